"""The streaming job on a TiCDC storage-sink directory, into the file sink (no broker).

The demo directory (three tables, CSV and canal-json data files, inserts/updates/deletes, an ADD COLUMN
mid-stream) goes through ``run_job``; the records read back and decoded with the registry's schemas must
replay to exactly the rows the manifest says, the registry must hold exactly the expected subjects and
versions, a stopped job must resume from its checkpoint without loss, bad lines must be reported and
skipped, and a registry refusal must fail the batch without committing it.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from avro_registry_sink.errors import IncompatibleSchema, NoHandleKey
from avro_registry_sink.settings.config import SinkConfig
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sinks.sinks import FileSink
from avro_registry_sink.spark.sources.sources import parse_source
from tests.support.job import by_partition, decode_file_sink, expected_state, key_of, replay, stamp_in_order

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

EXPECTED_VERSIONS = {
    "crm_events-key": 1, "crm_events-value": 1,
    "shop_customers-key": 1, "shop_customers-value": 1,
    "shop_orders-key": 1, "shop_orders-value": 2,  # the ADD COLUMN gives the value schema a second version
}


def _options(manifest, root: Path, work: Path, **kw) -> JobOptions:
    return JobOptions(
        source=parse_source(str(root)),
        checkpoint=work / "checkpoint",
        sink=SinkConfig(scheme="file", path=str(work / "out")),
        csv_options=manifest.csv_options,
        tables=tuple(manifest.tables.values()),
        **kw,
    )


def _assert_delivered(manifest, out: Path, client, *, exactly_once: bool = True) -> dict[str, list]:
    """Every change arrived, per key in commit order, and the rows replay to the manifest's."""
    topics = decode_file_sink(out, client)
    expected = expected_state(manifest)
    assert sorted(topics) == ["crm_events", "shop_customers", "shop_orders"]
    for topic, records in topics.items():
        name = topic.replace("_", ".", 1)
        counts = manifest.counts[name]
        if exactly_once:
            assert len(records) == counts.inserts + counts.updates + counts.deletes, topic
            assert sum(1 for r in records if r[3] is None) == counts.deletes, topic
        assert replay(by_partition(records)) == expected[name], topic
        partitions: dict = defaultdict(set)
        last_ts: dict = {}
        for partition, commit_ts, key, _ in records:
            k = key_of(key)
            partitions[k].add(partition)
            assert commit_ts >= last_ts.get(k, 0), f"{topic} key {k} out of commit order"
            last_ts[k] = commit_ts
        assert all(len(p) == 1 for p in partitions.values()), "a key spread over partitions"
        assert len({p for ps in partitions.values() for p in ps}) > 1, "index-value dispatch uses the partitions"
    return topics


def test_storage_directory_to_file_sink(spark, tmp_path, registry):
    manifest = generate_demo(tmp_path / "in", rows_per_table=12)
    stamp_in_order(tmp_path / "in", manifest.data_files)

    result = run_job(spark, _options(manifest, tmp_path / "in", tmp_path, max_files_per_trigger=3), registry=registry)

    total = sum(len(events) for events in manifest.events.values())
    assert result.totals.rows == total
    assert result.totals.tombstones == sum(c.deletes for c in manifest.counts.values())
    assert result.totals.batches >= 2 and result.totals.errors == 0 and not result.dead_letters
    _assert_delivered(manifest, tmp_path / "out", registry)
    assert {s: len(registry.get_versions(s)) for s in registry.get_subjects()} == EXPECTED_VERSIONS
    # tombstones are keyed by the primary key of the deleted row
    for topic, records in decode_file_sink(tmp_path / "out", registry).items():
        key_columns = manifest.key_columns[topic.replace("_", ".", 1)]
        assert all(sorted(key) == sorted(key_columns) for _, _, key, value in records if value is None)


def _copy(src: Path, dst: Path, relpaths) -> None:
    for rel in relpaths:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, dst / rel)


class CrashingSink(FileSink):
    """Writes a batch, then fails it once: the job dies after output but before its commit."""

    def __init__(self, path: Path, crash_batch: int) -> None:
        super().__init__(path)
        self.crash_batch = crash_batch
        self.crashed = False

    def write(self, records, batch_id: int, **kw) -> None:
        super().write(records, batch_id, **kw)
        if batch_id == self.crash_batch and not self.crashed:
            self.crashed = True
            raise RuntimeError(f"simulated crash after writing batch {batch_id}")


def test_restart_from_checkpoint_loses_nothing(spark, tmp_path, registry):
    full = tmp_path / "full"
    manifest = generate_demo(full, rows_per_table=10)
    stamp_in_order(full, manifest.data_files)
    live = tmp_path / "live"
    meta = sorted(str(p.relative_to(full)) for p in full.rglob("*") if p.is_file() and "CDC0" not in p.name)
    first, rest = manifest.data_files[: len(manifest.data_files) // 2], manifest.data_files[len(manifest.data_files) // 2:]
    _copy(full, live, meta)
    _copy(full, live, first)
    options = _options(manifest, live, tmp_path, max_files_per_trigger=2)

    sink = CrashingSink(tmp_path / "out", crash_batch=1)
    with pytest.raises(Exception, match="simulated crash"):
        run_job(spark, options, registry=registry, sink=sink)
    committed = {p.name for p in (tmp_path / "checkpoint" / "spark" / "commits").iterdir() if not p.name.startswith(".")}
    assert committed == {"0"}  # the crashed batch was not committed

    again = run_job(spark, options, registry=registry, sink=FileSink(tmp_path / "out"))
    assert again.totals.batches >= 1  # batch 1 replayed, then the rest of the first half
    _copy(full, live, rest)  # more files arrive while the job is down
    final = run_job(spark, options, registry=registry, sink=FileSink(tmp_path / "out"))
    assert final.totals.batches == (len(rest) + 1) // 2
    _assert_delivered(manifest, tmp_path / "out", registry)  # the file sink rewrites a replayed batch: exactly once
    assert {s: len(registry.get_versions(s)) for s in registry.get_subjects()} == EXPECTED_VERSIONS


def test_bad_lines_are_reported_and_the_rest_delivered(spark, tmp_path, registry):
    root = tmp_path / "in"
    manifest = generate_demo(root, rows_per_table=8)
    csv_file = next(f for f in manifest.data_files if f.startswith("shop/orders/") and f.endswith(".csv"))
    json_file = next(f for f in manifest.data_files if f.endswith(".json"))
    with open(root / csv_file, "a", encoding="utf-8", newline="") as fh:
        fh.write('"I","orders","shop",449640297946939393,false,not-a-number,"C0001","1.00","new",'
                 '"2024-05-01 00:00:00.000",\\N,\\N\r\n')
    bad_csv_line = (root / csv_file).read_text(encoding="utf-8").count("\n")
    with open(root / csv_file, "a", encoding="utf-8", newline="") as fh:  # parses, but NULL in a NOT NULL column
        fh.write('"I","orders","shop",449640297946939393,false,99999,\\N,"1.00","new",'
                 '"2024-05-01 00:00:00.000",\\N,\\N\r\n')
    null_line = bad_csv_line + 1
    with open(root / json_file, "a", encoding="utf-8", newline="") as fh:
        fh.write('{"id":0,"database":"crm","table":"events","type":"INSERT", oops\r\n')
    bad_json_line = (root / json_file).read_text(encoding="utf-8").count("\n")

    result = run_job(spark, _options(manifest, root, tmp_path), registry=registry)

    assert result.totals.errors == 3
    sources = sorted(e["source"] for e in result.bad_input)
    assert sources == sorted([f"{csv_file}:{bad_csv_line}", f"{csv_file}:{null_line}", f"{json_file}:{bad_json_line}"])
    assert "NOT NULL" in next(e["reason"] for e in result.bad_input if e["source"] == f"{csv_file}:{null_line}")
    assert all(e["reason"] and e["message"] for e in result.bad_input)
    dead = [json.loads(line) for path in result.dead_letters for line in path.read_text().splitlines()]
    assert sorted(d["source"] for d in dead) == sources
    _assert_delivered(manifest, tmp_path / "out", registry)


def test_incompatible_schema_fails_the_batch_and_commits_nothing(spark, tmp_path, registry):
    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    incompatible = json.dumps({"type": "record", "name": "orders", "namespace": "default.shop",
                               "fields": [{"name": "legacy", "type": "string"}]})
    registry.register("shop_orders-value", incompatible)
    options = _options(manifest, tmp_path / "in", tmp_path)

    with pytest.raises(IncompatibleSchema) as failure:
        run_job(spark, options, registry=registry)
    assert "shop.orders" in str(failure.value) and "shop_orders-value" in str(failure.value)
    commits = tmp_path / "checkpoint" / "spark" / "commits"
    assert not commits.exists() or not [p for p in commits.iterdir() if not p.name.startswith(".")]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.jsonl"))

    registry.delete_subject("shop_orders-value")
    registry.delete_subject("shop_orders-value", permanent=True)
    run_job(spark, options, registry=registry)  # the same batch again, now accepted
    _assert_delivered(manifest, tmp_path / "out", registry)


def test_a_table_without_a_key_in_its_schema_files_asks_for_its_ddl(spark, tmp_path, registry):
    manifest = generate_demo(tmp_path / "in", rows_per_table=4)  # shop.customers: keyed by a UNIQUE KEY only
    options = replace(_options(manifest, tmp_path / "in", tmp_path), tables=())

    with pytest.raises(NoHandleKey) as failure:
        run_job(spark, options, registry=registry)
    assert "shop.customers" in str(failure.value) and "--tables" in str(failure.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.jsonl"))

def test_partition_dispatch_rules(spark, tmp_path, registry):
    from avro_registry_sink.settings.config import DispatchRule, PartitionStrategy
    from avro_registry_sink.spark.sinks.sinks import read_file_sink

    manifest = generate_demo(tmp_path / "in", rows_per_table=12)
    sink = SinkConfig(scheme="file", path=str(tmp_path / "out"), partition_num=4, dispatchers=(
        DispatchRule(matcher=("shop.orders",), topic="{schema}_{table}", partition=PartitionStrategy.TABLE),
        DispatchRule(matcher=("shop.customers",), topic="{schema}_{table}", partition=PartitionStrategy.COLUMNS,
                     columns=("name",)),
        DispatchRule(matcher=("crm.*",), topic="{schema}_{table}", partition=PartitionStrategy.TS),
    ))
    run_job(spark, replace(_options(manifest, tmp_path / "in", tmp_path), sink=sink), registry=registry)

    decoded = decode_file_sink(tmp_path / "out", registry)
    assert len({p for p, _, _, _ in decoded["shop_orders"]}) == 1  # by table: one partition
    by_name: dict = defaultdict(set)
    for partition, _, _, value in decoded["shop_customers"]:
        if value is not None:
            by_name[value["name"]].add(partition)
    assert all(len(p) == 1 for p in by_name.values()) and len(by_name) > 1  # by column: one per name
    assert all(r.partition == r.commit_ts % 4 for r in read_file_sink(tmp_path / "out", "crm_events"))  # by ts
    assert {r.partition for r in read_file_sink(tmp_path / "out")} <= {0, 1, 2, 3}


def test_a_value_the_encoder_refuses_is_set_aside_and_the_other_rows_delivered(spark, tmp_path, registry):
    root = tmp_path / "in"
    manifest = generate_demo(root, rows_per_table=6)
    csv_file = next(f for f in manifest.data_files if f.startswith("shop/orders/") and f.endswith(".csv"))
    with open(root / csv_file, "a", encoding="utf-8", newline="") as fh:  # NULL in the NOT NULL customer_code
        fh.write('"I","orders","shop",449640297946939393,false,99999,\\N,"1.00","new","2024-05-01 00:00:00.000",'
                 '\\N,\\N\r\n')
    line = (root / csv_file).read_text(encoding="utf-8").count("\n")

    result = run_job(spark, _options(manifest, root, tmp_path), registry=registry)

    assert [e["source"] for e in result.bad_input] == [f"{csv_file}:{line}"]
    _assert_delivered(manifest, tmp_path / "out", registry)


def test_records_over_max_message_bytes_are_set_aside_with_the_reason(spark, tmp_path, registry):
    from avro_registry_sink.spark.sinks.sinks import read_file_sink

    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    base = _options(manifest, tmp_path / "in", tmp_path)
    # 80 bytes: every tombstone (key + 36) fits, no row with a value does
    options = replace(base, sink=base.sink.model_copy(update={"max_message_bytes": 80}))

    result = run_job(spark, options, registry=registry)

    records = list(read_file_sink(tmp_path / "out"))
    deletes = sum(c.deletes for c in manifest.counts.values())
    assert records and all(r.value is None for r in records) and len(records) == deletes
    too_large = [e for e in result.bad_input if "max-message-bytes 80" in e["reason"]]
    assert len(too_large) == len(manifest.all_events) - deletes
    assert all(e["source"] for e in too_large)  # file:line of each change set aside
