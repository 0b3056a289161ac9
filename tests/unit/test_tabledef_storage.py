"""TiCDC storage-sink schema files: TiCDC's checksum vectors, exact bytes, parsing, write -> parse round trip."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avro_registry_sink.errors import SourceError, UnsupportedColumnType
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T
from avro_registry_sink.tabledef import (
    check_schema_file_name,
    is_database_schema,
    parse_ddl,
    parse_table_schema_file,
    schema_file_checksum,
    schema_file_name,
    table_schema_content,
    write_database_schema_file,
    write_table_schema_file,
)
from avro_registry_sink.tabledef.types import BINARY_COUNTERPART, default_display_length
from tests.support.depth import examples

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------------
# TiCDC's own test vectors (pkg/sink/cloudstorage/table_definition_test.go, cloud_storage_ddl_sink_test.go)


def test_vector_database_schema_file(tmp_path: Path) -> None:
    # TestTableDefinitionGenFilePath: {Schema: "schema1", Version: 1, TableVersion: 100} -> schema_100_3233644819
    path = write_database_schema_file("schema1", 100, tmp_path)
    assert path.relative_to(tmp_path).as_posix() == "schema1/meta/schema_100_3233644819.json"
    assert path.read_bytes() == (
        b'{\n    "Table": "",\n    "Schema": "schema1",\n    "Version": 1,\n    "TableVersion": 100,\n'
        b'    "Query": "CREATE DATABASE `schema1`",\n    "Type": 1,\n    "TableColumns": null,\n'
        b'    "TableColumnsTotal": 0\n}'
    )
    assert is_database_schema(path)
    assert schema_file_checksum(json.loads(path.read_text())) == 3233644819


def test_vector_table_with_column_defaults() -> None:
    # generateTableDef() at tiflow HEAD: Go defaults 10 and 12345678 are numbers -> schema_100_3752767265
    # (the Go test compares with JSONEq against 1.2345678e+07; Go itself writes the int 12345678)
    content = {
        "Table": "table1", "Schema": "schema1", "Version": 1, "TableVersion": 100, "Query": "", "Type": 0,
        "TableColumns": [
            {"ColumnName": "Id", "ColumnType": "INT", "ColumnPrecision": "11", "ColumnDefault": 10,
             "ColumnNullable": "false", "ColumnIsPk": "true"},
            {"ColumnName": "LastName", "ColumnType": "VARCHAR", "ColumnDefault": "Default LastName",
             "ColumnPrecision": "128", "ColumnNullable": "false"},
            {"ColumnName": "FirstName", "ColumnDefault": "Default FirstName", "ColumnType": "VARCHAR",
             "ColumnPrecision": "64"},
            {"ColumnName": "Birthday", "ColumnDefault": 1.2345678e07, "ColumnType": "DATETIME"},
        ],
        "TableColumnsTotal": 4,
    }
    assert schema_file_checksum(content) == 3752767265
    table = parse_table_schema_file(content)
    assert [c.default for c in table.columns] == ["10", "Default LastName", "Default FirstName", "12345678"]
    assert table.primary_key == ("Id",) and table.version == 100


def test_vector_table_without_defaults(tmp_path: Path) -> None:
    # generateTableDef() before defaults were added -> schema1/table1/meta/schema_100_0785427252.json
    [table] = parse_ddl("CREATE TABLE schema1.table1 (Id INT PRIMARY KEY, LastName VARCHAR(128) NOT NULL, "
                        "FirstName VARCHAR(64), Birthday DATETIME)")
    table = table.model_copy(update={"version": 100})
    assert schema_file_checksum(table) == 785427252
    path = write_table_schema_file(table, tmp_path)
    assert path.relative_to(tmp_path).as_posix() == "schema1/table1/meta/schema_100_0785427252.json"


def test_vector_ddl_sink_file_exact_bytes(tmp_path: Path) -> None:
    # TestWriteDDLEvent: "alter table test.table1 add col2 varchar(64)" -> test/table1/meta/schema_100_4192708364.json
    [table] = parse_ddl("CREATE TABLE test.table1 (col1 INT, col2 VARCHAR(5))")
    table = table.model_copy(update={"version": 100})
    path = write_table_schema_file(table, tmp_path, query="alter table test.table1 add col2 varchar(64)", ddl_type=5)
    assert path.relative_to(tmp_path).as_posix() == "test/table1/meta/schema_100_4192708364.json"
    assert schema_file_name(table) == "schema_100_4192708364.json"
    assert path.read_text(encoding="utf-8") == """{
    "Table": "table1",
    "Schema": "test",
    "Version": 1,
    "TableVersion": 100,
    "Query": "alter table test.table1 add col2 varchar(64)",
    "Type": 5,
    "TableColumns": [
        {
            "ColumnName": "col1",
            "ColumnType": "INT",
            "ColumnPrecision": "11"
        },
        {
            "ColumnName": "col2",
            "ColumnType": "VARCHAR",
            "ColumnPrecision": "5"
        }
    ],
    "TableColumnsTotal": 2
}"""
    assert parse_table_schema_file(path) == table


@pytest.mark.parametrize(
    ("type_text", "expected"),
    [  # TestTableCol: column type -> the TableCol TiCDC writes
        ("TIME(5)", {"ColumnType": "TIME", "ColumnScale": "5"}),
        ("INT(5) UNSIGNED", {"ColumnType": "INT UNSIGNED", "ColumnPrecision": "5"}),
        ("FLOAT(12,3)", {"ColumnType": "FLOAT", "ColumnPrecision": "12", "ColumnScale": "3"}),
        ("FLOAT", {"ColumnType": "FLOAT", "ColumnPrecision": "12"}),
        ("DOUBLE(7,3)", {"ColumnType": "DOUBLE", "ColumnPrecision": "7", "ColumnScale": "3"}),
        ("DOUBLE", {"ColumnType": "DOUBLE", "ColumnPrecision": "22"}),
        ("TINYINT(5)", {"ColumnType": "TINYINT", "ColumnPrecision": "5"}),
        ("SMALLINT(5)", {"ColumnType": "SMALLINT", "ColumnPrecision": "5"}),
        ("MEDIUMINT(10)", {"ColumnType": "MEDIUMINT", "ColumnPrecision": "10"}),
        ("INT", {"ColumnType": "INT", "ColumnPrecision": "11"}),
        ("BIGINT(20)", {"ColumnType": "BIGINT", "ColumnPrecision": "20"}),
        ("BIT(5)", {"ColumnType": "BIT", "ColumnPrecision": "5"}),
        ("VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", {"ColumnType": "VARCHAR", "ColumnPrecision": "128"}),
        ("CHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", {"ColumnType": "CHAR", "ColumnPrecision": "32"}),
        ("BLOB(100)", {"ColumnType": "BLOB", "ColumnPrecision": "100"}),
        ("TEXT(100)", {"ColumnType": "TEXT", "ColumnPrecision": "100"}),
        ("TINYBLOB", {"ColumnType": "TINYBLOB", "ColumnPrecision": "255"}),
        ("LONGBLOB", {"ColumnType": "LONGBLOB", "ColumnPrecision": "4294967295"}),
        ("ENUM('a')", {"ColumnType": "ENUM"}),
        ("SET('a')", {"ColumnType": "SET"}),
        ("TIMESTAMP(2)", {"ColumnType": "TIMESTAMP", "ColumnScale": "2"}),
        ("TIMESTAMP", {"ColumnType": "TIMESTAMP"}),
        ("DATETIME(2)", {"ColumnType": "DATETIME", "ColumnScale": "2"}),
        ("DATE", {"ColumnType": "DATE"}),
        ("YEAR(4)", {"ColumnType": "YEAR", "ColumnPrecision": "4"}),
        ("YEAR", {"ColumnType": "YEAR", "ColumnPrecision": "4"}),
        # and the reference's defaults: unsigned widths one less, binary charset types, DECIMAL always both
        ("TINYINT UNSIGNED", {"ColumnType": "TINYINT UNSIGNED", "ColumnPrecision": "3"}),
        ("BIGINT UNSIGNED", {"ColumnType": "BIGINT UNSIGNED", "ColumnPrecision": "20"}),
        ("BOOL", {"ColumnType": "TINYINT", "ColumnPrecision": "1"}),
        ("DECIMAL", {"ColumnType": "DECIMAL", "ColumnPrecision": "10", "ColumnScale": "0"}),
        ("DECIMAL(20,6) UNSIGNED", {"ColumnType": "DECIMAL UNSIGNED", "ColumnPrecision": "20", "ColumnScale": "6"}),
        ("VARCHAR(16) CHARACTER SET binary", {"ColumnType": "VARBINARY", "ColumnPrecision": "16"}),
        ("TEXT", {"ColumnType": "TEXT", "ColumnPrecision": "65535"}),
        ("CHAR", {"ColumnType": "CHAR", "ColumnPrecision": "1"}),
        ("JSON", {"ColumnType": "JSON"}),
        ("VECTOR(3)", {"ColumnType": "VECTOR"}),
    ],
)
def test_table_col_per_type(type_text: str, expected: dict) -> None:
    [table] = parse_ddl(f"CREATE TABLE s.t (c {type_text})")
    [column] = table_schema_content(table)["TableColumns"]
    assert column == {"ColumnName": "c", **expected}
    assert list(column) == [k for k in ("ColumnName", "ColumnType", "ColumnDefault", "ColumnPrecision",
                                        "ColumnScale", "ColumnNullable", "ColumnIsPk") if k in column]


# --------------------------------------------------------------------------------------------------
# Hand-written TiCDC examples


def test_parse_reference_example_customers_after_add_column() -> None:
    text = """{
    "Table": "customers",
    "Schema": "crm",
    "Version": 1,
    "TableVersion": 449109137817600001,
    "Query": "ALTER TABLE crm.customers ADD COLUMN tier VARCHAR(16) NOT NULL DEFAULT 'basic'",
    "Type": 5,
    "TableColumns": [
        {"ColumnName": "id", "ColumnType": "BIGINT", "ColumnPrecision": "20", "ColumnNullable": "false",
         "ColumnIsPk": "true"},
        {"ColumnName": "email", "ColumnType": "VARCHAR", "ColumnPrecision": "128", "ColumnNullable": "false"},
        {"ColumnName": "balance", "ColumnType": "DECIMAL UNSIGNED", "ColumnPrecision": "12", "ColumnScale": "2",
         "ColumnDefault": "0.00"},
        {"ColumnName": "avatar", "ColumnType": "BLOB", "ColumnPrecision": "65535"},
        {"ColumnName": "tier", "ColumnType": "VARCHAR", "ColumnDefault": "basic", "ColumnPrecision": "16",
         "ColumnNullable": "false"}
    ],
    "TableColumnsTotal": 5
}"""
    table = parse_table_schema_file(text)
    assert table == TableDef(
        schema_name="crm", table="customers", version=449109137817600001, primary_key=("id",),
        columns=(
            ColumnDef(name="id", type=T.BIGINT, nullable=False),
            ColumnDef(name="email", type=T.VARCHAR, length=128, nullable=False),
            ColumnDef(name="balance", type=T.DECIMAL, unsigned=True, precision=12, scale=2, default="0.00"),
            ColumnDef(name="avatar", type=T.BLOB, binary=True),
            ColumnDef(name="tier", type=T.VARCHAR, length=16, nullable=False, default="basic"),
        ),
    )
    assert [c.name for c in table.handle_key_columns()] == ["id"]


def test_parse_design_doc_example_with_column_length_and_string_total() -> None:
    # the design doc's format (ColumnLength, "TableColumnsTotal": "5") is read too, although TiCDC writes neither
    text = """{
      "Table": "table1", "Schema": "schema1", "Version": 1, "TableVersion": 441349361156227074,
      "Query": "ALTER TABLE schema1.table1 ADD OfficeLocation blob(20)", "Type": 5,
      "TableColumns": [
        {"ColumnName": "Id", "ColumnType": "INT", "ColumnNullable": "false", "ColumnIsPk": "true"},
        {"ColumnName": "LastName", "ColumnType": "CHAR", "ColumnLength": "20"},
        {"ColumnName": "FirstName", "ColumnType": "VARCHAR", "ColumnLength": "30"},
        {"ColumnName": "HireDate", "ColumnType": "DATETIME"},
        {"ColumnName": "OfficeLocation", "ColumnType": "BLOB", "ColumnLength": "20"}
      ],
      "TableColumnsTotal": "5"
    }"""
    table = parse_table_schema_file(text)
    assert [(c.name, c.type, c.length, c.binary) for c in table.columns] == [
        ("Id", T.INT, None, False), ("LastName", T.CHAR, 20, False), ("FirstName", T.VARCHAR, 30, False),
        ("HireDate", T.DATETIME, None, False), ("OfficeLocation", T.BLOB, 20, True),
    ]


def test_parse_types_as_ticdc_names_them() -> None:
    columns = [
        {"ColumnName": "a", "ColumnType": "VAR_STRING", "ColumnPrecision": "64"},
        {"ColumnName": "b", "ColumnType": "VARBINARY", "ColumnPrecision": "16", "ColumnDefault": "ab"},
        {"ColumnName": "c", "ColumnType": "BIT", "ColumnPrecision": "10", "ColumnDefault": "\u0002\u0001"},
        {"ColumnName": "d", "ColumnType": "INT UNSIGNED", "ColumnPrecision": "10"},
        {"ColumnName": "e", "ColumnType": "FLOAT", "ColumnPrecision": "5"},  # FLOAT(p) leaves only a width
        {"ColumnName": "f", "ColumnType": "DOUBLE UNSIGNED", "ColumnPrecision": "22"},
        {"ColumnName": "g", "ColumnType": "ENUM", "ColumnDefault": "x"},
        {"ColumnName": "h", "ColumnType": "TIMESTAMP", "ColumnScale": "6",
         "ColumnDefault": "CURRENT_TIMESTAMP(6)"},
        {"ColumnName": "i", "ColumnType": "YEAR", "ColumnPrecision": "4", "ColumnDefault": "2024"},
        {"ColumnName": "j", "ColumnType": "TINYINT", "ColumnPrecision": "1"},
        {"ColumnName": "k", "ColumnType": "VECTOR"},
        {"ColumnName": "l", "ColumnType": "LONGTEXT", "ColumnPrecision": "4294967295"},
    ]
    table = parse_table_schema_file({"Table": "t", "Schema": "s", "TableVersion": 1, "TableColumns": columns,
                                     "TableColumnsTotal": len(columns)})
    got = {c.name: (c.type, c.unsigned, c.length, c.precision, c.scale, c.fsp, c.binary, c.default, c.elements)
           for c in table.columns}
    assert got == {
        "a": (T.VARCHAR, False, 64, None, None, None, False, None, ()),
        "b": (T.VARBINARY, False, 16, None, None, None, True, b"ab", ()),
        "c": (T.BIT, False, 10, None, None, None, False, b"\x02\x01", ()),
        "d": (T.INT, True, None, None, None, None, False, None, ()),
        "e": (T.FLOAT, False, None, None, None, None, False, None, ()),
        "f": (T.DOUBLE, True, None, None, None, None, False, None, ()),
        "g": (T.ENUM, False, None, None, None, None, False, "x", ()),  # members are not in schema files
        "h": (T.TIMESTAMP, False, None, None, None, 6, False, "CURRENT_TIMESTAMP(6)", ()),
        "i": (T.YEAR, False, None, None, None, None, False, "2024", ()),
        "j": (T.TINYINT, False, 1, None, None, None, False, None, ()),
        "k": (T.VECTOR, False, None, None, None, None, False, None, ()),
        "l": (T.LONGTEXT, False, None, None, None, None, False, None, ()),
    }
    assert all(c.nullable for c in table.columns) and table.unique_keys == ()


@pytest.mark.parametrize("path", sorted((ROOT / "tests" / "data" / "inputs").rglob("schema_*_*.json")),
                         ids=lambda p: p.name)
def test_checked_in_schema_files_are_named_by_their_checksum(path: Path) -> None:
    version, crc = path.stem.split("_")[1:]
    content = json.loads(path.read_text(encoding="utf-8"))
    assert schema_file_checksum(content) == int(crc)
    assert content["TableVersion"] == int(version)
    if not is_database_schema(path):
        table = parse_table_schema_file(path)
        assert table.version == int(version)
        # and written back, TiCDC's bytes again
        content_again = table_schema_content(table, query=content["Query"], ddl_type=content["Type"])
        assert content_again == content


# --------------------------------------------------------------------------------------------------
# Writing: exact bytes


def test_write_escapes_like_go_and_keeps_field_order(tmp_path: Path) -> None:
    [table] = parse_ddl("""CREATE TABLE `s`.`t<&>` (
        `id` BIGINT UNSIGNED NOT NULL PRIMARY KEY,
        `note` VARCHAR(8) NOT NULL DEFAULT 'a<b>&"c"\\\\ é 注\\n',
        `bits` BIT(16) DEFAULT b'1111111111111111',
        `bin` VARBINARY(4) DEFAULT x'41ff42')""")
    path = write_table_schema_file(table.model_copy(update={"version": 7}), tmp_path, query="q <&>", ddl_type=3)
    text = path.read_bytes().decode("utf-8")
    assert text == (
        '{\n    "Table": "t\\u003c\\u0026\\u003e",\n    "Schema": "s",\n    "Version": 1,\n    "TableVersion": 7,\n'
        '    "Query": "q \\u003c\\u0026\\u003e",\n    "Type": 3,\n    "TableColumns": [\n'
        '        {\n            "ColumnName": "id",\n            "ColumnType": "BIGINT UNSIGNED",\n'
        '            "ColumnPrecision": "20",\n            "ColumnNullable": "false",\n'
        '            "ColumnIsPk": "true"\n        },\n'
        '        {\n            "ColumnName": "note",\n            "ColumnType": "VARCHAR",\n'
        '            "ColumnDefault": "a\\u003cb\\u003e\\u0026\\"c\\"\\\\ é 注\\n",\n'
        '            "ColumnPrecision": "8",\n            "ColumnNullable": "false"\n        },\n'
        '        {\n            "ColumnName": "bits",\n            "ColumnType": "BIT",\n'
        '            "ColumnDefault": "\ufffd\ufffd",\n            "ColumnPrecision": "16"\n        },\n'
        '        {\n            "ColumnName": "bin",\n            "ColumnType": "VARBINARY",\n'
        '            "ColumnDefault": "A\ufffdB",\n            "ColumnPrecision": "4"\n        }\n'
        '    ],\n    "TableColumnsTotal": 4\n}'
    )
    assert path.parent == tmp_path / "s" / "t<&>" / "meta"
    # raw bytes that are not UTF-8 reach the file as U+FFFD (Go string marshalling): they cannot come back
    back = parse_table_schema_file(path)
    assert back.column("note").default == table.column("note").default
    assert back.column("bin").default == "A\ufffdB".encode()


def test_checksum_ignores_query_type_version_and_column_order() -> None:
    [table] = parse_ddl("CREATE TABLE s.t (b INT, a VARCHAR(3) NOT NULL, c DATETIME(3), PRIMARY KEY (a))")
    content = table_schema_content(table.model_copy(update={"version": 9}), query="x", ddl_type=5)
    reordered = dict(content, TableColumns=list(reversed(content["TableColumns"])), Query="", Type=0,
                     TableVersion=1)
    assert schema_file_checksum(content) == schema_file_checksum(reordered) == schema_file_checksum(table)
    changed = dict(content, TableColumns=[dict(content["TableColumns"][0], ColumnNullable="false"),
                                          *content["TableColumns"][1:]])
    assert schema_file_checksum(changed) != schema_file_checksum(content)


# --------------------------------------------------------------------------------------------------
# Round trip: write -> parse gives the table back, less what schema files do not carry


def after_storage(table: TableDef) -> TableDef:
    """What a schema file keeps of a table."""
    columns = []
    for c in table.columns:
        type_ = BINARY_COUNTERPART.get(c.type, c.type) if c.binary else c.type
        kw: dict = {"name": c.name, "type": type_, "unsigned": c.unsigned, "nullable": c.nullable,
                    "binary": c.binary, "default": c.default}
        if type_ is T.DECIMAL:
            kw["precision"] = 10 if c.precision is None else c.precision
            kw["scale"] = c.scale or 0
        elif type_ in (T.FLOAT, T.DOUBLE) and c.scale:
            kw["precision"], kw["scale"] = c.precision, c.scale
        elif type_ in (T.DATETIME, T.TIMESTAMP, T.TIME):
            kw["fsp"] = c.fsp or None
        elif type_ in (T.VARCHAR, T.VARBINARY):
            kw["length"] = 5 if c.length is None else c.length
        elif default_display_length(type_) is not None and type_ not in (T.FLOAT, T.DOUBLE):
            kw["length"] = None if c.length == default_display_length(type_, c.unsigned) else c.length
        columns.append(ColumnDef(**kw))
    pk = {k.lower() for k in table.primary_key}
    return TableDef(schema_name=table.schema_name, table=table.table, columns=tuple(columns),
                    primary_key=tuple(c.name for c in table.columns if c.name.lower() in pk), version=table.version)


@pytest.mark.parametrize("sql", ["shop.sql", "all_types.sql"])
def test_round_trip_example_schemas(sql: str, tmp_path: Path) -> None:
    for i, table in enumerate(parse_ddl((ROOT / "schemas" / sql).read_text(encoding="utf-8"))):
        table = table.model_copy(update={"version": 449118600000000000 + i})
        path = write_table_schema_file(table, tmp_path)
        assert path.name == schema_file_name(table)
        assert parse_table_schema_file(path) == after_storage(table)
        assert parse_table_schema_file(path.read_text(encoding="utf-8")) == after_storage(table)


_TYPES = [t for t in T if t is not T.VECTOR]


@st.composite
def storage_tables(draw: st.DrawFn) -> TableDef:
    names = draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=6, unique_by=str.lower))
    columns = []
    for name in names:
        type_ = draw(st.sampled_from(_TYPES))
        kw: dict = {"name": name, "type": type_, "nullable": draw(st.booleans())}
        if type_ in (T.TINYINT, T.SMALLINT, T.MEDIUMINT, T.INT, T.BIGINT, T.FLOAT, T.DOUBLE, T.DECIMAL):
            kw["unsigned"] = draw(st.booleans())
        if type_ is T.DECIMAL:
            kw["precision"] = p = draw(st.integers(1, 65))
            kw["scale"] = draw(st.integers(0, min(p, 30)))
        elif type_ in (T.FLOAT, T.DOUBLE) and draw(st.booleans()):
            kw["precision"] = draw(st.integers(1, 60))
            kw["scale"] = draw(st.integers(0, 30))
        elif type_ in (T.DATETIME, T.TIMESTAMP, T.TIME):
            kw["fsp"] = draw(st.none() | st.integers(0, 6))
        elif default_display_length(type_) is not None:
            kw["length"] = draw(st.none() | st.integers(1, 70000))
        if type_ in (T.BINARY, T.VARBINARY, T.TINYBLOB, T.BLOB, T.MEDIUMBLOB, T.LONGBLOB) or (
                type_ in BINARY_COUNTERPART and draw(st.booleans())):
            kw["binary"] = True
        if draw(st.booleans()):
            is_bytes = kw.get("binary") or type_ is T.BIT
            kw["default"] = draw(st.text(max_size=5)).encode() if is_bytes else draw(st.text(max_size=5))
        columns.append(ColumnDef(**kw))
    pk = draw(st.lists(st.sampled_from(names), unique=True, max_size=2))
    columns = [c.model_copy(update={"nullable": False}) if c.name in pk else c for c in columns]
    return TableDef(schema_name=draw(st.text(min_size=1, max_size=5)), table=draw(st.text(min_size=1, max_size=5)),
                    columns=tuple(columns), primary_key=tuple(pk), version=draw(st.integers(0, 2**64 - 1)))


@settings(max_examples=examples(200), deadline=None)
@given(storage_tables())
def test_round_trip_random_tables(table: TableDef) -> None:
    content = table_schema_content(table)
    from avro_registry_sink.tabledef.storage import _marshal_indent

    text = _marshal_indent(content)
    assert json.loads(text) == content
    assert parse_table_schema_file(text) == after_storage(table)
    assert schema_file_checksum(json.loads(text)) == schema_file_checksum(table)


# --------------------------------------------------------------------------------------------------
# Errors


def test_database_schema_file_is_recognised_and_not_a_table(tmp_path: Path) -> None:
    path = write_database_schema_file("shop", 5, tmp_path)
    assert is_database_schema(path) and is_database_schema(path.read_text())
    with pytest.raises(SourceError, match="database schema file of 'shop'"):
        parse_table_schema_file(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a JSON schema file"),
        ("[1]", "holds a JSON object"),
        ({"Table": "t", "Schema": "s", "TableColumns": [], "TableColumnsTotal": 0}, "has no TableColumns"),
        ({"Table": "t", "Schema": "s", "TableColumns": [{"ColumnName": "a", "ColumnType": "INT"}],
          "TableColumnsTotal": 2}, "TableColumnsTotal of s.t is 2 but TableColumns holds 1"),
        ({"Table": "t", "Schema": "s", "TableColumns": [{"ColumnName": "a"}]}, "ColumnName and ColumnType"),
        ({"Table": "t", "Schema": "s", "TableColumns": [{"ColumnName": "a", "ColumnType": "INT",
                                                        "ColumnPrecision": "x"}]}, "is not an integer"),
        ({"Table": 1, "Schema": "s"}, "string Schema and Table"),
    ],
)
def test_malformed_files(content: object, message: str) -> None:
    with pytest.raises(SourceError, match=message):
        parse_table_schema_file(content)  # type: ignore[arg-type]


def test_unknown_column_type_and_unreadable_path(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedColumnType, match="did you mean 'VARCHAR'"):
        parse_table_schema_file({"Table": "t", "Schema": "s",
                                 "TableColumns": [{"ColumnName": "a", "ColumnType": "VARCHARR"}]})
    with pytest.raises(SourceError, match="cannot read the schema file"):
        parse_table_schema_file(tmp_path / "missing.json")


# --------------------------------------------------------------------------------------------------
# A file's content against the version and checksum in its name (TiCDC's consumer checks both)

# TiCDC's test vectors, as files: name -> content (Go's bytes; 1.2345678e+07 as the Go test's JSON has it)
VECTOR_FILES = {
    "schema1/meta/schema_100_3233644819.json": """{
    "Table": "",
    "Schema": "schema1",
    "Version": 1,
    "TableVersion": 100,
    "Query": "CREATE DATABASE `schema1`",
    "Type": 1,
    "TableColumns": null,
    "TableColumnsTotal": 0
}""",
    "schema1/table1/meta/schema_100_3752767265.json": """{
    "Table": "table1",
    "Schema": "schema1",
    "Version": 1,
    "TableVersion": 100,
    "Query": "",
    "Type": 0,
    "TableColumns": [
        {"ColumnName": "Id", "ColumnType": "INT", "ColumnDefault": 10, "ColumnPrecision": "11",
         "ColumnNullable": "false", "ColumnIsPk": "true"},
        {"ColumnName": "LastName", "ColumnType": "VARCHAR", "ColumnDefault": "Default LastName",
         "ColumnPrecision": "128", "ColumnNullable": "false"},
        {"ColumnName": "FirstName", "ColumnType": "VARCHAR", "ColumnDefault": "Default FirstName",
         "ColumnPrecision": "64"},
        {"ColumnName": "Birthday", "ColumnType": "DATETIME", "ColumnDefault": 1.2345678e+07}
    ],
    "TableColumnsTotal": 4
}""",
    "test/table1/meta/schema_100_4192708364.json": """{
    "Table": "table1",
    "Schema": "test",
    "Version": 1,
    "TableVersion": 100,
    "Query": "alter table test.table1 add col2 varchar(64)",
    "Type": 5,
    "TableColumns": [
        {"ColumnName": "col1", "ColumnType": "INT", "ColumnPrecision": "11"},
        {"ColumnName": "col2", "ColumnType": "VARCHAR", "ColumnPrecision": "5"}
    ],
    "TableColumnsTotal": 2
}""",
}


def _written(tmp_path: Path, relpath: str, text: str) -> Path:
    path = tmp_path / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("relpath", sorted(VECTOR_FILES))
def test_ticdc_vector_files_pass_the_name_check(tmp_path: Path, relpath: str) -> None:
    text = VECTOR_FILES[relpath]
    check_schema_file_name(relpath, json.loads(text))  # no error
    path = _written(tmp_path, relpath, text)
    if not is_database_schema(path):
        assert parse_table_schema_file(path).version == 100


def test_a_file_written_as_ticdc_does_passes(tmp_path: Path) -> None:
    [table] = parse_ddl("CREATE TABLE s.t (id INT PRIMARY KEY, note VARCHAR(8) DEFAULT 'a<&>\\b\\f')")
    path = write_table_schema_file(table.model_copy(update={"version": 7}), tmp_path, query="q", ddl_type=3)
    assert parse_table_schema_file(path).version == 7
    check_schema_file_name(path.name, json.loads(path.read_text(encoding="utf-8")))
    check_schema_file_name("notes.json", {})  # not a schema file name: nothing to check


def test_a_column_renamed_in_place_is_refused_with_what_to_do(tmp_path: Path) -> None:
    name = "test/table1/meta/schema_100_4192708364.json"
    edited = VECTOR_FILES[name].replace('"col2"', '"col_two"')
    path = _written(tmp_path, name, edited)
    actual = schema_file_checksum(json.loads(edited))
    assert actual != 4192708364
    with pytest.raises(SourceError) as caught:
        parse_table_schema_file(path)
    message = caught.value.message
    assert message.startswith(f"{path}: refused")
    assert "the checksum in its name is 4192708364" in message and f"its content's checksum is {actual:010d}" in message
    assert "changed after TiCDC wrote it" in message and "not written by TiCDC" in message
    assert "Restore the file TiCDC wrote" in message and f"its correct name schema_100_{actual:010d}.json" in message
    assert caught.value.context["reason"] == "checksum mismatch"
    # under the name the message gives, the edited file is accepted
    renamed = path.with_name(f"schema_100_{actual:010d}.json")
    path.rename(renamed)
    assert [c.name for c in parse_table_schema_file(renamed).columns] == ["col1", "col_two"]


def test_a_wrong_table_version_is_refused(tmp_path: Path) -> None:
    name = "test/table1/meta/schema_100_4192708364.json"
    path = _written(tmp_path, name, VECTOR_FILES[name].replace('"TableVersion": 100', '"TableVersion": 101'))
    with pytest.raises(SourceError, match="says table version 100 but its TableVersion is 101") as caught:
        parse_table_schema_file(path)
    assert caught.value.context["reason"] == "version mismatch"
    with pytest.raises(SourceError, match="TableVersion is None"):
        check_schema_file_name("schema_100_4192708364.json", {"Table": "table1", "Schema": "test"})


def test_the_escapes_of_go_before_1_22_are_accepted_too() -> None:
    # Go < 1.22 wrote a backspace / form feed as \u0008 / \u000c, Go 1.22 on as \b / \f: TiCDC releases differ
    content = {"Table": "t", "Schema": "s", "TableVersion": 5, "TableColumnsTotal": 1,
               "TableColumns": [{"ColumnName": "c", "ColumnType": "VARCHAR", "ColumnDefault": "a\bb\fc"}]}
    new_go = schema_file_checksum(content)
    text = json.dumps({"Table": "t", "Schema": "s", "Version": 0, "TableColumns": [
        {"ColumnName": "c", "ColumnType": "VARCHAR", "ColumnDefault": "a\bb\fc"}], "TableColumnsTotal": 1},
        indent=4)
    assert "\\b" in text and zlib.crc32(text.encode()) == new_go
    old_go = zlib.crc32(text.replace("\\b", "\\u0008").replace("\\f", "\\u000c").encode())
    for crc in (new_go, old_go):
        check_schema_file_name(f"schema_5_{crc:010d}.json", content)
    with pytest.raises(SourceError, match=r"checksum mismatch|refused"):
        check_schema_file_name(f"schema_5_{(old_go + 1) % 2**32:010d}.json", content)


def test_float_defaults_are_hashed_as_go_writes_them() -> None:
    # Go writes 1e-05 as 0.00001 and 1e-07 as 1e-7 (Python's repr: 1e-05, 1e-07)
    content = {"Table": "t", "Schema": "s", "TableVersion": 5, "TableColumnsTotal": 2,
               "TableColumns": [{"ColumnName": "a", "ColumnType": "DOUBLE", "ColumnDefault": 1e-05},
                                {"ColumnName": "b", "ColumnType": "DOUBLE", "ColumnDefault": 1.5e-07}]}
    go_text = ('{\n    "Table": "t",\n    "Schema": "s",\n    "Version": 0,\n    "TableColumns": [\n'
               '        {\n            "ColumnName": "a",\n            "ColumnType": "DOUBLE",\n'
               '            "ColumnDefault": 0.00001\n        },\n'
               '        {\n            "ColumnName": "b",\n            "ColumnType": "DOUBLE",\n'
               '            "ColumnDefault": 1.5e-7\n        }\n    ],\n    "TableColumnsTotal": 2\n}')
    assert schema_file_checksum(content) == zlib.crc32(go_text.encode())
