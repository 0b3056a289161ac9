"""The console script as users run it: --version, and storage URIs refused before Spark starts (exit 2).

The refusals are children forked from one driver that imported the CLI once (tests/support/cli_batch.py calls
``avro_registry_sink.cli:main``, the console script's entry point); one of them also runs through the console
script and must answer byte for byte alike."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.support.cli_batch import CliCase, CliResult, run_cli_batch

SCRIPT = Path(sys.executable).with_name("avro-registry-sink")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_version():
    result = _cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"avro-registry-sink {version('avro-registry-sink')}"


BAD_URIS = [
    (["--source", "s3://bucket/cdc?endpoint=http://127.0.0.1:1&acces-key=a"], "'acces-key'"),
    (["--source", "s3://bucket/cdc?endpoint=http://127.0.0.1:1&access-key=AKIAXYZ"], "secret-access-key"),
    (["--source", "s3://bucket/cdc?endpoint=127.0.0.1:9000"], "scheme not found in endpoint"),
    (["--source", "gcs://bucket/cdc?credentials_file=/x&storage_clas=STANDARD"], "did you mean 'storage-class'"),
    (["--source", "ftp://host/cdc"], "expected a TiCDC storage-sink directory"),
    (["--source", "{tmp}", "--checkpoint", "s3://b/ck?region=x&sse=rot13"], "Invalid sse 'rot13'"),
]
# nothing listens on port 1: the probe fails, naming the endpoint; no Spark (no JVM) is started
UNREACHABLE = ["--source", "s3://bucket/cdc?endpoint=http://127.0.0.1:1&access-key=a&secret-access-key=b"]


def _argv(args: list[str], tmp: Path) -> list[str]:
    return ["run", *(a.replace("{tmp}", str(tmp)) for a in args), "--state-dir", str(tmp), "--progress", "none"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[tuple[Path, CliResult]]:
    """BAD_URIS' invocations, then UNREACHABLE's, each with a state directory of its own."""
    tmps = [tmp_path_factory.mktemp("deploy") for _ in range(len(BAD_URIS) + 1)]
    cases = [CliCase(_argv(args, tmp)) for (args, _), tmp in zip(BAD_URIS, tmps, strict=False)]
    cases.append(CliCase(_argv(UNREACHABLE, tmps[-1]), env={"AWS_EC2_METADATA_DISABLED": "true"}))
    return list(zip(tmps, run_cli_batch(cases, parallel=2), strict=True))  # the probe mostly waits


@pytest.mark.parametrize("case", range(len(BAD_URIS)), ids=[words for _, words in BAD_URIS])
def test_bad_storage_uris_exit_2_with_one_line_naming_the_parameter(runs, case):
    words = BAD_URIS[case][1]
    _, result = runs[case]
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert words in lines[0]
    assert "AKIAXYZ" not in result.stderr  # credentials are never echoed
    assert "Traceback" not in result.stderr


def test_the_console_script_answers_as_the_batch_does(runs):
    tmp, batched = runs[1]
    alone = _cli(*_argv(BAD_URIS[1][0], tmp))
    assert (alone.returncode, alone.stdout, alone.stderr) == (batched.returncode, batched.stdout, batched.stderr)


def test_unreachable_store_is_refused_before_spark_starts(runs):
    tmp, result = runs[-1]
    assert result.returncode == 2, result.stderr
    assert "endpoint" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp / "checkpoints").exists()
