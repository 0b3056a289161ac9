"""A table definition from a canal-json DML message (TiCDC's or Alibaba Canal's): best effort.

A message carries ``database``, ``table``, ``pkNames`` and, per column, ``mysqlType`` and ``sqlType``:

* ``mysqlType`` is TiDB's lower-case type name plus `` unsigned`` (``bigint unsigned``, ``varbinary``,
  ``blob``, ``enum``), or with TiCDC's ``content-compatible`` / Alibaba Canal the full type
  (``varchar(255)``, ``int(10) unsigned``, ``enum('a','b')``). Both are read with the DDL type reader.
* It is a JSON object written from a Go map, so its key order means nothing: column order comes from
  the keys of ``data[0]`` (then ``old[0]``, then the rest of ``mysqlType``), which are written in table
  column order.
* ``sqlType`` (java.sql.Types) only helps where ``mysqlType`` is silent: a text type whose ``sqlType``
  is 2004 (BLOB) is binary-charset, and a column missing from ``mysqlType`` gets a type from its
  ``sqlType`` (4 -> INT, 12 -> VARCHAR, 93 -> DATETIME ...: a guess, codes are shared by several types).

What canal-json does not say, and what is assumed:

* Nullability: columns are nullable except primary-key columns.
* ENUM/SET members: unknown unless the full type is given (so no Avro ``allowed`` parameter).
* Lengths, DECIMAL precision/scale (``precision``/``scale`` stay ``None``, not DECIMAL's 10/0) and
  temporal fsp: unknown unless the full type is given. A BIT column of unknown width is taken as BIT(64)
  (its values encode the same; only the schema's ``length`` parameter differs from the real width).
* Unique keys and defaults: unknown.

``previous`` (the definition known so far, e.g. from DDL) fills these in: a column whose type agrees
with its ``previous`` column keeps that column (nullability, default, members, lengths); its unique keys
are kept while their columns still exist; its version is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from avro_registry_sink.errors import SourceError
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
from avro_registry_sink.tabledef.ddl import column_from_type
from avro_registry_sink.tabledef.types import BINARY_COUNTERPART

__all__ = ["SQL_TYPE_GUESSES", "table_from_canal"]

#: java.sql.Types code -> a type for a column that has no ``mysqlType`` (several MySQL types share a code).
SQL_TYPE_GUESSES: dict[int, str] = {
    -6: "tinyint", 5: "smallint", 4: "int", -5: "bigint", 7: "float", 8: "double", 3: "decimal", -7: "bit",
    1: "char", 12: "varchar", 2005: "text", 2004: "blob", 91: "date", 92: "time", 93: "datetime",
}

_SQL_BLOB = 2004


def _row_keys(message: Mapping[str, Any], key: str) -> list[str]:
    rows = message.get(key)
    if isinstance(rows, list) and rows and isinstance(rows[0], Mapping):
        return [k for k in rows[0] if isinstance(k, str)]
    return []


def _agrees(known: ColumnDef, derived: ColumnDef, full_type: bool) -> bool:
    """Whether the message's type for a column is the type ``known`` already has."""
    if (known.type, known.unsigned, known.binary) != (derived.type, derived.unsigned, derived.binary):
        return False
    if not full_type:
        return True
    same_shape = (known.precision, known.scale, known.fsp) == (derived.precision, derived.scale, derived.fsp)
    same_length = derived.length is None or known.length == derived.length
    same_members = not derived.elements or known.elements == derived.elements
    return same_shape and same_length and same_members


def table_from_canal(message: Mapping[str, Any], *, previous: TableDef | None = None) -> TableDef:
    """The table a canal-json DML message implies (see the module doc for what is assumed).

    >>> t = table_from_canal({"database": "s", "table": "t", "pkNames": ["id"],
    ...     "mysqlType": {"v": "varbinary", "id": "bigint unsigned"}, "data": [{"id": "1", "v": "x"}]})
    >>> [(c.name, c.type.value, c.unsigned, c.binary, c.nullable) for c in t.columns]
    [('id', 'BIGINT', True, False, False), ('v', 'VARBINARY', False, True, True)]
    """
    database, table = message.get("database"), message.get("table")
    if not isinstance(database, str) or not isinstance(table, str) or not table:
        raise SourceError("canal-json message without string 'database' and 'table'.", reason="no database/table")
    qualified = f"{database}.{table}"
    if message.get("isDdl"):
        raise SourceError(
            f"canal-json message for {qualified} is a DDL, which carries no column types; apply its 'sql' "
            "with tabledef.ddl.apply_ddl instead.",
            source=qualified, reason="DDL message",
        )
    mysql_types = message.get("mysqlType")
    sql_types = message.get("sqlType") or {}
    if not isinstance(mysql_types, Mapping) or not isinstance(sql_types, Mapping):
        raise SourceError(f"canal-json message for {qualified} without a 'mysqlType' object.", source=qualified,
                          reason="no mysqlType")
    order: list[str] = []
    for name in [*_row_keys(message, "data"), *_row_keys(message, "old"), *mysql_types]:
        if name not in order:
            order.append(name)
    if not order:
        raise SourceError(f"canal-json message for {qualified} names no columns.", source=qualified,
                          reason="no columns")
    pk_names = message.get("pkNames") or []
    if not isinstance(pk_names, list) or not all(isinstance(n, str) for n in pk_names):
        raise SourceError(f"canal-json message for {qualified}: 'pkNames' is not a list of names.",
                          source=qualified, reason="bad pkNames")
    missing = [n for n in pk_names if n not in order]
    if missing:
        raise SourceError(f"canal-json message for {qualified}: primary-key columns {missing} have no type.",
                          source=qualified, reason="unknown pk column")
    pk = {n.lower() for n in pk_names}

    columns: list[ColumnDef] = []
    for name in order:
        type_text = mysql_types.get(name)
        sql_type = sql_types.get(name)
        if not isinstance(type_text, str) or not type_text.strip():
            if sql_type not in SQL_TYPE_GUESSES:
                raise SourceError(
                    f"canal-json message for {qualified}: column {name!r} has neither a 'mysqlType' nor a "
                    "known 'sqlType'.",
                    source=qualified, reason="no column type",
                )
            type_text = SQL_TYPE_GUESSES[sql_type]
        derived = column_from_type(name, type_text, table=qualified)
        if "(" not in type_text and derived.type is MySQLType.DECIMAL:
            derived = derived.model_copy(update={"precision": None, "scale": None})  # not "DECIMAL(10,0)": unknown
        if "(" not in type_text and derived.type is MySQLType.BIT:
            derived = derived.model_copy(update={"length": 64})  # not BIT(1): the width is unknown, take any value
        if sql_type == _SQL_BLOB and derived.type in BINARY_COUNTERPART:
            derived = derived.model_copy(update={"type": BINARY_COUNTERPART[derived.type], "binary": True})
        known = None
        if previous is not None:
            known = next((c for c in previous.columns if c.name.lower() == name.lower()), None)
        if known is not None and _agrees(known, derived, "(" in type_text):
            column = known
        else:
            column = derived.model_copy(update={"nullable": known.nullable if known is not None else True})
        if name.lower() in pk:
            column = column.model_copy(update={"nullable": False})
        columns.append(column)

    names = {c.name.lower() for c in columns}
    unique_keys: tuple[tuple[str, ...], ...] = ()
    version = 0
    if previous is not None:
        unique_keys = tuple(k for k in previous.unique_keys if all(c.lower() in names for c in k))
        version = previous.version
    primary_key = tuple(pk_names)
    if previous is not None and {c.lower() for c in previous.primary_key} == pk:
        primary_key = previous.primary_key  # keep the key's own column order
    result = TableDef(schema_name=database, table=table, columns=tuple(columns), primary_key=primary_key,
                      unique_keys=unique_keys, version=version)
    return previous if previous is not None and result == previous else result

