"""The console script as users run it: --version, and storage URIs refused before Spark starts (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("avro-registry-sink")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_version():
    result = _cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"avro-registry-sink {version('avro-registry-sink')}"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--source", "s3://bucket/cdc?endpoint=http://127.0.0.1:1&acces-key=a"], "'acces-key'"),
        (["--source", "s3://bucket/cdc?endpoint=http://127.0.0.1:1&access-key=AKIAXYZ"], "secret-access-key"),
        (["--source", "s3://bucket/cdc?endpoint=127.0.0.1:9000"], "scheme not found in endpoint"),
        (["--source", "gcs://bucket/cdc?credentials_file=/x&storage_clas=STANDARD"], "did you mean 'storage-class'"),
        (["--source", "ftp://host/cdc"], "expected a TiCDC storage-sink directory"),
        (["--source", "{tmp}", "--checkpoint", "s3://b/ck?region=x&sse=rot13"], "Invalid sse 'rot13'"),
    ],
)
def test_bad_storage_uris_exit_2_with_one_line_naming_the_parameter(args, words, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = _cli("run", *args, "--state-dir", str(tmp_path), "--progress", "none")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert words in lines[0]
    assert "AKIAXYZ" not in result.stderr  # credentials are never echoed
    assert "Traceback" not in result.stderr


def test_unreachable_store_is_refused_before_spark_starts(tmp_path):
    # nothing listens on port 1: the probe fails, naming the endpoint; no Spark (no JVM) is started
    result = _cli("run", "--source", "s3://bucket/cdc?endpoint=http://127.0.0.1:1&access-key=a&secret-access-key=b",
                  "--state-dir", str(tmp_path), "--progress", "none",
                  env={"AWS_EC2_METADATA_DISABLED": "true"})
    assert result.returncode == 2, result.stderr
    assert "endpoint" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "checkpoints").exists()
