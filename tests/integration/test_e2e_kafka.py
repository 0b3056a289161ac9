"""End to end through a real Kafka broker: inputs -> the streaming job -> Kafka -> a Confluent consumer.

* A TiCDC storage-sink directory (the demo: three tables, CSV and canal-json, inserts/updates/deletes,
  ADD COLUMN mid-stream) and a canal-json topic with the same changes (DDLs broadcast to its three
  partitions) go through ``run_job`` into the broker. confluent-kafka's ``DeserializingConsumer`` with
  ``AvroDeserializer`` against the (embedded) registry reads every record back; the decoded rows replay to
  the source rows (deletes are tombstones keyed by the primary key), and the registry holds exactly the
  expected subjects and versions.
* Bad input (a malformed CSV line, a broken canal-json line in a data file, a malformed and a mistyped
  canal-json message) is reported with its file:line or topic/partition@offset and reason; every other
  row of every table is still delivered.
* Restart: the job dies after writing a batch but before committing it, is started again from its
  checkpoint, and later picks up files that arrived while it was down: no row is lost, and the only
  duplicates are the replayed batch's records, with the same commit ts.

Markers ``kafka`` and ``spark``: the broker comes from ``tests/support/servers.ensure_kafka()`` (or
``KAFKA_BOOTSTRAP``), the SparkSession from the session fixture (with Spark's Kafka connector).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections import Counter, defaultdict

import pytest

from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import EncodingOptions, RegistryConfig, parse_sink_uri
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sinks.sinks import KafkaSink
from avro_registry_sink.spark.sources.sources import parse_source
from tests.support.job import (
    canal_messages,
    decoded_changes,
    expected_state,
    key_of,
    manifest_definition,
    replay,
    stamp_in_order,
)
from tests.support.servers import ensure_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

TABLES = ("crm.events", "shop.customers", "shop.orders")


@pytest.fixture(scope="module")
def bootstrap() -> str:
    return ensure_kafka()


@pytest.fixture()
def registry():
    server = EmbeddedRegistry()
    url = server.start()
    with RegistryClient(RegistryConfig(urls=(url,))) as client:
        yield url, client
    server.stop()


@pytest.fixture()
def prefix() -> str:
    return "e" + uuid.uuid4().hex[:8]  # topics and subjects of this test only (the broker is shared)


def _sink(bootstrap: str, url: str):
    return parse_sink_uri(f"kafka://{bootstrap}/?protocol=avro&partition-num=3&schema-registry={url}")


def consume(bootstrap: str, url: str, topics: list[str], expected: int, timeout: float = 90.0) -> dict[str, list]:
    """Every record of ``topics``, decoded: ``{topic: [(partition, offset, key dict, value dict or None)]}``."""
    from confluent_kafka import DeserializingConsumer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    client = SchemaRegistryClient({"url": url})
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "key.deserializer": AvroDeserializer(client),
        "value.deserializer": AvroDeserializer(client),
    })
    consumer.subscribe(topics)
    out: dict[str, list] = defaultdict(list)
    headers: dict[str, list] = defaultdict(list)
    count, deadline, idle_since = 0, time.monotonic() + timeout, time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if count >= expected and time.monotonic() - idle_since > 2.0:
                    break
                continue
            assert msg.error() is None, msg.error()
            idle_since = time.monotonic()
            count += 1
            out[msg.topic()].append((msg.partition(), msg.offset(), msg.key(), msg.value()))
            headers[msg.topic()].append(dict(msg.headers() or []))
    finally:
        consumer.close()
    HEADERS.clear()
    HEADERS.update(headers)
    return {topic: sorted(records, key=lambda r: (r[0], r[1])) for topic, records in out.items()}


#: The headers of the records the last :func:`consume` read, per topic.
HEADERS: dict[str, list[dict]] = {}


def _topic(prefix: str, name: str) -> str:
    return f"{prefix}_{name.replace('.', '_')}"


def _assert_rows(manifest, records_by_topic: dict[str, list], prefix: str, *, exact: bool = True) -> None:
    expected = expected_state(manifest)
    for name in TABLES:
        records = records_by_topic[_topic(prefix, name)]
        counts = manifest.counts[name]
        if exact:
            assert len(records) == counts.inserts + counts.updates + counts.deletes, name
            assert sum(1 for r in records if r[3] is None) == counts.deletes, name
        assert replay((key, value) for _, _, key, value in records) == expected[name], name
        partitions = defaultdict(set)
        for partition, _, key, value in records:
            partitions[key_of(key)].add(partition)
            if value is None:  # a tombstone is keyed by the primary (handle) key of the deleted row
                assert sorted(key) == sorted(manifest.key_columns[name])
        assert all(len(p) == 1 for p in partitions.values()), f"{name}: a key in several partitions"
        assert len({p for ps in partitions.values() for p in ps}) >= 2, f"{name}: keys are not spread"


def _assert_subjects(client, prefix: str) -> None:
    got = {s: client.get_versions(s) for s in client.get_subjects() if s.startswith(prefix)}
    want = {f"{_topic(prefix, n)}-{part}": [1] for n in TABLES for part in ("key", "value")}
    want[f"{_topic(prefix, 'shop.orders')}-value"] = [1, 2]  # ALTER TABLE ... ADD COLUMN
    assert got == want


def test_storage_directory_through_kafka(spark, bootstrap, registry, prefix, tmp_path):
    url, client = registry
    root = tmp_path / "in"
    manifest = generate_demo(root, rows_per_table=12)
    csv_file = next(f for f in manifest.data_files if f.startswith("shop/orders/") and f.endswith(".csv"))
    json_file = next(f for f in manifest.data_files if f.endswith(".json"))
    with open(root / csv_file, "a", encoding="utf-8", newline="") as fh:
        fh.write('"I","orders","shop",449640297946939393,false,12x,"C0001","1.00","new","2024-05-01 00:00:00.000",\\N,\\N\r\n')
    with open(root / json_file, "a", encoding="utf-8", newline="") as fh:
        fh.write('{"id":0,"database":"crm","table":"events","type":"INSERT","data":[{"id":\r\n')
    bad = {f"{csv_file}:{(root / csv_file).read_text().count(chr(10))}",
           f"{json_file}:{(root / json_file).read_text().count(chr(10))}"}
    stamp_in_order(root, manifest.data_files)  # the files keep TiCDC's write order

    result = run_job(spark, JobOptions(
        source=parse_source(str(root)), checkpoint=tmp_path / "checkpoint", sink=_sink(bootstrap, url),
        topic_rule=prefix + "_{schema}_{table}", csv_options=manifest.csv_options,
        tables=tuple(manifest.tables.values()), max_files_per_trigger=4,
    ))

    total = len(manifest.all_events)
    assert result.totals.rows == total and result.totals.batches >= 2
    assert {e["source"] for e in result.bad_input} == bad and all(e["reason"] for e in result.bad_input)
    assert "Spark Kafka sink" in result.sink  # the connector was added to the running session
    records = consume(bootstrap, url, [_topic(prefix, n) for n in TABLES], total)
    _assert_rows(manifest, records, prefix)
    _assert_subjects(client, prefix)
    for topic_headers in HEADERS.values():  # the stage's headers went along: op and commit ts, tombstones too
        assert all(h.get("op") in (b"c", b"u", b"d") and int(h["commit_ts"]) > 0 for h in topic_headers)


def test_canal_json_topic_through_kafka(spark, bootstrap, registry, prefix, tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    url, client = registry
    manifest = generate_demo(tmp_path / "demo", rows_per_table=12)
    source_topic = f"{prefix}_canal"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(source_topic, num_partitions=3, replication_factor=1)]).values():
        future.result(30)
    messages = canal_messages(manifest, partitions=3)
    good = next(json.loads(m) for _, _, m in messages
                if json.loads(m)["table"] == "orders" and json.loads(m)["type"] == "INSERT")
    mistyped = json.dumps({**good, "data": [{**good["data"][0], "id": "twelve"}]})
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition, _, message in messages:
        producer.produce(source_topic, value=message.encode(), partition=partition)
    producer.produce(source_topic, value=b'{"database": "shop", "table": "orders", "type": "INSERT", broken',
                     partition=0)
    producer.produce(source_topic, value=mistyped.encode(), partition=1)
    producer.flush(30)
    offsets = {p: sum(1 for q, _, _ in messages if q == p) for p in range(3)}

    result = run_job(spark, JobOptions(
        source=parse_source(f"canal-json+kafka://{bootstrap}/{source_topic}"), checkpoint=tmp_path / "checkpoint",
        sink=_sink(bootstrap, url), topic_rule=prefix + "_{schema}_{table}", max_offsets_per_trigger=40,
    ))

    total = len(manifest.all_events)
    assert result.totals.rows == total and result.totals.batches >= 2
    reasons = {e["source"]: e["reason"] for e in result.bad_input}
    assert set(reasons) == {f"{source_topic}/0@{offsets[0]}", f"{source_topic}/1@{offsets[1]}"}
    assert "JSON" in reasons[f"{source_topic}/0@{offsets[0]}"]
    assert "integer" in reasons[f"{source_topic}/1@{offsets[1]}"]
    records = consume(bootstrap, url, [_topic(prefix, n) for n in TABLES], total)
    _assert_rows(manifest, records, prefix)
    _assert_subjects(client, prefix)


def test_a_batch_of_a_kafka_source_is_split_into_tasks_that_fill_the_cores(spark, bootstrap, prefix, tmp_path):
    """Three equal partitions on two cores: six tasks (three full waves), not three (a core idle for a third of
    the batch); the partition count comes from the cluster's metadata."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from avro_registry_sink.spark.driver.job import _stream, check_kafka
    from avro_registry_sink.spark.sources.sources import min_partitions

    assert [min_partitions(p, 2) for p in (None, 1, 2, 3, 4, 5, 9)] == [4, 2, None, 6, None, None, None]
    assert min_partitions(3, 8) == 24 and min_partitions(1, 1) is None
    topic = f"{prefix}_split"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(300):
        producer.produce(topic, value=b'{"id": %d}' % i, partition=i % 3)
    producer.flush(30)
    options = JobOptions(source=parse_source(f"canal-json+kafka://{bootstrap}/{topic}"),
                         checkpoint=tmp_path / "checkpoint", sink=parse_sink_uri(f"file://{tmp_path / 'out'}"))
    assert check_kafka(options, sink=False) == 3
    seen: list[int] = []
    query = (_stream(spark, options).writeStream.trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .foreachBatch(lambda frame, _id: seen.append(frame.rdd.getNumPartitions())).start())
    query.awaitTermination(120)
    cores = spark.sparkContext.defaultParallelism
    assert seen == [min_partitions(3, cores) or 3]


class CrashingKafkaSink(KafkaSink):
    """Delivers a batch to Kafka, then fails it once: the job dies before the batch is committed."""

    crash_batch = 1

    def write(self, records, batch_id: int, **kw) -> None:
        super().write(records, batch_id, **kw)
        if batch_id == self.crash_batch:
            raise RuntimeError(f"simulated crash after delivering batch {batch_id}")


def test_restart_from_checkpoint_through_kafka(spark, bootstrap, registry, prefix, tmp_path):
    url, client = registry
    full, live = tmp_path / "full", tmp_path / "live"
    manifest = generate_demo(full, rows_per_table=10)
    files = manifest.data_files
    first, rest = files[: len(files) // 2 + 1], files[len(files) // 2 + 1:]

    def copy(relpaths) -> None:
        for rel in relpaths:
            (live / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(full / rel, live / rel)

    stamp_in_order(full, files)
    copy([str(p.relative_to(full)) for p in full.rglob("*") if p.is_file() and "CDC0" not in p.name])
    copy(first)
    # with _tidb_commit_ts in every value, a duplicate shows which change it repeats
    sink_config = parse_sink_uri(f"kafka://{bootstrap}/?protocol=avro&enable-tidb-extension=true&schema-registry={url}")
    options = JobOptions(source=parse_source(str(live)), checkpoint=tmp_path / "checkpoint", sink=sink_config,
                         topic_rule=prefix + "_{schema}_{table}", csv_options=manifest.csv_options,
                         tables=tuple(manifest.tables.values()), max_files_per_trigger=2)

    def sink(cls=KafkaSink):  # the confluent-kafka producer path (the tests above use Spark's Kafka sink)
        return cls(sink_config.brokers, partitions=3, producer="confluent")

    with pytest.raises(Exception, match="simulated crash"):
        run_job(spark, options, sink=sink(CrashingKafkaSink))
    resumed = run_job(spark, options, sink=sink())  # starts with the batch that was not committed
    copy(rest)  # files that arrived while the job was down
    final = run_job(spark, options, sink=sink())
    assert resumed.totals.batches >= 1 and final.totals.batches >= 1

    ext = EncodingOptions(enable_tidb_extension=True)
    want = Counter((name, key, value["_tidb_commit_ts"] if value else None)
                   for name, key, value in decoded_changes(manifest.all_events, manifest_definition(manifest), ext))
    records = consume(bootstrap, url, [_topic(prefix, n) for n in TABLES], sum(want.values()))
    got = Counter((name, key_of(key), value["_tidb_commit_ts"] if value else None)
                  for name in TABLES for _, _, key, value in records[_topic(prefix, name)])
    assert not want - got, "changes lost"
    assert set(got) == set(want), "a record that is not a repeated change"  # duplicates: same key, same commit ts
    assert sum(got.values()) > sum(want.values()), "the crashed batch was delivered twice"
    expected = expected_state(manifest, ext)
    for name in TABLES:
        assert replay((k, v) for _, _, k, v in records[_topic(prefix, name)]) == expected[name], name
    _assert_subjects(client, prefix)


def test_a_keys_changes_across_files_keep_their_order_through_kafka(spark, bootstrap, registry, prefix, tmp_path):
    # One table, six data files in one batch: later files update and delete keys inserted by earlier ones, on
    # lines with smaller numbers. The records are ordered per Kafka partition by file rank and line (one sort
    # key), so each partition's commit ts (growing with the row in TiCDC's write order) never go back.
    from bench.tree import CSV_OPTIONS, storage_tree

    url, _ = registry
    tree = storage_tree(3_000, 1, cache=tmp_path / "trees", rows_per_file=500)
    assert tree.files == 6 and tree.ops["update"] and tree.ops["delete"]
    sink = parse_sink_uri(f"kafka://{bootstrap}/?protocol=avro&enable-tidb-extension=true&schema-registry={url}")
    result = run_job(spark, JobOptions(
        source=parse_source(str(tree.root)), checkpoint=tmp_path / "checkpoint", sink=sink,
        topic_rule=prefix + "_{schema}_{table}", csv_options=CSV_OPTIONS,
    ))
    assert result.totals.rows == tree.rows and result.totals.batches == 1
    topic = _topic(prefix, tree.tables[0].qualified_name)
    records = consume(bootstrap, url, [topic], tree.rows)[topic]  # sorted by partition, offset
    assert len(records) == tree.rows
    stamps: dict[int, list[int]] = defaultdict(list)
    for partition, _, _, value in records:
        if value is not None:  # tombstones carry no commit ts
            stamps[partition].append(value["_tidb_commit_ts"])
    assert len(stamps) == 3 and all(s == sorted(s) for s in stamps.values())


def test_a_record_over_a_megabyte_reaches_kafka(spark, bootstrap, registry, prefix, tmp_path):
    # Kafka's producers and brokers refuse records over about 1 MB by default; TiCDC's max-message-bytes is
    # 10 MiB, so the sink raises the producer's limit and creates its topics with max.message.bytes to match.
    from avro_registry_sink.model import Op
    from avro_registry_sink.tabledef import parse_ddl
    from tests.support.job import canal_ddl, canal_dml

    create = "CREATE TABLE `docs` (`id` INT NOT NULL, `body` LONGTEXT, PRIMARY KEY (`id`))"
    (table,) = parse_ddl(create, default_schema="shop")
    body = "é" + "x" * 2_500_000
    ts = 449_640_294_064_586_754
    src = tmp_path / "canal"
    src.mkdir()
    (src / "part-1.json").write_text("\n".join([
        canal_ddl("shop", "docs", "CREATE", create, ts),
        canal_dml(table, Op.INSERT, ts + 1, None, {"id": 1, "body": body}),
        canal_dml(table, Op.INSERT, ts + 2, None, {"id": 2, "body": "small"}),
    ]) + "\n", encoding="utf-8")
    url, _ = registry

    result = run_job(spark, JobOptions(source=parse_source(f"canal-json+file://{src}"),
                                       checkpoint=tmp_path / "checkpoint", sink=_sink(bootstrap, url),
                                       topic_rule=prefix + "_{schema}_{table}"))

    assert result.totals.rows == 2 and not result.bad_input
    records = consume(bootstrap, url, [f"{prefix}_shop_docs"], 2)[f"{prefix}_shop_docs"]
    assert sorted((key["id"], len(value["body"])) for _, _, key, value in records) == [(1, len(body)), (2, 5)]


def test_a_missing_topic_under_auto_create_topic_false_stops_the_batch_uncommitted(spark, bootstrap, registry, prefix,
                                                                                   tmp_path):
    """``auto-create-topic=false``: the topics are looked for while the schemas register (the job's
    ``_topics_ahead``); a missing one stops the first batch, by name, before any record is written, and
    nothing is committed: with the topics created, the same checkpoint delivers every row."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from avro_registry_sink.errors import AvroSinkError

    url, client = registry
    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    stamp_in_order(tmp_path / "in", manifest.data_files)
    options = JobOptions(
        source=parse_source(str(tmp_path / "in")), checkpoint=tmp_path / "checkpoint",
        sink=parse_sink_uri(f"kafka://{bootstrap}/?protocol=avro&partition-num=3&auto-create-topic=false"
                            f"&schema-registry={url}"),
        topic_rule=prefix + "_{schema}_{table}", csv_options=manifest.csv_options,
        tables=tuple(manifest.tables.values()))
    with pytest.raises(AvroSinkError) as failed:
        run_job(spark, options)
    assert "auto-create-topic" in str(failed.value) and f"{prefix}_" in str(failed.value)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert not [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]

    topics = [_topic(prefix, n) for n in TABLES]
    for future in admin.create_topics([NewTopic(t, num_partitions=3, replication_factor=1) for t in topics]).values():
        future.result(30)
    result = run_job(spark, options)
    total = len(manifest.all_events)
    assert result.totals.rows == total
    _assert_rows(manifest, consume(bootstrap, url, topics, total), prefix)
    _assert_subjects(client, prefix)


def test_a_table_the_first_batchs_sample_misses_is_planned_from_the_full_summary(spark, bootstrap, registry, prefix,
                                                                                  tmp_path):
    """A topic dispatched by table (TiCDC's ``partition = "table"``): the first batch's sample is the start of
    the first input partition, which holds one table only; the other table's messages stop the strict pass, and
    the batch is read again with its full summary: every message of both tables arrives, none dead-lettered."""
    from avro_registry_sink.spark.sources.changelog_stage import SAMPLE
    from bench.changelog import canal_messages as bench_messages
    from bench.changelog import produce

    url, _ = registry
    n = 2 * SAMPLE + 2000
    messages = bench_messages(n, 2)
    source = f"{prefix}_canal"
    produce(bootstrap, source, messages.texts, 2, keys=messages.table_index)  # table i -> partition i
    assert (messages.table_index == 0).sum() > SAMPLE
    result = run_job(spark, JobOptions(
        source=parse_source(f"canal-json+kafka://{bootstrap}/{source}"), checkpoint=tmp_path / "checkpoint",
        sink=_sink(bootstrap, url), topic_rule=prefix + "_{schema}_{table}", tables=messages.tables))
    assert result.totals.rows == n and not result.bad_input
    per_table = {f"{prefix}_bench_t{i:03d}": int((messages.table_index == i).sum()) for i in range(2)}
    records = consume(bootstrap, url, list(per_table), n)
    assert {topic: len(rows) for topic, rows in records.items()} == per_table
