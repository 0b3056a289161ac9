"""Record shape, names, handle keys and extension fields."""

from __future__ import annotations

import json

import pytest

from avro_registry_sink.errors import DuplicateFieldName, NoHandleKey
from avro_registry_sink.schema import gojson
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.schema.naming import record_namespace, sanitize_name
from avro_registry_sink.settings.config import EncodingOptions
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T


def c(name, type_=T.INT, **kw):
    return ColumnDef(name=name, type=type_, **kw)


def table(columns, pk=(), uks=(), schema="test", name="t"):
    return TableDef(schema_name=schema, table=name, columns=tuple(columns), primary_key=tuple(pk), unique_keys=tuple(uks))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1ColumnNameStartWithNumber", "_1ColumnNameStartWithNumber"),
        ("A.B", "A_B"),
        ("columnNameWith中文", "columnNameWith__"),
        ("normal_name", "normal_name"),
        ("-x", "_x"),
        ("", ""),
    ],
)
def test_sanitize_name(raw, expected):
    assert sanitize_name(raw) == expected


@pytest.mark.parametrize(
    ("ns", "schema", "expected"),
    [("1Namespace", "1Schema", "_1Namespace._1Schema"), ("N-amespace", "S.chema", "N_amespace.S_chema"), ("normalNamespace", "", "normalNamespace")],
)
def test_namespace(ns, schema, expected):
    assert record_namespace(schema, ns) == expected


def test_record_name_and_namespace_shared_by_key_and_value():
    s = derive_schemas(table([c("id", nullable=False)], pk=["id"], schema="my-db", name="order.items"))
    for schema in (s.key_schema, s.value_schema):
        assert list(schema) == ["type", "name", "namespace", "fields"]
        assert schema["name"] == "order_items"
        assert schema["namespace"] == "default.my_db"


def test_key_is_primary_key_in_table_column_order():
    t = table([c("b", nullable=False), c("x"), c("a", nullable=False)], pk=["a", "b"])
    s = derive_schemas(t)
    assert [f["name"] for f in s.key_schema["fields"]] == ["b", "a"]


def test_key_falls_back_to_smallest_not_null_unique_index_first_created():
    t = table(
        [c("a", nullable=False), c("b", nullable=False), c("n"), c("d", nullable=False), c("e", nullable=False)],
        uks=[("a", "b"), ("n",), ("e",), ("d",)],
    )
    # ("n",) has a nullable column; ("e",) and ("d",) tie on length: the first created wins
    assert [f["name"] for f in derive_schemas(t).key_schema["fields"]] == ["e"]


def test_no_handle_key_is_rejected_with_the_table_name():
    with pytest.raises(NoHandleKey, match=r"test.t"):
        derive_schemas(table([c("a"), c("b", nullable=False)], uks=[("a",)]))


def test_key_fields_keep_defaults():
    t = table([c("id", nullable=False, default="0")], pk=["id"])
    assert derive_schemas(t).key_schema["fields"][0]["default"] == 0


def test_extension_fields_appended_to_values_only():
    t = table([c("id", nullable=False)], pk=["id"])
    s = derive_schemas(t, EncodingOptions(enable_tidb_extension=True))
    assert s.value_schema["fields"][1:] == [
        {"default": "", "name": "_tidb_op", "type": "string"},
        {"default": 0, "name": "_tidb_commit_ts", "type": "long"},
        {"default": 0, "name": "_tidb_commit_physical_time", "type": "long"},
    ]
    assert len(s.key_schema["fields"]) == 1
    assert len(derive_schemas(t).value_schema["fields"]) == 1


def test_columns_that_sanitise_to_one_name_are_an_error():
    with pytest.raises(DuplicateFieldName, match=r"'a\.b' and 'a-b'.*'a_b'"):
        derive_schemas(table([c("id", nullable=False), c("a.b"), c("a-b")], pk=["id"]))


def test_column_named_like_an_extension_field_conflicts_only_with_extension_on():
    t = table([c("id", nullable=False), c("_tidb_op", T.VARCHAR)], pk=["id"])
    derive_schemas(t)
    with pytest.raises(DuplicateFieldName, match="_tidb_op"):
        derive_schemas(t, EncodingOptions(enable_tidb_extension=True))


def test_schema_text_is_go_compact_and_parses():
    t = table([c("id", nullable=False), c("name", T.VARCHAR, default="<x>")], pk=["id"])
    s = derive_schemas(t)
    assert s.value_json == gojson.dumps(s.value_schema)
    assert json.loads(s.value_json) == s.value_schema
    assert " " not in s.value_json and "\\u003cx\\u003e" in s.value_json


def test_fingerprint_changes_with_any_schema_detail():
    base = table([c("id", nullable=False), c("v", T.VARCHAR)], pk=["id"])
    other_default = table([c("id", nullable=False), c("v", T.VARCHAR, default="x")], pk=["id"])
    assert derive_schemas(base).fingerprint == derive_schemas(base).fingerprint
    assert derive_schemas(base).fingerprint != derive_schemas(other_default).fingerprint
    ext = derive_schemas(base, EncodingOptions(enable_tidb_extension=True))
    assert ext.fingerprint != derive_schemas(base).fingerprint


def test_sql_type_escapes_enum_members_as_mysql_prints_them():
    from avro_registry_sink.table import ColumnDef, MySQLType

    col = ColumnDef(name="e", type=MySQLType.ENUM, elements=("it's", "a\\b", "x,y"))
    assert col.sql_type() == "enum('it''s','a\\\\b','x,y')"
    assert ColumnDef(name="d", type=MySQLType.DOUBLE, precision=10, scale=2, unsigned=True).sql_type() == "double(10,2) unsigned"
