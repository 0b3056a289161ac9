"""A realistic TiCDC storage-sink directory, with a manifest of exactly what it holds.

:func:`generate_demo` writes what a changefeed with the storage sink would leave behind after a short
busy period, so the job can run end to end without TiDB:

* ``shop.orders`` (CSV): BIGINT primary key, DECIMAL(12,2), ENUM, DATETIME(3), JSON and a nullable
  TEXT whose values hold quotes, commas, CR/LF, backslashes, non-ASCII and the literal text ``\\N``.
* ``shop.customers`` (CSV): no primary key, keyed by a NOT NULL UNIQUE KEY; SET, DATE, TIME, DOUBLE
  (Go ``%v`` text, exponent form included) and VARBINARY (base64).
* ``crm.events`` (canal-json with ``enable-tidb-extension``): BIGINT UNSIGNED beyond 2^63, BIT(10),
  VARBINARY with bytes 0x00..0xff (ISO-8859-1 text), TIMESTAMP(3), text needing JSON escapes.

Timeline: the tables exist when the changefeed starts (their first table version is the start ts and
their schema files have no ``Query``); two flushes of inserts/updates/deletes (two data files per
table, ``CDC.index`` rewritten each time); then ``ALTER TABLE shop.orders ADD COLUMN channel ...
DEFAULT 'web'`` (a new schema file with ``Query`` and ``Type`` 5, a new version directory) and a third
flush with later changes; ``metadata`` holds the checkpoint ts. Commit ts are TSOs (physical ms << 18 |
logical), strictly increasing; date directories are UTC dates of the flush time.

The manifest lists, per table, the events a reader must produce (values in TiCDC's text forms, with
``source`` = ``"<relative path>:<line>"``), the final rows keyed by handle key (rows written before
the ADD COLUMN show its default, as the upstream table does), the counts of inserts, updates and
deletes, the schema versions, and the full table definitions: storage-sink schema files do not
record ENUM/SET members nor unique keys, so ``shop.customers`` needs the manifest's definition (or its
``CREATE TABLE``) to get a Kafka key.
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from avro_registry_sink.changes import ChangeEvent
from avro_registry_sink.formats.csv import BinaryEncodingMethod, CsvOptions, is_binary_column
from avro_registry_sink.model import Op
from avro_registry_sink.sources.storage import data_file_name
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
from avro_registry_sink.tabledef.storage import write_table_schema_file

__all__ = ["DEMO_CSV_OPTIONS", "DemoManifest", "LiveKeys", "OpCounts", "generate_demo", "go_format_float",
           "write_rerun_files"]

#: A flush of more changes of one table than this is split into several data files.
MAX_ROWS_PER_FILE = 100_000
#: How often (in changes written) :func:`generate_demo` reports progress.
PROGRESS_STEP = 10_000

#: The CSV settings of the demo changefeed.
DEMO_CSV_OPTIONS = CsvOptions.model_validate({"include-commit-ts": True, "output-old-value": True})

_START = dt.datetime(2024, 5, 9, 8, 0, 0, tzinfo=dt.UTC)


@dataclass(frozen=True)
class OpCounts:
    """How many row changes of each kind a table received."""

    inserts: int = 0
    updates: int = 0
    deletes: int = 0


@dataclass
class DemoManifest:
    """What :func:`generate_demo` wrote: enough to check everything that comes out of the job.

    Tables are keyed by ``"schema.table"``; ``final_rows`` by the handle-key values (a tuple in key
    column order); ``table_versions`` by ``(schema, table, version)``.
    """

    root: Path
    csv_options: CsvOptions
    start_ts: int
    checkpoint_ts: int
    formats: dict[str, str]
    tables: dict[str, TableDef]
    table_versions: dict[tuple[str, str, int], TableDef]
    create_statements: dict[str, str]
    ddl_statements: dict[str, list[str]]
    schema_versions: dict[str, tuple[int, ...]]
    key_columns: dict[str, tuple[str, ...]]
    events: dict[str, list[ChangeEvent]]
    final_rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]]
    counts: dict[str, OpCounts]
    data_files: list[str] = field(default_factory=list)

    @property
    def all_events(self) -> list[ChangeEvent]:
        """Every event of every table, by commit ts (table name breaking ties, file order kept)."""
        merged = [e for name in sorted(self.events) for e in self.events[name]]
        return sorted(merged, key=lambda e: (e.commit_ts, e.schema, e.table))

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly overview (counts, versions, checkpoint) for logs and the CLI."""
        return {
            "root": str(self.root),
            "checkpoint_ts": self.checkpoint_ts,
            "tables": {
                name: {
                    "format": self.formats[name],
                    "schema_versions": list(self.schema_versions[name]),
                    "inserts": self.counts[name].inserts,
                    "updates": self.counts[name].updates,
                    "deletes": self.counts[name].deletes,
                    "final_rows": len(self.final_rows[name]),
                }
                for name in sorted(self.tables)
            },
        }


# --------------------------------------------------------------------------------------------------
# Value text in TiCDC's writers


def go_format_float(value: float, verb: str = "v") -> str:
    """A float64 as Go writes it: ``"v"`` is ``fmt``'s ``%v`` (shortest round-trip digits, exponent form
    when the decimal exponent is < -4 or >= 6, as TiCDC's CSV writes floats), ``"f"`` is
    ``strconv.FormatFloat(v, 'f', -1, 64)`` (never an exponent, as TiCDC's canal-json writes them).

    >>> [go_format_float(x) for x in (1.5e20, 1234567.0, 123456.0, 1e-05, 0.0001, 2.0, -0.5)]
    ['1.5e+20', '1.234567e+06', '123456', '1e-05', '0.0001', '2', '-0.5']
    >>> go_format_float(1.5e20, "f")
    '150000000000000000000'
    """
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    sign, digits, exp = Decimal(repr(value)).as_tuple()
    figures = list(digits)
    while len(figures) > 1 and figures[-1] == 0:
        figures.pop()
        exp += 1  # type: ignore[operator]
    exponent = len(figures) - 1 + int(exp)
    minus = "-" if sign else ""
    if verb == "v" and (exponent < -4 or exponent >= 6):
        mantissa = str(figures[0]) + ("." + "".join(map(str, figures[1:])) if len(figures) > 1 else "")
        return f"{minus}{mantissa}e{'+' if exponent >= 0 else '-'}{abs(exponent):02d}"
    return minus + format(Decimal((0, tuple(figures), int(exp))), "f")


_EASYJSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_EASYJSON_SPECIAL = re.compile("[\x00-\x1f\"\\\\<>&\u2028\u2029]")


def _easyjson_escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    return _EASYJSON_ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def _easyjson_string(text: str) -> str:
    """JSON string as TiCDC's canal-json encoder (easyjson, HTML escaping on) writes it."""
    return '"' + _EASYJSON_SPECIAL.sub(_easyjson_escape, text) + '"'


_STRING_VALUED = frozenset(
    {MySQLType.DECIMAL, MySQLType.DATE, MySQLType.DATETIME, MySQLType.TIMESTAMP, MySQLType.TIME, MySQLType.JSON,
     MySQLType.ENUM, MySQLType.SET, MySQLType.CHAR, MySQLType.VARCHAR, MySQLType.TINYTEXT, MySQLType.TEXT,
     MySQLType.MEDIUMTEXT, MySQLType.LONGTEXT, MySQLType.VECTOR}
)


def _csv_field(text: str, is_string: bool, options: CsvOptions) -> str:
    if not is_string:
        return text
    if options.quote:
        q = options.quote
        return q + text.replace(q, q + q) + q
    out = []
    i = 0
    delim = options.delimiter
    while i < len(text):
        if text.startswith(delim, i):
            out.append("".join("\\" + c for c in delim))
            i += len(delim)
            continue
        ch = text[i]
        out.append({"\\": "\\\\", "\n": "\\n", "\r": "\\r"}.get(ch, ch))
        i += 1
    return "".join(out)


def _csv_value(col: ColumnDef, value: Any, options: CsvOptions) -> str:
    if value is None:
        return options.null
    if is_binary_column(col):
        if options.binary_encoding_method is BinaryEncodingMethod.HEX:
            return _csv_field(value.hex(), True, options)
        return _csv_field(base64.b64encode(value).decode("ascii"), True, options)
    if isinstance(value, float):
        return go_format_float(value, "v")
    if isinstance(value, int):
        return str(value)
    return _csv_field(str(value), col.type in _STRING_VALUED or isinstance(value, str), options)


def _csv_writer(col: ColumnDef, options: CsvOptions) -> Callable[[Any], str]:
    """:func:`_csv_value` for one column, with what depends on the column alone decided once."""
    null = options.null
    if is_binary_column(col):
        return lambda value: null if value is None else _csv_value(col, value, options)
    string_typed = col.type in _STRING_VALUED

    def write(value: Any) -> str:
        if value is None:
            return null
        kind = type(value)
        if kind is int:
            return str(value)
        if kind is str:
            return _csv_field(value, True, options)
        if kind is float:
            return go_format_float(value, "v")
        return _csv_field(str(value), string_typed, options)

    return write


def _csv_record(op: str, table: TableDef, commit_ts: int, is_update: bool, row: dict[str, Any],
                options: CsvOptions, writers: list[tuple[str, Callable[[Any], str]]] | None = None) -> str:
    fields = [_csv_field(op, True, options), _csv_field(table.table, True, options),
              _csv_field(table.schema_name, True, options)]
    if options.include_commit_ts:
        fields.append(str(commit_ts))
    if options.output_old_value:
        fields.append("true" if is_update else "false")
    if writers is None:
        fields.extend(_csv_value(c, row[c.name], options) for c in table.columns)
    else:
        fields.extend(write(row[name]) for name, write in writers)
    return options.delimiter.join(fields) + options.terminator


_SQL_TYPES = {
    MySQLType.TINYINT: -6, MySQLType.SMALLINT: 5, MySQLType.MEDIUMINT: 4, MySQLType.INT: 4, MySQLType.BIGINT: -5,
    MySQLType.FLOAT: 7, MySQLType.DOUBLE: 8, MySQLType.DECIMAL: 3, MySQLType.BIT: -7, MySQLType.SET: -7,
    MySQLType.ENUM: 4, MySQLType.YEAR: 12, MySQLType.JSON: 12, MySQLType.DATE: 91, MySQLType.TIME: 92,
    MySQLType.DATETIME: 93, MySQLType.TIMESTAMP: 93, MySQLType.CHAR: 1, MySQLType.VARCHAR: 12,
    MySQLType.TINYTEXT: 2005, MySQLType.TEXT: 2005, MySQLType.MEDIUMTEXT: 2005, MySQLType.LONGTEXT: 2005,
}
# TiCDC promotes unsigned integers per value to the next wider java.sql type.
_UNSIGNED_PROMOTION = {
    MySQLType.TINYINT: (127, 5), MySQLType.SMALLINT: (32767, 4), MySQLType.INT: (2147483647, -5),
    MySQLType.BIGINT: (9223372036854775807, 3),
}


def _sql_type(col: ColumnDef, value: Any) -> int:
    if is_binary_column(col):
        return 2004
    if col.unsigned and col.type in _UNSIGNED_PROMOTION and isinstance(value, int):
        limit, promoted = _UNSIGNED_PROMOTION[col.type]
        if value > limit:
            return promoted
    return _SQL_TYPES[col.type]


def _mysql_type(col: ColumnDef) -> str:
    text = col.type.value.lower()
    if col.unsigned and col.type not in (MySQLType.BIT, MySQLType.YEAR):
        text += " unsigned"
    return text


def _canal_value(col: ColumnDef, value: Any) -> str:
    if value is None:
        return "null"
    if col.type in (MySQLType.ENUM, MySQLType.SET):
        raise ValueError("the demo's canal-json table has no ENUM/SET columns")
    if isinstance(value, bytes):
        return _easyjson_string(value.decode("latin-1"))
    if isinstance(value, float):
        return _easyjson_string(go_format_float(value, "f"))
    return _easyjson_string(str(value))


@dataclass(frozen=True)
class _CanalTable:
    """What a table's canal-json lines share: computed once per table, not per line (the demo is linear, but
    its constant matters at 10^6 rows)."""

    columns: tuple[tuple[ColumnDef, str], ...]  # (column, its name as a JSON string)
    head: str  # {"id":0,"database":...,"pkNames":[...],"isDdl":false,"type":"
    mysql_types: str
    fixed_sql_types: str | None  # the sqlType object when no value changes it (no unsigned promotion)


def _canal_table(table: TableDef) -> _CanalTable:
    columns = tuple((c, _easyjson_string(c.name)) for c in table.columns)
    pk = ",".join(_easyjson_string(c) for c in table.primary_key)
    varies = any(c.unsigned and c.type in _UNSIGNED_PROMOTION for c in table.columns)
    return _CanalTable(
        columns=columns,
        head=(f'{{"id":0,"database":{_easyjson_string(table.schema_name)},"table":{_easyjson_string(table.table)},'
              f'"pkNames":[{pk}],"isDdl":false,"type":"'),
        mysql_types=",".join(f"{name}:{_easyjson_string(_mysql_type(c))}" for c, name in columns),
        fixed_sql_types=None if varies else ",".join(f"{name}:{_sql_type(c, None)}" for c, name in columns),
    )


def _canal_line(kind: str, table: TableDef | _CanalTable, commit_ts: int, build_ms: int,
                old: dict[str, Any] | None, data: dict[str, Any]) -> str:
    shape = table if isinstance(table, _CanalTable) else _canal_table(table)
    sql_row = old if kind == "DELETE" and old is not None else data
    sql_types = shape.fixed_sql_types or ",".join(
        f"{name}:{_sql_type(c, sql_row.get(c.name))}" for c, name in shape.columns)

    def obj(row: dict[str, Any]) -> str:
        return "{" + ",".join(f"{name}:{_canal_value(c, row[c.name])}" for c, name in shape.columns) + "}"

    return (
        f'{shape.head}{kind}","es":{commit_ts >> 18},"ts":{build_ms},"sql":"",'
        f'"sqlType":{{{sql_types}}},"mysqlType":{{{shape.mysql_types}}},'
        f'"old":{"[" + obj(old) + "]" if kind == "UPDATE" and old is not None else "null"},'
        f'"data":[{obj(data)}],"_tidb":{{"commitTs":{commit_ts}}}}}'
    )


# --------------------------------------------------------------------------------------------------
# The tables and their rows


def _col(name: str, type_: MySQLType, **kw: Any) -> ColumnDef:
    return ColumnDef(name=name, type=type_, **kw)


ORDERS = TableDef(
    schema_name="shop", table="orders", primary_key=("id",),
    columns=(
        _col("id", MySQLType.BIGINT, nullable=False),
        _col("customer_code", MySQLType.VARCHAR, length=16, nullable=False),
        _col("amount", MySQLType.DECIMAL, precision=12, scale=2, nullable=False),
        _col("status", MySQLType.ENUM, elements=("new", "paid", "shipped", "cancelled"), nullable=False, default="new"),
        _col("created_at", MySQLType.DATETIME, fsp=3, nullable=False),
        _col("note", MySQLType.TEXT),
        _col("attrs", MySQLType.JSON),
    ),
)
_CHANNEL = _col("channel", MySQLType.VARCHAR, length=16, nullable=False, default="web")
ADD_CHANNEL = "ALTER TABLE `shop`.`orders` ADD COLUMN `channel` VARCHAR(16) NOT NULL DEFAULT 'web'"

CUSTOMERS = TableDef(
    schema_name="shop", table="customers", unique_keys=(("code",),),
    columns=(
        _col("code", MySQLType.VARCHAR, length=16, nullable=False),
        _col("name", MySQLType.VARCHAR, length=64, nullable=False),
        _col("email", MySQLType.VARCHAR, length=128),
        _col("tags", MySQLType.SET, elements=("vip", "newsletter", "beta")),
        _col("signup_date", MySQLType.DATE, nullable=False),
        _col("preferred_time", MySQLType.TIME),
        _col("balance", MySQLType.DOUBLE),
        _col("avatar_hash", MySQLType.VARBINARY, length=16, binary=True),
    ),
)

EVENTS = TableDef(
    schema_name="crm", table="events", primary_key=("id",),
    columns=(
        _col("id", MySQLType.BIGINT, unsigned=True, nullable=False),
        _col("flags", MySQLType.BIT, length=10, nullable=False),
        _col("payload", MySQLType.VARBINARY, length=64, binary=True),
        _col("occurred_at", MySQLType.TIMESTAMP, fsp=3, nullable=False),
        _col("kind", MySQLType.VARCHAR, length=32, nullable=False),
        _col("score", MySQLType.DOUBLE),
    ),
)

_NOTES = [
    None, "", "leave at the door", 'say "hi", please', "line one\r\nline two", "multi\nline, with comma",
    "back\\slash", "ünïcödé ✓ 注文", "\\N", "tab\there", "a,b,c",
]
_ATTRS = [None, '{"gift": false, "tags": ["a", "b"]}', '{"gift": true, "tags": []}', "[]", '{"note": "x\\"y"}']
_NAMES = ["Ana Lima", "José Álvarez", "O'Brien, Pat", "李雷", 'Dana "DJ" Smith', "Émile Zola", "Kai"]
_TAGS = [None, "", "vip", "vip,beta", "newsletter,beta", "vip,newsletter,beta"]
_BALANCES = [None, 0.0, 12.5, -3.25, 1234567.0, 1e-05, 99.99, 0.1, 250000.75]
_KINDS = ["click", "view", "purchase", "<script>&amp;", "tab\there", "née", "quote\"d"]
_SCORES = [None, 0.5, 1.5e20, 1e-05, -2.75, 3.0, 0.1]
_BIG_IDS = [9223372036854775807, 9223372036854775808, 18446744073709551615, 18446744073709551614]


def _ms_text(moment: dt.datetime, fsp: int) -> str:
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    return text + ("." + f"{moment.microsecond:06d}"[:fsp] if fsp else "")


class _Random(random.Random):
    """``random.Random`` whose integer draws take one call to the C generator (``random()``) instead of
    Python's exact rejection sampling: a bias below 2^-40 that a demo does not care about, for a third of the
    time per row. Deterministic for a seed, as its parent."""

    def randint(self, a: int, b: int) -> int:
        return a + int(self.random() * (b - a + 1))

    def randrange(self, start: int, stop: Any = None, step: int = 1) -> int:  # type: ignore[override]
        if stop is None and step == 1:
            return int(self.random() * start)
        return super().randrange(start, stop, step)

    def choice(self, seq: Any) -> Any:
        return seq[int(self.random() * len(seq))]


class LiveKeys:
    """The live handle keys of one table: add, remove and a uniform random choice in constant time (a list
    and each key's place in it; a removed key's place takes the last key), so a demo of n rows costs O(n).

    ``draws`` counts the random draws :meth:`choose` made (a test checks the generator stays linear).
    """

    def __init__(self) -> None:
        self._keys: list[Any] = []
        self._at: dict[Any, int] = {}
        self.draws = 0

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: Any) -> bool:
        return key in self._at

    def add(self, key: Any) -> None:
        if key not in self._at:
            self._at[key] = len(self._keys)
            self._keys.append(key)

    def remove(self, key: Any) -> None:
        at = self._at.pop(key)
        last = self._keys.pop()
        if at < len(self._keys):
            self._keys[at] = last
            self._at[last] = at

    def choose(self, rng: random.Random, exclude: set[Any]) -> Any | None:
        """A live key not in ``exclude`` (the few keys a transaction touched already), or ``None``."""
        if len(self._keys) <= sum(1 for key in exclude if key in self._at):
            return None
        while True:
            self.draws += 1
            key = self._keys[rng.randrange(len(self._keys))]
            if key not in exclude:
                return key


class _Generator:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.order_ids = itertools.count(1001)
        self.customer_ids = itertools.count(1)
        self.event_ids = itertools.chain(_BIG_IDS, itertools.count(1))
        self._decks: dict[str, list[Any]] = {}

    def pick(self, deck: str, choices: list[Any]) -> Any:
        """Values dealt from a shuffled deck, so every hard case shows up once there are enough rows."""
        cards = self._decks.get(deck)
        if not cards:
            cards = list(choices)
            self.rng.shuffle(cards)
            self._decks[deck] = cards
        return cards.pop()

    def new_key(self, name: str) -> Any:
        if name == "shop.orders":
            return next(self.order_ids)
        if name == "shop.customers":
            return f"C{next(self.customer_ids):04d}"
        return next(self.event_ids)

    def row(self, name: str, key: Any, has_channel: bool) -> dict[str, Any]:
        rng = self.rng
        if name == "shop.orders":
            cents = rng.randint(1, 999_999)
            created = _START - dt.timedelta(days=rng.randint(0, 30), milliseconds=rng.randint(0, 86_400_000))
            row = {
                "id": key,
                "customer_code": f"C{rng.randint(1, 40):04d}",
                "amount": f"{cents // 100}.{cents % 100:02d}",
                "status": rng.choice(ORDERS.columns[3].elements),
                "created_at": _ms_text(created, 3),
                "note": self.pick("note", _NOTES),
                "attrs": self.pick("attrs", _ATTRS),
            }
            if has_channel:
                row["channel"] = rng.choice(["web", "app", "store"])
            return row
        if name == "shop.customers":
            signup = dt.date(2023, 1, 1) + dt.timedelta(days=rng.randint(0, 400))
            return {
                "code": key,
                "name": self.pick("name", _NAMES),
                "email": rng.choice([None, f"{str(key).lower()}@example.com"]),
                "tags": self.pick("tags", _TAGS),
                "signup_date": signup.isoformat(),
                "preferred_time": rng.choice([None, "09:30:00", "18:05:59", "-01:00:00", "100:00:00"]),
                "balance": self.pick("balance", _BALANCES),
                "avatar_hash": rng.choice([None, rng.randbytes(16)]),
            }
        occurred = _START + dt.timedelta(milliseconds=rng.randint(0, 3_600_000))
        payload = bytes([0, 255, 13, 10]) + rng.randbytes(rng.randint(0, 8))
        return {
            "id": key,
            "flags": rng.randint(0, 1023),
            "payload": self.pick("payload", [None, b"", payload, payload]),
            "occurred_at": _ms_text(occurred, 3),
            "kind": self.pick("kind", _KINDS),
            "score": self.pick("score", _SCORES),
        }

    def change(self, name: str, row: dict[str, Any]) -> dict[str, Any]:
        """An UPDATE of the non-key columns (the handle key never changes: TiCDC would split that)."""
        rng = self.rng
        new = dict(row)
        if name == "shop.orders":
            statuses = [s for s in ORDERS.columns[3].elements if s != row["status"]]
            new["status"] = rng.choice(statuses)
            new["note"] = rng.choice([n for n in _NOTES if n != row["note"]])
            if "channel" in new and rng.random() < 0.5:
                new["channel"] = "app" if row["channel"] != "app" else "store"
        elif name == "shop.customers":
            new["balance"] = rng.choice([b for b in _BALANCES if b != row["balance"]])
            new["tags"] = rng.choice([t for t in _TAGS if t != row["tags"]])
            new["email"] = f"new.{str(row['code']).lower()}@example.org"
        else:
            new["kind"] = rng.choice([k for k in _KINDS if k != row["kind"]])
            new["score"] = rng.choice([s for s in _SCORES if s != row["score"]])
            new["flags"] = (row["flags"] + 1) % 1024
        return new


# --------------------------------------------------------------------------------------------------
# Writing


def _create_statement(table: TableDef) -> str:
    lines = []
    for c in table.columns:
        line = f"  `{c.name}` {c.sql_type()}"
        if not c.nullable:
            line += " NOT NULL"
        if c.default is not None:
            line += " DEFAULT '" + str(c.default).replace("'", "''") + "'"
        lines.append(line)
    if table.primary_key:
        lines.append("  PRIMARY KEY (" + ", ".join(f"`{k}`" for k in table.primary_key) + ")")
    for i, uk in enumerate(table.unique_keys, start=1):
        lines.append(f"  UNIQUE KEY `uk_{i}` (" + ", ".join(f"`{k}`" for k in uk) + ")")
    return f"CREATE TABLE `{table.schema_name}`.`{table.table}` (\n" + ",\n".join(lines) + "\n)"


def _write_schema_file(root: Path, table: TableDef, query: str = "", ddl_type: int = 0) -> Path:
    """A table schema file, written by the tabledef module; ``Query``/``Type`` set for a DDL version."""

    return Path(write_table_schema_file(table, root, query=query, ddl_type=ddl_type))


@dataclass
class _Txn:
    commit_ts: int
    ops: list[tuple[str, Op, Any]]  # (table, op, key)


def _csv_change(op: Op, table: TableDef, commit_ts: int, before: Any, after: Any, options: CsvOptions,
                writers: Any) -> tuple[str, dict[str, Any] | None]:
    """A change as TiCDC's CSV writer writes it (an UPDATE with ``output-old-value``: its DELETE and INSERT lines),
    and the before image its event keeps (none for an UPDATE without old values)."""
    if op is Op.INSERT:
        return _csv_record("I", table, commit_ts, False, after, options, writers), before
    if op is Op.DELETE:
        return _csv_record("D", table, commit_ts, False, before, options, writers), before
    if options.output_old_value:
        return (_csv_record("D", table, commit_ts, True, before, options, writers)
                + _csv_record("I", table, commit_ts, True, after, options, writers)), before
    return _csv_record("U", table, commit_ts, False, after, options, writers), None


class _DemoWriter:
    """One demo directory being written: its clock (TiDB TSOs from :data:`_START` on), each table's current
    version, rows and live keys, and what was written so far (events, op counts, data files). Each step writes
    its part of the directory, in the order :func:`generate_demo` calls them (the random draws follow that order)."""

    def __init__(self, root: Path, rng: _Random, rows_per_table: int, csv_options: CsvOptions, keep_events: bool,
                 max_rows_per_file: int, progress: Callable[[int, int], None] | None,
                 live_keys: Callable[[], LiveKeys]) -> None:
        self.root, self.rng, self.gen = root, rng, _Generator(rng)
        self.csv_options, self.keep_events, self.max_rows_per_file = csv_options, keep_events, max_rows_per_file
        self.progress = progress
        self.physical = int(_START.timestamp() * 1000)
        self.start_ts = self.tso()
        self.names = ["shop.orders", "shop.customers", "crm.events"]
        self.base = {"shop.orders": ORDERS, "shop.customers": CUSTOMERS, "crm.events": EVENTS}
        self.formats = {"shop.orders": "csv", "shop.customers": "csv", "crm.events": "json"}
        self.current: dict[str, TableDef] = {
            n: self.base[n].model_copy(update={"version": self.start_ts}) for n in self.names}
        self.table_versions = {(t.schema_name, t.table, t.version): t for t in self.current.values()}
        self.state: dict[str, dict[Any, dict[str, Any]]] = {n: {} for n in self.names}
        self.live = {n: live_keys() for n in self.names}
        self.events: dict[str, list[ChangeEvent]] = {n: [] for n in self.names}
        self.counts = {n: [0, 0, 0] for n in self.names}
        self.files: list[str] = []
        self.dir_numbers: dict[str, int] = {}
        self.has_channel = False
        n = rows_per_table
        self.phase_inserts = [n // 2, n - n // 2 - n // 4, n // 4]
        self.phase_updates = [0, max(1, n // 4), max(1, n // 6)]
        self.phase_deletes = [0, max(1, n // 6), 1]
        self.total_changes = len(self.names) * sum(self.phase_inserts + self.phase_updates + self.phase_deletes)
        self.written = 0
        self.reported = 0

    def tso(self) -> int:
        """The next commit ts (writes nothing): a TSO (physical ms << 18 | logical) a little later than the last."""
        self.physical += self.rng.randint(40, 900)
        return (self.physical << 18) | self.rng.randint(0, 7)

    def write_schemas(self) -> None:
        """Writes each table's schema file of its first version (the start ts)."""
        for t in self.current.values():
            _write_schema_file(self.root, t)

    def plan_phase(self, phase: int) -> list[_Txn]:
        """The transactions of a phase (writes nothing): its inserts, updates and deletes of every table shuffled
        (inserts first where a table has no row yet), 1-3 changes each."""
        work = [(name, op) for name in self.names
                for op, count in ((Op.INSERT, self.phase_inserts[phase]), (Op.UPDATE, self.phase_updates[phase]),
                                  (Op.DELETE, self.phase_deletes[phase]))
                for _ in range(count)]
        self.rng.shuffle(work)
        # inserts before the updates/deletes that need live rows: stable order by "needs a row"
        work.sort(key=lambda item: item[1] is not Op.INSERT and not self.state[item[0]])
        txns = []
        at = 0
        while at < len(work):
            size = self.rng.randint(1, 3)
            txns.append(_Txn(0, [(name, op, None) for name, op in work[at:at + size]]))
            at += size
        return txns

    def apply(self, txn: _Txn, commit_ts: int, pending: dict[str, list[tuple[int, str, Op, Any, Any]]]) -> None:
        """One transaction on the tables' rows (writes nothing yet): keys chosen and rows made, each change
        queued in ``pending`` per table, deletes first and then by handle, as TiCDC orders them."""
        touched: dict[str, set[Any]] = {name: set() for name in self.names}
        per_table: dict[str, list[tuple[Op, Any, dict[str, Any] | None, dict[str, Any] | None]]] = {}
        for name, op, _ in txn.ops:
            before: dict[str, Any] | None
            after: dict[str, Any] | None
            if op is Op.INSERT:
                key = self.gen.new_key(name)
                after = self.gen.row(name, key, self.has_channel and name == "shop.orders")
                before = None
            else:
                key = self.live[name].choose(self.rng, touched[name])
                if key is None:
                    continue
                before = dict(self.state[name][key])
                after = self.gen.change(name, before) if op is Op.UPDATE else None
            touched[name].add(key)
            per_table.setdefault(name, []).append((op, key, before, after))
        for name, ops in per_table.items():
            ops.sort(key=lambda o: (o[0] is not Op.DELETE, o[1]))
            for op, key, before, after in ops:
                if op is Op.DELETE:
                    del self.state[name][key]
                    self.live[name].remove(key)
                else:
                    self.state[name][key] = after  # type: ignore[assignment]
                    self.live[name].add(key)
                self.counts[name][[Op.INSERT, Op.UPDATE, Op.DELETE].index(op)] += 1
                pending[name].append((commit_ts, name, op, before, after))

    def run_phase(self, phase: int) -> None:
        """Writes one flush: the phase's transactions applied, then each table's changes as data files of at most
        ``max_rows_per_file`` changes in the flush's date folder."""
        pending: dict[str, list[tuple[int, str, Op, Any, Any]]] = {name: [] for name in self.names}
        for txn in self.plan_phase(phase):
            self.apply(txn, self.tso(), pending)
        flush_ms = self.physical + self.rng.randint(5, 50)
        date = dt.datetime.fromtimestamp(flush_ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d")
        step = max(1, self.max_rows_per_file)
        for name in self.names:
            rows = pending[name]
            for start in range(0, len(rows), step):
                self.flush(name, rows[start:start + step], date)

    def flush(self, name: str, rows: list[tuple[int, str, Op, Any, Any]], date: str) -> None:
        """Writes one data file of table ``name`` holding ``rows`` (CSV or canal-json, the next file number in
        its version's date folder) and that folder's ``meta/CDC.index``; keeps each change's event."""
        table = self.current[name]
        directory = f"{table.schema_name}/{table.table}/{table.version}/{date}"
        number = self.dir_numbers.get(directory, 0) + 1
        self.dir_numbers[directory] = number
        ext = "csv" if self.formats[name] == "csv" else "json"
        file_name = data_file_name(number, ext)
        relpath = f"{directory}/{file_name}"
        (self.root / directory / "meta").mkdir(parents=True, exist_ok=True)
        (self.root / directory / "meta" / "CDC.index").write_text(file_name + "\n", encoding="utf-8")
        options = self.csv_options
        canal = _canal_table(table) if ext == "json" else None
        writers = [(c.name, _csv_writer(c, options)) for c in table.columns] if ext == "csv" else None
        text_parts: list[str] = []
        line = 1
        if ext == "csv" and options.output_field_header:
            header = options.delimiter.join(options.header([c.name for c in table.columns]))
            text_parts.append(header + options.terminator)
            line += text_parts[-1].count("\n")
        for commit_ts, _, op, before, after in rows:
            source = f"{relpath}:{line}"
            if ext == "csv":
                chunk, ev_before = _csv_change(op, table, commit_ts, before, after, options, writers)
            else:
                kind = {Op.INSERT: "INSERT", Op.UPDATE: "UPDATE", Op.DELETE: "DELETE"}[op]
                chunk = _canal_line(kind, canal or table, commit_ts, (commit_ts >> 18) + self.rng.randint(1, 50),
                                    before if op is Op.UPDATE else None, before if op is Op.DELETE else after) + "\r\n"
                ev_before = before
            text_parts.append(chunk)
            line += chunk.count("\n")
            if self.keep_events:
                self.keep_event(name, table, op, commit_ts, ev_before, after, source, exact=ext == "json"
                                or options.include_commit_ts)
            self.count_written()
        (self.root / relpath).write_bytes("".join(text_parts).encode("utf-8"))
        self.files.append(relpath)

    def keep_event(self, name: str, table: TableDef, op: Op, commit_ts: int, before: dict[str, Any] | None,
                   after: dict[str, Any] | None, source: str, *, exact: bool) -> None:
        """Keeps a change's event (writes nothing); ``exact``: its file holds the commit ts."""
        self.events[name].append(ChangeEvent(
            schema=table.schema_name, table=table.table, op=op, commit_ts=commit_ts if exact else 0,
            after=dict(after) if after is not None else None,
            before=dict(before) if before is not None else None,
            table_version=table.version, source=source, extra={} if exact else {"commit_ts_exact": False},
        ))

    def count_written(self) -> None:
        """One more change written: ``progress`` told every :data:`PROGRESS_STEP` changes."""
        self.written += 1
        if self.progress is not None and self.written - self.reported >= PROGRESS_STEP:
            self.reported = self.written
            self.progress(self.written, self.total_changes)

    def add_channel(self) -> int:
        """Writes the DDL: ``shop.orders``' new version's schema file (ADD COLUMN with a default, its query and
        type); existing rows show the default from now on. Returns its commit ts."""
        ddl_ts = self.tso()
        orders = self.current["shop.orders"]
        new_orders = orders.model_copy(update={"columns": (*orders.columns, _CHANNEL), "version": ddl_ts})
        self.current["shop.orders"] = new_orders
        self.table_versions[("shop", "orders", ddl_ts)] = new_orders
        _write_schema_file(self.root, new_orders, ADD_CHANNEL, 5)
        for row in self.state["shop.orders"].values():
            row["channel"] = "web"
        self.has_channel = True
        return ddl_ts

    def write_checkpoint(self) -> int:
        """Writes the changefeed's ``metadata`` file: a checkpoint ts after every change. Returns it."""
        if self.progress is not None:
            # some planned updates or deletes find no row: the total is what was written
            self.progress(self.written, self.written)
        checkpoint_ts = self.tso()
        (self.root / "metadata").write_text(json.dumps({"checkpoint-ts": checkpoint_ts}, separators=(",", ":")),
                                            encoding="utf-8")
        return checkpoint_ts

    def manifest(self, ddl_ts: int, checkpoint_ts: int) -> DemoManifest:
        """What was written (writes nothing): the tables' versions, events, final rows and counts, the files."""
        names = self.names
        full_tables = {
            "shop.orders": self.current["shop.orders"].model_copy(update={"version": ddl_ts}),
            "shop.customers": self.current["shop.customers"],
            "crm.events": self.current["crm.events"],
        }
        key_columns = {name: tuple(full_tables[name].handle_key_names() or ()) for name in names}
        final_rows = {
            name: {tuple(row[k] for k in key_columns[name]): dict(row) for row in self.state[name].values()}
            if self.keep_events else {}
            for name in names
        }
        return DemoManifest(
            root=self.root,
            csv_options=self.csv_options,
            start_ts=self.start_ts,
            checkpoint_ts=checkpoint_ts,
            formats=self.formats,
            tables=full_tables,
            table_versions=self.table_versions,
            create_statements={name: _create_statement(self.base[name]) for name in names},
            ddl_statements={"shop.orders": [ADD_CHANNEL], "shop.customers": [], "crm.events": []},
            schema_versions={"shop.orders": (self.start_ts, ddl_ts), "shop.customers": (self.start_ts,),
                             "crm.events": (self.start_ts,)},
            key_columns=key_columns,
            events=self.events,
            final_rows=final_rows,
            counts={name: OpCounts(*self.counts[name]) for name in names},
            data_files=self.files,
        )


def generate_demo(
    root: Path | str,
    *,
    seed: int = 7,
    rows_per_table: int = 12,
    csv_options: CsvOptions = DEMO_CSV_OPTIONS,
    keep_events: bool = True,
    max_rows_per_file: int = MAX_ROWS_PER_FILE,
    progress: Callable[[int, int], None] | None = None,
    live_keys: Callable[[], LiveKeys] = LiveKeys,
) -> DemoManifest:
    """Write the demo storage-sink directory under ``root`` and return its manifest.

    ``rows_per_table`` (at least 4) is the number of rows inserted into each table in total; a
    quarter of that are updated and about a sixth deleted, spread over the three flushes. The same
    ``seed`` gives byte-identical files. ``csv_options`` may change the CSV writer (quote/escape
    mode, delimiter, header, old values, commit ts, hex binary), not ``output-handle-key``.

    The time and memory taken grow linearly with the rows. ``keep_events=False`` leaves the manifest's
    ``events`` and ``final_rows`` empty (counts, versions and files are kept), for directories too large to
    hold in memory twice; a flush of more than ``max_rows_per_file`` changes of a table is split into files
    of at most that many (TiCDC rotates its files by size too); ``progress(done, total)`` is called with
    the changes written so far, every :data:`PROGRESS_STEP` changes and at the end.

    >>> # manifest = generate_demo(Path("/tmp/demo")); manifest.counts["shop.orders"].inserts
    """
    if rows_per_table < 4:
        raise ValueError(f"rows_per_table must be at least 4, got {rows_per_table}")
    if csv_options.output_handle_key:
        raise ValueError("the demo does not write output-handle-key CSV")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    demo = _DemoWriter(root, _Random(seed), rows_per_table, csv_options, keep_events, max_rows_per_file, progress,
                       live_keys)
    demo.write_schemas()
    demo.run_phase(0)
    demo.run_phase(1)
    ddl_ts = demo.add_channel()  # ALTER TABLE ... ADD COLUMN mid-stream: the last flush has the new column
    demo.run_phase(2)
    checkpoint_ts = demo.write_checkpoint()
    return demo.manifest(ddl_ts, checkpoint_ts)


def write_rerun_files(manifest: DemoManifest, directory: Path | str) -> tuple[Path, Path]:
    """Write what a rerun of the job on the demo input needs, beside it: ``tables.sql`` (the CREATE TABLEs:
    schema files lack ``shop.customers``' unique key and the ENUM/SET members) and ``ticdc.toml`` (the
    changefeed's ``[sink.csv]`` settings). Returns both paths.

    >>> # write_rerun_files(generate_demo("/tmp/d/input"), "/tmp/d")  # run --source /tmp/d/input
    >>> #     --tables /tmp/d/tables.sql --config /tmp/d/ticdc.toml
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ddl = directory / "tables.sql"
    ddl.write_text(";\n\n".join(manifest.create_statements[n] for n in sorted(manifest.create_statements)) + ";\n",
                   encoding="utf-8")
    settings = directory / "ticdc.toml"
    lines = ["# The demo changefeed's CSV settings (TiCDC's [sink.csv] table)", "[sink.csv]"]
    for name, value in manifest.csv_options.model_dump(by_alias=True, exclude_defaults=True).items():
        lines.append(f"{name} = {str(value).lower() if isinstance(value, bool) else json.dumps(value)}")
    settings.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ddl, settings
