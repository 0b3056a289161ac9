"""``--on-incompatible new-major`` in the schema manager, against the registry over HTTP: a breaking change becomes
the subject's next major version with migration rules; ``stop`` stops as before."""

from __future__ import annotations

import uuid

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.manager import (
    MAJOR_VERSION,
    TABLE_VERSION,
    SchemaEvolutionError,
    SchemaManager,
    require_data_contracts,
)
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.settings.config import OnIncompatible, RegistryConfig, SinkConfig
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl

pytestmark = pytest.mark.integration

CREATE = "CREATE TABLE {schema}.t (id BIGINT PRIMARY KEY, a INT NOT NULL, note VARCHAR(20))"


@pytest.fixture
def schema_name() -> str:
    return "nm" + uuid.uuid4().hex[:10]


@pytest.fixture
def client(registry_url):
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as c:
        yield c


def versions(schema_name: str, ddl: list[tuple[int, str]]):
    """The table at each version: version 1 created, then each (version, ALTER) applied."""
    table = parse_ddl(CREATE.format(schema=schema_name))[0].model_copy(update={"version": 1})
    out = [table]
    for version, statement in ddl:
        table = apply_ddl(table, statement).model_copy(update={"version": version})
        out.append(table)
    return out


def manager(client, policy: str, history=None) -> SchemaManager:
    return SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), on_incompatible=policy,
                         ddl_history=history)


def test_a_breaking_change_becomes_major_2_with_rules(client, schema_name):
    ddl = [(5, "ALTER TABLE t RENAME COLUMN a TO a2")]
    v1, v2 = versions(schema_name, ddl)
    m = manager(client, "new-major", history=lambda s, t: ddl)
    subject = f"{schema_name}_t-value"
    first = m.prepare_batch([v1])[(schema_name, "t", 1)]
    assert client.get_latest(subject).properties == {MAJOR_VERSION: "1", TABLE_VERSION: "1"}
    second = m.prepare_batch([v2])[(schema_name, "t", 5)]
    assert second.encoding.value_schema_id != first.encoding.value_schema_id
    latest = client.get_latest(subject)
    assert latest.properties == {MAJOR_VERSION: "2", TABLE_VERSION: "5"}
    rules = {r["name"]: r for r in latest.rule_set["migrationRules"]}
    assert set(rules) == {"upgrade_1_to_2", "downgrade_2_to_1"}
    assert "a2" in rules["upgrade_1_to_2"]["expr"]
    assert client.get_full_config(subject).compatibility_group == MAJOR_VERSION
    assert client.get_full_config(subject, default_to_global=True).level.value == "BACKWARD"  # never NONE
    [major] = m.take_majors()
    assert (major.subject, major.old_major, major.new_major) == (subject, 1, 2)
    assert major.changes == ("a renamed to a2",) and not major.cannot_follow
    # the key did not change: one version
    assert client.get_versions(f"{schema_name}_t-key") == [1]
    # a fresh manager (a restart) finds both versions by their text, of either major, and registers nothing
    again = manager(client, "new-major")
    plans = again.prepare_batch([v1, v2])
    assert plans[(schema_name, "t", 1)].encoding.value_schema_id == first.encoding.value_schema_id
    assert plans[(schema_name, "t", 5)].encoding.value_schema_id == second.encoding.value_schema_id
    assert client.get_versions(subject) == [1, 2]


def test_a_compatible_change_is_a_minor_version_of_the_current_major(client, schema_name):
    ddl = [(3, "ALTER TABLE t ADD COLUMN n INT"), (5, "ALTER TABLE t MODIFY a VARCHAR(9) NOT NULL"),
           (7, "ALTER TABLE t ADD COLUMN extra INT")]
    v1, v2, v3, v4 = versions(schema_name, ddl)
    m = manager(client, "new-major", history=lambda s, t: ddl)
    for table in (v1, v2, v3, v4):
        m.prepare_batch([table])
    subject = f"{schema_name}_t-value"
    assert client.get_versions(subject) == [1, 2, 3, 4]
    assert [client.get_version(subject, v).properties[MAJOR_VERSION] for v in (1, 2, 3, 4)] == ["1", "1", "2", "2"]
    # a minor of major 1 (no majors yet) carries no rules: consumers read it by Avro schema resolution
    assert not (client.get_version(subject, 2).rule_set or {}).get("migrationRules")
    # a minor of major 2 carries its own rules, kept by the registry: Confluent's clients run the rules of every
    # version on the way and do not resolve their output, so without them a major-1 record read by a consumer
    # pinned to version 4 would lack "extra", and a version-4 record read by major 1 would keep it
    rules = {r["name"]: r for r in client.get_version(subject, 4).rule_set["migrationRules"]}
    assert set(rules) == {"upgrade_within_2", "downgrade_within_2"}
    assert client.get_latest_with_metadata(subject, {MAJOR_VERSION: "1"}).version == 2
    assert [major.new_major for major in m.take_majors()] == [2]


def test_a_change_that_breaks_readers_pinned_to_the_major_is_a_major_whatever_the_level(client, schema_name):
    """BACKWARD accepts a dropped NOT NULL column and nothing is refused, but a consumer pinned to major 1 that
    cached version 1 cannot read the new records by Avro resolution (no default for the dropped field): a new major
    with a DOWNGRADE rule. INT -> BIGINT likewise: a reader of INT cannot read a long."""
    ddl = [(5, "ALTER TABLE t DROP COLUMN a"), (7, "ALTER TABLE t ADD COLUMN b INT NOT NULL DEFAULT 3"),
           (9, "ALTER TABLE t MODIFY b BIGINT NOT NULL DEFAULT 3")]
    tables = versions(schema_name, ddl)
    m = manager(client, "new-major", history=lambda s, t: ddl)
    for table in tables:
        m.prepare_batch([table])
    subject = f"{schema_name}_t-value"
    assert client.get_full_config(subject, default_to_global=True).level.value == "BACKWARD"
    assert [client.get_version(subject, v).properties[MAJOR_VERSION] for v in (1, 2, 3, 4)] == ["1", "2", "2", "3"]
    drop, widen = m.take_majors()
    assert "consumers pinned to version 1 (major 1) cannot read its records" in drop.reasons
    assert "'a'" in drop.reasons and drop.rules == ("upgrade_1_to_2", "downgrade_2_to_1")
    assert "cannot read its records" in widen.reasons and widen.old_major == 2
    # the minor between (a column with a DEFAULT) needs no major: both ways readable, values as MySQL's
    assert {r["name"] for r in client.get_version(subject, 3).rule_set["migrationRules"]} == {
        "upgrade_within_2", "downgrade_within_2"}


def test_a_conversion_avro_resolution_would_not_make_is_a_major(client, schema_name):
    """DATETIME -> DATE is string to string for Avro (the registry accepts it), but MySQL truncates the values: a
    new major whose rules convert them, not a minor under which old records keep their time part."""
    ddl = [(5, "ALTER TABLE t ADD COLUMN at DATETIME"), (7, "ALTER TABLE t MODIFY at DATE"),
           (9, "ALTER TABLE t MODIFY at BIGINT")]
    tables = versions(schema_name, ddl)
    m = manager(client, "new-major", history=lambda s, t: ddl)
    for table in tables:
        m.prepare_batch([table])
    subject = f"{schema_name}_t-value"
    assert [client.get_version(subject, v).properties[MAJOR_VERSION] for v in (1, 2, 3, 4)] == ["1", "1", "2", "3"]
    date, number = m.take_majors()
    assert "the values of at change otherwise than Avro schema resolution" in date.reasons
    assert any("DATETIME NULL -> DATE NULL" in change for change in date.changes)
    assert not date.cannot_follow  # every DATETIME has a date, every DATE a midnight
    # DATE -> BIGINT: going down a number that is no valid date is refused (the column being NULL or not): said
    assert number.cannot_follow == ("consumers pinned to major 2 reading records of major 3: column at: a value "
                                    "that is not a valid DATE fails the record",)


def test_stop_still_stops_and_names_the_way_on(client, schema_name):
    v1, v2 = versions(schema_name, [(5, "ALTER TABLE t RENAME COLUMN a TO a2")])
    m = manager(client, "stop")
    m.prepare_batch([v1])
    with pytest.raises(SchemaEvolutionError) as caught:
        m.prepare_batch([v2])
    assert "a2" in caught.value.message and "--on-incompatible new-major" in caught.value.message
    assert client.get_versions(f"{schema_name}_t-value") == [1]


def test_subject_registered_without_majors_gets_its_latest_tagged_major_1(client, schema_name):
    v1, v2 = versions(schema_name, [(5, "ALTER TABLE t ADD COLUMN z INT NOT NULL")])
    manager(client, "stop").prepare_batch([v1])  # an earlier run, without majors
    m = manager(client, "new-major")
    m.prepare_batch([v2])
    subject = f"{schema_name}_t-value"
    assert client.get_versions(subject) == [1, 2, 3]
    assert client.get_latest_with_metadata(subject, {MAJOR_VERSION: "1"}).version == 2  # v1's text, tagged
    assert client.get_latest(subject).properties[MAJOR_VERSION] == "2"


def test_primary_key_change_breaks_the_key_and_says_who_cannot_follow(client, schema_name):
    ddl = [(5, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)")]
    v1, v2 = versions(schema_name, ddl)
    m = manager(client, "new-major", history=lambda s, t: ddl)
    m.prepare_batch([v1])
    m.prepare_batch([v2])
    [major] = m.take_majors()
    assert major.subject == f"{schema_name}_t-key"
    assert major.rules == ("downgrade_2_to_1",)
    assert any("major 2 cannot read the records of major 1" in line for line in major.cannot_follow)


def test_new_major_needs_a_registry_with_data_contracts(client):
    require_data_contracts(SinkConfig(on_incompatible=OnIncompatible.NEW_MAJOR), client)  # the embedded one: ok

    class NoContracts:
        def data_contracts_unsupported(self) -> str:
            return "it has no GET /subjects/{subject}/metadata"

    with pytest.raises(ConfigError, match="does not keep them: it has no GET"):
        require_data_contracts(SinkConfig(on_incompatible=OnIncompatible.NEW_MAJOR), NoContracts())
    require_data_contracts(SinkConfig(), NoContracts())  # stop: nothing asked


def test_check_finds_a_version_of_an_older_major_by_its_text(client, schema_name, registry_url, tmp_path):
    import json

    from typer.testing import CliRunner

    from avro_registry_sink.cli import app

    ddl = [(5, "ALTER TABLE t RENAME COLUMN a TO a2")]
    v1, v2 = versions(schema_name, ddl)
    m = manager(client, "new-major", history=lambda s, t: ddl)
    m.prepare_batch([v1])
    m.prepare_batch([v2])
    old = tmp_path / "old.sql"
    old.write_text(CREATE.format(schema=schema_name) + ";")
    result = CliRunner().invoke(app, ["check", "--ddl", str(old), "--registry", registry_url, "--output", "json"])
    assert result.exit_code == 0, result.output
    [value] = [s for s in json.loads(result.stdout)["subjects"] if s["subject"].endswith("-value")]
    assert value["status"] == "unchanged" and "major version 1" in value["messages"][0]


# -- confluent-kafka's own AvroSerializer/AvroDeserializer over HTTP, pinned to each major -------------------------


def _confluent(registry_url):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor
    from confluent_kafka.serialization import MessageField, SerializationContext

    JsonataExecutor.register()
    sr = SchemaRegistryClient({"url": registry_url})

    def writer(schema_id: int):
        return AvroSerializer(sr, None, conf={"auto.register.schemas": False, "use.schema.id": schema_id})

    def reader(major: int):
        return AvroDeserializer(sr, conf={"use.latest.with.metadata": {MAJOR_VERSION: str(major)}})

    return writer, reader, lambda schema_name: SerializationContext(f"{schema_name}_t", MessageField.VALUE)


def test_confluent_consumers_pinned_to_each_major_read_every_version_of_a_chain(client, schema_name, registry_url):
    """A minor of major 1, a major, a minor of major 2 (its own rules), a third major: a record written by
    confluent-kafka's AvroSerializer with each version's schema id is read by AvroDeserializers pinned to majors 1,
    2 and 3 in exactly the shape of that major's latest version (every field, defaults filled, nothing more)."""
    ddl = [(2, "ALTER TABLE t ADD COLUMN n INT NULL"), (3, "ALTER TABLE t MODIFY a VARCHAR(20) NOT NULL"),
           (4, "ALTER TABLE t ADD COLUMN w INT NULL"), (5, "ALTER TABLE t MODIFY w BIGINT NULL")]
    tables = versions(schema_name, ddl)
    m = manager(client, "new-major", history=lambda s, t: ddl)
    ids = [m.prepare_batch([t])[(schema_name, "t", t.version)].encoding.value_schema_id for t in tables]
    subject = f"{schema_name}_t-value"
    assert [client.get_version(subject, v).properties[MAJOR_VERSION] for v in range(1, 6)] == ["1", "1", "2", "2", "3"]
    writer, reader, context = _confluent(registry_url)
    ctx = context(schema_name)
    written = [{"id": 1, "a": 5, "note": "x"}, {"id": 2, "a": 6, "note": None, "n": 7},
               {"id": 3, "a": "8", "note": "y", "n": None}, {"id": 4, "a": "9", "note": None, "n": 1, "w": 2},
               {"id": 5, "a": "10", "note": "z", "n": None, "w": 3}]
    records = [writer(schema_id)(row, ctx) for schema_id, row in zip(ids, written, strict=True)]
    major1 = [{"id": 1, "a": 5, "note": "x", "n": None}, {"id": 2, "a": 6, "note": None, "n": 7},
              {"id": 3, "a": 8, "note": "y", "n": None}, {"id": 4, "a": 9, "note": None, "n": 1},
              {"id": 5, "a": 10, "note": "z", "n": None}]
    major2 = [{"id": 1, "a": "5", "note": "x", "n": None, "w": None}, {"id": 2, "a": "6", "note": None, "n": 7, "w": None},
              {"id": 3, "a": "8", "note": "y", "n": None, "w": None}, {"id": 4, "a": "9", "note": None, "n": 1, "w": 2},
              {"id": 5, "a": "10", "note": "z", "n": None, "w": 3}]
    for major, want in ((1, major1), (2, major2), (3, major2)):  # major 3 has major 2's fields, w a BIGINT
        got = [reader(major)(record, ctx) for record in records]
        assert got == want, f"pinned to major {major}"
        assert [list(row) for row in got] == [list(row) for row in want], f"field order, major {major}"


def test_a_long_running_consumer_pinned_to_major_1_reads_through_a_drop_column(client, schema_name, registry_url):
    """BACKWARD accepts DROP COLUMN a (NOT NULL, no default). A consumer pinned to major 1 that read a record before
    the DDL keeps version 1 as its pinned schema; had the drop been a minor of major 1, Avro resolution of the next
    record would fail (``No default value for field a``). As major 2 its DOWNGRADE rule runs: ``a`` is MySQL's
    implicit default."""
    ddl = [(2, "ALTER TABLE t DROP COLUMN a")]
    v1, v2 = versions(schema_name, ddl)
    m = manager(client, "new-major", history=lambda s, t: ddl)
    first = m.prepare_batch([v1])[(schema_name, "t", 1)].encoding.value_schema_id
    writer, reader, context = _confluent(registry_url)
    ctx = context(schema_name)
    consumer = reader(1)
    assert consumer(writer(first)({"id": 1, "a": 5, "note": "x"}, ctx), ctx) == {"id": 1, "a": 5, "note": "x"}
    second = m.prepare_batch([v2])[(schema_name, "t", 2)].encoding.value_schema_id
    [major] = m.take_majors()
    assert major.new_major == 2 and "'a'" in major.reasons
    record = writer(second)({"id": 2, "note": "y"}, ctx)
    assert consumer(record, ctx) == {"id": 2, "a": 0, "note": "y"}  # the same (cached) deserializer
    assert reader(2)(writer(first)({"id": 1, "a": 5, "note": "x"}, ctx), ctx) == {"id": 1, "note": "x"}


def test_check_says_new_major_makes_a_major_of_a_drop_the_level_accepts(client, schema_name, registry_url, tmp_path):
    import json

    from typer.testing import CliRunner

    from avro_registry_sink.cli import app

    v1, = versions(schema_name, [])
    manager(client, "new-major").prepare_batch([v1])
    dropped = tmp_path / "dropped.sql"
    dropped.write_text(CREATE.format(schema=schema_name) + f";\nALTER TABLE {schema_name}.t DROP COLUMN a;")
    result = CliRunner().invoke(app, ["check", "--ddl", str(dropped), "--registry", registry_url, "--output", "json"])
    assert result.exit_code == 0, result.output  # the level accepts it
    [value] = [s for s in json.loads(result.stdout)["subjects"] if s["subject"].endswith("-value")]
    assert value["status"] == "compatible"
    [reason, *rest] = value["policies"]["new-major"]
    assert reason.startswith("a new major although the level accepts it: Apache Avro's checker: consumers pinned "
                             "to version 1 (major 1) cannot read its records")
    assert any("as major version 2" in line for line in rest)
    assert "breaks consumers pinned to a major" in value["policies"]["stop"][0]
