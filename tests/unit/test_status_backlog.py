"""``status``'s input backlog of a storage tree: the demo tree with a checkpoint laid out as the job writes it (the
last committed batch's offset of the tree in ``spark/offsets/<batch>``), the backlog counted per table from the files
that offset's batches did not take, against the tree listed now; the source from ``job.json`` or ``--source``;
``--max-backlog``; and the command answers without importing Spark."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.errors import ConfigError
from avro_registry_sink.ops.status import read_status
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.sources.storage import StorageLayout
from avro_registry_sink.sources.storage_offsets import batch_files, end_offset, initial_offset, list_tree

NOW = 1_800_000_000.0


def checkpoint(root: Path, source: str, offsets: list[dict]) -> Path:
    """A checkpoint of ``source`` whose batches 0.. ended at ``offsets`` (none: no batch committed)."""
    ck = root / "ck"
    for d in ("spark/commits", "spark/offsets", "state/progress"):
        (ck / d).mkdir(parents=True, exist_ok=True)
    (ck / "job.json").write_text(json.dumps({"source": source, "created": NOW - 3600}))
    for batch, offset in enumerate(offsets):
        meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": int((NOW - 8) * 1000), "conf": {}})
        (ck / "spark/offsets" / str(batch)).write_text(f"v1\n{meta}\n{json.dumps(offset)}")
        (ck / "spark/commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
        (ck / "state/progress" / f"{batch:010d}.json").write_text(json.dumps(
            {"batch": batch, "time": NOW - 5, "rows": 1, "tables": {}, "resolved_ts": {}}))
    return ck


def expected(tree: Path, taken: set[str]) -> dict[str, dict[str, int]]:
    """Per table, the data files of ``tree`` (found by walking it) not in ``taken``, and their bytes."""
    out: dict[str, dict[str, int]] = {}
    for path in sorted(p for p in tree.rglob("CDC*") if p.suffix in (".csv", ".json")):
        relpath = path.relative_to(tree).as_posix()
        entry = out.setdefault(".".join(relpath.split("/")[:2]), {"files": 0, "bytes": 0})
        if relpath not in taken:
            entry["files"] += 1
            entry["bytes"] += path.stat().st_size
    return out


def test_the_backlog_is_the_trees_files_that_no_committed_batch_took_per_table(tmp_path):
    tree = tmp_path / "tree"
    manifest = generate_demo(tree, rows_per_table=4)
    layout = StorageLayout(tree)
    # batch 0 took the first 3 files in TiCDC's order, batch 1 three more: the committed offset is batch 1's
    first = end_offset(initial_offset(), list_tree(layout), max_files=3)
    second = end_offset(first, list_tree(layout), max_files=3)
    taken = {relpath for relpath, _ in batch_files(initial_offset(), second, list_tree(layout))}
    assert len(taken) == 6 < len(manifest.data_files)
    ck = checkpoint(tmp_path, f"storage://{tree}", [first, second])

    status = read_status(ck, now=NOW)
    tables = expected(tree, taken)
    assert status.backlog == {"kind": "storage", "source": str(tree),
                              "files": len(manifest.data_files) - 6,
                              "bytes": sum(t["bytes"] for t in tables.values()), "tables": tables}
    assert any(t["files"] == 0 for t in tables.values())  # a caught-up table is listed with 0
    assert status.verdict == "healthy" and status.to_json()["backlog"] == status.backlog

    # a file TiCDC writes meanwhile counts at once; --max-backlog makes the tables over it 'behind'
    table = max(tables, key=lambda t: tables[t]["files"])
    newest = max(p for p in tree.joinpath(*table.split(".")).rglob("CDC*") if p.suffix in (".csv", ".json"))
    number = int(newest.stem[3:]) + 1
    (newest.parent / f"CDC{number:0{len(newest.stem) - 3}d}{newest.suffix}").write_bytes(newest.read_bytes())
    later = read_status(ck, max_backlog=tables[table]["files"], now=NOW)
    assert later.backlog["tables"][table]["files"] == tables[table]["files"] + 1
    assert later.verdict == "behind" and later.exit_status == 1
    assert later.reasons == [f"table {table} has {tables[table]['files'] + 1} data files no committed batch took "
                             f"(over --max-backlog {tables[table]['files']})"]


def test_before_a_committed_batch_the_whole_tree_is_backlog(tmp_path):
    tree = tmp_path / "tree"
    manifest = generate_demo(tree, rows_per_table=4)
    status = read_status(checkpoint(tmp_path, str(tree), []), now=NOW)
    assert status.last_batch is None
    assert status.backlog["files"] == len(manifest.data_files)
    assert status.backlog["tables"] == expected(tree, set())


def test_the_source_comes_from_job_json_or_source_and_a_missing_one_is_unknown_not_a_failure(tmp_path):
    tree = tmp_path / "tree"
    generate_demo(tree, rows_per_table=4)
    first = end_offset(initial_offset(), list_tree(StorageLayout(tree)), max_files=2)
    # an object store's source is recorded with its credentials masked: status asks for the run's --source
    ck = checkpoint(tmp_path, "s3://bucket/cdc?access-key=***&secret-access-key=***", [first])
    masked = read_status(ck, max_backlog=0, now=NOW)
    assert masked.backlog["unknown"].startswith("job.json records the source without its credentials")
    assert masked.verdict == "healthy"  # what cannot be measured changes no verdict, as a table without a ts
    given = read_status(ck, source=str(tree), now=NOW)
    assert given.backlog["files"] == sum(t["files"] for t in expected(tree, set()).values()) - 2
    gone = read_status(ck, source=str(tmp_path / "nothing"), now=NOW)
    assert "does not exist" in gone.backlog["unknown"] and gone.verdict == "healthy"
    assert read_status(ck, backlog=False, now=NOW).backlog is None
    # a --source that is no source is the caller's error; job.json's is reported
    with pytest.raises(ConfigError, match="Invalid source 'nosuch\\+kafka://b/t'"):
        read_status(ck, source="nosuch+kafka://b/t", now=NOW)
    (ck / "job.json").write_text(json.dumps({"source": "nosuch+kafka://b/t"}))
    assert read_status(ck, now=NOW).backlog["unknown"].startswith("job.json's source cannot be read (Invalid source")
    # changelog files: not measured, said so
    files = read_status(ck, source=f"canal-json+file://{tmp_path}", now=NOW)
    assert files.backlog["kind"] == "files" and "not measured" in files.backlog["unknown"]


def test_an_unreachable_broker_makes_the_backlog_unknown_within_the_timeout(tmp_path):
    import time

    ck = checkpoint(tmp_path, "canal-json+kafka://127.0.0.1:1/cdc", [{"cdc": {"0": 5}}])
    started = time.monotonic()
    status = read_status(ck, max_backlog=0, timeout=1.0, now=NOW)
    assert time.monotonic() - started < 10
    assert status.backlog["kind"] == "kafka"
    assert status.backlog["unknown"].startswith("Kafka at 127.0.0.1:1 (plaintext) is not reachable")
    assert status.backlog["unknown"].endswith("(each request given 1 s)")
    assert status.verdict == "healthy" and status.exit_status == 0


def test_the_command_prints_the_backlog_per_table_and_json(tmp_path):
    tree = tmp_path / "tree"
    generate_demo(tree, rows_per_table=4)
    first = end_offset(initial_offset(), list_tree(StorageLayout(tree)), max_files=2)
    ck = checkpoint(tmp_path, f"storage://{tree}", [first])
    tables = expected(tree, {r for r, _ in batch_files(initial_offset(), first, list_tree(StorageLayout(tree)))})
    runner = CliRunner()
    out = runner.invoke(app, ["status", "--checkpoint", str(ck), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["backlog"]["tables"] == tables
    behind = runner.invoke(app, ["status", "--checkpoint", str(ck), "--json", "--max-backlog", "0"])
    assert behind.exit_code == 1 and json.loads(behind.output)["status"] == "behind"
    skipped = runner.invoke(app, ["status", "--checkpoint", str(ck), "--json", "--no-backlog", "--max-backlog", "0"])
    assert skipped.exit_code == 0 and json.loads(skipped.output)["backlog"] is None

    from avro_registry_sink import cli

    report = read_status(ck)
    lines: list[str] = []
    original = cli.typer.echo
    cli.typer.echo = lambda text="", **_: lines.append(str(text))  # type: ignore[assignment]
    try:
        cli._print_status(report)
    finally:
        cli.typer.echo = original
    total = sum(t["files"] for t in tables.values())
    assert f"backlog: {total} data files ({sum(t['bytes'] for t in tables.values())} bytes) no committed batch took" \
        in lines
    for table, entry in tables.items():
        assert f"  {table}: {entry['files']} files ({entry['bytes']} bytes)" in lines


def test_status_with_its_backlog_does_not_import_spark(tmp_path):
    tree = tmp_path / "tree"
    generate_demo(tree, rows_per_table=4)
    ck = checkpoint(tmp_path, f"storage://{tree}", [end_offset(initial_offset(), list_tree(StorageLayout(tree)))])
    script = textwrap.dedent(f"""
        import atexit, sys
        atexit.register(lambda: print("SPARK" if "pyspark" in sys.modules else "NO SPARK", file=sys.stderr))
        sys.argv = ["avro-registry-sink", "status", "--checkpoint", {str(ck)!r}, "--json"]
        from avro_registry_sink.cli import main
        main()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["backlog"]["files"] == 0  # the offset took every file
    assert done.stderr.strip().splitlines()[-1] == "NO SPARK"
