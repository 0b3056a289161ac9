"""Interop: confluent-kafka's own SchemaRegistryClient + AvroDeserializer read what this project writes,
for every SQL type of the mapping table, in both decimal and bigint modes, with and without extension."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from avro_registry_sink.manager import SchemaManager
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.settings.config import BigintUnsignedMode, DecimalMode, EncodingOptions, RegistryConfig
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T
from tests.support.reference_encoder import RowEncoder

pytestmark = pytest.mark.integration

COLUMNS = (
    ColumnDef(name="id", type=T.BIGINT, nullable=False),
    ColumnDef(name="c_tinyint", type=T.TINYINT, default="1"),
    ColumnDef(name="c_utinyint", type=T.TINYINT, unsigned=True, nullable=False),
    ColumnDef(name="c_smallint", type=T.SMALLINT),
    ColumnDef(name="c_mediumint", type=T.MEDIUMINT, unsigned=True),
    ColumnDef(name="c_int", type=T.INT, nullable=False, default="7"),
    ColumnDef(name="c_uint", type=T.INT, unsigned=True),
    ColumnDef(name="c_ubigint", type=T.BIGINT, unsigned=True),
    ColumnDef(name="c_float", type=T.FLOAT, default="3.14"),
    ColumnDef(name="c_double", type=T.DOUBLE),
    ColumnDef(name="c_decimal", type=T.DECIMAL, precision=20, scale=4),
    ColumnDef(name="c_decimal_nn", type=T.DECIMAL, precision=10, scale=0, nullable=False, default="0"),
    ColumnDef(name="c_bit", type=T.BIT, length=10, default=b"\x02\xaa"),
    ColumnDef(name="c_char", type=T.CHAR, length=4),
    ColumnDef(name="c_varchar", type=T.VARCHAR, length=64, default="null"),
    ColumnDef(name="c_text", type=T.TEXT),
    ColumnDef(name="c_binary", type=T.BINARY, length=4, binary=True),
    ColumnDef(name="c_varbinary", type=T.VARBINARY, length=8, binary=True, default=b"ab"),
    ColumnDef(name="c_blob", type=T.BLOB, binary=True),
    ColumnDef(name="c_enum", type=T.ENUM, elements=("small", "medium", "large, really"), default="small"),
    ColumnDef(name="c_set", type=T.SET, elements=("r", "g", "b")),
    ColumnDef(name="c_json", type=T.JSON),
    ColumnDef(name="c_date", type=T.DATE),
    ColumnDef(name="c_datetime", type=T.DATETIME, fsp=6),
    ColumnDef(name="c_timestamp", type=T.TIMESTAMP, fsp=3, default="CURRENT_TIMESTAMP(3)"),
    ColumnDef(name="c_time", type=T.TIME),
    ColumnDef(name="c_year", type=T.YEAR),
    ColumnDef(name="c_vector", type=T.VECTOR),
)

ROW = {
    "id": 9007199254740993, "c_tinyint": -128, "c_utinyint": 255, "c_smallint": -32768, "c_mediumint": 16777215,
    "c_int": -2147483648, "c_uint": 4294967295, "c_ubigint": 18446744073709551615, "c_float": 1.5,
    "c_double": -2.25e-300, "c_decimal": "-179394.2330", "c_decimal_nn": "128", "c_bit": 683, "c_char": "ab",
    "c_varchar": "héllo, 世界", "c_text": "", "c_binary": b"\x00\x01\x02\x00", "c_varbinary": b"\xff", "c_blob": b"",
    "c_enum": 3, "c_set": 5, "c_json": '{"a": [1, 2]}', "c_date": "2024-02-29", "c_datetime": "2024-04-15 20:31:02.123456",
    "c_timestamp": "1970-01-01 00:00:01.000", "c_time": "-838:59:59", "c_year": 2155, "c_vector": "[1,2,3]",
}
NULLS = {c.name: (None if c.nullable else ROW[c.name]) for c in COLUMNS}


def expected(row: dict, options: EncodingOptions) -> dict:
    out = dict(row)
    for name in ("c_ubigint",):
        if row[name] is not None:
            out[name] = str(row[name]) if options.bigint_unsigned_mode is BigintUnsignedMode.STRING else -1
    for name in ("c_decimal", "c_decimal_nn"):
        if row[name] is not None:
            out[name] = row[name] if options.decimal_mode is DecimalMode.STRING else Decimal(row[name])
    if row["c_bit"] is not None:
        out["c_bit"] = b"\x02\xab"
    if row["c_enum"] is not None:
        out["c_enum"] = "large, really"
    if row["c_set"] is not None:
        out["c_set"] = "r,b"
    return out


@pytest.mark.parametrize(
    "options",
    [
        EncodingOptions(),
        EncodingOptions(enable_tidb_extension=True, decimal_mode=DecimalMode.STRING, bigint_unsigned_mode=BigintUnsignedMode.STRING),
    ],
    ids=["precise-long", "string-string-ext"],
)
def test_confluent_deserializer_reads_every_type(registry_url, options):
    schema = "interop" + uuid.uuid4().hex[:8]
    table = TableDef(schema_name=schema, table="all_types", columns=COLUMNS, primary_key=("id",))
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        plan = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), options).plan(table)
    encoder = RowEncoder(plan.encoding)
    sr = SchemaRegistryClient({"url": registry_url})
    value_de = AvroDeserializer(sr)
    key_de = AvroDeserializer(sr)
    topic = plan.route.topic
    for row in (ROW, NULLS):
        key, value = encoder.encode("insert", row, commit_ts=417318403368288260)
        decoded = value_de(value, SerializationContext(topic, MessageField.VALUE))
        want = expected(row, options)
        for name, got in decoded.items():
            if name.startswith("_tidb"):
                continue
            if name == "c_float":
                assert got == pytest.approx(want[name]) if want[name] is not None else got is None
            else:
                assert got == want[name], name
        if options.enable_tidb_extension:
            assert decoded["_tidb_op"] == "c" and decoded["_tidb_commit_physical_time"] == 1591943372224
        assert key_de(key, SerializationContext(topic, MessageField.KEY)) == {"id": ROW["id"]}
    # the registry returns exactly the text this project registered
    registered = sr.get_schema(plan.encoding.value_schema_id).schema_str
    import json

    assert json.loads(registered) == json.loads(plan.encoding.value_schema_json)
