"""The pure parts of the job (no Spark): source URIs, the changelog table catalog, schema-file completion,
progress reporting and the file sink's reader."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.formats.canal_json import DdlEvent
from avro_registry_sink.ops.progress import (
    BatchReport,
    JobTotals,
    JsonLogProgress,
    NullProgress,
    RichProgress,
    SchemaVersion,
    lag_seconds,
    make_progress,
)
from avro_registry_sink.settings.config import OnIncompatible
from avro_registry_sink.spark.runtime.packages import kafka_package
from avro_registry_sink.spark.sinks.sinks import read_file_sink
from avro_registry_sink.spark.sources.sources import parse_source
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
from avro_registry_sink.tabledef.catalog import TableCatalog, complete_table, pick_version
from avro_registry_sink.tabledef.ddl import parse_ddl
from tests.support.job import side_state


@pytest.mark.parametrize(
    ("text", "kind", "transport", "topics"),
    [
        ("canal-json+kafka://h1:9092,h2:9092/cdc,more", "canal-json", "kafka", ("cdc", "more")),
        ("debezium-json+kafka://h:9092/dbz?startingOffsets=latest", "debezium-json", "kafka", ("dbz",)),
        ("canal-json+file:///data/canal", "canal-json", "file", ()),
        ("storage:///data/ticdc", "storage", "file", ()),
        ("/data/ticdc", "storage", "file", ()),
    ],
)
def test_parse_source(text, kind, transport, topics):
    spec = parse_source(text)
    assert (spec.kind, spec.transport, spec.topics) == (kind, transport, topics)
    assert parse_source(spec.describe()).describe() == spec.describe()  # describe() names the checkpoint's source


def test_parse_source_keeps_kafka_options_and_rejects_unknown_schemes():
    assert parse_source("canal-json+kafka://h:1/t?startingOffsets=latest").options == {"startingOffsets": "latest"}
    with pytest.raises(ConfigError, match="canal-json\\+kafka://"):
        parse_source("avro+kafka://h:1/t")
    with pytest.raises(ConfigError, match="at least one topic"):
        parse_source("canal-json+kafka://h:1/")


ORDERS = "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, status ENUM('new','paid') NOT NULL)"


def _ddl(query: str, ts: int, table: str = "orders") -> DdlEvent:
    return DdlEvent(schema="shop", table=table, query=query, commit_ts=ts, source=f"topic/0@{ts}")


def test_catalog_applies_ddl_once_and_picks_versions_by_commit_ts(tmp_path):
    catalog = TableCatalog(tmp_path / "tables.json")
    assert catalog.apply(_ddl(ORDERS, 100))
    assert catalog.apply(_ddl("ALTER TABLE shop.orders ADD COLUMN note TEXT", 200))
    assert not catalog.apply(_ddl("ALTER TABLE shop.orders ADD COLUMN note TEXT", 200))  # replayed batch
    assert not catalog.apply(_ddl("TRUNCATE TABLE shop.orders", 300))  # same columns: same version
    history = catalog.history([("shop", "orders")])[("shop", "orders")]
    assert [v for v, _ in history] == [100, 200]
    assert [c.name for c in pick_version(history, 150).columns] == ["id", "status"]
    assert [c.name for c in pick_version(history, 200).columns] == ["id", "status", "note"]
    assert [t.version for t in catalog.versions_between("shop", "orders", 150, 250)] == [100, 200]
    assert [t.version for t in catalog.versions_between("shop", "orders", 201, 250)] == [200]
    catalog.save()

    reloaded = TableCatalog(tmp_path / "tables.json")
    assert reloaded.history([("shop", "orders")]) == catalog.history([("shop", "orders")])
    assert reloaded.apply(_ddl("DROP TABLE shop.orders", 400))


def test_catalog_seed_and_unknown_table_ddl(tmp_path):
    seed = parse_ddl("CREATE TABLE shop.items (id INT PRIMARY KEY)")
    catalog = TableCatalog(seed=seed)
    assert catalog.known() == {("shop", "items")}
    assert not catalog.apply(_ddl("ALTER TABLE shop.other ADD COLUMN x INT", 5, table="other"))
    assert catalog.notes and "shop.other" in catalog.notes[0]
    assert not catalog.apply(DdlEvent(schema="shop", table="", query="CREATE DATABASE shop", commit_ts=1))


def test_complete_table_takes_unique_keys_from_the_hint_not_members():
    from_file = TableDef(schema_name="s", table="t", columns=(
        ColumnDef(name="code", type=MySQLType.VARCHAR, length=8, nullable=False),
        ColumnDef(name="tags", type=MySQLType.SET),
    ))
    hint = parse_ddl("CREATE TABLE s.t (code VARCHAR(8) NOT NULL, tags SET('a','b'), UNIQUE KEY (code))")[0]
    done = complete_table(from_file, hint)
    # members are per table version (tabledef.catalog.complete_versions), never one hint's for all of them
    assert done.unique_keys == (("code",),) and done.column("tags").elements == ()
    assert complete_table(from_file, None) is from_file


def test_json_log_progress_writes_one_object_per_line():
    out = io.StringIO()
    progress = JsonLogProgress(out)
    totals = JobTotals()
    progress.start({"source": "s", "sink": "k"})
    report = BatchReport(batch_id=0, rows=5, tombstones=1, per_table={"a.b": 5}, max_commit_ts=1000 << 18,
                         new_schemas=[SchemaVersion("a_b-value", 3, 1, "a.b")])
    totals.add(report)
    progress.batch(report, totals)
    progress.finish(totals)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["start", "batch", "finish"]
    assert lines[1]["rows"] == 5 and lines[1]["new_schemas"][0]["subject"] == "a_b-value"
    assert lines[1]["lag_seconds"] > 0 and lines[2]["status"] == "ok"


def test_rich_progress_renders_tables_schemas_and_lag():
    from rich.console import Console

    console = Console(file=io.StringIO(), width=150, force_terminal=False)
    progress = RichProgress(console)
    totals = JobTotals()
    totals.add(BatchReport(batch_id=0, rows=7, per_table={"shop.orders": 7},
                           new_schemas=[SchemaVersion("shop_orders-value", 2, 1, "shop.orders")]))
    progress.start({"source": "storage:///x", "sink": "file:///y"})
    progress.batch(BatchReport(batch_id=0), totals)
    progress.finish(totals)
    text = console.file.getvalue()
    assert "shop.orders" in text and "shop_orders-value v1 (id 2)" in text and "rows 7" in text


def test_make_progress_and_lag():
    assert isinstance(make_progress("none"), NullProgress)
    assert isinstance(make_progress("auto", io.StringIO()), JsonLogProgress)  # not a terminal
    with pytest.raises(ValueError, match="auto, rich, json or none"):
        make_progress("loud")
    assert lag_seconds(0) is None and lag_seconds(2000 << 18, now=5.0) == 3.0


def test_kafka_package_falls_back_to_the_newest_published_connector(monkeypatch):
    monkeypatch.delenv("AVRO_SINK_SPARK_KAFKA_VERSION", raising=False)
    assert kafka_package("4.0.1").endswith(":4.0.1")
    assert kafka_package("9.9.0").endswith(":4.2.0")
    monkeypatch.setenv("AVRO_SINK_SPARK_KAFKA_VERSION", "4.1.3")
    assert kafka_package("4.3.0").endswith(":4.1.3")


def test_read_file_sink_orders_batches_and_parts(tmp_path):
    topic = tmp_path / "t"
    topic.mkdir()
    row = {"topic": "t", "partition": 1, "key": "00000000010a", "value": None, "headers": [], "commit_ts": 5}
    (topic / "batch-0000000001-part-00000.jsonl").write_text(json.dumps({**row, "batch": 1}) + "\n")
    (topic / "batch-0000000000-part-00001.jsonl").write_text(
        json.dumps({**row, "value": "0000000002", "batch": 0}) + "\n")
    records = list(read_file_sink(tmp_path))
    assert [r.batch for r in records] == [0, 1]
    assert records[0].value == bytes.fromhex("0000000002") and records[1].is_tombstone
    assert records[1].key == bytes.fromhex("00000000010a")


def test_files_taken_out_of_order_are_reported(tmp_path):
    from avro_registry_sink.sources.demo import generate_demo
    from avro_registry_sink.sources.storage import StorageLayout
    from avro_registry_sink.spark.driver.job import _BatchProcessor
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import resolve_storage_files

    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    layout = StorageLayout(tmp_path / "in")
    orders = [f for f in manifest.data_files if f.startswith("shop/orders/")]
    manager = SimpleNamespace(on_incompatible=OnIncompatible.STOP)  # the processor hooks the history recorder onto it
    processor = _BatchProcessor(JobOptions(source=parse_source(str(tmp_path / "in")), checkpoint=tmp_path / "ck"),
                                manager, None, None, None, None)  # type: ignore[arg-type]
    uri = f"file:{tmp_path / 'in'}/"
    assert manager.on_register == processor.history.registered
    assert processor.batches._late_files(resolve_storage_files(layout, [uri + orders[1]])) == []
    processor._end_side(0)
    late = processor.batches._late_files(resolve_storage_files(layout, [uri + orders[0]]))
    assert len(late) == 1 and late[0].startswith(orders[0]) and "TiCDC's order" in late[0]
    processor._end_side(1)
    assert side_state(tmp_path / "ck", "numbers")


def test_every_batch_gets_the_same_completed_definition_object(tmp_path):
    # the schema manager then finds a known table version by identity, not by comparing definitions
    from avro_registry_sink.sources.demo import generate_demo
    from avro_registry_sink.sources.storage import StorageLayout
    from avro_registry_sink.spark.sources.sources import resolve_storage_files

    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    layout = StorageLayout(tmp_path / "in")
    hints = {(t.schema_name, t.table): t for t in manifest.tables.values()}
    uri = f"file:{tmp_path / 'in'}/"
    customers = [uri + f for f in manifest.data_files if f.startswith("shop/customers/")]
    completed: dict = {}
    first = resolve_storage_files(layout, customers[:1], hints, completed).tables
    second = resolve_storage_files(layout, customers[1:], hints, completed).tables
    (key,) = first
    assert first[key].unique_keys  # completed from the hint (schema files record no unique keys)
    assert second[key] is first[key]
    assert resolve_storage_files(layout, customers[1:], hints).tables[key] is not first[key]  # no memo: a new copy
