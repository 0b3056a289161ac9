"""debezium-json: TiCDC's flavour (with and without schema) and real Debezium MySQL output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avro_registry_sink.errors import SourceError
from avro_registry_sink.formats.canal_json import DdlEvent, Watermark
from avro_registry_sink.formats.debezium_json import (
    convert_debezium_value,
    events_from_debezium,
    table_from_table_change,
)
from avro_registry_sink.model import Op
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

DATA = Path(__file__).resolve().parents[1] / "data" / "inputs" / "debezium"

FOO = TableDef(
    schema_name="test",
    table="foo",
    primary_key=("pk",),
    version=449118650000000000,
    columns=(
        ColumnDef(name="pk", type=MySQLType.INT, nullable=False),
        ColumnDef(name="d", type=MySQLType.DATE),
        ColumnDef(name="dt1", type=MySQLType.DATETIME, fsp=1),
        ColumnDef(name="dt6", type=MySQLType.DATETIME, fsp=6),
        ColumnDef(name="t6", type=MySQLType.TIME, fsp=6),
        ColumnDef(name="ts5", type=MySQLType.TIMESTAMP, fsp=5),
        ColumnDef(name="b1", type=MySQLType.BIT, length=1),
        ColumnDef(name="b10", type=MySQLType.BIT, length=10),
        ColumnDef(name="vb", type=MySQLType.VARBINARY, length=16, binary=True),
        ColumnDef(name="dec", type=MySQLType.DECIMAL, precision=10, scale=5),
        ColumnDef(name="u", type=MySQLType.BIGINT, unsigned=True),
        ColumnDef(name="e", type=MySQLType.ENUM, elements=("a", "b", "c")),
        ColumnDef(name="s", type=MySQLType.SET, elements=("a", "b", "c")),
        ColumnDef(name="j", type=MySQLType.JSON),
        ColumnDef(name="txt", type=MySQLType.VARCHAR, length=32),
    ),
)
TABLES = {("test", "foo"): FOO}

EXPECTED_AFTER = {
    "pk": 1,
    "d": "1000-01-01",
    "dt1": "2023-11-30 12:34:56.1",
    "dt6": "2023-11-30 12:34:56.123456",
    "t6": "-12:34:56.123456",
    "ts5": "2023-11-30 12:34:56.12346",
    "b1": 1,
    "b10": 682,
    "vb": b"\x00\xff\r\n",
    "dec": "12345.12345",
    "u": 18446744073709551615,
    "e": "b",
    "s": "a,c",
    "j": '{"a": [1, 2]}',
    "txt": "<tag> & ü\n",
}


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_ticdc_insert_with_schema_and_table_definition() -> None:
    [event] = events_from_debezium(read("ticdc_insert_with_schema.json"), tables=TABLES, source="t/0@1")
    assert event.op is Op.INSERT
    assert (event.schema, event.table, event.table_version) == ("test", "foo", FOO.version)
    assert event.commit_ts == 449118655446581249
    assert event.before is None
    assert event.after == EXPECTED_AFTER
    assert event.extra == {}
    assert event.source == "t/0@1"


def test_ticdc_insert_from_field_schemas_alone() -> None:
    # No table definition: units, binary-ness and unsigned-ness come from the field schemas
    # (name and TiCDC's tidb_type). Without the column's fsp/scale, the message's own digits are used.
    [event] = events_from_debezium(read("ticdc_insert_with_schema.json"))
    assert event.after == {**EXPECTED_AFTER, "dt1": "2023-11-30 12:34:56.100"}  # ms unit: 3 digits
    assert event.table_version == 0


def test_ticdc_update_without_schema() -> None:
    [event] = events_from_debezium(read("ticdc_update_bare.json"), tables=TABLES)
    assert event.op is Op.UPDATE
    assert event.commit_ts == 449118656233013251
    assert event.before == EXPECTED_AFTER
    assert event.after["dec"] == "5.00000"  # DECIMAL(10,5) from the double 5.0
    assert event.after["u"] == 9223372036854775807
    assert event.after["b1"] == 0
    assert event.after["vb"] is None
    assert event.after["txt"] == "changed"


def test_ticdc_delete_with_null_schema() -> None:
    [event] = events_from_debezium(read("ticdc_delete.json"), tables=TABLES)
    assert event.op is Op.DELETE
    assert event.after is None
    assert event.before["pk"] == 1
    assert event.key_image == event.before


def test_real_debezium_snapshot_read_is_an_insert() -> None:
    [event] = events_from_debezium(read("real_snapshot_read.json"), source="dbserver1.inventory.customers/0@3")
    assert event.op is Op.INSERT
    assert (event.schema, event.table) == ("inventory", "customers")
    assert event.commit_ts == 1465581029523 << 18  # no commit_ts: source.ts_ms << 18
    assert event.extra == {"commit_ts_exact": False, "snapshot": True}
    assert event.after == {
        "id": 1004,
        "email": "annek@noanswer.org",
        "balance": "123.45",  # Connect Decimal: base64 big-endian unscaled 12345, scale 2
        "created": "2016-06-10 17:50:29",
        "birthday": "2000-01-01",
        "seen": "2016-06-10 15:50:29",  # +02:00 -> UTC
        "avatar": b"\x00\x01\x02",
    }


def test_ddl_with_table_changes() -> None:
    [event] = events_from_debezium(read("ddl_alter.json"), source="ddl/0@4")
    assert isinstance(event, DdlEvent)
    assert (event.schema, event.table, event.kind) == ("test", "foo", "ALTER")
    assert event.query == "ALTER TABLE `test`.`foo` ADD COLUMN `note` VARCHAR(16) NULL"
    assert event.commit_ts == 449118657019445253
    [table] = event.tables
    assert table.qualified_name == "test.foo" and table.version == event.commit_ts
    assert table.primary_key == ("pk",)
    cols = {c.name: c for c in table.columns}
    assert [c.name for c in table.columns] == ["pk", "e", "amount", "at", "u", "note"]
    assert cols["pk"].nullable is False
    assert cols["e"].elements == ("a", "b", "it's") and cols["e"].default == "a"
    assert (cols["amount"].precision, cols["amount"].scale) == (10, 2)
    assert cols["at"].fsp == 3
    assert cols["u"].unsigned and cols["u"].type is MySQLType.BIGINT
    assert cols["note"].length == 16


def test_watermark() -> None:
    assert events_from_debezium(read("watermark.json")) == [Watermark(ts=449118657019445253)]


def test_tombstone_gives_nothing() -> None:
    assert events_from_debezium(None) == []
    assert events_from_debezium('{"schema": null, "payload": null}') == []


def test_truncate_becomes_a_ddl() -> None:
    msg = {"op": "t", "source": {"db": "shop", "table": "orders", "ts_ms": 1000}, "ts_ms": 1001}
    [event] = events_from_debezium(msg)
    assert isinstance(event, DdlEvent)
    assert event.query == "TRUNCATE TABLE `shop`.`orders`"
    assert event.commit_ts == 1000 << 18


@pytest.mark.parametrize(
    ("value", "col", "field", "expected"),
    [
        (19691, ColumnDef(name="c", type=MySQLType.DATE), None, "2023-11-30"),
        (2932896, ColumnDef(name="c", type=MySQLType.DATE), None, "9999-12-31"),
        (1701347696000, ColumnDef(name="c", type=MySQLType.DATETIME), None, "2023-11-30 12:34:56"),
        (1701347696123, ColumnDef(name="c", type=MySQLType.DATETIME, fsp=3), None, "2023-11-30 12:34:56.123"),
        (1701347696123500, ColumnDef(name="c", type=MySQLType.DATETIME, fsp=4), None, "2023-11-30 12:34:56.1235"),
        (-1000, ColumnDef(name="c", type=MySQLType.DATETIME), None, "1969-12-31 23:59:59"),
        (45296000000, ColumnDef(name="c", type=MySQLType.TIME), None, "12:34:56"),
        (3020399000000, ColumnDef(name="c", type=MySQLType.TIME, fsp=3), None, "838:59:59.000"),
        ("2023-11-30T12:34:56Z", ColumnDef(name="c", type=MySQLType.TIMESTAMP), None, "2023-11-30 12:34:56"),
        ("2023-11-30T12:34:56.1Z", ColumnDef(name="c", type=MySQLType.TIMESTAMP, fsp=6), None,
         "2023-11-30 12:34:56.100000"),
        ("1970-01-01T00:00:00Z", ColumnDef(name="c", type=MySQLType.TIMESTAMP), None, "1970-01-01 00:00:00"),
        (5, ColumnDef(name="c", type=MySQLType.DECIMAL, precision=10, scale=2), None, "5.00"),
        (0.1, ColumnDef(name="c", type=MySQLType.DECIMAL, precision=20, scale=6), None, "0.100000"),
        (-12.345, ColumnDef(name="c", type=MySQLType.DECIMAL, precision=5, scale=2), None, "-12.35"),
        ("12.34", ColumnDef(name="c", type=MySQLType.DECIMAL, precision=5, scale=2), None, "12.34"),
        (True, ColumnDef(name="c", type=MySQLType.BIT, length=1), None, 1),
        ("EAAAAAAAAAA=", ColumnDef(name="c", type=MySQLType.BIT, length=60), None, 16),
        (-9223372036854775808, ColumnDef(name="c", type=MySQLType.BIGINT, unsigned=True), None, 9223372036854775808),
        (-5, ColumnDef(name="c", type=MySQLType.BIGINT), None, -5),
        (4294967295, ColumnDef(name="c", type=MySQLType.INT, unsigned=True), None, 4294967295),
        (2024, ColumnDef(name="c", type=MySQLType.YEAR), None, 2024),
        (12345.123, ColumnDef(name="c", type=MySQLType.FLOAT), None, 12345.123),
        ("Zm9v", ColumnDef(name="c", type=MySQLType.BLOB), None, b"foo"),
        ("Zm9v", ColumnDef(name="c", type=MySQLType.VARCHAR), None, "Zm9v"),
        ("", ColumnDef(name="c", type=MySQLType.ENUM, elements=("a",)), None, ""),
        # no column: the field schema decides
        (45296123, None, {"type": "int64", "name": "io.debezium.time.Time"}, "12:34:56.123"),
        (1701347696123456789, None, {"type": "int64", "name": "io.debezium.time.NanoTimestamp"},
         "2023-11-30 12:34:56.123456"),
        (-1, None, {"type": "int64", "tidb_type": "bigint unsigned"}, 18446744073709551615),
        ("AQI=", None, {"type": "string", "tidb_type": "blob"}, b"\x01\x02"),
        ("AQI=", None, {"type": "string"}, "AQI="),
        (12.5, None, {"type": "double", "tidb_type": "decimal"}, "12.5"),
        ({"scale": 3, "value": "AeI="}, None, {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"},
         "0.482"),
        (None, ColumnDef(name="c", type=MySQLType.INT), None, None),
    ],
)
def test_convert_debezium_value(value: object, col: ColumnDef | None, field: dict | None, expected: object) -> None:
    assert convert_debezium_value(value, col, field) == expected


def test_bad_value_names_column_and_table() -> None:
    msg = json.loads(read("ticdc_update_bare.json"))
    msg["after"]["b10"] = "not base64!"
    with pytest.raises(SourceError, match=r"t/2@9: column 'b10' of test\.foo \(bit\(10\)\): cannot convert"):
        events_from_debezium(msg, tables=TABLES, source="t/2@9")


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ('{"op": "x", "source": {"db": "a", "table": "b", "commit_ts": 1}}', "unknown debezium op 'x'"),
        ('{"op": "c", "source": {"db": "a", "table": "b"}}', "no source.commit_ts"),
        ('{"op": "c", "source": {"db": "a", "table": "b", "commit_ts": 1}, "after": null}', "without 'after'"),
        ('{"op": "d", "source": {"db": "a", "table": "b", "commit_ts": 1}, "before": null}', "without 'before'"),
        ('{"source": {"db": "a", "commit_ts": 1}}', "neither 'op' nor 'ddl'"),
        ('{"op": "c", "source": {"commit_ts": 1}}', "without source.db and source.table"),
        ("nope", "not valid JSON"),
    ],
)
def test_malformed_messages(message: str, reason: str) -> None:
    with pytest.raises(SourceError, match=reason):
        events_from_debezium(message, source="t/0@0")


def test_unknown_column_is_reported() -> None:
    msg = json.loads(read("ticdc_update_bare.json"))
    msg["after"]["extra_col"] = 1
    with pytest.raises(SourceError, match=r"no column.*'extra_col'"):
        events_from_debezium(msg, tables=TABLES)


def test_table_change_with_unknown_type_gives_no_definition() -> None:
    change = {"type": "CREATE", "id": '"a"."b"', "table": {"columns": [{"name": "g", "typeName": "GEOMETRY"}]}}
    assert table_from_table_change(change, "a") is None
    assert table_from_table_change({"type": "DROP", "id": '"a"."b"', "table": None}, "a") is None
