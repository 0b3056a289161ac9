"""The breaking-DDL corpus (tests/support/evolution.py) class by class, without Spark: the schema manager under
``--on-incompatible new-major`` registers each class's versions in the (embedded) registry, the product's encoder
writes its rows, and confluent-kafka-python's AvroDeserializers pinned to each major (its JSONata rule executor
registered) read every record of every version, and so does the record follower ``from_flat_avro(major=N)`` runs
in each Spark task (the same plan read from the registry, the same code, on the driver); the values must equal the
hand-written oracle (MySQL's), or the record be refused as the oracle says (column, value, reason).
confluent-kafka-python's documented limits: it refuses every record it must migrate that holds a DECIMAL or bytes
value (its JSONata executor takes none), and a DECIMAL or BLOB value a rule makes comes out as the JSON number or
text the rule gave (a float whose shortest text is the value, a str whose UTF-8 is the bytes). Under ``stop``
every class the registry's level refuses stops, naming the registry's reasons. (The same corpus through the job
and Kafka, and through ``from_flat_avro`` in Spark: ``test_evolution_e2e.py``.)
"""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor
from confluent_kafka.serialization import MessageField, SerializationContext

from avro_registry_sink.manager import SchemaEvolutionError, SchemaManager
from avro_registry_sink.model import Op
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.schema.follow import RecordFollower, RecordRefused
from avro_registry_sink.settings.config import RegistryConfig
from avro_registry_sink.spark.functions import follow_plan
from tests.support.evolution import (
    CORPUS,
    BreakingClass,
    Refused,
    causes,
    exact_kinds,
    kinds,
    python_refuses,
    python_view,
    writer_majors,
)
from tests.support.reference_encoder import RowEncoder

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def registry():
    JsonataExecutor.register()
    with EmbeddedRegistry() as server, RegistryClient(RegistryConfig(urls=(server.url,))) as client:
        yield server.url, client


def encoded(case: BreakingClass, manager: SchemaManager) -> list[tuple[int, bytes | None, bytes]]:
    """(id, key, value) of every row, each era encoded with the plan of its table version."""
    eras = case.eras()
    plans = manager.prepare_batch([table for table, _ in eras])
    out = []
    for table, rows in eras:
        encoder = RowEncoder(plans[(table.schema_name, table.table, table.version)].encoding)
        for row in rows:
            key, value = encoder.encode(Op.INSERT, row)
            out.append((row["id"], key, value))
    return out


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_pinned_consumers_read_both_eras(registry, case):
    url, client = registry
    history = {(s.schema_name, s.table): [(t.version, q) for t, q in case.versions()[1:]] for s, _ in case.versions()[:1]}
    manager = SchemaManager(client, TopicRouter(topic_rule="corpus_{schema}_{table}"), on_incompatible="new-major",
                            ddl_history=lambda schema, table: history.get((schema, table), []))
    records = encoded(case, manager)
    majors = manager.take_majors()
    assert [m.new_major for m in majors] == list(range(2, case.last_major + 1)), case.name
    assert all(m.subject.endswith("-key" if case.breaks_key else "-value") for m in majors)
    topic = f"corpus_evo_{case.name}"
    subject = f"{topic}-{'key' if case.breaks_key else 'value'}"
    written = writer_majors(client, subject)
    rows = {row["id"]: row for _, rows in case.eras() for row in rows}
    sr = SchemaRegistryClient({"url": url})
    field = MessageField.KEY if case.breaks_key else MessageField.VALUE
    ctx = SerializationContext(topic, field)
    for pin, want in case.pinned.items():
        reader = AvroDeserializer(sr, conf={"use.latest.with.metadata": {"major_version": str(pin)}})
        follower = RecordFollower(follow_plan(client, subject, pin))
        seen, followed = {}, {}
        for row_id, key, value in records:
            data = key if case.breaks_key else value
            assert data is not None
            if case.breaks_key and row_id not in want:
                with pytest.raises(Exception):  # noqa: B017 - UPGRADE impossible: no rule, and Avro resolution fails
                    reader(data, ctx)
                with pytest.raises(RecordRefused, match=r"Avro schema resolution fails: No default value for field region"):
                    follower.read(data)
                continue
            expected = want[row_id]
            if isinstance(expected, Refused):
                with pytest.raises(RecordRefused) as refused:
                    follower.read(data)
                assert expected.matches(str(refused.value)), f"{case.name}, major {pin}: {refused.value}"
            else:
                followed[row_id] = follower.read(data)
            if written[int.from_bytes(data[1:5], "big")] != pin and python_refuses(rows[row_id]):
                with pytest.raises(Exception) as blocked:  # documented: jsonata-python takes no Decimal, no bytes
                    reader(data, ctx)
                assert "Unsupported type" in causes(blocked.value), f"{case.name}, major {pin}: {blocked.value}"
            elif isinstance(expected, Refused):
                with pytest.raises(Exception) as refused:
                    reader(data, ctx)
                assert expected.matches(causes(refused.value)), f"{case.name}, major {pin}: {refused.value}"
            else:
                seen[row_id] = python_view(reader(data, ctx), expected)
        values = {k: v for k, v in want.items() if not isinstance(v, Refused)}
        assert followed == values, f"{case.name}: from_flat_avro's follower pinned to major {pin}"
        assert exact_kinds(followed) == exact_kinds(values), f"{case.name}: from_flat_avro, major {pin}"
        python = {k: v for k, v in values.items() if k in seen}
        assert seen == python, f"{case.name}: consumer pinned to major {pin}"
        if not case.breaks_key:  # the values compare equal; their kinds are the target's too
            assert kinds(seen) == kinds(python), f"{case.name}: consumer pinned to major {pin}"


STOPPED = [c for c in CORPUS if c.registry_refuses]


@pytest.mark.parametrize("case", STOPPED, ids=[c.name for c in STOPPED])
def test_stop_stops_every_class_with_the_registrys_reasons(registry, case):
    _, client = registry
    manager = SchemaManager(client, TopicRouter(topic_rule="stop_{schema}_{table}"))
    versions = case.versions()
    manager.prepare_batch([versions[0][0]])
    with pytest.raises(SchemaEvolutionError) as caught:
        manager.prepare_batch([versions[-1][0]])
    assert caught.value.context["reasons"] and case.table in caught.value.message
