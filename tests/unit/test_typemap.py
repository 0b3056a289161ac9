"""Golden table: (column, options) -> the exact ColumnValueBlock TiCDC writes, one row per SQL type."""

from __future__ import annotations

import pytest

from avro_registry_sink.errors import EncodingError, TableDefinitionError
from avro_registry_sink.schema import gojson
from avro_registry_sink.schema.builder import column_field
from avro_registry_sink.settings.config import BigintUnsignedMode, DecimalMode, EncodingOptions
from avro_registry_sink.table import ColumnDef
from avro_registry_sink.table import MySQLType as T
from avro_registry_sink.typemap.mysql import TYPE_RULES, to_avro_value

PRECISE = EncodingOptions()
STRINGS = EncodingOptions(decimal_mode=DecimalMode.STRING, bigint_unsigned_mode=BigintUnsignedMode.STRING)


def col(type_: T, **kw) -> ColumnDef:
    kw.setdefault("nullable", False)
    return ColumnDef(name="c", type=type_, **kw)


def t(avro: str, tidb: str, **params) -> dict:
    return {"type": avro, "connect.parameters": dict(sorted({"tidb_type": tidb, **params}.items()))}


# (column, type object in precise/long mode, type object in string/string mode)
TYPE_TABLE = [
    (col(T.TINYINT), t("int", "INT"), t("int", "INT")),
    (col(T.TINYINT, unsigned=True), t("int", "INT UNSIGNED"), t("int", "INT UNSIGNED")),
    (col(T.TINYINT, length=1), t("int", "INT"), t("int", "INT")),  # BOOL
    (col(T.SMALLINT), t("int", "INT"), t("int", "INT")),
    (col(T.SMALLINT, unsigned=True), t("int", "INT UNSIGNED"), t("int", "INT UNSIGNED")),
    (col(T.MEDIUMINT), t("int", "INT"), t("int", "INT")),
    (col(T.MEDIUMINT, unsigned=True), t("int", "INT UNSIGNED"), t("int", "INT UNSIGNED")),
    (col(T.INT), t("int", "INT"), t("int", "INT")),
    (col(T.INT, unsigned=True), t("long", "INT UNSIGNED"), t("long", "INT UNSIGNED")),
    (col(T.BIGINT), t("long", "BIGINT"), t("long", "BIGINT")),
    (col(T.BIGINT, unsigned=True), t("long", "BIGINT UNSIGNED"), t("string", "BIGINT UNSIGNED")),
    (col(T.FLOAT), t("float", "FLOAT"), t("float", "FLOAT")),
    (col(T.FLOAT, unsigned=True), t("float", "FLOAT"), t("float", "FLOAT")),
    (col(T.DOUBLE), t("double", "DOUBLE"), t("double", "DOUBLE")),
    (col(T.DOUBLE, unsigned=True), t("double", "DOUBLE"), t("double", "DOUBLE")),
    (
        col(T.DECIMAL, precision=20, scale=4),
        {"type": "bytes", "connect.parameters": {"tidb_type": "DECIMAL"}, "logicalType": "decimal", "precision": 20, "scale": 4},
        t("string", "DECIMAL"),
    ),
    (
        col(T.DECIMAL),
        {"type": "bytes", "connect.parameters": {"tidb_type": "DECIMAL"}, "logicalType": "decimal", "precision": 10, "scale": 0},
        t("string", "DECIMAL"),
    ),
    (
        col(T.DECIMAL, precision=10, scale=2, unsigned=True),
        {"type": "bytes", "connect.parameters": {"tidb_type": "DECIMAL"}, "logicalType": "decimal", "precision": 10, "scale": 2},
        t("string", "DECIMAL"),
    ),
    (col(T.BIT, length=64), t("bytes", "BIT", length="64"), t("bytes", "BIT", length="64")),
    (col(T.BIT, length=10), t("bytes", "BIT", length="10"), t("bytes", "BIT", length="10")),
    (col(T.BIT), t("bytes", "BIT", length="1"), t("bytes", "BIT", length="1")),
    (col(T.CHAR, length=10), t("string", "TEXT"), t("string", "TEXT")),
    (col(T.VARCHAR, length=255), t("string", "TEXT"), t("string", "TEXT")),
    (col(T.TINYTEXT), t("string", "TEXT"), t("string", "TEXT")),
    (col(T.TEXT), t("string", "TEXT"), t("string", "TEXT")),
    (col(T.MEDIUMTEXT), t("string", "TEXT"), t("string", "TEXT")),
    (col(T.LONGTEXT), t("string", "TEXT"), t("string", "TEXT")),
    (col(T.VARCHAR, length=10, binary=True), t("bytes", "BLOB"), t("bytes", "BLOB")),  # CHARACTER SET binary
    (col(T.BINARY, length=16, binary=True), t("bytes", "BLOB"), t("bytes", "BLOB")),
    (col(T.VARBINARY, length=16, binary=True), t("bytes", "BLOB"), t("bytes", "BLOB")),
    (col(T.TINYBLOB, binary=True), t("bytes", "BLOB"), t("bytes", "BLOB")),
    (col(T.BLOB, binary=True), t("bytes", "BLOB"), t("bytes", "BLOB")),
    (col(T.MEDIUMBLOB, binary=True), t("bytes", "BLOB"), t("bytes", "BLOB")),
    (col(T.LONGBLOB, binary=True), t("bytes", "BLOB"), t("bytes", "BLOB")),
    (col(T.ENUM, elements=("a,", "b")), t("string", "ENUM", allowed="a\\,,b"), t("string", "ENUM", allowed="a\\,,b")),
    (col(T.SET, elements=("x", "y", "z")), t("string", "SET", allowed="x,y,z"), t("string", "SET", allowed="x,y,z")),
    (col(T.JSON), t("string", "JSON"), t("string", "JSON")),
    (col(T.DATE), t("string", "DATE"), t("string", "DATE")),
    (col(T.DATETIME, fsp=6), t("string", "DATETIME"), t("string", "DATETIME")),
    (col(T.TIMESTAMP, fsp=3), t("string", "TIMESTAMP"), t("string", "TIMESTAMP")),
    (col(T.TIME), t("string", "TIME"), t("string", "TIME")),
    (col(T.YEAR), t("int", "YEAR"), t("int", "YEAR")),
    (col(T.VECTOR, length=3), t("string", "TiDBVECTORFloat32"), t("string", "TiDBVECTORFloat32")),
]


def test_every_type_has_a_golden_row():
    covered = {c.type for c, _, _ in TYPE_TABLE}
    assert covered == set(TYPE_RULES)


@pytest.mark.parametrize(("column", "precise", "strings"), TYPE_TABLE, ids=lambda v: v.sql_type() if isinstance(v, ColumnDef) else "")
def test_type_fragment(column, precise, strings):
    assert column_field(column, PRECISE) == {"name": "c", "type": precise}
    assert column_field(column, STRINGS) == {"name": "c", "type": strings}
    nullable = column.model_copy(update={"nullable": True})
    assert column_field(nullable, PRECISE) == {"default": None, "name": "c", "type": ["null", precise]}


# (column with default, options, expected "default" or None for no default, union order when nullable)
DEFAULTS = [
    (col(T.INT, default="5"), PRECISE, 5),
    (col(T.TINYINT, length=1, default="1"), PRECISE, 1),
    (col(T.BIGINT, unsigned=True, default="18446744073709551615"), PRECISE, -1),
    (col(T.BIGINT, unsigned=True, default="18446744073709551615"), STRINGS, "18446744073709551615"),
    (col(T.INT, unsigned=True, default="4294967295"), PRECISE, 4294967295),
    (col(T.FLOAT, default="3.14"), PRECISE, 3.140000104904175),
    (col(T.DOUBLE, default="3.14"), PRECISE, 3.14),
    (col(T.DECIMAL, precision=10, scale=2, default="1.50"), PRECISE, None),
    (col(T.DECIMAL, precision=10, scale=2, default="1.50"), STRINGS, "1.50"),
    (col(T.BIT, length=10, default=b"\x02\xaa"), PRECISE, "Aqo="),
    (col(T.BIT, length=8, default="5"), PRECISE, "BQ=="),
    (col(T.VARBINARY, length=8, binary=True, default=b"ab"), PRECISE, "YWI="),
    (col(T.BLOB, binary=True, default="ab"), PRECISE, "YWI="),
    (col(T.VARCHAR, length=8, default="null"), PRECISE, "null"),
    (col(T.VARCHAR, length=8, default="a<b>&c"), PRECISE, "a<b>&c"),
    (col(T.ENUM, elements=("a", "b"), default="b"), PRECISE, "b"),
    (col(T.SET, elements=("a", "b"), default="a,b"), PRECISE, "a,b"),
    (col(T.TIMESTAMP, default="CURRENT_TIMESTAMP"), PRECISE, "CURRENT_TIMESTAMP"),
    (col(T.DATETIME, default="2020-01-01 00:00:00"), PRECISE, "2020-01-01 00:00:00"),
    (col(T.YEAR, default="0000"), PRECISE, 0),
    (col(T.YEAR, default="2024"), PRECISE, 2024),
    (col(T.JSON, default='{"a": 1}'), PRECISE, '{"a": 1}'),
]


@pytest.mark.parametrize(("column", "options", "default"), DEFAULTS, ids=lambda v: repr(getattr(v, "default", v))[:30])
def test_defaults(column, options, default):
    block = column_field(column, options)
    if default is None:
        assert "default" not in block
        nullable = column_field(column.model_copy(update={"nullable": True}), options)
        assert nullable["default"] is None and nullable["type"][0] == "null"
        return
    assert block["default"] == default
    assert list(block) == ["default", "name", "type"]
    nullable = column_field(column.model_copy(update={"nullable": True}), options)
    assert nullable["default"] == default and nullable["type"][1] == "null"


def test_float_default_text_is_gos():
    assert gojson.dumps(column_field(col(T.FLOAT, default="3.14"))) == (
        '{"default":3.140000104904175,"name":"c","type":{"type":"float","connect.parameters":{"tidb_type":"FLOAT"}}}'
    )


def test_html_escaping_in_defaults_matches_go():
    text = gojson.dumps(column_field(col(T.VARCHAR, default="a<b>&c")))
    assert '"default":"a\\u003cb\\u003e\\u0026c"' in text


def test_bad_default_names_the_column():
    with pytest.raises(TableDefinitionError, match=r"'c'.*default"):
        column_field(col(T.INT, default="abc"), PRECISE, "db.t")


# ---- values ----------------------------------------------------------------------------------

VALUES = [
    (col(T.DECIMAL, precision=10, scale=4), "2021.1208", PRECISE, bytes.fromhex("01346608")),
    (col(T.DECIMAL, precision=12, scale=4), "-179394.2330", PRECISE, bytes.fromhex("95129cc6")),
    (col(T.DECIMAL, precision=10, scale=0), "0", PRECISE, bytes.fromhex("00")),
    (col(T.DECIMAL, precision=10, scale=0), "128", PRECISE, bytes.fromhex("0080")),
    (col(T.DECIMAL, precision=10, scale=0), "-128", PRECISE, bytes.fromhex("80")),
    (col(T.DECIMAL, precision=10, scale=0), "-129", PRECISE, bytes.fromhex("ff7f")),
    (col(T.DECIMAL, precision=10, scale=0), 128, PRECISE, bytes.fromhex("0080")),
    (col(T.DECIMAL, precision=10, scale=7), "129012.1230000", STRINGS, "129012.1230000"),
    (col(T.DECIMAL, precision=10, scale=4), "0.0000", STRINGS, "0.0000"),
    (col(T.DECIMAL, precision=10, scale=2), 5, STRINGS, "5.00"),
    (col(T.DECIMAL, precision=65, scale=30), 10**34, STRINGS, "1" + "0" * 34 + "." + "0" * 30),  # > 28 digits
    (col(T.BIT, length=10), 683, PRECISE, bytes.fromhex("02ab")),
    (col(T.BIT, length=8), 65, PRECISE, b"A"),
    (col(T.BIT, length=1), 0, PRECISE, b"\x00"),
    (col(T.BIGINT, unsigned=True), 18446744073709551615, PRECISE, -1),
    (col(T.BIGINT, unsigned=True), 9223372036854775808, PRECISE, -9223372036854775808),
    (col(T.BIGINT, unsigned=True), "18446744073709551615", STRINGS, "18446744073709551615"),
    (col(T.INT, unsigned=True), 4294967295, PRECISE, 4294967295),
    (col(T.INT), "-7", PRECISE, -7),
    (col(T.FLOAT), 3.14, PRECISE, 3.140000104904175),
    (col(T.FLOAT), float("nan"), PRECISE, 0.0),
    (col(T.DOUBLE), "1.5e20", PRECISE, 1.5e20),
    (col(T.ENUM, elements=("a", "b")), 2, PRECISE, "b"),
    (col(T.ENUM, elements=("a", "b")), "a", PRECISE, "a"),
    (col(T.SET, elements=("r", "g", "b")), 5, PRECISE, "r,b"),
    (col(T.SET, elements=("r", "g", "b")), 0, PRECISE, ""),
    (col(T.SET, elements=("r", "g", "b")), "r,g", PRECISE, "r,g"),
    (col(T.VARBINARY, binary=True), b"\x00\xff", PRECISE, b"\x00\xff"),
    (col(T.JSON), {"k": "v", "a": [1, 2]}, PRECISE, '{"k": "v", "a": [1, 2]}'),
    (col(T.YEAR), 0, PRECISE, 0),
    (col(T.TIME, fsp=3), "-838:59:59.000", PRECISE, "-838:59:59.000"),
]


@pytest.mark.parametrize(("column", "value", "options", "expected"), VALUES, ids=lambda v: repr(v)[:24])
def test_values(column, value, options, expected):
    assert to_avro_value(column, value, options) == expected


BAD_VALUES = [
    (col(T.TINYINT), 200, "out of range -128..127"),
    (col(T.TINYINT, unsigned=True), -1, "out of range 0..255"),
    (col(T.INT), "x", "expected an integer"),
    (col(T.BIT, length=4), 16, r"BIT\(4\)"),
    (col(T.ENUM, elements=("a", "b")), 0, "ENUM index"),
    (col(T.ENUM, elements=("a", "b")), "c", "allowed: 'a', 'b'"),
    (col(T.SET, elements=("a",)), "a,z", "unknown members 'z'"),
    (col(T.DECIMAL, precision=4, scale=2), "123.45", "more than 4 digits"),
    (col(T.DECIMAL, precision=10, scale=2), "abc", "decimal"),
    (col(T.YEAR), 1800, "YEAR"),
]


@pytest.mark.parametrize(("column", "value", "message"), BAD_VALUES, ids=lambda v: repr(v)[:24])
def test_bad_values_name_table_and_column(column, value, message):
    with pytest.raises(EncodingError, match=message) as info:
        to_avro_value(column, value, PRECISE, "shop.orders")
    assert "shop.orders" in str(info.value) and "'c'" in str(info.value)
    assert info.value.column == "c"
