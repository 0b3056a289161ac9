"""canal-json: TiCDC's storage and Kafka flavours and Alibaba Canal's, read per FLIP-105."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avro_registry_sink.errors import SourceError
from avro_registry_sink.formats.canal_json import (
    DdlEvent,
    Watermark,
    commit_ts_from_ms,
    convert_canal_value,
    events_from_canal,
)
from avro_registry_sink.model import Op
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

DATA = Path(__file__).resolve().parents[1] / "data" / "inputs" / "canal"

T3 = TableDef(
    schema_name="test",
    table="t3",
    primary_key=("id",),
    version=449118650000000000,
    columns=(
        ColumnDef(name="id", type=MySQLType.BIGINT, unsigned=True, nullable=False),
        ColumnDef(name="bin", type=MySQLType.VARBINARY, length=16, binary=True),
        ColumnDef(name="color", type=MySQLType.ENUM, elements=("red", "green", "blue")),
        ColumnDef(name="tags", type=MySQLType.SET, elements=("a", "b", "c")),
        ColumnDef(name="flags", type=MySQLType.BIT, length=10),
        ColumnDef(name="amount", type=MySQLType.DECIMAL, precision=10, scale=2),
        ColumnDef(name="at", type=MySQLType.TIMESTAMP, fsp=3),
        ColumnDef(name="score", type=MySQLType.FLOAT),
        ColumnDef(name="name", type=MySQLType.VARCHAR, length=32),
    ),
)

CANAL_USER = TableDef(
    schema_name="canal_manager",
    table="canal_user",
    primary_key=("id",),
    columns=(
        ColumnDef(name="id", type=MySQLType.INT, nullable=False),
        ColumnDef(name="username", type=MySQLType.VARCHAR, length=31),
        ColumnDef(name="password", type=MySQLType.VARCHAR, length=128),
        ColumnDef(name="name", type=MySQLType.VARCHAR, length=31),
        ColumnDef(name="role", type=MySQLType.ENUM, elements=("admin", "user")),
    ),
)

TABLES = {("test", "t3"): T3, ("canal_manager", "canal_user"): CANAL_USER}


def lines(name: str) -> list[str]:
    raw = (DATA / name).read_bytes().decode("utf-8")
    assert raw.endswith("\r\n")  # the storage sink's default terminator
    return [line for line in raw.split("\r\n") if line]


def test_insert_converts_every_value_to_ticdc_text_forms() -> None:
    [event] = events_from_canal(lines("storage_t3.json")[0], tables=TABLES, source="f.json:1")
    assert event.op is Op.INSERT
    assert event.before is None
    assert event.commit_ts == 449118655446581249
    assert event.table_version == T3.version
    assert event.source == "f.json:1"
    assert event.extra == {}
    assert event.after == {
        "id": 18446744073709551615,  # BIGINT UNSIGNED as unsigned text
        "bin": b"\x00\xff\r\n",  # ISO-8859-1 text -> the original bytes
        "color": 2,  # ENUM: 1-based index, named later by the type map
        "tags": 5,  # SET: bitmask
        "flags": 682,
        "amount": "12.50",
        "at": "2024-05-09 08:00:01.123",
        "score": 1.5,
        "name": 'a <b> & "c"',  # easyjson's \u003c \u003e \u0026 unescaped by JSON
    }
    assert list(event.after) == [c.name for c in T3.columns]


def test_float_text_without_exponent_and_nulls() -> None:
    [event] = events_from_canal(lines("storage_t3.json")[1], tables=TABLES)
    assert event.after["score"] == 1.5e20
    assert event.after["bin"] is None
    assert event.after["name"] == ""
    assert event.after["tags"] == 7


def test_update_has_old_values_as_before() -> None:
    [event] = events_from_canal(lines("storage_t3.json")[2], tables=TABLES)
    assert event.op is Op.UPDATE
    assert event.before["name"] == 'a <b> & "c"' and event.after["name"] == "renamed"
    assert event.before["amount"] == "12.50" and event.after["amount"] == "99.99"
    assert event.after["tags"] == 0 and event.after["color"] == 3


def test_delete_puts_the_row_in_before() -> None:
    [event] = events_from_canal(lines("storage_t3.json")[3], tables=TABLES)
    assert event.op is Op.DELETE
    assert event.after is None
    assert event.before["id"] == 7
    assert event.key_image == event.before


def test_without_tidb_extension_commit_ts_comes_from_es() -> None:
    line = lines("storage_t3_noext.json")[0]
    es = json.loads(line)["es"]
    [event] = events_from_canal(line, tables=TABLES)
    assert event.commit_ts == es << 18 == commit_ts_from_ms(es)
    assert event.extra == {"commit_ts_exact": False}


def test_only_changed_columns_in_old_are_merged_over_the_new_row() -> None:
    message = json.loads((DATA / "update_two_rows.json").read_text())
    events = events_from_canal(message, tables=TABLES, source="topic/0@5")
    assert [e.op for e in events] == [Op.UPDATE, Op.UPDATE]
    first, second = events
    assert first.after == {"id": 13, "username": "13", "password": "6BB4", "name": "Canal Manager V2", "role": "admin"}
    assert first.before == {"id": 13, "username": "13", "password": "6BB4", "name": "Canal Manager", "role": "admin"}
    assert second.before == {"id": 14, "username": "14", "password": "77AA", "name": "Old other", "role": "admin"}
    assert second.after["role"] == "user"  # Alibaba Canal sends ENUM member names: kept as text
    assert first.commit_ts == second.commit_ts == 1568972368000 << 18


def test_table_key_may_be_a_qualified_name() -> None:
    [event] = events_from_canal(lines("storage_t3.json")[0], tables={"test.t3": T3})
    assert event.after["id"] == 18446744073709551615


def test_ddl_message() -> None:
    [event] = events_from_canal((DATA / "ddl.json").read_text(), tables=TABLES, source="t/0@9")
    assert isinstance(event, DdlEvent)
    assert (event.schema, event.table, event.kind) == ("test", "t3", "ALTER")
    assert event.query == "ALTER TABLE `test`.`t3` ADD COLUMN `note` VARCHAR(16) NOT NULL DEFAULT 'n/a'"
    assert event.commit_ts == 449118657019445253
    assert event.source == "t/0@9"


def test_watermark_message() -> None:
    [event] = events_from_canal((DATA / "watermark.json").read_bytes())
    assert event == Watermark(ts=449118657019445253)


@pytest.mark.parametrize(
    ("col", "text", "expected"),
    [
        (ColumnDef(name="c", type=MySQLType.TINYINT), "-128", -128),
        (ColumnDef(name="c", type=MySQLType.YEAR), "2024", 2024),
        (ColumnDef(name="c", type=MySQLType.BIT, length=64), "18446744073709551615", 18446744073709551615),
        (ColumnDef(name="c", type=MySQLType.DOUBLE), "0.00001", 1e-05),
        (ColumnDef(name="c", type=MySQLType.DECIMAL, precision=20, scale=6), "0.000000", "0.000000"),
        (ColumnDef(name="c", type=MySQLType.JSON), '{"a": 1}', '{"a": 1}'),
        (ColumnDef(name="c", type=MySQLType.TIME, fsp=3), "-838:59:59.000", "-838:59:59.000"),
        (ColumnDef(name="c", type=MySQLType.BLOB), "\u00ff\u00fe", b"\xff\xfe"),
        (ColumnDef(name="c", type=MySQLType.VARCHAR, binary=True), "ÿ", b"\xff"),
        (ColumnDef(name="c", type=MySQLType.VARCHAR), "ÿ", "ÿ"),
        (ColumnDef(name="c", type=MySQLType.SET, elements=("a", "b")), "", ""),
        (ColumnDef(name="c", type=MySQLType.ENUM, elements=("x",)), "x", "x"),
        (ColumnDef(name="c", type=MySQLType.INT), None, None),
    ],
)
def test_convert_canal_value(col: ColumnDef, text: str | None, expected: object) -> None:
    assert convert_canal_value(col, text) == expected


def test_bad_value_names_the_column() -> None:
    message = json.loads(lines("storage_t3.json")[0])
    message["data"][0]["flags"] = "lots"
    with pytest.raises(SourceError, match=r"f\.json:3: column 'flags' of test\.t3 \(bit\(10\)\): expected an integer"):
        events_from_canal(message, tables=TABLES, source="f.json:3")


def test_unknown_column_suggests_a_missed_ddl() -> None:
    message = json.loads(lines("storage_t3.json")[0])
    message["data"][0]["note"] = "new column"
    with pytest.raises(SourceError, match=r"has no column.*'note'.*Was a DDL missed"):
        events_from_canal(message, tables=TABLES)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({"database": "test", "table": "t3", "type": "UPSERT", "es": 1}, "unknown canal-json type 'UPSERT'"),
        ({"database": "test", "table": "t3", "type": "INSERT", "data": [{"id": "1"}]}, "neither _tidb.commitTs nor es"),
        ({"database": "test", "table": "t3", "type": "INSERT", "es": 1, "data": None}, "without rows"),
        ({"database": "test", "table": "t3", "type": "UPDATE", "es": 1, "data": [{"id": "1"}], "old": []},
         "1 rows in 'data' but 0 in 'old'"),
        ({"type": "TIDB_WATERMARK", "es": 1}, "without _tidb.watermarkTs"),
        ({"database": "test", "table": "t3", "isDdl": True, "type": "ALTER", "es": 1, "sql": ""}, "without its 'sql'"),
    ],
)
def test_malformed_messages(message: object, reason: str) -> None:
    with pytest.raises(SourceError, match=reason):
        events_from_canal(message, tables=TABLES, source="topic/1@7")  # type: ignore[arg-type]


def test_without_a_table_definition_one_is_derived_from_the_message() -> None:
    pytest.importorskip("avro_registry_sink.tabledef.canal")
    events = events_from_canal(lines("storage_t3.json")[0], tables={})
    assert events[0].after["bin"] == b"\x00\xff\r\n"  # mysqlType 'varbinary' -> binary column
    assert events[0].after["id"] == 18446744073709551615
