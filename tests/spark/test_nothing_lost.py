"""Nothing lost, merged or skipped without a word (issue 17), through the CLI.

* File times decide nothing: a storage tree with one file 30 days in the future, files 400 days old and a
  file from 1970 is read whole (Spark's file source skipped files older than its ``maxFileAge``).
* Side state is committed with the batch: the job is killed (``kill -9``, :mod:`~avro_registry_sink.failpoints`)
  at every point between a batch's first side write and Spark's commit (in CI at the two that leave the most
  to reconcile, :data:`CI_POINTS`), in a batch that reads a held file, writes dead letters and registers a new
  table version; the rerun delivers every row exactly once.
* A data file that vanished before it was read is reported on its own (progress, summary, a dead-letter
  record), or fails the batch with ``--on-missing-file fail``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.failpoints import ENV, POINTS
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig
from avro_registry_sink.tabledef.ddl import parse_ddl
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.support.depth import full_depth
from tests.support.job import decode_file_sink

pytestmark = [pytest.mark.spark, pytest.mark.faults, pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()
V1 = 449640297946939392
V2 = V1 + 10_000
DDL = "CREATE TABLE shop.{name} (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL)"
DDL2 = "CREATE TABLE shop.{name} (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL, w INT NULL)"
RUN_TIMEOUT = 300
#: The kill points of a CI run (each kill is a CLI run, a JVM start): after the sink published the batch's
#: records, its dead letters and side state not written; and after everything but Spark's commit. A full-depth
#: run (tests/support/depth.py) kills at every point of ``POINTS``.
CI_POINTS = ("job.after-sink-write", "job.after-side-write")


def _table(name: str, version: int = V1, ddl: str = DDL):
    return parse_ddl(ddl.format(name=name))[0].model_copy(update={"version": version})


def _rows(table: str, ids, version: int = V1, extra: str = "") -> bytes:
    return b"".join(f'"I","{table}","shop",{version + i},{i},"v{i}"{extra}\r\n'.encode() for i in ids)


def _data(root: Path, table: str, number: int, version: int = V1) -> Path:
    return root / "shop" / table / str(version) / f"CDC{number:020d}.csv"


def _put(path: Path, data: bytes, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def _delivered(out: Path, registry_url: str) -> Counter:
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        return Counter((topic, key["id"]) for topic, records in decode_file_sink(out, client).items()
                       for _, _, key, _ in records)


def _summary(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def _dead_letters(checkpoint: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((checkpoint / "dead-letter").glob("batch-*.jsonl"))
            for line in path.read_text().splitlines()]


def test_file_times_decide_nothing(spark, tmp_path):
    root = tmp_path / "in"
    write_table_schema_file(_table("t"), root)
    now = 1_800_000_000
    _put(_data(root, "t", 1), _rows("t", range(1, 51)), mtime=now + 30 * 86400)  # a clock-skewed writer
    for n in range(2, 6):  # a restored backlog, a bucket sync with the old times
        _put(_data(root, "t", n), _rows("t", range(50 * n - 49, 50 * n + 1)), mtime=now - 400 * 86400)
    with EmbeddedRegistry() as registry:
        args = ["run", "--source", str(root), "--available-now", "--sink-uri", f"file://{tmp_path / 'out'}",
                "--registry", registry.url, "--state-dir", str(tmp_path / "state"), "--csv",
                "include-commit-ts=true", "--progress", "none"]
        first = runner.invoke(app, args)
        assert first.exit_code == 0, first.output
        assert _summary(first.stdout)["rows"] == 250
        assert _delivered(tmp_path / "out", registry.url) == Counter({("shop_t", i): 1 for i in range(1, 251)})

        _put(_data(root, "t", 6), _rows("t", range(251, 261)), mtime=0)  # 1970
        second = runner.invoke(app, args)
        assert second.exit_code == 0, second.output
        assert _summary(second.stdout)["rows"] == 10
        assert _delivered(tmp_path / "out", registry.url) == Counter({("shop_t", i): 1 for i in range(1, 261)})


def _cli(args: list[str], env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, **(env_extra or {}))
    return subprocess.run([sys.executable, "-c", "from avro_registry_sink.cli import main; main()", *args],
                          env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)


def _here(args: list[str]) -> subprocess.CompletedProcess:
    """A run that is not killed, in this process on the session's Spark (a JVM start less than :func:`_cli`),
    with the same exit status, stdout and stderr as the CLI's."""
    result = runner.invoke(app, args)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def _run_args(root: Path, work: Path) -> list[str]:
    return ["run", "--source", str(root), "--available-now", "--sink-uri", f"file://{work / 'out'}",
            "--state-dir", str(work / "state"), "--checkpoint", str(work / "checkpoint"),
            "--csv", "include-commit-ts=true", "--progress", "json"]


def test_a_kill_between_the_side_writes_and_the_commit_loses_and_duplicates_nothing(spark, tmp_path):
    root = tmp_path / "in"
    base = tmp_path / "base"
    # Run 1: a's data file waits for its schema file (held); b has a bad row (dead-lettered)
    _put(_data(root, "a", 1), _rows("a", range(1, 21)))
    write_table_schema_file(_table("b"), root)
    _put(_data(root, "b", 1), _rows("b", range(1, 6)) + f'"I","b","shop",{V1 + 99},not-an-int,"x"\r\n'.encode())
    first = _here(_run_args(root, base))
    assert first.returncode == 0, first.stderr[-3000:]
    assert _summary(first.stdout)["rows"] == 5

    # Then a's schema file lands, b gets a new table version (a column added) and another bad row
    write_table_schema_file(_table("a"), root)
    write_table_schema_file(_table("b", V2, DDL2), root)
    _put(_data(root, "b", 1, V2), _rows("b", range(6, 11), V2, ',"7"') + b'"I","b","shop",' + str(V2).encode()
         + b',98,"x","not-an-int"\r\n')

    expected = Counter({**{("shop_a", i): 1 for i in range(1, 21)}, **{("shop_b", i): 1 for i in range(1, 11)}})
    points = POINTS if full_depth() else CI_POINTS
    assert set(points) <= set(POINTS)
    for point in points:
        work = tmp_path / point
        shutil.copytree(base, work)
        killed = _cli(_run_args(root, work), {ENV: f"{point}=kill"})
        assert killed.returncode == -9, (point, killed.stderr[-3000:])
        again = _here(_run_args(root, work))
        assert again.returncode == 0, (point, again.stderr[-3000:])
        assert "Traceback" not in again.stderr
        db = work / "state" / "registry.db"
        with EmbeddedRegistry(data=str(db)) as registry:
            assert _delivered(work / "out", registry.url) == expected, point
            with RegistryClient(RegistryConfig(urls=(registry.url,))) as client:
                assert len(client.get_versions("shop_b-value")) == 2, point
                assert len(client.get_versions("shop_a-value")) == 1, point
        dead = _dead_letters(work / "checkpoint")
        assert [r["line"] for r in dead] == [6, 6], point  # each bad row once, on its own
        assert sorted(r["table_version"] for r in dead) == [V1, V2], point


def test_a_vanished_data_file_is_reported_on_its_own(spark, tmp_path):
    root = tmp_path / "in"
    work = tmp_path / "work"
    write_table_schema_file(_table("t"), root)
    for n in (1, 2, 3):
        _put(_data(root, "t", n), _rows("t", range(10 * n - 9, 10 * n + 1)))
    # the batch's files are planned (Spark's offset log) and the process dies; file 2 is deleted meanwhile
    killed = _cli(_run_args(root, work), {ENV: "job.after-side-read=kill"})
    assert killed.returncode == -9, killed.stderr[-3000:]
    _data(root, "t", 2).unlink()

    failed = _here([*_run_args(root, work), "--on-missing-file", "fail"])
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert f"shop/t/{V1}/CDC{2:020d}.csv" in failed.stderr and "--on-missing-file report" in failed.stderr
    assert "Traceback" not in failed.stderr

    reported = _here(_run_args(root, work))
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert "Traceback" not in reported.stderr
    missing = f"shop/t/{V1}/CDC{2:020d}.csv"
    summary = _summary(reported.stdout)
    assert summary["missing_files"] == [missing] and summary["rows"] == 20 and summary["dead_lettered"] == 0
    events = [json.loads(line) for line in reported.stderr.splitlines() if line.startswith("{")]
    batch = next(e for e in events if e["event"] == "batch")
    assert batch["missing_files"] == [missing] and any("vanished" in w for w in batch["warnings"])
    [record] = _dead_letters(work / "checkpoint")
    assert (record["file"], record["reason"], record["rows"], record["table_version"], record["table"]) == \
        (missing, "missing file", "unknown", V1, "t")
    with EmbeddedRegistry(data=str(work / "state" / "registry.db")) as registry:
        assert _delivered(work / "out", registry.url) == Counter(
            {("shop_t", i): 1 for i in [*range(1, 11), *range(21, 31)]})
