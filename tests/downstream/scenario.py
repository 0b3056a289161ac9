"""The changes the downstream tests replay: three tables, their row changes in commit order, an ADD COLUMN.

* ``dml.all_types``: one column per SQL type of the type map (``TYPE_RULES``), BIGINT primary key; rows with
  typical values, both extremes, every nullable column NULL; updates, a delete.
* ``dml.composite``: a composite primary key ``(tenant, code)``; an UPDATE that changes ``code`` (the handle
  key), a DELETE, and two ADD COLUMNs with defaults in the middle (``note`` VARCHAR, ``priority`` INT): rows
  written before them are not sent again, so downstream they must get the defaults.
* ``dml.unique_key``: no primary key; the handle key is the NOT NULL unique key ``email``; an UPDATE that
  changes it.

:func:`write_storage_tree` writes the changes as a TiCDC storage-sink directory (CSV with commit ts and old
values, one directory per table version, schema files with the DDL); :func:`canal_json_messages` as a
canal-json changelog (TiCDC's, with its extension). :func:`final_state` is the source's final state that a
downstream database must hold.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avro_registry_sink.model import Op
from avro_registry_sink.sources.demo import go_format_float
from avro_registry_sink.sources.storage import data_file_name
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.support.job import canal_ddl, canal_dml


def _c(name: str, type_: T, **kw: Any) -> ColumnDef:
    return ColumnDef(name=name, type=type_, **kw)


ALL_TYPES = TableDef(schema_name="dml", table="all_types", primary_key=("id",), columns=(
    _c("id", T.BIGINT, nullable=False),
    _c("c_tinyint", T.TINYINT), _c("c_tinyint_u", T.TINYINT, unsigned=True),
    _c("c_smallint", T.SMALLINT), _c("c_smallint_u", T.SMALLINT, unsigned=True),
    _c("c_mediumint", T.MEDIUMINT), _c("c_mediumint_u", T.MEDIUMINT, unsigned=True),
    _c("c_int", T.INT), _c("c_int_u", T.INT, unsigned=True),
    _c("c_bigint", T.BIGINT), _c("c_bigint_u", T.BIGINT, unsigned=True),
    _c("c_float", T.FLOAT), _c("c_double", T.DOUBLE),
    _c("c_decimal", T.DECIMAL, precision=20, scale=6), _c("c_decimal_0", T.DECIMAL, precision=10, scale=0),
    _c("c_bit_1", T.BIT, length=1), _c("c_bit_10", T.BIT, length=10), _c("c_bit_64", T.BIT, length=64),
    _c("c_char", T.CHAR, length=10), _c("c_varchar", T.VARCHAR, length=64), _c("c_tinytext", T.TINYTEXT),
    _c("c_text", T.TEXT), _c("c_mediumtext", T.MEDIUMTEXT), _c("c_longtext", T.LONGTEXT),
    _c("c_binary", T.BINARY, length=4, binary=True), _c("c_varbinary", T.VARBINARY, length=16, binary=True),
    _c("c_tinyblob", T.TINYBLOB, binary=True), _c("c_blob", T.BLOB, binary=True),
    _c("c_mediumblob", T.MEDIUMBLOB, binary=True), _c("c_longblob", T.LONGBLOB, binary=True),
    _c("c_enum", T.ENUM, elements=("small", "medium", "large, really")),
    _c("c_set", T.SET, elements=("r", "g", "b")),
    _c("c_json", T.JSON), _c("c_date", T.DATE), _c("c_datetime", T.DATETIME, fsp=3),
    _c("c_timestamp", T.TIMESTAMP, fsp=6), _c("c_time", T.TIME), _c("c_year", T.YEAR), _c("c_vector", T.VECTOR),
    _c("c_status", T.VARCHAR, length=16, nullable=False, default="new"),
))

COMPOSITE = TableDef(schema_name="dml", table="composite", primary_key=("tenant", "code"), columns=(
    _c("tenant", T.INT, nullable=False), _c("code", T.VARCHAR, length=16, nullable=False),
    _c("qty", T.INT, nullable=False), _c("price", T.DECIMAL, precision=12, scale=2),
))
NOTE = _c("note", T.VARCHAR, length=32, nullable=False, default="none")
ADD_NOTE = "ALTER TABLE `dml`.`composite` ADD COLUMN `note` VARCHAR(32) NOT NULL DEFAULT 'none'"
PRIORITY = _c("priority", T.INT, nullable=False, default="5")
ADD_PRIORITY = "ALTER TABLE `dml`.`composite` ADD COLUMN `priority` INT NOT NULL DEFAULT 5"

UNIQUE_KEY = TableDef(schema_name="dml", table="unique_key", unique_keys=(("email",),), columns=(
    _c("id", T.INT), _c("email", T.VARCHAR, length=64, nullable=False), _c("name", T.VARCHAR, length=32),
))

TABLES = (ALL_TYPES, COMPOSITE, UNIQUE_KEY)

_TYPICAL = {
    "id": 1, "c_tinyint": -5, "c_tinyint_u": 200, "c_smallint": -300, "c_smallint_u": 60000, "c_mediumint": -70000,
    "c_mediumint_u": 16000000, "c_int": 123456, "c_int_u": 3000000000, "c_bigint": -9007199254740993,
    "c_bigint_u": 12345678901234, "c_float": 3.14, "c_double": -2.5e-300, "c_decimal": "-179394.233000",
    "c_decimal_0": "42", "c_bit_1": 1, "c_bit_10": 683, "c_bit_64": 1 << 40, "c_char": "ab", "c_varchar": "héllo, 世界",
    "c_tinytext": "t", "c_text": 'quote " and \\ backslash', "c_mediumtext": "line\nbreak", "c_longtext": "long",
    "c_binary": b"\x00\x01\x02\x00", "c_varbinary": b"\xff\x00\xfe", "c_tinyblob": b"tiny", "c_blob": b"\x80\x81",
    "c_mediumblob": b"", "c_longblob": b"\x00", "c_enum": "large, really", "c_set": "r,b",
    "c_json": '{"a": [1, 2], "b": "x"}', "c_date": "2024-02-29", "c_datetime": "2024-04-15 20:31:02.123",
    "c_timestamp": "2024-05-09 08:00:00.654321", "c_time": "12:34:56", "c_year": 2024, "c_vector": "[1,2.5,-3]",
    "c_status": "new",
}
_MAXIMA = {
    "id": 2, "c_tinyint": 127, "c_tinyint_u": 255, "c_smallint": 32767, "c_smallint_u": 65535, "c_mediumint": 8388607,
    "c_mediumint_u": 16777215, "c_int": 2147483647, "c_int_u": 4294967295, "c_bigint": 9223372036854775807,
    "c_bigint_u": 18446744073709551615, "c_float": 3.0e38, "c_double": 1.7976931348623157e308,
    "c_decimal": "99999999999999.999999", "c_decimal_0": "9999999999", "c_bit_1": 1, "c_bit_10": 1023,
    "c_bit_64": (1 << 64) - 1, "c_char": "0123456789", "c_varchar": "x" * 64, "c_tinytext": "ü" * 10,
    "c_text": "日本語", "c_mediumtext": "m", "c_longtext": "🙂 emoji", "c_binary": b"\xff\xff\xff\xff",
    "c_varbinary": bytes(range(16)), "c_tinyblob": b"\xff", "c_blob": bytes(range(256)), "c_mediumblob": b"m",
    "c_longblob": b"l" * 100, "c_enum": "medium", "c_set": "r,g,b", "c_json": "[]", "c_date": "9999-12-31",
    "c_datetime": "9999-12-31 23:59:59.999", "c_timestamp": "2038-01-19 03:14:07.999999", "c_time": "838:59:59",
    "c_year": 2155, "c_vector": "[0.5]", "c_status": "max",
}
_MINIMA = {
    "id": 3, "c_tinyint": -128, "c_tinyint_u": 0, "c_smallint": -32768, "c_smallint_u": 0, "c_mediumint": -8388608,
    "c_mediumint_u": 0, "c_int": -2147483648, "c_int_u": 0, "c_bigint": -9223372036854775808,
    "c_bigint_u": 9223372036854775808, "c_float": -1.5, "c_double": 0.0, "c_decimal": "-99999999999999.999999",
    "c_decimal_0": "-9999999999", "c_bit_1": 0, "c_bit_10": 0, "c_bit_64": 0, "c_char": "", "c_varchar": "",
    "c_tinytext": "", "c_text": "", "c_mediumtext": "", "c_longtext": "", "c_binary": b"\x00\x00\x00\x00",
    "c_varbinary": b"", "c_tinyblob": b"", "c_blob": b"", "c_mediumblob": b"", "c_longblob": b"", "c_enum": "small",
    "c_set": "", "c_json": "null", "c_date": "1000-01-01", "c_datetime": "1000-01-01 00:00:00.000",
    "c_timestamp": "1970-01-01 00:00:01.000000", "c_time": "-838:59:59", "c_year": 1901, "c_vector": "[]",
    "c_status": "",
}
_NULLS = {c.name: None for c in ALL_TYPES.columns} | {"id": 4, "c_status": "nulls"}


@dataclass(frozen=True)
class Change:
    """One row change: ``before`` for UPDATE/DELETE, ``after`` for INSERT/UPDATE (whole rows)."""

    table: str  # "schema.table"
    op: Op
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass(frozen=True)
class Ddl:
    """A DDL that starts a new table version."""

    table: str
    query: str
    definition: TableDef  # the table after it


@dataclass(frozen=True)
class Step:
    commit_ts: int
    change: Change | Ddl


def _ts(physical_ms: int, logical: int = 0) -> int:
    return (physical_ms << 18) | logical


START_MS = 1_715_241_600_000  # 2024-05-09 08:00:00 UTC


def steps() -> list[Step]:
    """Every change in commit order; one transaction per commit ts."""
    out: list[Step] = []
    clock = [START_MS]

    def at(*changes: Change | Ddl) -> None:
        clock[0] += 1000
        out.extend(Step(_ts(clock[0], 3), c) for c in changes)

    def ins(table: str, row: dict) -> Change:
        return Change(table, Op.INSERT, None, dict(row))

    def upd(table: str, before: dict, **changes: Any) -> Change:
        return Change(table, Op.UPDATE, dict(before), {**before, **changes})

    def dele(table: str, row: dict) -> Change:
        return Change(table, Op.DELETE, dict(row), None)

    at_, cp, uk = "dml.all_types", "dml.composite", "dml.unique_key"
    gone = {**_TYPICAL, "id": 5, "c_varchar": "deleted later"}
    at(ins(at_, _TYPICAL), ins(at_, _MAXIMA), ins(at_, _MINIMA), ins(at_, _NULLS), ins(at_, gone))
    c1 = {"tenant": 1, "code": "A-1", "qty": 1, "price": "9.99"}
    c2 = {"tenant": 1, "code": "A-2", "qty": 2, "price": None}
    c3 = {"tenant": 2, "code": "A-1", "qty": 3, "price": "-0.50"}
    c4 = {"tenant": 2, "code": "B-7", "qty": 4, "price": "1000000000.00"}
    at(ins(cp, c1), ins(cp, c2), ins(cp, c3), ins(cp, c4))
    u1 = {"id": 1, "email": "ana@example.com", "name": "Ana"}
    u2 = {"id": None, "email": "bo@example.com", "name": None}
    u3 = {"id": 3, "email": "cy@example.com", "name": "Cy"}
    at(ins(uk, u1), ins(uk, u2), ins(uk, u3))
    # updates that keep the key, a key change (tombstone of the old key + the new row), deletes
    typical2 = {**_TYPICAL, "c_int": 7, "c_varchar": "updated", "c_json": '{"a": null}', "c_set": "g",
                "c_enum": "medium", "c_bit_10": 1, "c_decimal": "0.000001", "c_blob": None, "c_status": "updated"}
    at(upd(at_, _TYPICAL, **{k: v for k, v in typical2.items() if k != "id"}), dele(at_, gone))
    at(upd(cp, c2, code="A-9", qty=20), dele(cp, c3))
    at(upd(uk, u1, email="ana@new.example.com"), upd(uk, u3, name="Cyrus"), dele(uk, u2))
    nulls2 = {**_NULLS, "c_text": "no longer null"}
    at(upd(at_, _NULLS, c_text="no longer null"))
    # ADD COLUMN with a default: c1 and c4 are never written again and must show the default downstream
    with_note = COMPOSITE.model_copy(update={"columns": (*COMPOSITE.columns, NOTE)})
    at(Ddl(cp, ADD_NOTE, with_note))
    with_priority = COMPOSITE.model_copy(update={"columns": (*COMPOSITE.columns, NOTE, PRIORITY)})
    at(Ddl(cp, ADD_PRIORITY, with_priority))
    c2n = {"tenant": 1, "code": "A-9", "qty": 20, "price": None, "note": "none", "priority": 5}
    c5 = {"tenant": 3, "code": "C-1", "qty": 5, "price": "5.00", "note": "after the DDL", "priority": -1}
    at(ins(cp, c5), upd(cp, c2n, note="touched"))
    at(upd(at_, typical2, c_float=-0.25, c_double=6.02214076e23), upd(at_, nulls2, c_text=None))
    return out


def table_versions(all_steps: list[Step]) -> dict[str, list[tuple[int, TableDef]]]:
    """``{table: [(version, definition)]}``: the first version at the first commit ts minus one."""
    first = all_steps[0].commit_ts - 1
    versions = {f"{t.schema_name}.{t.table}": [(first, t.model_copy(update={"version": first}))] for t in TABLES}
    for step in all_steps:
        if isinstance(step.change, Ddl):
            versions[step.change.table].append(
                (step.commit_ts, step.change.definition.model_copy(update={"version": step.commit_ts})))
    return versions


def final_definitions(all_steps: list[Step]) -> tuple[TableDef, ...]:
    """The newest definition of every table (what ``--tables`` gives the job: unique keys, ENUM/SET members)."""
    return tuple(versions[-1][1] for versions in table_versions(all_steps).values())


@dataclass(frozen=True)
class FinalRow:
    """A live row at the end: its values, the op and commit ts of its last change (the extension fields), and
    the columns that hold an added column's default (the row was not written since that ADD COLUMN)."""

    row: dict[str, Any]
    op: Op
    commit_ts: int
    defaulted: frozenset[str] = frozenset()


def final_state(all_steps: list[Step]) -> dict[str, dict[tuple, FinalRow]]:
    """``{table: {handle key values: FinalRow}}`` after every step; an ADD COLUMN gives old rows its default."""
    keys = {f"{t.schema_name}.{t.table}": t.handle_key_names() for t in TABLES}
    state: dict[str, dict[tuple, FinalRow]] = {name: {} for name in keys}
    for step in all_steps:
        change = step.change
        rows = state[change.table]
        if isinstance(change, Ddl):
            added = change.definition.columns[-1]
            for key, live in rows.items():
                default = int(added.default) if added.type is T.INT else added.default
                rows[key] = FinalRow({**live.row, added.name: default}, live.op, live.commit_ts,
                                     live.defaulted | {added.name})
            continue
        if change.before is not None:
            rows.pop(tuple(change.before[k] for k in keys[change.table]), None)
        if change.after is not None:
            key = tuple(change.after[k] for k in keys[change.table])
            key_changed = change.before is not None and key != tuple(change.before[k] for k in keys[change.table])
            # a key-changing UPDATE reaches Kafka as a tombstone of the old key and an INSERT of the new row
            op = Op.INSERT if key_changed else change.op
            rows[key] = FinalRow(dict(change.after), op, step.commit_ts)
    return state


# --------------------------------------------------------------------------------------------------
# A TiCDC storage-sink directory (CSV, include-commit-ts and output-old-value)

_QUOTED = frozenset({T.DECIMAL, T.DATE, T.DATETIME, T.TIMESTAMP, T.TIME, T.JSON, T.ENUM, T.SET, T.CHAR, T.VARCHAR,
                     T.TINYTEXT, T.TEXT, T.MEDIUMTEXT, T.LONGTEXT, T.VECTOR})


def _csv_value(col: ColumnDef, value: Any) -> str:
    """A value as TiCDC's CSV writer writes it: numbers bare, text quoted, binary base64, NULL as ``\\N``."""
    if value is None:
        return "\\N"
    if isinstance(value, bytes):
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if isinstance(value, float):
        return go_format_float(value, "v")
    if col.type in _QUOTED:
        return '"' + str(value).replace('"', '""') + '"'
    return str(value)


def _csv_line(op: str, table: TableDef, commit_ts: int, is_update: bool, row: dict[str, Any]) -> str:
    fields = [f'"{op}"', f'"{table.table}"', f'"{table.schema_name}"', str(commit_ts), str(is_update).lower()]
    fields.extend(_csv_value(c, row[c.name]) for c in table.columns)
    return ",".join(fields) + "\r\n"


def write_storage_tree(root: Path, all_steps: list[Step]) -> list[str]:
    """Write the steps under ``root`` as TiCDC's storage sink does; returns the data files in write order.

    Layout: ``<schema>/<table>/meta/schema_<version>_<crc>.json`` per table version (the DDL's in ``Query``),
    ``<schema>/<table>/<version>/CDC<n>.csv`` with ``meta/CDC.index``; an UPDATE is a ``D`` and an ``I``
    line marked as an update; one data file per transaction.
    """
    versions = table_versions(all_steps)
    current = {name: v[0] for name, v in versions.items()}
    for _, table in current.values():
        write_table_schema_file(table, root)
    numbers: dict[str, int] = {}
    files: list[str] = []
    by_ts: dict[int, list[Change | Ddl]] = {}
    for step in all_steps:
        by_ts.setdefault(step.commit_ts, []).append(step.change)
    for commit_ts, changes in by_ts.items():
        lines: dict[str, list[str]] = {}
        for change in changes:
            if isinstance(change, Ddl):
                version = next(v for v in versions[change.table] if v[0] == commit_ts)
                current[change.table] = version
                write_table_schema_file(version[1], root, query=change.query, ddl_type=5)
                continue
            _, table = current[change.table]
            out = lines.setdefault(change.table, [])
            if change.op is Op.INSERT:
                out.append(_csv_line("I", table, commit_ts, False, change.after))
            elif change.op is Op.DELETE:
                out.append(_csv_line("D", table, commit_ts, False, change.before))
            else:
                out.append(_csv_line("D", table, commit_ts, True, change.before))
                out.append(_csv_line("I", table, commit_ts, True, change.after))
        for name, text in lines.items():
            version, table = current[name]
            directory = f"{table.schema_name}/{table.table}/{version}"
            numbers[directory] = numbers.get(directory, 0) + 1
            file_name = data_file_name(numbers[directory])
            (root / directory / "meta").mkdir(parents=True, exist_ok=True)
            (root / directory / "meta" / "CDC.index").write_text(file_name + "\n", encoding="utf-8")
            (root / directory / file_name).write_bytes("".join(text).encode("utf-8"))
            files.append(f"{directory}/{file_name}")
    (root / "metadata").write_text(json.dumps({"checkpoint-ts": all_steps[-1].commit_ts + 1}), encoding="utf-8")
    return files


# --------------------------------------------------------------------------------------------------
# A canal-json changelog (TiCDC's canal-json with enable-tidb-extension)


def _create_statement(table: TableDef) -> str:
    lines = [f"  `{c.name}` {c.sql_type()}" + ("" if c.nullable else " NOT NULL")
             + ("" if c.default is None else " DEFAULT '" + str(c.default).replace("'", "''") + "'")
             for c in table.columns]
    if table.primary_key:
        lines.append("  PRIMARY KEY (" + ", ".join(f"`{k}`" for k in table.primary_key) + ")")
    for i, uk in enumerate(table.unique_keys, start=1):
        lines.append(f"  UNIQUE KEY `uk_{i}` (" + ", ".join(f"`{k}`" for k in uk) + ")")
    return f"CREATE TABLE `{table.schema_name}`.`{table.table}` (\n" + ",\n".join(lines) + "\n)"


def canal_json_messages(all_steps: list[Step]) -> list[str]:
    """The steps as canal-json messages in commit order (for a one-partition topic): CREATE TABLE first."""
    versions = table_versions(all_steps)
    current = {name: v[0][1] for name, v in versions.items()}
    first = all_steps[0].commit_ts - 1
    out = [canal_ddl(t.schema_name, t.table, "CREATE", _create_statement(t), first) for t in current.values()]
    for step in all_steps:
        change = step.change
        if isinstance(change, Ddl):
            schema, table = change.table.split(".")
            current[change.table] = next(v for ts, v in versions[change.table] if ts == step.commit_ts)
            out.append(canal_ddl(schema, table, "ALTER", change.query, step.commit_ts))
        else:
            out.append(canal_dml(current[change.table], change.op, step.commit_ts, change.before, change.after))
    return out
