"""canal-json DML message -> TableDef (TiCDC's plain and content-compatible mysqlType, Alibaba Canal)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avro_registry_sink.errors import NoHandleKey, SourceError, UnsupportedColumnType
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T
from avro_registry_sink.tabledef import parse_ddl, table_from_canal

DATA = Path(__file__).resolve().parents[1] / "data" / "inputs" / "canal"

# A TiCDC canal-json INSERT (enable-tidb-extension), mysqlType keys in Go-map (random) order.
TICDC = {
    "id": 0, "database": "test", "table": "t3", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
    "es": 1713251706873, "ts": 1713251707250, "sql": "",
    "sqlType": {"id": -5, "bin": 2004, "color": 4, "tags": -7, "flags": -7, "amount": 3, "at": 93, "score": 7,
                "name": 12, "raw": 2004, "y": 12},
    "mysqlType": {"name": "varchar", "score": "float", "at": "timestamp", "amount": "decimal", "flags": "bit",
                  "tags": "set", "color": "enum", "bin": "varbinary", "id": "bigint unsigned", "raw": "blob",
                  "y": "year"},
    "old": None,
    "data": [{"id": "18446744073709551615", "bin": "\u0000ÿ", "color": "2", "tags": "5", "flags": "682",
              "amount": "12.50", "at": "2024-05-09 08:00:01.123", "score": "1.5", "name": "a", "raw": None,
              "y": "2024"}],
    "_tidb": {"commitTs": 449118655446581249},
}


def shape(col: ColumnDef) -> tuple:
    return (col.type, col.unsigned, col.length, col.precision, col.scale, col.fsp, col.binary, col.nullable,
            col.elements)


def test_ticdc_plain_mysql_types() -> None:
    t = table_from_canal(TICDC)
    assert t.qualified_name == "test.t3" and t.version == 0
    assert [c.name for c in t.columns] == ["id", "bin", "color", "tags", "flags", "amount", "at", "score", "name",
                                           "raw", "y"]  # data order, not mysqlType order
    got = {c.name: shape(c) for c in t.columns}
    assert got == {
        "id": (T.BIGINT, True, None, None, None, None, False, False, ()),  # bigint unsigned, PK: NOT NULL
        "bin": (T.VARBINARY, False, None, None, None, None, True, True, ()),
        "color": (T.ENUM, False, None, None, None, None, False, True, ()),  # members unknown
        "tags": (T.SET, False, None, None, None, None, False, True, ()),
        "flags": (T.BIT, False, 64, None, None, None, False, True, ()),  # width unknown: any value fits
        "amount": (T.DECIMAL, False, None, None, None, None, False, True, ()),  # precision/scale unknown
        "at": (T.TIMESTAMP, False, None, None, None, None, False, True, ()),
        "score": (T.FLOAT, False, None, None, None, None, False, True, ()),
        "name": (T.VARCHAR, False, None, None, None, None, False, True, ()),
        "raw": (T.BLOB, False, None, None, None, None, True, True, ()),
        "y": (T.YEAR, False, None, None, None, None, False, True, ()),
    }
    assert t.primary_key == ("id",) and [c.name for c in t.handle_key_columns()] == ["id"]


def test_ticdc_binary_type_names() -> None:
    msg = dict(TICDC, mysqlType={"id": "bigint unsigned", "b": "binary", "vb": "varbinary", "tb": "tinyblob",
                                 "t": "text", "c": "char", "j": "json"},
               sqlType={}, data=[{"id": "1", "b": "x", "vb": "y", "tb": "z", "t": "u", "c": "v", "j": "{}"}])
    t = table_from_canal(msg)
    assert [(c.name, c.type, c.binary) for c in t.columns] == [
        ("id", T.BIGINT, False), ("b", T.BINARY, True), ("vb", T.VARBINARY, True), ("tb", T.TINYBLOB, True),
        ("t", T.TEXT, False), ("c", T.CHAR, False), ("j", T.JSON, False),
    ]


def test_content_compatible_full_types() -> None:
    msg = {
        "database": "shop", "table": "orders", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
        "mysqlType": {"id": "int(10) unsigned", "name": "varchar(255)", "amount": "decimal(10,2)",
                      "state": "enum('a','it''s','x,y')", "tags": "set('p','q')", "token": "binary(16)",
                      "at": "datetime(3)", "flags": "bit(10)", "ok": "tinyint(1)"},
        "data": [{"id": "1", "name": "n", "amount": "1.00", "state": "a", "tags": "p", "token": "t", "at": "x",
                  "flags": "1", "ok": "1"}],
    }
    t = table_from_canal(msg)
    got = {c.name: shape(c) for c in t.columns}
    assert got["id"] == (T.INT, True, 10, None, None, None, False, False, ())
    assert got["name"] == (T.VARCHAR, False, 255, None, None, None, False, True, ())
    assert got["amount"] == (T.DECIMAL, False, None, 10, 2, None, False, True, ())
    assert got["state"][-1] == ("a", "it's", "x,y") and got["tags"][-1] == ("p", "q")
    assert got["token"] == (T.BINARY, False, 16, None, None, None, True, True, ())
    assert got["at"][5] == 3 and got["flags"][2] == 10 and got["ok"][2] == 1


def test_alibaba_canal_message() -> None:
    msg = json.loads((DATA / "update_two_rows.json").read_text(encoding="utf-8"))
    t = table_from_canal(msg)
    assert t.qualified_name == "canal_manager.canal_user"
    assert [(c.name, c.type, c.length) for c in t.columns] == [
        ("id", T.INT, 11), ("username", T.VARCHAR, 31), ("password", T.VARCHAR, 128), ("name", T.VARCHAR, 31),
        ("role", T.ENUM, None),
    ]
    assert t.column("role").elements == ("admin", "user")
    assert t.primary_key == ("id",) and not t.column("id").nullable


def test_column_order_falls_back_to_old_then_mysql_type() -> None:
    msg = {"database": "d", "table": "t", "pkNames": None, "mysqlType": {"z": "int", "b": "int", "a": "int"},
           "old": [{"b": "1"}], "data": [{"a": "1"}]}
    t = table_from_canal(msg)
    assert [c.name for c in t.columns] == ["a", "b", "z"]
    with pytest.raises(NoHandleKey):  # canal-json says nothing of unique keys
        t.handle_key_columns()


def test_sql_type_fills_what_mysql_type_does_not_say() -> None:
    msg = {"database": "d", "table": "t", "pkNames": ["id"], "mysqlType": {"id": "bigint", "t": "text"},
           "sqlType": {"id": -5, "t": 2004, "extra": 93}, "data": [{"id": "1", "t": "x", "extra": "2024-01-01"}]}
    t = table_from_canal(msg)
    assert [(c.name, c.type, c.binary) for c in t.columns] == [
        ("id", T.BIGINT, False), ("t", T.BLOB, True), ("extra", T.DATETIME, False)]


PREVIOUS = parse_ddl("""CREATE TABLE test.t3 (
    id BIGINT UNSIGNED NOT NULL, name VARCHAR(32) NOT NULL DEFAULT 'x', color ENUM('r','g','b') DEFAULT 'r',
    amount DECIMAL(12,2), gone INT, code CHAR(4) NOT NULL, PRIMARY KEY (id), UNIQUE KEY (code), UNIQUE (gone))""")[0]
PREVIOUS = PREVIOUS.model_copy(update={"version": 99})


def test_previous_definition_fills_in_what_canal_does_not_say() -> None:
    msg = {"database": "test", "table": "t3", "pkNames": ["id"],
           "mysqlType": {"id": "bigint unsigned", "name": "varchar", "color": "enum", "amount": "decimal",
                         "code": "char", "added": "json"},
           "data": [{"id": "1", "name": "n", "color": "1", "amount": "1.00", "code": "abcd", "added": "{}"}]}
    t = table_from_canal(msg, previous=PREVIOUS)
    assert [c.name for c in t.columns] == ["id", "name", "color", "amount", "code", "added"]
    for name in ("id", "name", "color", "amount", "code"):
        assert t.column(name) == PREVIOUS.column(name)  # nullability, defaults, members, precision kept
    assert t.column("added").nullable and t.column("added").type is T.JSON
    assert t.unique_keys == (("code",),)  # the key over the dropped column is gone
    assert t.version == 99
    assert [c.name for c in t.handle_key_columns()] == ["id"]


def test_previous_is_returned_when_nothing_changed_and_replaced_on_type_change() -> None:
    msg = {"database": "test", "table": "t3", "pkNames": ["id"],
           "mysqlType": {c.name: c.type.value.lower() + (" unsigned" if c.unsigned else "") for c in PREVIOUS.columns},
           "data": [{c.name: None for c in PREVIOUS.columns}]}
    assert table_from_canal(msg, previous=PREVIOUS) is PREVIOUS
    changed = dict(msg, mysqlType={**msg["mysqlType"], "name": "text", "amount": "decimal(14,4)"})
    t = table_from_canal(changed, previous=PREVIOUS)
    assert t.column("name").type is T.TEXT and not t.column("name").nullable  # nullability kept, type replaced
    assert t.column("name").default is None
    assert (t.column("amount").precision, t.column("amount").scale) == (14, 4)


@pytest.mark.parametrize(
    ("message", "error", "match"),
    [
        ({"database": "d", "table": "t", "isDdl": True, "sql": "ALTER TABLE t ADD c INT"}, SourceError,
         "is a DDL"),
        ({"database": "d", "mysqlType": {"a": "int"}}, SourceError, "without string 'database' and 'table'"),
        ({"database": "d", "table": "t", "mysqlType": None}, SourceError, "without a 'mysqlType'"),
        ({"database": "d", "table": "t", "mysqlType": {}}, SourceError, "names no columns"),
        ({"database": "d", "table": "t", "mysqlType": {"a": "int"}, "pkNames": "a"}, SourceError, "pkNames"),
        ({"database": "d", "table": "t", "mysqlType": {"a": "int"}, "pkNames": ["b"]}, SourceError,
         r"primary-key columns \['b'\]"),
        ({"database": "d", "table": "t", "mysqlType": {"a": "int"}, "data": [{"a": "1", "b": "2"}]}, SourceError,
         "column 'b' has neither"),
        ({"database": "d", "table": "t", "mysqlType": {"a": "bigint unsignd"}}, UnsupportedColumnType,
         "unexpected text after the type"),
        ({"database": "d", "table": "t", "mysqlType": {"a": "varchr(10)"}}, UnsupportedColumnType,
         "did you mean 'VARCHAR'"),
    ],
)
def test_malformed_messages(message: dict, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        table_from_canal(message)


def test_result_is_a_plain_frozen_table() -> None:
    t = table_from_canal(TICDC)
    assert isinstance(t, TableDef) and hash(t) == hash(table_from_canal(TICDC))
