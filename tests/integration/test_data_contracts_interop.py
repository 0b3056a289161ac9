"""confluent-kafka-python's own SchemaRegistryClient and rule-executing Avro serdes against the registry's data
contracts: a breaking change registered as major version 2 with JSONata migration rules, read by consumers
pinned with ``use.latest.with.metadata`` to either major (the real JSONata executor, no mock://).
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import (
    Metadata,
    MetadataProperties,
    Rule,
    RuleKind,
    RuleMode,
    RuleSet,
    Schema,
    SchemaRegistryClient,
    ServerConfig,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.integration

V1 = json.dumps({"type": "record", "name": "orders", "namespace": "default.shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
]})
V2 = json.dumps({"type": "record", "name": "orders", "namespace": "default.shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "full_name", "type": "string"},
]})
UP = "$merge([$sift($, function($v, $k) {$k != 'name'}), {'full_name': $.'name'}])"
DOWN = "$merge([$sift($, function($v, $k) {$k != 'full_name'}), {'name': $.'full_name'}])"


def _major(n: int) -> Metadata:
    return Metadata(tags=None, properties=MetadataProperties({"major_version": str(n)}), sensitive=None)


def _rule(name: str, mode: RuleMode, expr: str) -> Rule:
    return Rule(name=name, doc=None, kind=RuleKind.TRANSFORM, mode=mode, type="JSONATA", tags=None, params=None,
                expr=expr, on_success=None, on_failure=None, disabled=False)


@pytest.fixture
def client(registry_url):
    JsonataExecutor.register()
    sr = SchemaRegistryClient({"url": registry_url, "timeout": 30})
    yield sr
    sr.close()


@pytest.fixture
def topic(new_subject):
    return new_subject("topic").removesuffix("-value")


def test_confluent_client_registers_and_reads_data_contracts(client, topic):
    subject = f"{topic}-value"
    v1_id = client.register_schema(subject, Schema(V1, "AVRO", metadata=_major(1)))
    client.set_config(subject, ServerConfig(compatibility_group="major_version"))
    assert client.get_config(subject).compatibility_group == "major_version"
    rules = RuleSet(migration_rules=[_rule("up", RuleMode.UPGRADE, UP), _rule("down", RuleMode.DOWNGRADE, DOWN)],
                    domain_rules=None)
    v2_id = client.register_schema(subject, Schema(V2, "AVRO", metadata=_major(2), rule_set=rules))
    assert v2_id != v1_id
    major1 = client.get_latest_with_metadata(subject, {"major_version": "1"})
    assert (major1.version, major1.schema_id) == (1, v1_id)
    major2 = client.get_latest_with_metadata(subject, {"major_version": "2"})
    assert major2.version == 2
    assert [r.name for r in major2.schema.rule_set.migration_rules] == ["up", "down"]
    assert major2.schema.metadata.properties.properties == {"major_version": "2"}


def test_pinned_consumers_read_both_eras_through_the_migration_rules(client, topic):
    subject = f"{topic}-value"
    client.register_schema(subject, Schema(V1, "AVRO", metadata=_major(1)))
    client.set_config(subject, ServerConfig(compatibility_group="major_version"))
    rules = RuleSet(migration_rules=[_rule("up", RuleMode.UPGRADE, UP), _rule("down", RuleMode.DOWNGRADE, DOWN)],
                    domain_rules=None)
    client.register_schema(subject, Schema(V2, "AVRO", metadata=_major(2), rule_set=rules))
    ctx = SerializationContext(topic, MessageField.VALUE)

    def writer(major: int) -> AvroSerializer:
        return AvroSerializer(client, None, conf={"auto.register.schemas": False,
                                                   "use.latest.with.metadata": {"major_version": str(major)}})

    def reader(major: int) -> AvroDeserializer:
        return AvroDeserializer(client, conf={"use.latest.with.metadata": {"major_version": str(major)}})

    old = writer(1)({"id": 1, "name": "ann"}, ctx)
    new = writer(2)({"id": 2, "full_name": "bob"}, ctx)
    assert reader(1)(old, ctx) == {"id": 1, "name": "ann"}
    assert reader(1)(new, ctx) == {"id": 2, "name": "bob"}  # DOWNGRADE
    assert reader(2)(old, ctx) == {"id": 1, "full_name": "ann"}  # UPGRADE
    assert reader(2)(new, ctx) == {"id": 2, "full_name": "bob"}
