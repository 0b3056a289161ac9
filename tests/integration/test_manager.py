"""Schema manager against a real registry over HTTP (embedded by default, or AVRO_SINK_TEST_REGISTRY_URL)."""

from __future__ import annotations

import uuid

import pytest

from avro_registry_sink.errors import RegistryUnavailable
from avro_registry_sink.manager import SchemaEvolutionError, SchemaManager
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.settings.config import EncodingOptions, RegistryConfig
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T

pytestmark = [pytest.mark.integration, pytest.mark.every_registry]  # embedded and Apicurio


def orders(version: int, *extra: ColumnDef, schema: str) -> TableDef:
    return TableDef(
        schema_name=schema,
        table="orders",
        version=version,
        primary_key=("id",),
        columns=(
            ColumnDef(name="id", type=T.BIGINT, nullable=False),
            ColumnDef(name="amount", type=T.DECIMAL, precision=10, scale=2),
            *extra,
        ),
    )


@pytest.fixture
def schema_name() -> str:
    return "mgr" + uuid.uuid4().hex[:10]


@pytest.fixture
def client(registry_url):
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as c:
        yield c


def test_new_table_creates_fresh_subjects_and_steady_state_makes_no_calls(client, schema_name):
    manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"))
    table = orders(1, schema=schema_name)
    plans = manager.prepare_batch([table])
    plan = plans[(schema_name, "orders", 1)]
    assert plan.route.value_subject == f"{schema_name}_orders-value"
    assert client.get_versions(f"{schema_name}_orders-value") == [1]
    assert client.get_versions(f"{schema_name}_orders-key") == [1]
    assert client.get_schema(plan.encoding.value_schema_id).schema  # resolvable by id
    calls = manager.stats.registry_calls
    for _ in range(50):
        assert manager.prepare_batch([table]) == plans
    assert manager.stats.registry_calls == calls
    # a new table version with an identical schema reuses the ids without registering
    same = manager.prepare_batch([orders(2, schema=schema_name)])[(schema_name, "orders", 2)]
    assert same.encoding.value_schema_id == plan.encoding.value_schema_id
    assert manager.stats.registry_calls == calls


def test_compatible_change_adds_a_version(client, schema_name):
    manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), EncodingOptions(enable_tidb_extension=True))
    v1 = manager.plan(orders(1, schema=schema_name))
    v2 = manager.plan(orders(2, ColumnDef(name="note", type=T.VARCHAR, length=20), schema=schema_name))
    assert client.get_versions(f"{schema_name}_orders-value") == [1, 2]
    assert client.get_versions(f"{schema_name}_orders-key") == [1]  # key unchanged
    assert v2.encoding.value_schema_id != v1.encoding.value_schema_id
    assert v2.encoding.key_schema_id == v1.encoding.key_schema_id


def test_incompatible_change_stops_the_batch_with_a_clear_error(client, schema_name, registry_flavour):
    manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"))
    manager.plan(orders(1, schema=schema_name))
    client.set_config("BACKWARD", f"{schema_name}_orders-value")  # Confluent's default; Apicurio's is NONE
    bad = orders(2, ColumnDef(name="required", type=T.INT, nullable=False), schema=schema_name)
    other = orders(1, schema=schema_name + "x")
    with pytest.raises(SchemaEvolutionError) as info:
        manager.prepare_batch([other, bad])
    err = info.value
    text = str(err)
    assert f"{schema_name}.orders" in text and f"{schema_name}_orders-value" in text
    assert "table version 2" in text and "version 1" in text
    # the registry's reasons: Confluent's difference list, Apicurio's list of diff types
    assert ("READER_FIELD_MISSING_DEFAULT_VALUE" in text) if registry_flavour.name == "confluent" else ("/fields/2" in text)
    assert err.subject == f"{schema_name}_orders-value" and err.status_code == 409
    assert client.get_versions(f"{schema_name}_orders-value") == [1]  # nothing registered


def test_unreachable_registry_waits_within_budget_then_fails(schema_name):
    import socket

    with socket.socket() as s:  # find a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = RegistryConfig(urls=(f"http://127.0.0.1:{port}",), max_retries=0, timeout=1.0)
    slept: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds + 0.5

    with RegistryClient(config) as c:
        manager = SchemaManager(c, TopicRouter(topic_rule="{schema}_{table}"), unavailable_budget=5.0,
                                sleep=sleep, clock=lambda: now[0])
        with pytest.raises(RegistryUnavailable, match=r"gave up after 5s.*Nothing of this batch was emitted"):
            manager.prepare_batch([orders(1, schema=schema_name)])
    assert slept and sum(slept) <= 5.0
