"""``avro-registry-sink verify`` on the file sink: a clean run reconciles (exit 0, every discrepancy count zero);
the faults injected into the sink's output (a record dropped, duplicated, two changes of one key swapped, a
DECIMAL off by one unit in the last place, a wrong or unknown schema id, a header the source does not give), each
on a key of its own in one copy, are found by one verify run (exit 1): each counted, each listed on its record.
The file sink's promise is checked the same way: staged batches are not visible, a batch published but not
committed is not compared, a batch rerun after a crash replaces its files (no duplicates).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.ops.status import read_status
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig
from avro_registry_sink.sources.demo import DemoManifest, generate_demo
from avro_registry_sink.spark.audit.verify import DISCREPANCIES
from tests.support.job import stamp_in_order
from tests.support.tamper import (
    SAMPLE_KIND,
    UNKNOWN_ID,
    decoded_key,
    fault_counts,
    tamper_file_sink,
    tamper_file_sink_many,
)

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()
TABLES = ("crm.events", "shop.customers", "shop.orders")


@dataclass
class Run:
    base: Path
    manifest: DemoManifest
    client: RegistryClient
    options: list[str]  # the run's options, without --sink-uri

    def verify(self, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
        result = runner.invoke(app, ["verify", *self.options, "--sink-uri", f"file://{out}?protocol=avro", "--json",
                                     *extra])
        assert result.exit_code in (0, 1), result.output
        return result.exit_code, json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory) -> Any:
    """The demo tree (three tables, CSV and canal-json, an ADD COLUMN) run into the file sink by the CLI, in
    several batches, with an embedded registry over HTTP."""
    base = tmp_path_factory.mktemp("verify")
    manifest = generate_demo(base / "in", rows_per_table=12)
    stamp_in_order(base / "in", manifest.data_files)
    ddl = base / "tables.sql"
    ddl.write_text(";\n".join(manifest.create_statements.values()) + ";\n", encoding="utf-8")
    server = EmbeddedRegistry()
    url = server.start()
    options = ["--source", str(base / "in"), "--checkpoint", str(base / "checkpoint"), "--registry", url,
               "--tables", str(ddl), "--csv", "include-commit-ts=true", "--csv", "output-old-value=true"]
    result = runner.invoke(app, ["run", *options, "--sink-uri", f"file://{base / 'out'}?protocol=avro",
                                 "--available-now", "--max-files-per-trigger", "3", "--progress", "none"])
    assert result.exit_code == 0, result.output
    with RegistryClient(RegistryConfig(urls=(url,))) as client:
        yield Run(base=base, manifest=manifest, client=client, options=options)
    server.stop()


def _counts(report: dict[str, Any], table: str) -> dict[str, int]:
    return {k: report["tables"][table][k] for k in DISCREPANCIES}


def _total(manifest: DemoManifest, table: str) -> int:
    counts = manifest.counts[table]
    return counts.inserts + counts.updates + counts.deletes


def test_a_clean_run_reconciles(run):
    code, report = run.verify(run.base / "out")

    assert code == 0, report
    assert report["status"] == "ok" and report["samples"] == []
    assert report["committed_batch"] >= 2  # several batches, all of them compared
    assert all(report["totals"][k] == 0 for k in DISCREPANCIES)
    assert sorted(report["tables"]) == list(TABLES)
    for table in TABLES:
        counts = report["tables"][table]
        assert counts["expected"] == counts["delivered"] == _total(run.manifest, table), table
        assert counts["dead_lettered"] == counts["held_files"] == counts["unread"] == 0
    # status, reading the checkpoint alone (no Spark), counts what verify counts on the same run
    status = read_status(run.base / "checkpoint")
    assert (status.verdict, status.last_batch) == ("healthy", report["committed_batch"])
    assert {t: status.tables[t]["rows"] for t in TABLES} == {t: report["tables"][t]["delivered"] for t in TABLES}
    assert status.rows == report["totals"]["delivered"]
    assert status.dead_lettered == sum(report["tables"][t]["dead_lettered"] for t in TABLES) == 0
    assert len(status.held_files) == sum(report["tables"][t]["held_files"] for t in TABLES) == 0
    # and its backlog, the tree listed against the same checkpoint: nothing left; a file TiCDC writes next counts
    assert status.backlog["kind"] == "storage" and status.backlog["files"] == 0
    assert set(TABLES) <= set(status.backlog["tables"])
    newest = max(p for p in (run.base / "in").rglob("CDC*") if p.suffix in (".csv", ".json"))
    extra = newest.with_name(f"CDC{int(newest.stem[3:]) + 1:0{len(newest.stem) - 3}d}{newest.suffix}")
    extra.write_bytes(newest.read_bytes())
    try:
        later = read_status(run.base / "checkpoint").backlog
    finally:
        extra.unlink()  # the module's other tests verify this tree
    table = ".".join(extra.relative_to(run.base / "in").parts[:2])
    assert later["files"] == 1 and later["tables"][table] == {"files": 1, "bytes": newest.stat().st_size}


#: The faults injected into one copy of the sink's output, each on a key of its own, and found by one verify run:
#: shop.orders shows the sum of what each shows (``tamper.SHOWS``), each listed on its own record.
FAULTS = ("drop", "duplicate", "swap", "decimal", "wrong_schema_id", "unknown_schema_id", "commit_ts_header")


@dataclass
class Tampered:
    out: Path
    changed: dict[str, dict[str, Any]]  # fault kind -> the record it changed, as it was


@pytest.fixture(scope="module")
def tampered(run, tmp_path_factory) -> Tampered:
    """A copy of the run's output with every fault of FAULTS in shop_orders (each on a key of its own), and two
    batches no run committed: one staged, not published, and one published but not committed."""
    out = tmp_path_factory.mktemp("tampered") / "out"
    shutil.copytree(run.base / "out", out)
    changed = tamper_file_sink_many(out, "shop_orders", FAULTS, run.client)
    first = sorted((out / "shop_orders").glob("batch-*.jsonl"))[0]
    staged = out / "_staging" / "batch-0000000077" / "topic=shop_orders"
    staged.mkdir(parents=True)
    shutil.copy(first, staged / "part-00000-x.c000.txt")
    shutil.copy(first, out / "shop_orders" / "batch-0000000077-part-00000.jsonl")  # staged: not visible
    shutil.copy(first, out / "shop_orders" / "batch-0000000078-part-00000.jsonl")  # published, not committed
    return Tampered(out=out, changed=changed)


@pytest.fixture(scope="module")
def found(run, tampered) -> dict[str, Any]:
    """verify's report on the tampered copy (one run for every test of the faults), with ``encoded``: how many
    source rows verify encoded (its expected records, counted as Spark computes them)."""
    from avro_registry_sink.spark.audit import verify

    build = verify.expected_storage
    counters = []

    def counted(spark, *args: Any, **kwargs: Any) -> Any:
        out = build(spark, *args, **kwargs)
        counter = spark.sparkContext.accumulator(0)
        counters.append(counter)

        def count(batches):
            for batch in batches:
                counter.add(batch.num_rows)
                yield batch

        out.records = out.records.mapInArrow(count, out.records.schema)
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(verify, "expected_storage", counted)
        code, report = run.verify(tampered.out)
    assert code == 1, report
    assert len(counters) == 1
    return {**report, "encoded": counters[0].value}


def test_every_fault_injected_into_the_file_sink_is_counted(run, found):
    assert found["status"] == "discrepancies"
    assert _counts(found, "shop.orders") == fault_counts(FAULTS, DISCREPANCIES)
    total = _total(run.manifest, "shop.orders")
    assert found["tables"]["shop.orders"]["expected"] == total
    assert found["tables"]["shop.orders"]["delivered"] == total - 1 + 1  # one record dropped, one duplicated
    for table in ("crm.events", "shop.customers"):
        assert _counts(found, table) == {k: 0 for k in DISCREPANCIES}
        assert found["tables"][table]["expected"] == found["tables"][table]["delivered"] == _total(run.manifest, table)
    assert all(s["table"] == "shop.orders" for s in found["samples"])
    assert len(found["samples"]) == len(FAULTS)  # each fault listed once


def test_verify_compares_once(run, found):
    """The summary and the sample's second look at the keys with a discrepancy read one comparison: the source
    is read and encoded once (it was twice: once for the counts, once again for the keys to look at)."""
    assert found["encoded"] == found["totals"]["expected"] == sum(_total(run.manifest, t) for t in TABLES)


def _sample_of(report: dict[str, Any], kind: str, record: dict[str, Any], client: Any) -> dict[str, Any]:
    """The sample that lists the fault ``kind`` injected into ``record``: its kind, key and commit ts."""
    key = decoded_key(record, client)
    listed = [s for s in report["samples"] if s["kind"] == SAMPLE_KIND[kind] and s["key"] == key
              and s.get("commit_ts", record["commit_ts"]) == record["commit_ts"]]
    assert len(listed) == 1, (kind, key, record["commit_ts"], report["samples"])
    return listed[0]


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_each_fault_in_the_file_sink_is_listed_on_its_record(run, tampered, found, kind):
    record = tampered.changed[kind]
    sample = _sample_of(found, kind, record, run.client)

    assert sample["table"] == "shop.orders"
    if kind == "drop":
        assert sample["source"].startswith("shop/orders/")
    if kind in ("duplicate", "decimal", "wrong_schema_id", "unknown_schema_id", "commit_ts_header"):
        file, _, line = sample["sink"].rpartition(":")  # the sink location is the very line
        assert file.startswith("shop_orders/batch-")
        at = json.loads((tampered.out / file).read_text().splitlines()[int(line) - 1])
        assert (bytes.fromhex(at["key"]), at["commit_ts"]) == (record["key"], record["commit_ts"])
    if kind == "decimal":
        assert sample["differs"] == ["amount"]
        assert sample["source"].startswith("shop/orders/")
        assert at["value"] != record["value"].hex()
    if kind == "wrong_schema_id":
        assert sample["delivered"]["value_schema_id"] == int.from_bytes(record["key"][1:5], "big")
        assert sample["decoded"] == "undecodable"
    if kind == "unknown_schema_id":
        assert sample["delivered"]["value_schema_id"] == UNKNOWN_ID and sample["decoded"] == "unknown"
    if kind == "swap":
        stamps = [d["commit_ts"] for d in sample["delivered"]]
        assert record["commit_ts"] in stamps and stamps != sorted(stamps)
    if kind.endswith("_header"):
        name = kind.removesuffix("_header")
        assert sample["header"] == name, sample
        assert sample["offset"] is None  # a file: its line
        found_value = "d" if name == "op" else str(record["commit_ts"] + 1)
        assert (sample["expected"], sample["found"]) == ({"op": "c", "commit_ts": str(record["commit_ts"])}[name],
                                                         found_value)


def test_a_swap_within_one_file_is_out_of_order(run, tmp_path):
    """A topic's records all in one file (in their order: still clean), then two changes of one key swapped in it:
    the order within a file is its lines' order."""
    out = tmp_path / "out"
    shutil.copytree(run.base / "out", out)
    files = sorted((out / "shop_orders").glob("batch-*.jsonl"))
    last = max(int(p.name.split("-")[1]) for p in files)
    records = [json.loads(line) for p in files for line in p.read_text().splitlines()]
    for p in files:
        p.unlink()
    (out / "shop_orders" / f"batch-{last:010d}-part-00000.jsonl").write_text(
        "".join(json.dumps({**r, "batch": last}) + "\n" for r in records))
    # no verify of the merged file alone: the exact counts below say it holds nothing else
    tamper_file_sink(out, "shop_orders", "swap", run.client)
    code, report = run.verify(out)

    assert code == 1
    assert _counts(report, "shop.orders") == {k: int(k == "out_of_order") for k in DISCREPANCIES}
    sample = next(s for s in report["samples"] if s["kind"] == "out_of_order")
    lines = [int(d["sink"].rpartition(":")[2]) for d in sample["delivered"]]
    assert len(set(lines)) == len(lines) and lines == sorted(lines)  # each record at its own line, in file order
    stamps = [d["commit_ts"] for d in sample["delivered"]]
    assert stamps != sorted(stamps)
    assert report["tables"]["shop.orders"]["out_of_order_in_source"] == 0  # the sink's doing, not the source's
    assert sample["detail"].endswith("the source has them in commit-ts order")


def test_staged_and_uncommitted_batches_are_not_compared(run, found):
    """The tampered copy holds batch 77 staged and 78 published but not committed (copies of a committed file):
    both noted, neither compared (the counts are the faults' alone: test_every_fault_..._is_counted)."""
    assert found["tables"]["shop.orders"]["delivered"] == _total(run.manifest, "shop.orders")
    assert _counts(found, "shop.orders") == fault_counts(FAULTS, DISCREPANCIES)
    notes = " ".join(found["notes"])
    assert "staged, not published" in notes and "77" in notes
    assert "published but not committed" in notes and "78" in notes


def test_a_batch_published_twice_is_duplicated(run, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(run.base / "out", out)
    first = sorted((out / "shop_orders").glob("batch-*.jsonl"))[0]
    lines = first.read_text().splitlines()
    copy = first.with_name(first.name.replace("-part-00000", "-part-00099"))
    copy.write_text("\n".join(lines) + "\n")  # the same batch's records in a second part

    code, report = run.verify(out)

    assert code == 1
    # the copies come after newer changes of some of their keys: those are out of order too, counted here
    # independently (per partition and key, a commit ts below one read before it)
    newest: dict[tuple[int, str], int] = {}
    back = 0
    for path in sorted((out / "shop_orders").glob("batch-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            where = (record["partition"], record["key"])
            back += record["commit_ts"] < newest.get(where, -1)
            newest[where] = max(newest.get(where, -1), record["commit_ts"])
    assert back > 0
    assert _counts(report, "shop.orders") == {k: {"duplicated": len(lines), "out_of_order": back}.get(k, 0)
                                              for k in DISCREPANCIES}


def test_a_rerun_batch_replaces_its_files_and_verifies(spark, tmp_path, registry):
    from avro_registry_sink.settings.config import SinkConfig
    from avro_registry_sink.spark.audit.verify import verify_run
    from avro_registry_sink.spark.driver.job import JobFailed, run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sinks.sinks import FileSink
    from avro_registry_sink.spark.sources.sources import parse_source

    class CrashingSink(FileSink):
        """Publishes batch 1, then fails it: the job stops after the output, before Spark's commit."""

        crashed = False

        def write(self, records, batch_id: int, **kw) -> None:
            super().write(records, batch_id, **kw)
            if batch_id == 1 and not CrashingSink.crashed:
                CrashingSink.crashed = True
                raise RuntimeError("crash after publishing batch 1")

    manifest = generate_demo(tmp_path / "in", rows_per_table=8)
    stamp_in_order(tmp_path / "in", manifest.data_files)
    options = JobOptions(source=parse_source(str(tmp_path / "in")), checkpoint=tmp_path / "checkpoint",
                         sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), csv_options=manifest.csv_options,
                         tables=tuple(manifest.tables.values()), max_files_per_trigger=3)
    with pytest.raises((JobFailed, RuntimeError)):
        run_job(spark, options, registry=registry, sink=CrashingSink(tmp_path / "out"))

    between = verify_run(spark, options, registry=registry)  # batch 1 published, not committed
    assert between.committed_batch == 0
    assert any("published but not committed" in n for n in between.notes)
    assert between.totals["unread"] > 0 and between.ok

    run_job(spark, options, registry=registry, sink=FileSink(tmp_path / "out"))
    after = verify_run(spark, options, registry=registry)
    assert after.ok, after.to_json()
    assert after.totals["expected"] == after.totals["delivered"] == len(manifest.all_events)
    assert after.totals["duplicated"] == 0 and after.totals["unread"] == 0


def test_dead_lettered_rows_are_counted_not_missing(spark, tmp_path, registry):
    from avro_registry_sink.settings.config import SinkConfig
    from avro_registry_sink.spark.audit.verify import verify_run
    from avro_registry_sink.spark.driver.job import run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source

    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    csv_file = next(f for f in manifest.data_files if f.startswith("shop/orders/") and f.endswith(".csv"))
    with open(tmp_path / "in" / csv_file, "a", encoding="utf-8", newline="") as fh:
        fh.write('"I","orders","shop",449640297946939393,false,12x,"C0001","1.00","new","2024-05-01 00:00:00.000",'
                 '\\N,\\N\r\n')
    options = JobOptions(source=parse_source(str(tmp_path / "in")), checkpoint=tmp_path / "checkpoint",
                         sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), csv_options=manifest.csv_options,
                         tables=tuple(manifest.tables.values()))
    run_job(spark, options, registry=registry)

    report = verify_run(spark, options, registry=registry)

    assert report.ok, report.to_json()
    assert report.tables["shop.orders"]["dead_lettered"] == 1
    assert report.totals["expected"] == report.totals["delivered"] == len(manifest.all_events)
    status = read_status(tmp_path / "checkpoint")  # status counts what verify counts on the same run
    assert (status.rows, status.dead_lettered) == (report.totals["delivered"], report.totals["dead_lettered"])
    assert {t: e["rows"] for t, e in status.tables.items()} == {t: c["delivered"] for t, c in report.tables.items()}


def test_verify_refuses_a_checkpoint_no_run_wrote(tmp_path):
    (tmp_path / "in").mkdir()
    result = runner.invoke(app, ["verify", "--source", str(tmp_path / "in"), "--checkpoint", str(tmp_path / "ck"),
                                 "--json"])
    assert result.exit_code == 2
    assert "No job ran with checkpoint" in result.stderr
    bad = runner.invoke(app, ["verify", "--source", str(tmp_path / "in"), "--read-topic", "x"])
    assert bad.exit_code == 2


def test_a_canal_json_file_source_reconciles(spark, tmp_path, registry):
    from avro_registry_sink.settings.config import SinkConfig
    from avro_registry_sink.spark.audit.verify import verify_run
    from avro_registry_sink.spark.driver.job import run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source
    from tests.support.job import canal_messages

    manifest = generate_demo(tmp_path / "demo", rows_per_table=6)
    messages = canal_messages(manifest, partitions=1)
    (tmp_path / "canal").mkdir()
    half = len(messages) // 2
    for number, chunk in enumerate((messages[:half], messages[half:]), start=1):
        (tmp_path / "canal" / f"part-{number}.jsonl").write_text("".join(m + "\n" for _, _, m in chunk))
    options = JobOptions(source=parse_source(f"canal-json+file://{tmp_path / 'canal'}"),
                         checkpoint=tmp_path / "checkpoint", sink=SinkConfig(scheme="file", path=str(tmp_path / "out")),
                         max_files_per_trigger=1)
    run_job(spark, options, registry=registry)

    report = verify_run(spark, options, registry=registry)

    assert report.ok, report.to_json()
    assert report.committed_batch == 1
    assert report.totals["expected"] == report.totals["delivered"] == len(manifest.all_events)
    (tmp_path / "canal" / "part-3.jsonl").write_text(messages[-1][2] + "\n")  # not read by the run yet
    later = verify_run(spark, options, registry=registry)
    assert later.ok and later.totals["expected"] == len(manifest.all_events)
    assert later.tables["(source files)"]["unread"] == 1


def test_completeness_from_resolved_ts():
    from avro_registry_sink.spark.audit.verify import VerifyReport, completeness

    report = VerifyReport(source="s", sink="k", checkpoint="c", committed_batch=3)
    report.table("shop.orders").update(first_missing_ts=200, max_delivered_ts=300)
    report.table("crm.events").update(max_delivered_ts=250)

    state = completeness(report, {"shop.orders": 150, "crm.events": 250, "other.t": 1})

    assert state == {
        "shop.orders": {"resolved_ts": 150, "complete": True, "first_missing_ts": 200, "max_delivered_ts": 300},
        "crm.events": {"resolved_ts": 250, "complete": True, "first_missing_ts": None, "max_delivered_ts": 250},
    }
    assert not completeness(report, {"shop.orders": 200})["shop.orders"]["complete"]


def test_decode_all_decodes_every_record_and_counts_the_same(run, tampered, found):
    """--decode-all over the tampered copy: every committed record decoded, the same counts as the run without it
    (the unknown and undecodable records among them)."""
    code, report = run.verify(tampered.out, "--decode-all")

    assert code == 1
    for table in TABLES:
        assert report["tables"][table]["decoded"] == _total(run.manifest, table)
        assert _counts(report, table) == _counts(found, table)
    assert _counts(report, "shop.orders") == fault_counts(FAULTS, DISCREPANCIES)


@pytest.mark.parametrize(("source_ts", "in_source"), [((10, 5), 1), ((5, 10), 0)])
def test_out_of_order_counts_keys_the_source_had_in_that_order(spark, source_ts, in_source):
    """Two changes of one key delivered with commit ts 10 then 5: out of order; the source read them in that
    order too (10 at its first position), or in commit-ts order."""
    from avro_registry_sink.spark.audit.verify import SOURCE_ORDER, _compared

    key, value = b"\x00\x00\x00\x00\x01k", b"\x00\x00\x00\x00\x02v"
    schema = "topic string, partition int, key binary, value binary, ts bigint, pos struct<x: bigint, y: string, z: bigint>"
    expected = spark.createDataFrame([("t", 0, key, value, ts, (1, "f", line)) for line, ts in enumerate(source_ts)],
                                     schema)
    delivered = spark.createDataFrame([("t", 0, key, value, ts, (0, "", line)) for line, ts in enumerate((10, 5))],
                                      schema)

    row = _compared(expected, delivered, spark).collect()[0]

    assert (row["out_of_order"], row[SOURCE_ORDER]) == (1, in_source)
