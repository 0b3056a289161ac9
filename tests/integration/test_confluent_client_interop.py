"""confluent-kafka-python's real SchemaRegistryClient and Avro serdes against the registry (not mock://)."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.integration

ROW_V1 = json.dumps(
    {
        "type": "record",
        "name": "orders",
        "namespace": "default.shop",
        "fields": [
            {"name": "id", "type": {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}},
            {"name": "note", "type": ["null", {"type": "string", "connect.parameters": {"tidb_type": "TEXT"}}],
             "default": None},
            {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2,
                                        "connect.parameters": {"tidb_type": "DECIMAL", "length": "10", "scale": "2"}}},
        ],
    }
)
ROW_V2 = json.dumps(
    {**json.loads(ROW_V1), "fields": [*json.loads(ROW_V1)["fields"], {"name": "tag", "type": ["null", "string"], "default": None}]}
)
BREAKING = json.dumps({**json.loads(ROW_V1), "fields": [*json.loads(ROW_V1)["fields"], {"name": "qty", "type": "int"}]})


@pytest.fixture
def client(registry_url):
    sr = SchemaRegistryClient({"url": registry_url, "timeout": 30})
    yield sr
    sr.close()


def test_register_lookup_get_and_list(client, subject):
    schema_id = client.register_schema(subject, Schema(ROW_V1, "AVRO"))
    assert isinstance(schema_id, int)
    registered = client.lookup_schema(subject, Schema(ROW_V1, "AVRO"))
    assert (registered.subject, registered.version, registered.schema_id) == (subject, 1, schema_id)
    fetched = client.get_schema(schema_id)
    assert json.loads(fetched.schema_str) == json.loads(ROW_V1)
    assert fetched.schema_type == "AVRO"
    second = client.register_schema(subject, Schema(ROW_V2, "AVRO"))
    assert second != schema_id
    assert client.get_versions(subject) == [1, 2]
    assert subject in client.get_subjects()
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.schema_id) == (2, second)
    assert client.get_version(subject, 1).schema_id == schema_id


def test_compatibility_settings_and_checks(client, subject, compat):
    client.register_schema(subject, Schema(ROW_V1, "AVRO"))
    compat(subject, "BACKWARD")  # via the fixture, so it is reset afterwards
    assert client.set_compatibility(subject, "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility(subject) == "FULL"
    assert client.test_compatibility(subject, Schema(ROW_V2, "AVRO")) is True
    assert client.test_compatibility(subject, Schema(BREAKING, "AVRO")) is False
    assert client.test_compatibility_all_versions(subject, Schema(BREAKING, "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(BREAKING, "AVRO"))
    assert refused.value.http_status_code == 409
    assert refused.value.error_code in (409, 40901)


def test_deletes(client, subject):
    client.register_schema(subject, Schema(ROW_V1, "AVRO"))
    client.register_schema(subject, Schema(ROW_V2, "AVRO"))
    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    assert client.delete_subject(subject) == [2]
    with pytest.raises(SchemaRegistryError) as soft:
        client.delete_subject(subject)
    assert soft.value.error_code == 40404
    assert sorted(client.delete_subject(subject, permanent=True)) == [1, 2]
    with pytest.raises(SchemaRegistryError) as gone:
        client.get_versions(subject)
    assert gone.value.error_code == 40401


def test_avro_serializer_round_trip(client, new_subject):
    topic = new_subject("topic").removesuffix("-value")
    serializer = AvroSerializer(client, ROW_V1)
    deserializer = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    rows = [
        {"id": 1, "note": None, "amount": Decimal("12.34")},
        {"id": 2**40, "note": "héllo", "amount": Decimal("-0.05")},
    ]
    for row in rows:
        payload = serializer(row, ctx)
        assert payload[0] == 0
        schema_id = int.from_bytes(payload[1:5], "big")
        assert client.get_schema(schema_id).schema_str is not None
        assert deserializer(payload, ctx) == row
    # auto-registration used TopicNameStrategy
    assert client.get_versions(f"{topic}-value") == [1]


def test_hand_framed_value_decodes_with_avro_deserializer(client, subject):
    schema_id = client.register_schema(subject, Schema(ROW_V1, "AVRO"))
    parsed = fastavro.parse_schema(json.loads(ROW_V1))
    body = io.BytesIO()
    row = {"id": 7, "note": "n", "amount": Decimal("99.99")}
    fastavro.schemaless_writer(body, parsed, row)
    framed = b"\x00" + schema_id.to_bytes(4, "big") + body.getvalue()
    deserializer = AvroDeserializer(client)
    assert deserializer(framed, SerializationContext("any-topic", MessageField.VALUE)) == row
