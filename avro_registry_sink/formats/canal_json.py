"""canal-json messages (TiCDC's flavour, and Alibaba Canal's) -> change events, DDLs and watermarks.

Interpretation follows Flink's canal-json format (FLIP-105):

* ``INSERT``: one insert per object of ``data`` (``after``).
* ``UPDATE``: one update per object of ``data`` (``after``); its ``before`` is the matching object of
  ``old`` laid over the new values, so columns missing from ``old`` (Canal and TiCDC's
  ``only-output-updated-columns`` send only the changed ones) keep their new value. Without ``old``
  the update has no before image.
* ``DELETE``: one delete per object of ``data`` (``before``: ``data`` holds the deleted row).
* ``isDdl: true``: a :class:`DdlEvent`; the job applies it with ``tabledef.ddl.apply_ddl`` to bump the
  table version.
* ``TIDB_WATERMARK``: a :class:`Watermark` (``_tidb.watermarkTs``).

The commit ts is ``_tidb.commitTs`` (``enable-tidb-extension=true``); without the extension only ``es``
(the commit's physical time in ms) exists, and ``es << 18`` is used: a TSO with the logical part 0,
exact to the millisecond, so two transactions committed in the same ms are indistinguishable. Such
events carry ``extra={"commit_ts_exact": False}``.

Values: TiCDC writes every non-NULL value as a JSON string. They are turned back into TiCDC's text
forms by the table definition's column type (:func:`convert_canal_value`): TINYINT..BIGINT, YEAR and
BIT -> ``int``; FLOAT/DOUBLE -> ``float``; binary-charset strings, which TiCDC decodes byte-for-byte
as ISO-8859-1, -> ``bytes`` (latin-1); ENUM (1-based index) and SET (bitmask) -> ``int`` when the text is
a number, as TiCDC sends them (the type map turns them into member names given the members; Alibaba
Canal sends member names, which stay text: an ENUM whose member names are themselves numbers is
therefore ambiguous and read as an index); everything else (DECIMAL, temporal, JSON, text) -> ``str``.

Table definitions come from ``tables``, a mapping keyed by ``(schema, table)`` or ``"schema.table"``.
When it has none for a message's table, ``tabledef.canal.table_from_canal`` derives one from the
message's ``mysqlType``/``sqlType``/``pkNames``: canal-json does not say which columns are nullable,
nor the ENUM/SET members or unique keys, so such a definition is a best effort (the job should
keep it and replace it when a DDL or schema file gives the real one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from avro_registry_sink.changes import ChangeEvent
from avro_registry_sink.errors import SourceError
from avro_registry_sink.formats.base import InputFormat, register
from avro_registry_sink.formats.json_text import refuse_lone_surrogates
from avro_registry_sink.model import Op
from avro_registry_sink.table import BINARY_TYPES, ColumnDef, MySQLType, TableDef
from avro_registry_sink.typemap.mysql import FLOAT_TYPES, INT_TYPES

# Imported inside functions, for start-up: the formats are imported by every Spark Python worker and by the
# CLI; the vectorized reader (and the encoder behind it) loads only where a batch uses it (about 20 more modules).

__all__ = [
    "CANAL_JSON",
    "CanalJson",
    "DdlEvent",
    "SourceEvent",
    "TableLookup",
    "Watermark",
    "commit_ts_from_ms",
    "commit_ts_value",
    "convert_canal_value",
    "derive_table",
    "events_from_canal",
    "find_table",
    "load_message",
    "message_shape",
    "parse_canal_line",
    "parse_canal_lines",
    "peek",
]


@dataclass(frozen=True)
class DdlEvent:
    """A DDL seen in a changelog: the job applies ``query`` to the table's definition.

    ``table`` is ``""`` for database-level DDL (``CREATE DATABASE``). ``kind`` is the producer's own
    label (canal ``type`` such as ``ALTER``/``CREATE``/``QUERY``, debezium ``tableChanges[].type``,
    storage schema file ``Type`` number as text). ``tables`` holds the table definitions after the DDL
    when the message carries them (debezium ``tableChanges``), else is empty.
    """

    schema: str
    table: str
    query: str
    commit_ts: int
    source: str = ""
    kind: str = ""
    tables: tuple[TableDef, ...] = ()


@dataclass(frozen=True)
class Watermark:
    """All events with a commit ts below ``ts`` have been delivered (TiCDC's resolved ts)."""

    ts: int
    source: str = ""


#: What a changelog message turns into.
SourceEvent = ChangeEvent | DdlEvent | Watermark

#: Table definitions by ``(schema, table)`` (or ``"schema.table"``).
TableLookup = Mapping[Any, TableDef]


def commit_ts_from_ms(ms: int) -> int:
    """A TSO from a physical time in ms (logical part 0): ``ms << 18``.

    >>> commit_ts_from_ms(1591943372224)
    417318403368288256
    """
    return commit_ts_value(int(ms) << 18)


def commit_ts_value(value: Any) -> int:
    """A message's commit ts as an int; :class:`SourceError` when it is past a 64-bit TSO (the row could not be
    written with it, and the vectorized readers never take it).

    >>> commit_ts_value(42)
    42
    """
    ts = int(value)
    if not -(1 << 63) <= ts < 1 << 63:
        digits = str(ts)
        shown = digits if len(digits) <= 40 else f"{digits[:40]}... ({len(digits)} digits)"
        raise SourceError(f"commit ts {shown} is past a 64-bit TSO.", reason="commit ts out of range")
    return ts


def find_table(tables: TableLookup | None, schema: str, table: str) -> TableDef | None:
    """The definition of ``schema.table`` in ``tables``, tried as ``(schema, table)`` then ``"schema.table"``."""
    if not tables:
        return None
    found = tables.get((schema, table))
    if found is None:
        found = tables.get(f"{schema}.{table}")
    return found


def load_message(message: Mapping[str, Any] | str | bytes, source: str) -> dict[str, Any]:
    """A JSON message as a dict (text and bytes are parsed), or :class:`SourceError`."""
    if isinstance(message, (str, bytes, bytearray)):
        try:
            parsed = json.loads(message)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SourceError(f"{source or 'message'}: not valid JSON ({exc}).", source=source, reason=str(exc)) from None
        refuse_lone_surrogates(message, parsed, source)
        message = parsed
    if not isinstance(message, Mapping):
        raise SourceError(
            f"{source or 'message'}: expected a JSON object, got {type(message).__name__}.",
            source=source, reason="not an object",
        )
    return dict(message)


# --------------------------------------------------------------------------------------------------
# Values



def convert_canal_value(col: ColumnDef, value: Any) -> Any:
    """One canal-json value -> TiCDC's text form for ``col``; raises ``ValueError`` with the reason.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType
    >>> convert_canal_value(ColumnDef(name="b", type=MySQLType.VARBINARY), "\\u00ff\\u0000A")
    b'\\xff\\x00A'
    >>> convert_canal_value(ColumnDef(name="e", type=MySQLType.ENUM), "2")
    2
    """
    if value is None:
        return None
    if isinstance(value, bool):
        value = int(value)
    kind = col.type
    if kind in INT_TYPES:
        if isinstance(value, int):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise ValueError(f"expected an integer, got {value!r}") from None
    if kind in FLOAT_TYPES:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number, got {value!r}") from None
    if kind in (MySQLType.ENUM, MySQLType.SET):
        if isinstance(value, int):
            return value
        text = str(value)
        return int(text) if text.isdigit() else text
    if col.binary or kind in BINARY_TYPES:
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        text = str(value)
        try:
            return text.encode("latin-1")  # TiCDC: each byte became one ISO-8859-1 character
        except UnicodeEncodeError:
            return text.encode("utf-8")  # not TiCDC's encoding: a producer that wrote the text itself
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return value if isinstance(value, str) else str(value)


# --------------------------------------------------------------------------------------------------
# Messages


def _commit_ts(message: Mapping[str, Any], source: str) -> tuple[int, bool]:
    tidb = message.get("_tidb")
    if isinstance(tidb, Mapping) and tidb.get("commitTs") is not None:
        return commit_ts_value(tidb["commitTs"]), True
    es = message.get("es")
    if es is None:
        raise SourceError(
            f"{source or 'message'}: canal-json message has neither _tidb.commitTs nor es, so no commit time.",
            source=source, reason="no commit ts",
        )
    return commit_ts_from_ms(int(es)), False


def events_from_canal(
    message: Mapping[str, Any] | str | bytes,
    *,
    tables: TableLookup | None = None,
    source: str = "",
    table: TableDef | None = None,
    table_version: int | None = None,
) -> list[SourceEvent]:
    """Interpret one canal-json message.

    ``table`` (when given) is used instead of looking the message's table up in ``tables``;
    ``table_version`` overrides the definition's version on the events (the storage reader passes its
    directory's version). Raises :class:`SourceError` for a malformed message.

    >>> msg = {"database": "shop", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "UPDATE",
    ...        "es": 1, "mysqlType": {"id": "int", "v": "varchar"}, "sqlType": {"id": 4, "v": 12},
    ...        "old": [{"v": "a"}], "data": [{"id": "1", "v": "b"}], "_tidb": {"commitTs": 42}}
    >>> from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
    >>> t = TableDef(schema_name="shop", table="t", primary_key=("id",), columns=(
    ...     ColumnDef(name="id", type=MySQLType.INT), ColumnDef(name="v", type=MySQLType.VARCHAR)))
    >>> [(e.op.value, e.before, e.after) for e in events_from_canal(msg, tables={("shop", "t"): t})]
    [('update', {'id': 1, 'v': 'a'}, {'id': 1, 'v': 'b'})]
    """
    msg = load_message(message, source)
    where = source or "message"
    kind = msg.get("type")
    if kind == "TIDB_WATERMARK":
        tidb = msg.get("_tidb")
        if not isinstance(tidb, Mapping) or tidb.get("watermarkTs") is None:
            raise SourceError(f"{where}: TIDB_WATERMARK message without _tidb.watermarkTs.", source=source,
                              reason="no watermark ts")
        return [Watermark(ts=int(tidb["watermarkTs"]), source=source)]
    schema_name = msg.get("database")
    table_name = msg.get("table")
    if not isinstance(schema_name, str) or not isinstance(table_name, str):
        raise SourceError(f"{where}: canal-json message without string 'database' and 'table'.", source=source,
                          reason="no database/table")
    commit_ts, exact = _commit_ts(msg, source)
    if msg.get("isDdl"):
        query = msg.get("sql")
        if not isinstance(query, str) or not query:
            raise SourceError(f"{where}: DDL message for {schema_name}.{table_name} without its 'sql'.",
                              source=source, reason="no sql")
        return [DdlEvent(schema=schema_name, table=table_name, query=query, commit_ts=commit_ts, source=source,
                         kind=str(kind or ""))]
    if kind not in ("INSERT", "UPDATE", "DELETE"):
        raise SourceError(
            f"{where}: unknown canal-json type {kind!r} for {schema_name}.{table_name}; expected INSERT, UPDATE, "
            "DELETE, TIDB_WATERMARK or a DDL (isDdl: true).",
            source=source, reason="unknown type",
        )
    if table is None:
        table = find_table(tables, schema_name, table_name)
    if table is None:
        from avro_registry_sink.tabledef.canal import table_from_canal

        table = table_from_canal(msg)
    elif (table.schema_name, table.table) != (schema_name, table_name):
        raise SourceError(
            f"{where}: message is for {schema_name}.{table_name}, expected {table.qualified_name}.",
            source=source, reason="table mismatch",
        )
    data = msg.get("data")
    old = msg.get("old")
    if not isinstance(data, list) or not data:
        raise SourceError(f"{where}: {kind} message for {table.qualified_name} without rows in 'data'.",
                          source=source, reason="no data")
    if kind == "UPDATE" and old is not None and (not isinstance(old, list) or len(old) != len(data)):
        raise SourceError(
            f"{where}: UPDATE message for {table.qualified_name} has {len(data)} rows in 'data' but "
            f"{len(old) if isinstance(old, list) else type(old).__name__} in 'old'.",
            source=source, reason="old/data mismatch",
        )
    version = table.version if table_version is None else table_version
    extra = {} if exact else {"commit_ts_exact": False}
    events: list[SourceEvent] = []
    for i, row in enumerate(data):
        image = _image(row, table, where, source)
        if kind == "INSERT":
            op, before, after = Op.INSERT, None, image
        elif kind == "DELETE":
            op, before, after = Op.DELETE, image, None
        else:
            op, after = Op.UPDATE, image
            before = None
            if isinstance(old, list):
                if not isinstance(old[i], Mapping):
                    raise SourceError(f"{where}: 'old' row {i} is not an object.", source=source, reason="bad old")
                merged = dict(row)  # columns missing from `old` kept their value (Flink's rule)
                merged.update(old[i])
                before = _image(merged, table, where, source)
        events.append(ChangeEvent(
            schema=schema_name, table=table_name, op=op, commit_ts=commit_ts, after=after, before=before,
            table_version=version, source=source, extra=extra,
        ))
    return events


def check_known_columns(row: Mapping[str, Any], table: TableDef, where: str, source: str) -> None:
    """Raise :class:`SourceError` naming the columns of ``row`` that ``table`` (at its version) lacks."""
    known = {c.name.lower() for c in table.columns}
    unknown = [name for name in row if name.lower() not in known]
    if unknown:
        raise SourceError(
            f"{where}: {table.qualified_name} (version {table.version}) has no column(s) "
            + ", ".join(repr(u) for u in unknown) + "; its columns are: " + ", ".join(c.name for c in table.columns)
            + ". Was a DDL missed?",
            source=source, table=table.qualified_name, column=unknown[0], reason="unknown column",
        )

def _image(row: Any, table: TableDef, where: str, source: str) -> dict[str, Any]:
    if not isinstance(row, Mapping):
        raise SourceError(f"{where}: a row of {table.qualified_name} is not a JSON object.", source=source,
                          reason="row not an object")
    check_known_columns(row, table, where, source)
    image: dict[str, Any] = {}
    provided = {name.lower(): value for name, value in row.items()}
    for col in table.columns:  # table order
        key = col.name.lower()
        if key not in provided:
            continue
        try:
            image[col.name] = convert_canal_value(col, provided[key])
        except ValueError as exc:
            raise SourceError(
                f"{where}: column {col.name!r} of {table.qualified_name} ({col.sql_type()}): {exc}.",
                source=source, table=table.qualified_name, column=col.name, reason=str(exc),
            ) from None
    return image


# --------------------------------------------------------------------------------------------------
# Peek and derived table definitions


def peek(msg: Mapping[str, Any]) -> tuple[str, str | None, str | None, int | None]:
    """What a decoded message is, before any table definition is needed:
    ``(kind, schema, table, commit_ts)`` with kind ``dml``, ``ddl`` or ``watermark``.

    >>> peek({"database": "s", "table": "t", "type": "INSERT", "es": 1})
    ('dml', 's', 't', 262144)
    """
    kind = msg.get("type")
    if kind == "TIDB_WATERMARK":
        return "watermark", None, None, None
    database, table = msg.get("database"), msg.get("table")
    tidb = msg.get("_tidb")
    commit_ts: int | None = None
    if isinstance(tidb, Mapping) and tidb.get("commitTs") is not None:
        commit_ts = commit_ts_value(tidb["commitTs"])
    elif msg.get("es") is not None:
        commit_ts = commit_ts_from_ms(int(msg["es"]))
    if msg.get("isDdl"):
        return "ddl", database, table, commit_ts
    if not isinstance(database, str) or not isinstance(table, str):
        raise SourceError("canal-json message without string 'database' and 'table'.", reason="no database/table")
    if commit_ts is None:
        raise SourceError("canal-json message has neither _tidb.commitTs nor es, so no commit time.",
                          reason="no commit ts")
    return "dml", database, table, commit_ts


def derive_table(message: str, source: str, *, previous: TableDef | None = None) -> TableDef | None:
    """A best-effort definition from one DML message (``mysqlType``/``sqlType``/``pkNames``), or ``None``;
    ``previous`` fills in what the message cannot say (see ``tabledef.canal.table_from_canal``)."""
    from avro_registry_sink.tabledef.canal import table_from_canal

    try:
        return table_from_canal(load_message(message, source), previous=previous)
    except Exception:  # noqa: BLE001 - the parse stage reports the table as unknown
        return None


def parse_canal_lines(
    text: str, table: TableDef, *, source: str, table_version: int
) -> tuple[list[ChangeEvent], list[SourceError]]:
    """A storage-sink canal-json data file (one message per line) -> (events, one error per bad line).

    ``text`` comes from :func:`~avro_registry_sink.formats.csv.decode_text`: a line holding invalid
    UTF-8 (kept as lone surrogates) is refused on its own; every error carries the line's raw bytes.
    """
    events: list[ChangeEvent] = []
    errors: list[SourceError] = []
    for number, line in enumerate(text.split("\n"), start=1):
        parse_canal_line(line, number, table, source=source, table_version=table_version, events=events, errors=errors)
    return events, errors


def parse_canal_line(line: str, number: int, table: TableDef, *, source: str, table_version: int,
                     events: list[ChangeEvent], errors: list[SourceError]) -> None:
    """Line ``number`` of a storage-sink canal-json data file (see :func:`parse_canal_lines`): its events go to
    ``events``, or its error to ``errors``; a blank line gives neither."""
    line = line.rstrip("\r")
    if not line.strip():
        return
    where = f"{source}:{number}"
    raw = line.encode("utf-8", "surrogateescape")
    try:
        if any("\udc80" <= ch <= "\udcff" for ch in line):
            raise SourceError(f"{where}: invalid UTF-8 bytes in the line.", reason="invalid UTF-8")
        got = events_from_canal(line, table=table, table_version=table_version, source=where)
    except SourceError as exc:
        context = dict(exc.context)
        context.update(source=source, line=number, raw=raw)
        errors.append(SourceError(exc.message, **context))
        return
    for event in got:
        if isinstance(event, ChangeEvent):
            events.append(event)
        else:
            errors.append(SourceError(
                f"{where}: a {type(event).__name__} in a storage-sink data file (DDLs are schema files, and "
                "the storage sink writes no watermarks); ignored.",
                source=source, line=number, reason="not a DML message", raw=raw,
            ))


def message_shape(msg: Mapping[str, Any]) -> str | None:
    """The column set a DML message's ``mysqlType`` names (sorted, lower-case, comma-separated), or ``None``.

    >>> message_shape({"mysqlType": {"id": "int", "V": "varchar"}})
    'id,v'
    """
    types = msg.get("mysqlType")
    return ",".join(sorted(str(k).lower() for k in types)) if isinstance(types, Mapping) and types else None


class CanalJson(InputFormat):
    """canal-json: TiCDC's canal-json messages (Kafka records, or the lines of a storage tree's ``.json`` files)."""

    name = "canal-json"
    file_extension = "json"
    is_changelog = True
    carries_types = True

    def peek(self, msg: Mapping[str, Any]) -> tuple[str, str | None, str | None, int | None]:
        return peek(msg)

    def shape(self, msg: Mapping[str, Any]) -> str | None:
        return message_shape(msg)

    def events(self, message: Any, *, source: str = "", table: TableDef | None = None,
               tables: TableLookup | None = None, table_version: int | None = None) -> list[SourceEvent]:
        return events_from_canal(message, tables=tables, table=table, source=source, table_version=table_version)

    def derive_table(self, message: str, source: str, *, previous: TableDef | None = None) -> TableDef | None:
        return derive_table(message, source, previous=previous)

    def read_file(self, text: str, table: TableDef, options: Any, *, source: str, table_version: int
                  ) -> tuple[list[ChangeEvent], list[SourceError]]:
        return parse_canal_lines(text, table, source=source, table_version=table_version)

    def arrow_rows(self, messages: Any, versions: Any) -> Any:
        from avro_registry_sink.formats.changelog_arrow import canal_rows

        return canal_rows(messages, versions)

    def summary_peek(self, texts: Any, body: Any, rows: Any) -> Any:
        from avro_registry_sink.formats.changelog_arrow import canal_summary_peek

        return canal_summary_peek(texts, body, rows)


#: The canal-json format object (see :mod:`avro_registry_sink.formats.base`).
CANAL_JSON = register(CanalJson())
