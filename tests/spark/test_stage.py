"""The encode stage through a real SparkSession: same records as the reference encoder, clear failures."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from avro_registry_sink.changes import ChangeEvent, load_image
from avro_registry_sink.encoding.plan import EncodingPlan, unframe
from avro_registry_sink.model import CHANGE_COLUMNS, CHANGE_DDL, KAFKA_DDL, Op
from avro_registry_sink.routing.rules import Route, partition_for
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import EncodingOptions, PartitionStrategy
from avro_registry_sink.spark.stages.plan import StagePlan
from avro_registry_sink.spark.stages.stage import encode_changes, encode_table
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T
from tests.support.reference_encoder import RowEncoder

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

# Every SQL type, nullable and NOT NULL, with and without defaults (union order [T, "null"]).
ALL_TYPES = TableDef(
    schema_name="shop",
    table="items",
    version=1,
    primary_key=("id",),
    columns=(
        ColumnDef(name="id", type=T.BIGINT, nullable=False),
        ColumnDef(name="ti", type=T.TINYINT, nullable=False, default="1"),
        ColumnDef(name="si", type=T.SMALLINT, unsigned=True),
        ColumnDef(name="mi", type=T.MEDIUMINT, default="-5"),
        ColumnDef(name="i", type=T.INT, unsigned=True),
        ColumnDef(name="bu", type=T.BIGINT, unsigned=True),
        ColumnDef(name="f", type=T.FLOAT, default="3.14"),
        ColumnDef(name="dbl", type=T.DOUBLE),
        ColumnDef(name="dec", type=T.DECIMAL, precision=20, scale=4),
        ColumnDef(name="wide", type=T.DECIMAL, precision=65, scale=30),
        ColumnDef(name="bit", type=T.BIT, length=12, default=b"\x01"),
        ColumnDef(name="ch", type=T.CHAR, length=4, nullable=False),
        ColumnDef(name="vc", type=T.VARCHAR, length=20, default="dflt"),
        ColumnDef(name="tx", type=T.TEXT),
        ColumnDef(name="bin", type=T.BINARY, length=4, binary=True),
        ColumnDef(name="vb", type=T.VARBINARY, length=20, binary=True, default=b"ab"),
        ColumnDef(name="bl", type=T.BLOB, binary=True),
        ColumnDef(name="en", type=T.ENUM, elements=("red", "green,blue", "é")),
        ColumnDef(name="st", type=T.SET, elements=("a", "b", "c")),
        ColumnDef(name="js", type=T.JSON),
        ColumnDef(name="dt", type=T.DATE),
        ColumnDef(name="dtt", type=T.DATETIME, fsp=3),
        ColumnDef(name="ts", type=T.TIMESTAMP, default="2020-01-01 00:00:00"),
        ColumnDef(name="tm", type=T.TIME),
        ColumnDef(name="yr", type=T.YEAR),
        ColumnDef(name="vec", type=T.VECTOR),
    ),
)

ORDERS_V1 = TableDef(
    schema_name="shop", table="orders", version=1, primary_key=("id",),
    columns=(ColumnDef(name="id", type=T.INT, nullable=False), ColumnDef(name="note", type=T.VARCHAR)),
)
ORDERS_V2 = ORDERS_V1.model_copy(update={
    "version": 2, "columns": (*ORDERS_V1.columns, ColumnDef(name="qty", type=T.INT, nullable=False, default="1")),
})


def _row(i: int) -> dict[str, Any]:
    return {
        "id": (1 << 62) + i if i % 3 == 0 else i, "ti": -128 if i % 2 else 127, "si": 65535, "mi": None if i % 4 else -8388608,
        "i": 4294967295, "bu": (1 << 64) - 1 - i, "f": 1.1, "dbl": None if i % 5 == 0 else -2.5e-300,
        "dec": "-123456.7890", "wide": "-" + "9" * 35 + ".000000000000000000000000000001", "bit": 2049, "ch": "ab",
        "vc": "héllo wörld 日本" if i % 2 else "", "tx": None, "bin": b"\x00\x01\x02\x03", "vb": b"", "bl": bytes(range(i % 200)),
        "en": "green,blue", "st": "a,c", "js": '{"k": [1, 2]}', "dt": "2024-02-29", "dtt": "2024-02-29 23:59:59.123",
        "ts": "1970-01-01 00:00:01", "tm": "-838:59:59", "yr": 2155, "vec": "[1,2.5]",
    }


def _plans(options: EncodingOptions, partitions: int = 3) -> dict[tuple[str, str, int], StagePlan]:
    out = {}
    for n, (table, strategy) in enumerate([(ALL_TYPES, PartitionStrategy.DEFAULT), (ORDERS_V1, PartitionStrategy.DEFAULT),
                                           (ORDERS_V2, PartitionStrategy.TS)]):
        encoding = EncodingPlan.from_schemas(derive_schemas(table, options), 100 + 2 * n, 101 + 2 * n)
        topic = f"{table.schema_name}_{table.table}"
        route = Route(schema=table.schema_name, table=table.table, topic=topic, key_subject=f"{topic}-key",
                      value_subject=f"{topic}-value", partition=strategy)
        out[(table.schema_name, table.table, table.version)] = StagePlan(encoding, topic, partitions, route)
    return out


def _events() -> list[ChangeEvent]:
    events = []
    for i in range(40):
        after = _row(i)
        op = [Op.INSERT, Op.UPDATE, Op.DELETE][i % 3]
        events.append(ChangeEvent(
            schema="shop", table="items", op=op, commit_ts=417318403368288260 + i, table_version=1,
            after=None if op is Op.DELETE else after, before=after if op is not Op.INSERT else None, source=f"items.log:{i}",
        ))
        table = ORDERS_V1 if i < 20 else ORDERS_V2
        image = {"id": i, "note": None if i % 2 else f"n{i}"}
        if table is ORDERS_V2:
            image["qty"] = i
        events.append(ChangeEvent(
            schema="shop", table="orders", op=Op.DELETE if i % 7 == 0 else Op.INSERT, commit_ts=1000 + i,
            table_version=table.version, after=None if i % 7 == 0 else image, before=image if i % 7 == 0 else None,
            source=f"orders.log:{i}",
        ))
    return events


def _reference(event_row: tuple[Any, ...], plan: StagePlan) -> dict[str, Any]:
    """What the per-row path makes of one change row: the job's reference semantics."""
    row = dict(zip(CHANGE_COLUMNS, event_row, strict=False))
    table = plan.encoding.table
    op = Op.parse(row["op"])
    before, after = load_image(row["before"], table), load_image(row["after"], table)
    image = (before if before is not None else after) if op is Op.DELETE else after
    encoder = RowEncoder(plan.encoding)
    key, value = encoder.encode(op, image, row["commit_ts"])
    partition = partition_for(plan.route, plan.partitions, key_values=encoder.key_values(image), commit_ts=row["commit_ts"])
    letter = {"insert": b"c", "update": b"u", "delete": b"d"}[op.value]
    return {"topic": plan.topic, "partition": partition, "key": key, "value": value,
            "headers": [{"key": "op", "value": letter}, {"key": "commit_ts", "value": str(row["commit_ts"]).encode()}],
            "commit_ts": row["commit_ts"]}


def _decode(schema_json: str, data: bytes) -> dict[str, Any]:
    _, body = unframe(data)
    return fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(json.loads(schema_json)))


@pytest.mark.parametrize("extension", [True, False])
def test_mixed_tables_and_versions_equal_the_reference(spark, extension):
    plans = _plans(EncodingOptions(enable_tidb_extension=extension))
    rows = [event.to_row() for event in _events()]
    df = spark.createDataFrame(rows, CHANGE_DDL)
    out = encode_changes(df, plans)
    assert out.schema.simpleString() == spark.createDataFrame([], KAFKA_DDL).schema.simpleString()
    records = [r.asDict(recursive=True) for r in out.collect()]
    assert len(records) == len(rows)
    for record, row in zip(records, rows, strict=True):  # input order is kept
        expected = _reference(row, plans[(row[0], row[1], row[2])])
        record["key"], record["value"] = bytes(record["key"]), record["value"] and bytes(record["value"])
        record["headers"] = [{"key": h["key"], "value": bytes(h["value"])} for h in record["headers"]]
        assert record == expected, row[-1]


def test_decoded_values_deletes_and_extension_fields(spark):
    plans = _plans(EncodingOptions(enable_tidb_extension=True))
    events = _events()
    out = encode_changes(spark.createDataFrame([e.to_row() for e in events], CHANGE_DDL), plans).collect()
    plan = plans[("shop", "items", 1)]
    insert = next(r for r, e in zip(out, events, strict=False) if e.table == "items" and e.op is Op.INSERT)
    value = _decode(plan.encoding.value_schema_json, insert["value"])
    assert value["dec"] == Decimal("-123456.7890") and value["wide"] == Decimal("-" + "9" * 35 + ".000000000000000000000000000001")
    assert value["bu"] == -1 and value["bit"] == b"\x08\x01" and value["bl"] == b""
    assert value["en"] == "green,blue" and value["vc"] == "" and value["tx"] is None and value["mi"] == -8388608
    assert value["_tidb_op"] == "c" and value["_tidb_commit_physical_time"] == 1591943372224
    deletes = [(r, e) for r, e in zip(out, events, strict=False) if e.op is Op.DELETE]
    assert deletes and all(r["value"] is None for r, _ in deletes)
    for record, event in deletes:  # keyed by the pre-image, tombstone still carries the commit ts
        key_schema = plans[(event.schema, event.table, event.table_version)].encoding.key_schema_json
        assert _decode(key_schema, record["key"]) == {"id": event.before["id"]}
        assert record["headers"][1]["value"] == str(event.commit_ts).encode()
        assert record["headers"][0]["value"] == b"d"


def test_encode_table_with_spark_types(spark):
    options = EncodingOptions(enable_tidb_extension=True)
    plan = _plans(options, partitions=4)[("shop", "items", 1)]
    ddl = ("id BIGINT, ti TINYINT, si INT, mi INT, i BIGINT, bu DECIMAL(20,0), f FLOAT, dbl DOUBLE, dec DECIMAL(20,4), "
           "wide STRING, bit BIGINT, ch STRING, vc STRING, tx STRING, bin BINARY, vb BINARY, bl BINARY, en STRING, "
           "st STRING, js STRING, dt STRING, dtt STRING, ts STRING, tm STRING, yr INT, vec STRING, _op STRING, _commit_ts BIGINT")
    rows = []
    for i in range(30):
        r = _row(i)
        r["bu"], r["dec"] = Decimal(r["bu"]), Decimal(r["dec"])
        rows.append({**r, "_op": ["c", "u", "d"][i % 3], "_commit_ts": 10 + i})
    df = spark.createDataFrame(rows, ddl)
    records = encode_table(df, plan, keep=["_commit_ts"]).collect()
    encoder = RowEncoder(plan.encoding)
    for record, row in zip(records, rows, strict=False):
        values = {k: v for k, v in row.items() if not k.startswith("_")}
        values["f"] = float(__import__("numpy").float32(values["f"]))  # Spark FLOAT holds the float32
        key, value = encoder.encode(row["_op"], values, row["_commit_ts"])
        assert (bytes(record["key"]), record["value"] and bytes(record["value"])) == (key, value)
        assert record["partition"] == partition_for(plan.route, 4, key_values=[row["id"]])
        assert record["_commit_ts"] == record["commit_ts"] == row["_commit_ts"]


def test_rows_the_vectorized_parse_cannot_take_still_equal_the_reference(spark):
    plans = _plans(EncodingOptions())
    plan = plans[("shop", "orders", 2)]
    rows = [
        ("shop", "orders", 2, "c", 5, None, '{"ID": 1, "note": "x", "qty": 2}', "a:1"),  # key in another case
        ("shop", "orders", 2, "c", 6, None, '{"id": 2.0, "note": null, "qty": "3"}', "a:2"),  # 2.0 and "3"
        ("shop", "orders", 2, "d", 7, '{"id": 3}', None, "a:3"),  # a delete needs only the key
        ("shop", "orders", 2, "U", 8, None, '{\n "id": 4, "note": "y", "qty": 1}', "a:4"),  # pretty-printed
    ]
    out = encode_changes(spark.createDataFrame(rows, CHANGE_DDL), plans).collect()
    for record, row in zip(out, rows, strict=False):
        expected = _reference(row, plan)
        assert (bytes(record["key"]), record["value"] and bytes(record["value"]), record["partition"]) == \
            (expected["key"], expected["value"], expected["partition"])


def test_unknown_table_version_fails_the_job_with_a_clear_message(spark):
    plans = _plans(EncodingOptions())
    rows = [("shop", "orders", 9, "c", 1, None, '{"id": 1, "note": null}', "orders.log:17")]
    with pytest.raises(Exception) as info:
        encode_changes(spark.createDataFrame(rows, CHANGE_DDL), plans).collect()
    text = str(info.value)
    assert "No encoding plan for table shop.orders version 9 (first row at orders.log:17)" in text
    assert "shop.orders v1" in text


def test_a_bad_value_fails_the_job_naming_table_version_column_and_source(spark):
    plans = _plans(EncodingOptions())
    rows = [
        ("shop", "orders", 2, "c", 1, None, '{"id": 1, "note": null, "qty": 1}', "orders.log:1"),
        ("shop", "orders", 2, "c", 2, None, '{"id": 2, "note": null, "qty": 99999999999}', "orders.log:2"),
    ]
    with pytest.raises(Exception) as info:
        encode_changes(spark.createDataFrame(rows, CHANGE_DDL), plans).collect()
    text = str(info.value)
    assert "Cannot encode the change at orders.log:2 for table shop.orders version 2" in text
    assert "column 'qty'" in text and "out of range -2147483648..2147483647" in text


def test_a_missing_image_and_a_not_null_column_fail_clearly(spark):
    plans = _plans(EncodingOptions())
    rows = [("shop", "orders", 1, "u", 1, None, None, "orders.log:5")]
    with pytest.raises(Exception, match=r"orders.log:5 for table shop.orders version 1: a update event without a row image"):
        encode_changes(spark.createDataFrame(rows, CHANGE_DDL), plans).collect()
    rows = [("shop", "orders", 2, "c", 1, None, '{"id": 1, "note": "a", "qty": null}', "orders.log:6")]
    with pytest.raises(Exception, match=r"orders.log:6 .*Column 'qty' of table shop.orders is NOT NULL"):
        encode_changes(spark.createDataFrame(rows, CHANGE_DDL), plans).collect()
