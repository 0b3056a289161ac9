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
   the zero value, as MySQL's ``MODIFY ... NOT NULL`` does) and default; where the cast alone gives other values
   than MySQL's ALTER (a temporal type's text, YEAR printed, DOUBLE rounded, a SET's order), an ``UPDATE`` before or
   after it converts them as MySQL does (:func:`_conversion`); text going into an ENUM/SET column that lost members
   is checked by a CHECK constraint added and dropped again; a conversion without SQL here raises ConfigError;
6. the new primary key is added.

Dialects: ``postgres`` (PostgreSQL) and ``mysql`` (MySQL 8.0.13+ and MariaDB 10.5+, which know ``RENAME COLUMN``;
a default of a ``longtext``/``longblob`` column is written as an expression, ``DEFAULT ('')``, the one form MySQL 8
takes on BLOB/TEXT columns and MariaDB takes too).
"""

from __future__ import annotations

import re
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


# -- the values MySQL's ALTER gives a kept column ---------------------------------------------------------------------


_TEMPORAL = ("DATE", "DATETIME", "TIMESTAMP", "TIME", "YEAR")


def _kind(f: AvroField) -> str | None:
    """The temporal/number/text family of a field (as ``schema.migration``'s rules tell them apart): DATE, DATETIME,
    TIMESTAMP and TIME are text in TiCDC's Avro, YEAR an int; ``None`` for what no conversion here concerns."""
    t = str(f.parameters.get("tidb_type") or "").upper()
    if f.logical is not None:
        return None
    if f.type == "string" and t in ("DATE", "DATETIME", "TIMESTAMP", "TIME"):
        return t
    if f.type in ("int", "long"):
        return "YEAR" if t == "YEAR" else "INTEGER"
    if f.type == "string":
        return "TEXT"
    return f.type if f.type in ("float", "double") else None


def _refuse(column: str, pair: str, why: str) -> ConfigError:
    return ConfigError(f"column {column}: {pair}: {why}, and --sql has no statement that gives the rows MySQL's ALTER "
                       "gives them; convert that column's values yourself (diff without --sql lists every change).",
                       option="sql", value=column)


def _conversion(old: AvroField, new: AvroField, column: str, dialect: str) -> tuple[str | None, str | None]:
    """MySQL's conversion of a kept column's values where the type change alone (PostgreSQL's cast, MySQL's
    ``MODIFY``) would give other values: ``(before, after)``, an expression over the column assigned to it before
    the type change (in the old type) or after it (in the new one), ``None`` for nothing. Conversions MySQL refuses
    for every value (DATE to YEAR) are left to the type change, which fails on any row as MySQL's ALTER does; those
    no SQL here computes raise a ConfigError naming the column."""
    s, d = _kind(old), _kind(new)
    pg = dialect == "postgres"
    name = quote(column, dialect)
    if s in ("float", "double") and d == "INTEGER":  # rounded half away from zero (a cast rounds half to even)
        return (f"round({name}::numeric)" if pg else f"ROUND(CAST({name} AS DECIMAL(65,30)))"), None
    if s == "TEXT" and d == "TEXT":
        return None, _members(old, new, name, dialect)
    if s is None or d is None or s == d or not ({s, d} & set(_TEMPORAL)):
        return None, None
    pair = f"{s} to {d}"
    if d == "TEXT":  # the text TiCDC prints is MySQL's text of the value (YEAR as four digits)
        return None, (f"lpad({name}, 4, '0')" if pg else f"LPAD({name}, 4, '0')") if s == "YEAR" else None
    if s == "YEAR" and d == "INTEGER":
        return None, None
    if d == "YEAR" and s in ("DATE", "DATETIME", "TIMESTAMP", "TIME"):
        return None, None  # MySQL's ALTER refuses every value: so does the cast of the text to an integer
    if s in ("TIME", "YEAR") and d in ("DATE", "DATETIME", "TIMESTAMP"):
        raise _refuse(column, pair, "MySQL's ALTER takes the date of the day it ran (CURRENT_DATE)" if s == "TIME"
                      else "MySQL's ALTER refuses every value")
    if d == "INTEGER" and s in ("DATE", "DATETIME", "TIMESTAMP", "TIME"):  # the digits: YYYYMMDD[hhmmss], [-]hhmmss
        separators = ":" if s == "TIME" else "-: "
        expr = name
        for sep in separators:
            expr = f"replace({expr}, '{sep}', '')" if pg else f"REPLACE({expr}, '{sep}', '')"
        return expr, None  # fractional seconds leave a '.': the cast fails, as MySQL's ALTER refuses them
    if d == "TIME" and s == "DATE":
        return "'00:00:00'", None
    if d == "TIME" and s in ("DATETIME", "TIMESTAMP"):  # the time part
        return (f"substr({name}, 12)" if pg else f"SUBSTRING({name}, 12)"), None
    if d == "DATE" and s in ("DATETIME", "TIMESTAMP"):  # the date, the time rounded to the second
        rounded = (f"to_char({name}::timestamp + interval '0.5 second', 'YYYY-MM-DD')" if pg else
                   f"DATE_FORMAT(CAST({name} AS DATETIME(6)) + INTERVAL 500000 MICROSECOND, '%Y-%m-%d')")
        return f"CASE WHEN {name} LIKE '% 23:59:59.%' THEN {rounded} ELSE substr({name}, 1, 10) END", None
    if s == "DATE" and d in ("DATETIME", "TIMESTAMP"):
        return (f"{name} || ' 00:00:00'" if pg else f"CONCAT({name}, ' 00:00:00')"), None
    if {s, d} == {"DATETIME", "TIMESTAMP"}:
        return None, None  # the same text
    if s == "TEXT" and d == "DATE":  # Y-M-D or digits, printed YYYY-MM-DD
        return (f"to_char({name}::date, 'YYYY-MM-DD')" if pg else
                f"DATE_FORMAT(CAST({name} AS DATE), '%Y-%m-%d')"), None
    raise _refuse(column, pair, "MySQL's ALTER converts the values (docs/registries.md, temporal pairs)")


def _members(old: AvroField, new: AvroField, name: str, dialect: str) -> str | None:
    """A SET column whose members changed order: its values printed in the new order, as MySQL prints its bitmask
    (``x,y`` is ``y,x`` in ``SET('y','x')``)."""
    types = {str(f.parameters.get("tidb_type") or "").upper() for f in (old, new)}
    before, after = (str(f.parameters.get("allowed") or "").split(",") for f in (old, new))
    if types != {"SET"} or [m for m in after if m in before] == [m for m in before if m in after]:
        return None
    if dialect == "postgres":
        parts = [f"CASE WHEN {_string_literal(m, dialect)} = ANY(string_to_array({name}, ',')) THEN "
                 f"{_string_literal(m, dialect)} END" for m in after]
    else:
        parts = [f"IF(FIND_IN_SET({_string_literal(m, dialect)}, {name}), {_string_literal(m, dialect)}, NULL)"
                 for m in after]
    return f"CASE WHEN {name} IS NULL THEN NULL ELSE concat_ws(',', {', '.join(parts)}) END"


def _member_guard(old: AvroField, new: AvroField, table: str, dialect: str) -> list[str]:
    """Text going into an ENUM or SET column whose members are not all the old column's: a CHECK constraint added and
    dropped again, which fails on a row holding a value that is no member (PostgreSQL, MySQL 8.0.19+ and MariaDB
    check the rows already there), as MySQL's ALTER fails (error 1265). Its name says the column."""
    kind = str(new.parameters.get("tidb_type") or "").upper()
    if old.type != "string" or new.type != "string" or kind not in ("ENUM", "SET"):
        return []
    members = str(new.parameters.get("allowed") or "").split(",")
    if str(old.parameters.get("tidb_type") or "").upper() == kind and \
            set(str(old.parameters.get("allowed") or "").split(",")) <= set(members):
        return []
    name = quote(new.name, dialect)
    texts = ", ".join(_string_literal(m, dialect) for m in members)
    if kind == "ENUM":
        check = f"{name} IN ({texts})"
    elif dialect == "postgres":
        check = f"string_to_array({name}, ',') <@ ARRAY[{texts}]::text[]"
    else:
        one = "(" + "|".join(re.escape(m) for m in members) + ")"
        check = f"{name} REGEXP {_string_literal(f'^({one}(,{one})*)?$', dialect)}"
    constraint = quote(f"avro_sink_{kind.lower()}_{new.name}"[:63], dialect)
    return [f"ALTER TABLE {table} ADD CONSTRAINT {constraint} CHECK ({check})",
            f"ALTER TABLE {table} DROP CONSTRAINT {constraint}"]


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
        if old is None or not kinds:
            continue
        column = quote(f.name, dialect)
        out += _member_guard(old, f, name, dialect)
        before, after = _conversion(old, f, f.name, dialect)
        if before is not None:
            out.append(f"UPDATE {name} SET {column} = {before}")
        if not kinds - {"connect.parameters"}:  # the same column: only its values change (a temporal type, a SET)
            if after is not None:
                out.append(f"UPDATE {name} SET {column} = {after}")
            continue
        in_key = f.name in key_after
        becomes_not_null = "nullability" in kinds and not f.nullable
        if becomes_not_null:
            fill = _literal(f, _default(f), dialect) if _default(f) is not None else _zero(f, dialect)
            out.append(f"UPDATE {name} SET {column} = {fill} WHERE {column} IS NULL")
        if dialect == "mysql":
            out.append(alter + "MODIFY COLUMN " + _column_definition(f, dialect, key=in_key))
            if after is not None:
                out.append(f"UPDATE {name} SET {column} = {after}")
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
        if after is not None:
            out.append(f"UPDATE {name} SET {column} = {after}")
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

