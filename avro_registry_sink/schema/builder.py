"""Table definition -> Avro key and value record schemas, exactly as TiCDC's avro protocol writes them.

Shape (``shared/reference/ticdc-avro.md`` §3)::

    record : {"type":"record","name":<table>,"namespace":"default.<schema>","fields":[...]}
    column : {"name":n,"type":T}                         NOT NULL, no default
             {"default":d,"name":n,"type":T}             NOT NULL with a default
             {"default":null,"name":n,"type":["null",T]} nullable, no default (or precise decimal)
             {"default":d,"name":n,"type":[T,"null"]}    nullable with a non-NULL default

The key schema has the same record name and namespace and holds the handle-key columns in table
column order. The schema text is Go-compact JSON (:mod:`.gojson`), the text TiCDC registers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from avro_registry_sink.errors import DuplicateFieldName
from avro_registry_sink.schema import gojson
from avro_registry_sink.schema.naming import record_namespace, sanitize_name
from avro_registry_sink.settings.config import DEFAULT_ENCODING, EncodingOptions
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.typemap.mysql import NO_DEFAULT, avro_default, avro_type

#: Fields appended to every value when ``enable-tidb-extension`` is on (never to keys or deletes).
EXTENSION_FIELDS: tuple[dict[str, Any], ...] = (
    {"default": "", "name": "_tidb_op", "type": "string"},
    {"default": 0, "name": "_tidb_commit_ts", "type": "long"},
    {"default": 0, "name": "_tidb_commit_physical_time", "type": "long"},
)


def column_field(col: ColumnDef, options: EncodingOptions = DEFAULT_ENCODING, table: str | None = None) -> dict[str, Any]:
    """The ColumnValueBlock of one column."""
    type_ = avro_type(col, options)
    default = avro_default(col, options, table)
    name = sanitize_name(col.name)
    if col.nullable:
        if default is NO_DEFAULT:
            return {"default": None, "name": name, "type": ["null", type_]}
        return {"default": default, "name": name, "type": [type_, "null"]}
    if default is NO_DEFAULT:
        return {"name": name, "type": type_}
    return {"default": default, "name": name, "type": type_}


def _record(table: TableDef, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": sanitize_name(table.table),
        "namespace": record_namespace(table.schema_name),
        "fields": fields,
    }


def _check_unique_names(table: TableDef, columns: tuple[ColumnDef, ...], extra: tuple[str, ...] = ()) -> None:
    seen: dict[str, str] = {}
    for source in [c.name for c in columns] + list(extra):
        name = sanitize_name(source)
        if name in seen:
            raise DuplicateFieldName(
                f"Table {table.qualified_name}: columns {seen[name]!r} and {source!r} both become the Avro "
                f"field name {name!r} (characters outside [A-Za-z0-9_] turn into '_'); rename one of them. "
                "TiCDC does not detect this and fails later in its Avro codec.",
                table=table.qualified_name,
                column=source,
                field=name,
            )
        seen[name] = source


def derive_value_schema(table: TableDef, options: EncodingOptions = DEFAULT_ENCODING) -> dict[str, Any]:
    """The value record: every column in table order, plus the extension fields when enabled."""
    extra = tuple(f["name"] for f in EXTENSION_FIELDS) if options.enable_tidb_extension else ()
    _check_unique_names(table, table.columns, extra)
    fields = [column_field(c, options, table.qualified_name) for c in table.columns]
    if options.enable_tidb_extension:
        fields.extend(dict(f) for f in EXTENSION_FIELDS)
    return _record(table, fields)


def derive_key_schema(table: TableDef, options: EncodingOptions = DEFAULT_ENCODING) -> dict[str, Any]:
    """The key record over the handle-key columns (raises ``NoHandleKey`` when the table has none)."""
    columns = table.handle_key_columns()
    _check_unique_names(table, columns)
    return _record(table, [column_field(c, options, table.qualified_name) for c in columns])


@dataclass(frozen=True)
class TableSchemas:
    """Key and value schemas of one table version, as objects and as the exact text to register."""

    table: TableDef
    options: EncodingOptions
    key_schema: dict[str, Any] | None
    value_schema: dict[str, Any]
    key_json: str | None = field(repr=False)
    value_json: str = field(repr=False)
    fingerprint: str

    @property
    def key_columns(self) -> tuple[ColumnDef, ...]:
        return self.table.handle_key_columns() if self.key_schema is not None else ()


def schema_fingerprint(key_json: str | None, value_json: str) -> str:
    """SHA-256 over the full schema texts (keys, defaults and ``connect.parameters`` included).

    Parsing Canonical Form would strip defaults, logical types and custom properties, so it cannot
    tell the changes Confluent registers as new versions; the exact text can.
    """
    digest = hashlib.sha256()
    digest.update((key_json or "").encode())
    digest.update(b"\n")
    digest.update(value_json.encode())
    return digest.hexdigest()


def derive_schemas(table: TableDef, options: EncodingOptions = DEFAULT_ENCODING, *, require_key: bool = True) -> TableSchemas:
    """Derive both schemas of a table.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
    >>> t = TableDef(schema_name="test", table="t", primary_key=("id",),
    ...              columns=(ColumnDef(name="id", type=MySQLType.INT, nullable=False),))
    >>> derive_schemas(t).key_json
    '{"type":"record","name":"t","namespace":"default.test","fields":[{"name":"id","type":{"type":"int","connect.parameters":{"tidb_type":"INT"}}}]}'
    """
    value_schema = derive_value_schema(table, options)
    key_schema: dict[str, Any] | None
    if require_key or table.handle_key_names() is not None:
        key_schema = derive_key_schema(table, options)
    else:
        key_schema = None
    key_json = gojson.dumps(key_schema) if key_schema is not None else None
    value_json = gojson.dumps(value_schema)
    return TableSchemas(
        table=table,
        options=options,
        key_schema=key_schema,
        value_schema=value_schema,
        key_json=key_json,
        value_json=value_json,
        fingerprint=schema_fingerprint(key_json, value_json),
    )
