"""The breaking-DDL corpus through the streaming job into Kafka, read by confluent-kafka-python's
``DeserializingConsumer`` pinned to a major version (``use.latest.with.metadata``, its JSONata rule executor
registered).

* A TiCDC storage tree holding every class as a table of its own (version 1 rows, the breaking DDL(s), version 2
  rows), run once with ``--on-incompatible new-major``; then a canal-json changelog file with the same changes.
  No batch stops, no subject is set to NONE, each class registers its new majors (one, or two for a class of three
  majors); consumers pinned to each major read every record of every version and see the oracle's values
  (tests/support/evolution.py), or fail the record as the oracle says (the column, the value, the reason; and
  records holding a DECIMAL or bytes value that confluent-kafka-python must migrate: its executor refuses them).
* The same records, as the job wrote them to Kafka, read by ``from_flat_avro(major=N)`` in Spark: one query per
  major over every class's records (each class's column reads its topic's rows only), equal to the oracle to the
  type (Decimal, bytes); the records the oracle refuses are refused by the follower that query runs (the same plan,
  on the driver), one of them through Spark too.
* The tree of the classes the registry's level refuses, with ``stop``: the job stops at the first breaking table
  version with the registry's reasons.

Markers ``kafka`` and ``spark``: the broker from ``KAFKA_BOOTSTRAP`` (or ``scripts/kafka.sh``), the session's Spark.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Any

import pytest

from avro_registry_sink.errors import AvroSinkError
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import OnIncompatible, RegistryConfig, parse_sink_uri
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from tests.support.evolution import (
    CORPUS,
    BreakingClass,
    Refused,
    canal_changelog,
    causes,
    exact_kinds,
    python_refuses,
    python_view,
    row_majors,
    write_storage_tree,
)
from tests.support.servers import ensure_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

VALUE_CLASSES = [c for c in CORPUS if not c.breaks_key]
#: The table of every new major the corpus makes (a class of three majors twice).
MAJORS = sorted(c.table for c in CORPUS for _ in range(c.last_major - 1))
STOPPED = tuple(c for c in CORPUS if c.registry_refuses)
KEY_CLASSES = [c for c in CORPUS if c.breaks_key]


@pytest.fixture(scope="module")
def bootstrap() -> str:
    return ensure_kafka()


@pytest.fixture()
def registry():
    from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor

    JsonataExecutor.register()
    server = EmbeddedRegistry()
    url = server.start()
    with RegistryClient(RegistryConfig(urls=(url,))) as client:
        yield url, client
    server.stop()


def _options(source: str, tmp_path, bootstrap: str, url: str, prefix: str, policy: OnIncompatible) -> JobOptions:
    sink = parse_sink_uri(f"kafka://{bootstrap}/?protocol=avro&partition-num=1&schema-registry={url}")
    return JobOptions(source=parse_source(source), checkpoint=tmp_path / f"checkpoint-{prefix}",
                      sink=sink.model_copy(update={"on_incompatible": policy}), topic_rule=prefix + "_{schema}_{table}")


def read_pinned(bootstrap: str, url: str, topics: list[str], expected: int, *, key_major: int | None,
                value_major: int | None, timeout: float = 90.0) -> dict[str, list]:
    """Every record of ``topics`` through a DeserializingConsumer whose key and/or value deserializer is pinned to
    a major version: ``{topic: [(key, value)]}``; a record that cannot be read is ``("error", (key, message))`` (the
    key read unpinned when the value is pinned; the message with the exceptions it was raised from)."""
    from confluent_kafka import DeserializingConsumer
    from confluent_kafka.error import ConsumeError
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": url})

    def deserializer(major: int | None) -> AvroDeserializer:
        conf = {} if major is None else {"use.latest.with.metadata": {"major_version": str(major)}}
        return AvroDeserializer(client, conf=conf)

    unpinned = deserializer(None)

    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap, "group.id": f"evo-{uuid.uuid4().hex}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "key.deserializer": deserializer(key_major),
        "value.deserializer": deserializer(value_major),
    })
    consumer.subscribe(topics)
    out: dict[str, list] = defaultdict(list)
    count, deadline, idle_since = 0, time.monotonic() + timeout, time.monotonic()
    try:
        while time.monotonic() < deadline:
            try:
                msg = consumer.poll(0.5)
            except ConsumeError as exc:  # Key/ValueDeserializationError: the record is there, not readable
                count += 1
                idle_since = time.monotonic()
                raw = exc.kafka_message
                key = None
                if value_major is not None:  # which row: its key, read unpinned (a value class's key has one version)
                    key = unpinned(raw.key(), SerializationContext(raw.topic(), MessageField.KEY))
                out[raw.topic()].append(("error", (key, f"{exc} <- {causes(exc.exception)}")))
                continue
            if msg is None:
                if count >= expected and time.monotonic() - idle_since > 2.0:
                    break
                continue
            assert msg.error() is None, msg.error()
            idle_since = time.monotonic()
            count += 1
            out[msg.topic()].append((msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def assert_corpus_read(bootstrap: str, url: str, client: Any, prefix: str) -> None:
    value_topics = {f"{prefix}_evo_{c.name}": c for c in VALUE_CLASSES}
    key_topics = {f"{prefix}_evo_{c.name}": c for c in KEY_CLASSES}
    key_rows = sum(c.row_count for c in KEY_CLASSES)
    written = {topic: row_majors(case, client, f"{topic}-value") for topic, case in value_topics.items()}
    for major in sorted({m for c in CORPUS for m in c.pinned}):
        pinned = {topic: case for topic, case in value_topics.items() if major in case.pinned}
        records = read_pinned(bootstrap, url, list(pinned), sum(c.row_count for c in pinned.values()), key_major=None,
                              value_major=major)
        for topic, case in pinned.items():
            seen: dict[int, Any] = {}
            failed: dict[int, str] = {}
            for key, value in records.get(topic, []):
                if key == "error":
                    failed[value[0]["id"]] = value[1]
                else:
                    seen[value["id"]] = value
            rows = {row["id"]: row for _, era in case.eras() for row in era}
            for row_id, expected in case.pinned[major].items():
                label = f"{case.name}, id {row_id}: consumer pinned to major {major}"
                if written[topic][row_id] != major and python_refuses(rows[row_id]):
                    assert "Unsupported type" in failed.pop(row_id), label  # documented: no Decimal, no bytes
                elif isinstance(expected, Refused):
                    assert expected.matches(failed.pop(row_id)), label
                else:
                    got = python_view(seen.pop(row_id), expected)
                    assert got == expected, label
            assert not seen and not failed, f"{case.name}, major {major}: records the oracle has not: {seen} {failed}"
        keyed = {topic: case for topic, case in key_topics.items() if major in case.pinned}
        if not keyed:
            continue
        records = read_pinned(bootstrap, url, list(keyed), key_rows, key_major=major, value_major=None)
        for topic, case in keyed.items():
            got = records.get(topic, [])
            want = case.pinned[major]
            keys = {key["id"]: key for key, _ in got if key != "error"}
            assert keys == want, f"{case.name}: key consumer pinned to major {major}"
            unreadable = case.row_count - len(want)
            assert sum(1 for r in got if r[0] == "error") == unreadable, case.name


def raw_records(bootstrap: str, url: str, prefix: str) -> list[tuple[str, int, bytes, bytes]]:
    """``(topic, id, key, value)`` of every record of the corpus's topics, the bytes as the job wrote them (the id
    read from the key with its writer's schema)."""
    from confluent_kafka import Consumer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    key_of = AvroDeserializer(SchemaRegistryClient({"url": url}))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"evo-raw-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([f"{prefix}_evo_{c.name}" for c in CORPUS])
    out: list[tuple[str, int, bytes, bytes]] = []
    expected, deadline = sum(c.row_count for c in CORPUS), time.monotonic() + 60
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            key = key_of(msg.key(), SerializationContext(msg.topic(), MessageField.KEY))
            out.append((msg.topic(), key["id"], msg.key(), msg.value()))
    finally:
        consumer.close()
    assert len(out) == expected, f"{len(out)} of {expected} records"
    return out


def assert_from_flat_avro(spark: Any, client: Any, raw: list[tuple[str, int, bytes, bytes]], prefix: str, *,
                          refusal_in_spark: bool = True) -> None:
    """Every record read by ``from_flat_avro(major=N)``: one Spark query per major over all the classes' records
    (a column per class, fed its topic's records whose oracle is a value; null elsewhere), equal to the oracle to the
    type; each record the oracle refuses refused by the follower of the same plan (what the query's tasks run), the
    first one through a Spark query too (``refusal_in_spark``)."""
    from pyspark.sql import functions as F

    from avro_registry_sink.schema.follow import RecordFollower, RecordRefused
    from avro_registry_sink.spark.functions import follow_plan, from_flat_avro

    df = spark.createDataFrame(raw, "topic STRING, id LONG, key BINARY, value BINARY").cache()
    by_topic: dict[str, dict[int, tuple[bytes, bytes]]] = defaultdict(dict)
    for topic, row_id, key, value in raw:
        by_topic[topic][row_id] = (key, value)
    through_spark: tuple[str, str, BreakingClass, Any] | None = None
    for major in sorted({m for c in CORPUS for m in c.pinned}):
        columns, wanted = [], {}
        for case in (c for c in CORPUS if major in c.pinned):
            topic, field = f"{prefix}_evo_{case.name}", "key" if case.breaks_key else "value"
            subject, want = f"{topic}-{field}", case.pinned[major]
            values = [i for i, v in want.items() if not isinstance(v, Refused)]
            wanted[case.name] = {i: want[i] for i in values}
            feed = F.when((F.col("topic") == topic) & F.col("id").isin(values), F.col(field))
            columns.append(from_flat_avro(feed, registry=client, subject=subject, major=major).alias(case.name))
            refused_ids = sorted(set(by_topic[topic]) - set(values))  # the oracle refuses them
            follower = RecordFollower(follow_plan(client, subject, major)) if refused_ids else None
            for row_id in refused_ids:
                assert follower is not None
                data = by_topic[topic][row_id][0 if case.breaks_key else 1]
                with pytest.raises(RecordRefused) as refused:
                    follower.read(data)
                expected = want.get(row_id)
                if isinstance(expected, Refused):
                    assert expected.matches(str(refused.value)), f"{case.name}, id {row_id}, major {major}"
                    through_spark = through_spark or (subject, field, case, (major, row_id, data))
                else:  # a key of the primary-key change: no rule, and Avro resolution cannot read it
                    assert "Avro schema resolution fails" in str(refused.value), case.name
        got: dict[str, dict[int, Any]] = defaultdict(dict)
        for row in df.select("id", *columns).collect():
            for name in wanted:
                if row[name] is not None:
                    got[name][row["id"]] = {k: bytes(v) if isinstance(v, bytearray) else v
                                            for k, v in row[name].asDict().items()}
        for name, want in wanted.items():
            assert got[name] == want, f"{name}: from_flat_avro(major={major})"
            assert exact_kinds(got[name]) == exact_kinds(want), f"{name}: from_flat_avro(major={major})"
    assert through_spark is not None
    if not refusal_in_spark:
        df.unpersist()
        return
    subject, _, case, (major, row_id, data) = through_spark
    expected = case.pinned[major][row_id]
    with pytest.raises(Exception) as failed:
        spark.createDataFrame([(data,)], "value BINARY").select(
            from_flat_avro("value", registry=client, subject=subject, major=major)).collect()
    assert expected.matches(str(failed.value)), str(failed.value)[-2000:]
    df.unpersist()


def assert_registry(client, prefix: str) -> None:
    subjects = [s for s in client.get_subjects() if s.startswith(prefix)]
    assert len(subjects) == 2 * len(CORPUS)
    for subject in subjects:
        assert client.get_full_config(subject, default_to_global=True).level.value != "NONE", subject
    for case in CORPUS:
        broken = f"{prefix}_evo_{case.name}-{'key' if case.breaks_key else 'value'}"
        assert client.get_latest(subject=broken).properties["major_version"] == str(case.last_major), broken
        assert client.get_full_config(broken).compatibility_group == "major_version"


def test_corpus_from_a_storage_tree_with_new_major(spark, bootstrap, registry, tmp_path):
    url, client = registry
    prefix = "evs" + uuid.uuid4().hex[:8]
    root = tmp_path / "tree"
    write_storage_tree(root)
    result = run_job(spark, _options(str(root), tmp_path, bootstrap, url, prefix, OnIncompatible.NEW_MAJOR))
    rows = sum(c.row_count for c in CORPUS)
    assert result.totals.rows == rows and not result.bad_input
    assert result.totals.errors == 0 and not result.dead_letters, result.dead_letters[:4]
    assert sorted(m["table"] for m in result.totals.new_majors) == MAJORS
    [pk] = [m for m in result.totals.new_majors if m["table"] == "evo.pk_change"]
    assert pk["rules"] == ["downgrade_2_to_1"] and pk["cannot_follow"]
    assert_registry(client, prefix)
    assert_corpus_read(bootstrap, url, client, prefix)
    assert_from_flat_avro(spark, client, raw_records(bootstrap, url, prefix), prefix)
    assert_history(tmp_path / f"checkpoint-{prefix}", result.totals.new_majors, url)


def assert_history(checkpoint, new_majors: list[dict], url: str) -> None:
    """Every new major is on record in the checkpoint's history (major version, rules, the registry's reasons), and
    ``diff --table`` over the journal names the change of each class."""
    import json

    from typer.testing import CliRunner

    from avro_registry_sink.cli import app
    from avro_registry_sink.history.journal import HistoryJournal

    records = HistoryJournal.at(str(checkpoint)).read()
    for major in new_majors:
        [record] = [r for r in records if (r.subject, r.schema_id) == (major["subject"], major["schema_id"])]
        assert (record.major_version, record.rules, record.verdict) == (major["new_major"], major["rules"], "new major"), major
        assert record.reasons == [major["reasons"]] and record.table_version == major["table_version"]
        versions = sorted({r.table_version for r in records if r.table == major["table"]})
        shown = CliRunner().invoke(app, ["diff", "--checkpoint", str(checkpoint), "--table", major["table"],
                                         str(versions[0]), str(versions[-1]), "--registry", url, "--json"])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["changes"], major["table"]


def test_corpus_from_a_canal_json_changelog_with_new_major(spark, bootstrap, registry, tmp_path):
    url, client = registry
    prefix = "evc" + uuid.uuid4().hex[:8]
    source = tmp_path / "canal"
    source.mkdir()
    (source / "part-0.json").write_text("\n".join(canal_changelog()) + "\n", encoding="utf-8")
    result = run_job(spark, _options(f"canal-json+file://{source}", tmp_path, bootstrap, url, prefix,
                                     OnIncompatible.NEW_MAJOR))
    rows = sum(c.row_count for c in CORPUS)
    assert result.totals.rows == rows and not result.bad_input
    assert result.totals.errors == 0 and not result.dead_letters, result.dead_letters[:4]
    assert sorted(m["table"] for m in result.totals.new_majors) == MAJORS
    assert_registry(client, prefix)
    assert_corpus_read(bootstrap, url, client, prefix)
    assert_from_flat_avro(spark, client, raw_records(bootstrap, url, prefix), prefix, refusal_in_spark=False)


def test_corpus_with_stop_stops_naming_the_reasons(spark, bootstrap, registry, tmp_path):
    url, client = registry
    prefix = "evx" + uuid.uuid4().hex[:8]
    root = tmp_path / "tree"
    write_storage_tree(root, STOPPED)
    with pytest.raises(AvroSinkError) as caught:
        run_job(spark, _options(str(root), tmp_path, bootstrap, url, prefix, OnIncompatible.STOP))
    message = str(caught.value)
    assert "incompatible with subject" in message and "Registry said" in message
    assert "--on-incompatible new-major" in message
    assert not [s for s in client.get_subjects() if s.startswith(prefix) and len(client.get_versions(s)) > 1]
