"""The streaming job on canal-json and debezium-json changelog files, into the file sink.

DDL messages in the changelog start new table versions (applied on the driver, kept in the checkpoint's
``state/tables/``), so a later batch registers the new schema while the query runs, and a restarted job
still knows the versions earlier runs built. Bad messages are reported with file:line and reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from avro_registry_sink.changes import ChangeEvent
from avro_registry_sink.model import Op
from avro_registry_sink.settings.config import SinkConfig
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
from tests.support.job import (
    by_partition,
    canal_messages,
    decode_file_sink,
    expected_rows,
    expected_state,
    log_file_manager,
    replay,
    side_state,
)

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]


def _write(path: Path, lines: list[str], mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.utime(path, (mtime, mtime))  # the file source takes files oldest first


def test_canal_json_files_with_a_ddl_mid_stream(spark, tmp_path, registry):
    manifest = generate_demo(tmp_path / "demo", rows_per_table=10)
    messages = [text for _, _, text in canal_messages(manifest, partitions=1)]
    ddl_at = next(i for i, m in enumerate(messages) if json.loads(m).get("type") == "ALTER")
    third = ddl_at // 2
    src = tmp_path / "canal"
    _write(src / "part-1.json", messages[:third], 1_700_000_000)
    options = JobOptions(source=parse_source(f"canal-json+file://{src}"), checkpoint=tmp_path / "checkpoint",
                         sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), max_files_per_trigger=1)

    first = run_job(spark, options, registry=registry)
    assert first.totals.batches == 1
    catalog = side_state(tmp_path / "checkpoint", "tables")
    assert sorted(t["table"] for t in catalog["tables"]) == ["customers", "events", "orders"]

    # The job is down; more arrives: part 2 with two bad messages, part 3 starting with the ALTER TABLE.
    bad = ['{"id":0,"database":"shop","table":"orders", not json',
           json.dumps({**json.loads(messages[third]), "data": [{"id": "7", "no_such_column": "x"}]})]
    _write(src / "part-2.json", messages[third:ddl_at] + bad, 1_700_000_100)
    _write(src / "part-3.json", messages[ddl_at:], 1_700_000_200)
    second = run_job(spark, options, registry=registry)

    assert second.totals.batches == 2  # the DDL is applied in the second batch of this query
    reasons = {e["source"]: e["reason"] for e in second.bad_input}
    n = ddl_at - third
    assert set(reasons) == {f"part-2.json:{n + 1}", f"part-2.json:{n + 2}"}
    assert "JSON" in reasons[f"part-2.json:{n + 1}"] and reasons[f"part-2.json:{n + 2}"] == "unknown column"
    topics = decode_file_sink(tmp_path / "out", registry)
    expected = expected_state(manifest)
    for topic, records in topics.items():
        assert replay(by_partition(records)) == expected[topic.replace("_", ".", 1)], topic
    assert sum(len(r) for r in topics.values()) == len(manifest.all_events)
    assert len(registry.get_versions("shop_orders-value")) == 2
    catalog = side_state(tmp_path / "checkpoint", "tables")
    assert sorted(t["version"] for t in catalog["tables"] if t["table"] == "orders") == \
        sorted(manifest.schema_versions["shop.orders"])


ITEMS_DDL = ("CREATE TABLE `shop`.`items` (`id` INT NOT NULL, `name` VARCHAR(32) NOT NULL, "
             "`price` DECIMAL(10,2), `updated` DATETIME(3), PRIMARY KEY (`id`))")
ITEMS_ALTER = "ALTER TABLE `shop`.`items` ADD COLUMN `stock` INT NOT NULL DEFAULT 0"


def _debezium(op: str, commit_ts: int, before: dict | None, after: dict | None, *, envelope: bool) -> str:
    payload = {"before": before, "after": after, "op": op, "ts_ms": (commit_ts >> 18) + 9, "transaction": None,
               "source": {"version": "2.4.0.Final", "connector": "TiCDC", "name": "default",
                          "ts_ms": commit_ts >> 18, "snapshot": "false", "db": "shop", "table": "items",
                          "commit_ts": commit_ts, "cluster_id": "default"}}
    if envelope:
        return json.dumps({"payload": payload, "schema": {"type": "struct", "fields": [], "optional": False,
                                                          "name": "default.shop.items.Envelope"}})
    return json.dumps(payload)


def _debezium_ddl(query: str, commit_ts: int) -> str:
    return json.dumps({"payload": {"source": {"db": "shop", "table": "items", "commit_ts": commit_ts,
                                              "ts_ms": commit_ts >> 18}, "ts_ms": commit_ts >> 18,
                                   "databaseName": "shop", "ddl": query, "tableChanges": []}})


def test_debezium_json_files(spark, tmp_path, registry, monkeypatch):
    lookups: list[str] = []
    real_lookup = registry.lookup
    monkeypatch.setattr(registry, "lookup", lambda subject, *a, **k: lookups.append(subject) or real_lookup(subject, *a, **k))
    ts = [(1_715_241_600_000 + i * 50) << 18 for i in range(12)]
    v1 = parse_ddl(ITEMS_DDL)[0].model_copy(update={"version": ts[0]})
    v2 = apply_ddl(v1, ITEMS_ALTER).model_copy(update={"version": ts[6]})
    rows = {i: {"id": i, "name": f"item {i}", "price": f"{i}.50", "updated": f"2024-05-09 08:00:0{i}.123"}
            for i in range(1, 5)}
    events: list[ChangeEvent] = []
    lines = [_debezium_ddl(ITEMS_DDL, ts[0])]
    for i in range(1, 5):  # inserts, half with the Connect envelope (epoch ms DATETIME, double DECIMAL)
        after = {**rows[i], "price": float(rows[i]["price"]), "updated": 1715241600123 + i * 1000}
        lines.append(_debezium("c", ts[i], None, after, envelope=i % 2 == 0))
        events.append(ChangeEvent("shop", "items", Op.INSERT, ts[i], after=rows[i], table_version=v1.version))
    lines.append(_debezium("d", ts[5], {"id": 1, "name": "item 1", "price": 1.5, "updated": 1715241601123}, None,
                           envelope=False))
    events.append(ChangeEvent("shop", "items", Op.DELETE, ts[5], before=rows[1], table_version=v1.version))
    lines.append(_debezium_ddl(ITEMS_ALTER, ts[6]))
    new2 = {**rows[2], "name": "renamed", "stock": 5}
    lines.append(_debezium("u", ts[7], {**rows[2], "price": 2.5, "updated": 1715241602123, "stock": 0},
                           {**new2, "price": 2.5, "updated": 1715241602123}, envelope=False))
    events.append(ChangeEvent("shop", "items", Op.UPDATE, ts[7], after=new2, table_version=v2.version))
    lines.append(_debezium("c", ts[8], None, {"id": 9, "name": "new", "price": None, "updated": None, "stock": 1},
                           envelope=False))
    events.append(ChangeEvent("shop", "items", Op.INSERT, ts[8],
                              after={"id": 9, "name": "new", "price": None, "updated": None, "stock": 1},
                              table_version=v2.version))
    lines.append("null")  # a Kafka tombstone copied to a file: no event
    _write(tmp_path / "dbz" / "changes.json", lines, 1_700_000_000)

    options = JobOptions(source=parse_source(f"debezium-json+file://{tmp_path / 'dbz'}"),
                         checkpoint=tmp_path / "checkpoint", sink=SinkConfig(scheme="file", path=str(tmp_path / "out")))
    result = run_job(spark, options, registry=registry)

    assert result.totals.errors == 0, result.bad_input
    assert result.totals.rows == len(events) and result.totals.tombstones == 1
    records = decode_file_sink(tmp_path / "out", registry)["shop_items"]
    versions = {v1.version: v1, v2.version: v2}
    expected = expected_rows(events, lambda e: versions[e.table_version])["shop.items"]
    assert replay(by_partition(records)) == expected
    assert len(registry.get_versions("shop_items-value")) == 2
    assert sorted((v.subject, v.version) for v in result.totals.schemas) == [
        ("shop_items-key", 1), ("shop_items-value", 1), ("shop_items-value", 2)]
    # the history looks up only the version of a subject's second schema (a new subject's one version is it), and
    # the batch report reuses the history's versions
    assert lookups == ["shop_items-value"]


def test_continuous_run_picks_up_new_files_and_a_ddl_without_restarting(spark, tmp_path, registry):
    import threading

    manifest = generate_demo(tmp_path / "demo", rows_per_table=6)
    messages = [text for _, _, text in canal_messages(manifest, partitions=1)]
    ddl_at = next(i for i, m in enumerate(messages) if json.loads(m).get("type") == "ALTER")
    src = tmp_path / "canal"
    _write(src / "part-1.json", messages[:ddl_at], 1_700_000_000)
    options = JobOptions(source=parse_source(f"canal-json+file://{src}"), checkpoint=tmp_path / "checkpoint",
                         sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), available_now=False,
                         trigger_interval="1 second")
    total = len(manifest.all_events)
    first_done = threading.Event()

    def feed() -> None:  # the rest, starting with the ALTER TABLE, arrives while the query runs
        first_done.wait(120)
        _write(src / "part-2.json", messages[ddl_at:], 1_700_000_100)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()

    managers: set[tuple[str, str]] = set()

    def until(totals) -> bool:
        for query in spark.streams.active:  # the job's query, running: how its offset and commit logs write
            managers.update((log, log_file_manager(spark, query, log)) for log in ("offsetLog", "commitLog"))
        if totals.rows:
            first_done.set()
        return totals.rows >= total

    result = run_job(spark, options, registry=registry, timeout=120, until=until)
    feeder.join(5)

    assert result.totals.rows == total and result.totals.batches >= 2
    # a local checkpoint's logs are written through Hadoop's FileSystem API (no readlink process per rename)
    assert managers == {("offsetLog", "FileSystemBasedCheckpointFileManager"),
                        ("commitLog", "FileSystemBasedCheckpointFileManager")}
    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass", None) is None  # the session's own
    assert len(registry.get_versions("shop_orders-value")) == 2
    topics = decode_file_sink(tmp_path / "out", registry)
    expected = expected_state(manifest)
    for topic, records in topics.items():
        assert replay(by_partition(records)) == expected[topic.replace("_", ".", 1)], topic


def test_canal_table_without_ddl_is_described_by_its_messages(spark, tmp_path, registry):
    base = {"id": 0, "database": "app", "table": "notes", "pkNames": ["id"], "isDdl": False, "sql": "",
            "sqlType": {"id": -5, "body": 12}, "mysqlType": {"id": "bigint", "body": "varchar"}}
    lines = [
        json.dumps({**base, "type": "INSERT", "es": 1, "ts": 2, "old": None, "data": [{"id": "1", "body": "a"}],
                    "_tidb": {"commitTs": 10}}),
        json.dumps({**base, "type": "INSERT", "es": 1, "ts": 2, "old": None, "data": [{"id": "2", "body": None}],
                    "_tidb": {"commitTs": 11}}),
        json.dumps({**base, "type": "UPDATE", "es": 1, "ts": 2, "old": [{"body": "a"}],
                    "data": [{"id": "1", "body": "b"}], "_tidb": {"commitTs": 12}}),
        json.dumps({**base, "type": "DELETE", "es": 1, "ts": 2, "old": None, "data": [{"id": "2", "body": None}],
                    "_tidb": {"commitTs": 13}}),
    ]
    _write(tmp_path / "canal" / "notes.json", lines, 1_700_000_000)
    options = JobOptions(source=parse_source(f"canal-json+file://{tmp_path / 'canal'}"),
                         checkpoint=tmp_path / "checkpoint", sink=SinkConfig(scheme="file", path=str(tmp_path / "out")))

    result = run_job(spark, options, registry=registry)

    assert result.totals.rows == 4 and result.totals.tombstones == 1 and result.totals.errors == 0
    records = decode_file_sink(tmp_path / "out", registry)["app_notes"]
    assert replay(by_partition(records)) == {(("id", 1),): {"id": 1, "body": "b"}}
    assert registry.get_subjects() == ["app_notes-key", "app_notes-value"]


def test_an_update_that_changes_the_primary_key_deletes_the_old_key(spark, tmp_path, registry):
    # Alibaba Canal and Flink write a primary-key change as one UPDATE; TiCDC splits it into DELETE + INSERT
    # so the old key does not stay live in a compacted topic. The job does the same.
    from tests.support.job import canal_ddl, canal_dml

    (table,) = parse_ddl("CREATE TABLE `shop`.`moves` (`id` INT NOT NULL, `v` VARCHAR(8), PRIMARY KEY (`id`))")
    ts = 449_640_294_064_586_754
    src = tmp_path / "canal"
    _write(src / "part-1.json", [
        canal_ddl("shop", "moves", "CREATE", "CREATE TABLE `moves` (`id` INT NOT NULL, `v` VARCHAR(8), PRIMARY KEY (`id`))", ts),
        canal_dml(table, Op.INSERT, ts + 1, None, {"id": 1, "v": "a"}),
        canal_dml(table, Op.UPDATE, ts + 2, {"id": 1, "v": "a"}, {"id": 2, "v": "a"}),
        canal_dml(table, Op.UPDATE, ts + 3, {"id": 2, "v": "a"}, {"id": 2, "v": "b"}),
    ], 1_700_000_000)
    options = JobOptions(source=parse_source(f"canal-json+file://{src}"), checkpoint=tmp_path / "checkpoint",
                         sink=SinkConfig(scheme="file", path=str(tmp_path / "out"), partition_num=1))

    run_job(spark, options, registry=registry)

    records = decode_file_sink(tmp_path / "out", registry)["shop_moves"]
    assert [(key["id"], value) for _, _, key, value in records] == [
        (1, {"id": 1, "v": "a"}), (1, None), (2, {"id": 2, "v": "a"}), (2, {"id": 2, "v": "b"})]
    assert replay(by_partition(records)) == {(("id", 2),): {"id": 2, "v": "b"}}
