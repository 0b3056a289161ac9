"""``ALTER TABLE`` statements that bring a downstream table from one flat-Avro schema to the next.

The downstream table is the one Kafka Connect's JDBC sinks create from the records (README, "Loading a
database"): one column per value field, typed by its Avro type (``int`` -> integer, ``long`` -> bigint, ``float``
-> real/float, ``double``, ``decimal(p,s)`` -> numeric/decimal(p,s), ``string`` -> text/longtext, ``bytes`` ->
bytea/longblob), NOT NULL unless the field is a ``["null",T]`` union, the field's default as the column's
default, and the key fields as the primary key (on MySQL/MariaDB a string key column is ``VARCHAR(255)``, a
binary one ``VARBINARY(255)``, as the README tells to create them). :func:`create_table` writes that table;
:func:`alter_statements` the statements from the older schema's table to the newer one's, in this order:

1. the primary key is dropped when the key changes;
2. renamed columns are renamed (their data kept);
3. removed columns are dropped;
4. added columns are added: with their default, and a NOT NULL column without one gets MySQL's implicit default
   for the rows already there (the type's zero, ``''``, an ENUM's first member: what MySQL gives them upstream),
   then has that default dropped; a column dropped and added again (``SchemaDiff.readded``) is dropped in 3 and
   added here, so its rows hold the default as upstream, never a cast of the old value;
5. kept columns change type (a cast keeps the data), nullability (rows holding NULL first get the default, or
   the zero value, as MySQL's ``MODIFY ... NOT NULL`` does) and default;
6. the new primary key is added.

Dialects: ``postgres`` (PostgreSQL) and ``mysql`` (MySQL 8.0.13+ and MariaDB 10.5+, which know ``RENAME COLUMN``;
a default of a ``longtext``/``longblob`` column is written as an expression, ``DEFAULT ('')``, the one form MySQL 8
takes on BLOB/TEXT columns and MariaDB takes too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.history.diff import AvroField, SchemaDiff, record_fields

DIALECTS = ("postgres", "mysql")
_ALIASES = {"postgresql": "postgres", "pg": "postgres", "mariadb": "mysql"}


def dialect_of(name: str) -> str:
    """``postgres`` or ``mysql`` (``postgresql``, ``pg`` and ``mariadb`` are accepted); raises ConfigError."""
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in DIALECTS:
        raise ConfigError(f"Invalid value {name!r} for option '--sql': valid values are postgres or mysql "
                          "(mariadb is mysql).", option="sql", value=name)
    return key


def quote(name: str, dialect: str) -> str:
    """An identifier quoted for the dialect (``"a""b"`` / ```a``b```)."""
    if dialect == "postgres":
        return '"' + name.replace('"', '""') + '"'
    return "`" + name.replace("`", "``") + "`"


def _table_name(table: str, dialect: str) -> str:
    """``schema.table`` is quoted part by part; a plain name as one identifier."""
    return ".".join(quote(part, dialect) for part in table.split(".")) if "." in table else quote(table, dialect)


def column_type(f: AvroField, dialect: str, *, key: bool = False) -> str:
    """The column type a JDBC sink gives a field (``key``: the field is in the primary key)."""
    if f.logical is not None:
        return f"{'numeric' if dialect == 'postgres' else 'decimal'}({f.logical[1]},{f.logical[2]})"
    if dialect == "postgres":
        return {"int": "integer", "long": "bigint", "float": "real", "double": "double precision",
                "string": "text", "bytes": "bytea", "boolean": "boolean"}.get(f.type, "text")
    if key and f.type == "string":
        return "varchar(255)"
    if key and f.type == "bytes":
        return "varbinary(255)"
    return {"int": "int", "long": "bigint", "float": "float", "double": "double", "string": "longtext",
            "bytes": "longblob", "boolean": "tinyint(1)"}.get(f.type, "longtext")


def _string_literal(text: str, dialect: str) -> str:
    text = text.replace("'", "''")
    if dialect == "mysql":
        text = text.replace("\\", "\\\\")
    return f"'{text}'"


def _literal(f: AvroField, value: Any, dialect: str) -> str:
    """A SQL literal of a value of the field's type (Avro's JSON form of a default)."""
    if value is None:
        return "NULL"
    if f.type == "bytes" and f.logical is None:
        data = value.encode("latin-1") if isinstance(value, str) else bytes(value)  # Avro's JSON bytes: code points
        return f"'\\x{data.hex()}'::bytea" if dialect == "postgres" else (f"X'{data.hex()}'" if data else "''")
    if f.type == "string" or isinstance(value, str):
        return _string_literal(str(value), dialect)
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return repr(value) if isinstance(value, float) else str(value)


#: MySQL's implicit default of a NOT NULL string column without DEFAULT, by TiCDC's ``tidb_type`` (the same table
#: as the migration rules', ``schema.migration``): an ENUM's is its first member.
_IMPLICIT_TEXT = {"DATE": "0000-00-00", "DATETIME": "0000-00-00 00:00:00", "TIMESTAMP": "0000-00-00 00:00:00",
                  "TIME": "00:00:00", "JSON": "null"}


def _zero(f: AvroField, dialect: str) -> str:
    """The value MySQL gives existing rows for a NOT NULL column without a default (its implicit default)."""
    if f.type == "string":
        tidb_type = str(f.parameters.get("tidb_type") or "").upper()
        allowed = str(f.parameters.get("allowed") or "")
        if tidb_type == "ENUM" and allowed:
            return _string_literal(allowed.split(",")[0], dialect)
        return _string_literal(_IMPLICIT_TEXT.get(tidb_type, ""), dialect)
    if f.type == "bytes" and f.logical is None:
        return "''::bytea" if dialect == "postgres" else "''"
    return "0"


def _default(f: AvroField) -> Any:
    """The column default a field carries (``None``: none; a nullable field's ``null`` default is none)."""
    return f.default if f.has_default and f.default is not None else None


def _default_clause(f: AvroField, literal: str, dialect: str, *, key: bool = False) -> str:
    """``DEFAULT <literal>``; in MySQL a BLOB/TEXT column takes only an expression default, ``DEFAULT ('x')`` (MySQL
    8 refuses a literal with error 1101; the expression form works from MySQL 8.0.13 and MariaDB 10.2.1)."""
    if dialect == "mysql" and column_type(f, dialect, key=key) in ("longtext", "longblob"):
        return f" DEFAULT ({literal})"
    return f" DEFAULT {literal}"


def _column_definition(f: AvroField, dialect: str, *, key: bool = False) -> str:
    text = f"{quote(f.name, dialect)} {column_type(f, dialect, key=key)}"
    nullable = f.nullable and not key
    if not nullable:
        text += " NOT NULL"
    if _default(f) is not None:
        text += _default_clause(f, _literal(f, _default(f), dialect), dialect, key=key)
    elif dialect == "mysql" and nullable:
        text += " NULL"
    return text


def create_table(value_schema: Mapping[str, Any] | str, key_schema: Mapping[str, Any] | str | None, table: str,
                 dialect: str) -> str:
    """``CREATE TABLE`` of the downstream table of a schema, as a JDBC sink creates it."""
    dialect = dialect_of(dialect)
    keys = [f.name for f in record_fields(key_schema)]
    columns = [_column_definition(f, dialect, key=f.name in keys) for f in record_fields(value_schema)]
    if keys:
        columns.append("PRIMARY KEY (" + ", ".join(quote(k, dialect) for k in keys) + ")")
    return f"CREATE TABLE {_table_name(table, dialect)} (" + ", ".join(columns) + ")"


def _cast(column: str, old: AvroField, new: AvroField, type_text: str) -> str:
    """PostgreSQL's ``USING`` expression of a type change that keeps the data."""
    if new.type == "bytes" and new.logical is None and old.type == "string":
        return f"convert_to({column}, 'UTF8')"
    if new.type == "string" and old.type == "bytes" and old.logical is None:
        return f"convert_from({column}, 'UTF8')"
    return f"{column}::{type_text}"


def alter_statements(diff: SchemaDiff, table: str, dialect: str) -> list[str]:
    """The statements that turn the downstream table of ``diff.before`` into that of ``diff.after``.

    >>> from avro_registry_sink.history.diff import diff_schemas
    >>> a = {"fields": [{"name": "id", "type": "int"}]}
    >>> b = {"fields": [{"name": "id", "type": "long"}, {"name": "n", "type": "string", "default": "x"}]}
    >>> for s in alter_statements(diff_schemas(a, b), "t", "postgres"): print(s)
    ALTER TABLE "t" ADD COLUMN "n" text NOT NULL DEFAULT 'x'
    ALTER TABLE "t" ALTER COLUMN "id" TYPE bigint USING "id"::bigint
    """
    dialect = dialect_of(dialect)
    name = _table_name(table, dialect)
    alter = f"ALTER TABLE {name} "
    out: list[str] = []
    key_after = set(diff.key_after or ())
    key_before = {diff.renames.get(k, k) for k in diff.key_before or ()}
    key_changed = bool(diff.of_kind("key"))
    if key_changed:
        if dialect == "postgres":
            out.append(
                "DO $$ DECLARE n text; BEGIN SELECT conname INTO n FROM pg_constraint WHERE conrelid = "
                f"{_string_literal(name, dialect)}::regclass AND contype = 'p'; IF n IS NOT NULL THEN "
                f"EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', {_string_literal(name, dialect)}, n); "
                "END IF; END $$")
        else:
            out.append(alter + "DROP PRIMARY KEY")
    for change in diff.of_kind("renamed"):
        out.append(alter + f"RENAME COLUMN {quote(change.old, dialect)} TO {quote(change.new, dialect)}")
    for change in diff.of_kind("removed"):
        out.append(alter + f"DROP COLUMN {quote(change.field, dialect)}")
    for change in diff.of_kind("added"):
        f = diff.field_after(change.field)
        assert f is not None
        in_key = f.name in key_after
        if not f.nullable and _default(f) is None:  # existing rows get the type's zero value, as upstream
            zero_default = _column_definition(f, dialect, key=in_key) + _default_clause(
                f, _zero(f, dialect), dialect, key=in_key)
            out.append(alter + "ADD COLUMN " + zero_default)
            out.append(alter + f"ALTER COLUMN {quote(f.name, dialect)} DROP DEFAULT")
        else:
            out.append(alter + "ADD COLUMN " + _column_definition(f, dialect, key=in_key))
    changed: dict[str, set[str]] = {}
    for change in diff.changes:
        if change.kind in ("type", "nullability", "default", "connect.parameters"):
            changed.setdefault(change.field, set()).add(change.kind)
    if dialect == "mysql":  # a column entering the key may need a key type (varchar(255) for text)
        for f in diff.after:
            old = _old_field(diff, f.name)
            if old is not None and (f.name in key_after) != (f.name in key_before) \
                    and column_type(f, dialect, key=True) != column_type(f, dialect):
                changed.setdefault(f.name, set()).add("type")
    for f in diff.after:
        kinds = changed.get(f.name, set())
        old = _old_field(diff, f.name)
        if old is None or not kinds - {"connect.parameters"}:
            continue
        in_key = f.name in key_after
        column = quote(f.name, dialect)
        becomes_not_null = "nullability" in kinds and not f.nullable
        if becomes_not_null:
            fill = _literal(f, _default(f), dialect) if _default(f) is not None else _zero(f, dialect)
            out.append(f"UPDATE {name} SET {column} = {fill} WHERE {column} IS NULL")
        if dialect == "mysql":
            out.append(alter + "MODIFY COLUMN " + _column_definition(f, dialect, key=in_key))
            continue
        new_type = column_type(f, dialect)
        if "type" in kinds and column_type(old, dialect) != new_type:
            if _default(old) is not None:
                out.append(alter + f"ALTER COLUMN {column} DROP DEFAULT")
            out.append(alter + f"ALTER COLUMN {column} TYPE {new_type} USING {_cast(column, old, f, new_type)}")
            if _default(f) is not None:
                out.append(alter + f"ALTER COLUMN {column} SET DEFAULT {_literal(f, _default(f), dialect)}")
        elif "default" in kinds or "type" in kinds:
            if _default(f) is not None:
                out.append(alter + f"ALTER COLUMN {column} SET DEFAULT {_literal(f, _default(f), dialect)}")
            else:
                out.append(alter + f"ALTER COLUMN {column} DROP DEFAULT")
        if "nullability" in kinds:
            out.append(alter + f"ALTER COLUMN {column} {'DROP' if f.nullable else 'SET'} NOT NULL")
    if key_changed and diff.key_after:
        out.append(alter + "ADD PRIMARY KEY (" + ", ".join(quote(k, dialect) for k in diff.key_after) + ")")
    return out


def _old_field(diff: SchemaDiff, new_name: str) -> AvroField | None:
    if new_name in diff.readded:
        return None
    source = {new: old for old, new in diff.renames.items()}.get(new_name)
    if source is not None:
        return diff.field_before(source)
    if new_name in diff.renames:
        return None
    return diff.field_before(new_name)

