"""The breaking-DDL corpus through the streaming job into Kafka, read by confluent-kafka-python's
``DeserializingConsumer`` pinned to a major version (``use.latest.with.metadata``, its JSONata rule executor
registered).

* A TiCDC storage tree holding every class as a table of its own (version 1 rows, the breaking DDL(s), version 2
  rows), run once with ``--on-incompatible new-major``; then a canal-json changelog file with the same changes.
  No batch stops, no subject is set to NONE, each class registers its new majors (one, or two for a class of three
  majors); consumers pinned to each major read every record of every version and see the oracle's values
  (tests/support/evolution.py).
* The tree of the classes the registry's level refuses, with ``stop``: the job stops at the first breaking table
  version with the registry's reasons.

Markers ``kafka`` and ``spark``: the broker from ``KAFKA_BOOTSTRAP`` (or ``scripts/kafka.sh``), the session's Spark.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict

import pytest

from avro_registry_sink.config import OnIncompatible, RegistryConfig, parse_sink_uri
from avro_registry_sink.errors import AvroSinkError
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.spark.job import run_job
from avro_registry_sink.spark.job_options import JobOptions
from avro_registry_sink.spark.sources import parse_source
from tests.support.evolution import CORPUS, canal_changelog, write_storage_tree
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
    a major version: ``{topic: [(key, value)]}``; a record that cannot be read is ``("error", message)``."""
    from confluent_kafka import DeserializingConsumer
    from confluent_kafka.error import ConsumeError
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    client = SchemaRegistryClient({"url": url})

    def deserializer(major: int | None) -> AvroDeserializer:
        conf = {} if major is None else {"use.latest.with.metadata": {"major_version": str(major)}}
        return AvroDeserializer(client, conf=conf)

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
                out[exc.kafka_message.topic()].append(("error", str(exc)))
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


def assert_corpus_read(bootstrap: str, url: str, prefix: str) -> None:
    value_topics = {f"{prefix}_evo_{c.name}": c for c in VALUE_CLASSES}
    key_topics = {f"{prefix}_evo_{c.name}": c for c in KEY_CLASSES}
    key_rows = sum(c.row_count for c in KEY_CLASSES)
    for major in sorted({m for c in CORPUS for m in c.pinned}):
        pinned = {topic: case for topic, case in value_topics.items() if major in case.pinned}
        records = read_pinned(bootstrap, url, list(pinned), sum(c.row_count for c in pinned.values()), key_major=None,
                              value_major=major)
        for topic, case in pinned.items():
            got = records.get(topic, [])
            assert all(r[0] != "error" for r in got), f"{case.name}, major {major}: {got}"
            seen = {value["id"]: value for _, value in got}
            want = case.pinned[major]
            assert seen == want, f"{case.name}: consumer pinned to major {major}"
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
    assert sorted(m["table"] for m in result.totals.new_majors) == MAJORS
    [pk] = [m for m in result.totals.new_majors if m["table"] == "evo.pk_change"]
    assert pk["rules"] == ["downgrade_2_to_1"] and pk["cannot_follow"]
    assert_registry(client, prefix)
    assert_corpus_read(bootstrap, url, prefix)
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
    assert sorted(m["table"] for m in result.totals.new_majors) == MAJORS
    assert_registry(client, prefix)
    assert_corpus_read(bootstrap, url, prefix)


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
