"""debezium-json messages (TiCDC's ``protocol=debezium`` and real Debezium MySQL) -> events.

A message is either the Kafka Connect envelope ``{"schema": {...}, "payload": {...}}`` or the bare
payload (``debezium-disable-schema=true``, or Debezium's ``value.converter.schemas.enable=false``).
A ``null`` value (Debezium's tombstone after a delete) gives no events.

* ``op`` ``c`` (insert), ``r`` (snapshot read: an insert), ``u`` (update: ``before`` when
  ``debezium-output-old-value`` is on, and ``after``), ``d`` (delete: ``before``). ``t`` (Debezium's
  TRUNCATE) becomes a :class:`DdlEvent` with a ``TRUNCATE TABLE`` query.
* ``op`` ``m``: TiCDC's watermark -> :class:`Watermark` (``source.commit_ts``).
* No ``op`` and a ``ddl``: a :class:`DdlEvent`; its ``tables`` are built from ``tableChanges`` (the
  table as it is after the DDL) when every column type there is one this project knows.
* Commit ts: ``source.commit_ts`` (TiCDC); else ``source.ts_ms << 18`` (else the payload's ``ts_ms``),
  exact to the millisecond only, flagged ``extra={"commit_ts_exact": False}``.

Values are converted back to TiCDC's text forms (see :mod:`avro_registry_sink.changes`) using the
table definition when ``tables`` has it and the field schemas of the envelope when present (the
``name`` of a field fixes units: ``io.debezium.time.Timestamp`` is ms, ``MicroTimestamp`` µs ...):

==========================  =================================================================
DATE                        days since 1970-01-01 -> ``YYYY-MM-DD``
DATETIME                    epoch ms (fsp <= 3) / µs (fsp > 3), read as UTC -> ``YYYY-MM-DD HH:MM:SS[.f]``
TIMESTAMP                   ``...Z`` (ISO, UTC) -> ``YYYY-MM-DD HH:MM:SS[.f]`` **in UTC**
TIME                        µs -> ``[-]HH:MM:SS[.f]`` (hours may exceed 24)
DECIMAL                     JSON double -> text at the column's scale (also Connect ``Decimal``
                            base64 bytes and string mode from real Debezium)
BIT(1) / BIT(n)             boolean / base64 little-endian bytes -> ``int``
integers                    ``int``; UNSIGNED values TiCDC wrapped to int64 (negative) get 2^64 added
BINARY/VARBINARY/BLOB       base64 -> ``bytes``
ENUM/SET/JSON/text          text as sent (member names for ENUM/SET)
==========================  =================================================================

``[.f]`` has the column's fsp digits when the table definition is known, else the digits the
message carries (zero fractions dropped for epoch numbers).

What is lossy (nothing here can bring it back):

* DECIMAL travels as an IEEE double: values with more than 15-17 significant digits arrive rounded,
  and the text rebuilt at the column's scale shows the double's digits. Without a table definition the
  scale is unknown and the shortest text of the double is used (``5.00`` comes back as ``5.0``).
* TIMESTAMP is UTC where CSV and canal-json give TiCDC's time zone; TiCDC writes values before
  ``1970-01-01 00:00:01`` as ``1970-01-01T00:00:00Z``.
* TiCDC writes NULL as the column's DEFAULT when the column has one.
* Without a table definition and without TiCDC's ``tidb_type`` field schema, binary columns look like
  text (TiCDC declares them ``string``) and stay base64 text; DATETIME units come from the field name.
* A debezium UPDATE without ``before`` (``debezium-output-old-value=false``) has no before image.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from avro_registry_sink.changes import ChangeEvent
from avro_registry_sink.errors import SourceError
from avro_registry_sink.formats.base import InputFormat, register
from avro_registry_sink.formats.canal_json import (
    DdlEvent,
    SourceEvent,
    TableLookup,
    Watermark,
    check_known_columns,
    commit_ts_from_ms,
    commit_ts_value,
    find_table,
    load_message,
)
from avro_registry_sink.model import Op
from avro_registry_sink.table import BINARY_TYPES, ColumnDef, MySQLType, TableDef
from avro_registry_sink.typemap.mysql import INT_TYPES

# Imported inside functions, for start-up: as formats/canal_json.py, the vectorized reader loads where used.

__all__ = ["DEBEZIUM_JSON", "DebeziumJson", "convert_debezium_value", "events_from_debezium", "peek", "table_from_table_change"]

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)

_DATE_NAMES = frozenset({"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"})
_DATETIME_UNITS = {
    "io.debezium.time.Timestamp": "ms",
    "org.apache.kafka.connect.data.Timestamp": "ms",
    "io.debezium.time.MicroTimestamp": "us",
    "io.debezium.time.NanoTimestamp": "ns",
}
_TIME_UNITS = {
    "io.debezium.time.Time": "ms",
    "org.apache.kafka.connect.data.Time": "ms",
    "io.debezium.time.MicroTime": "us",
    "io.debezium.time.NanoTime": "ns",
}
_ZONED = "io.debezium.time.ZonedTimestamp"
_CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_BITS = "io.debezium.data.Bits"
_INT_FIELD_TYPES = frozenset({"int8", "int16", "int32", "int64"})
_BINARY_TIDB_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_ISO = re.compile(
    r"(?P<date>-?\d{4,}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<frac>\d+))?"
    r"(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)


# --------------------------------------------------------------------------------------------------
# Values


def _unit_digits(unit: str) -> int:
    return {"ms": 3, "us": 6, "ns": 9}[unit]


def _to_micros(value: int, unit: str) -> int:
    if unit == "ms":
        return value * 1000
    if unit == "ns":
        return value // 1000
    return value


def _fraction(micros: int, fsp: int | None, unit: str) -> str:
    if fsp is None:
        if micros == 0:
            return ""
        digits = f"{micros:06d}"[: min(_unit_digits(unit), 6)]
        return "." + digits
    if fsp <= 0:
        return ""
    return "." + f"{micros:06d}"[:fsp]


def format_datetime(value: int, unit: str, fsp: int | None) -> str:
    """Epoch ms/µs/ns (as UTC) -> ``YYYY-MM-DD HH:MM:SS[.f]``.

    >>> format_datetime(1701347696100, "ms", 1)
    '2023-11-30 12:34:56.1'
    """
    moment = _EPOCH + dt.timedelta(microseconds=_to_micros(value, unit))
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    return text + _fraction(moment.microsecond, fsp, unit)


def format_time(value: int, unit: str, fsp: int | None) -> str:
    """A duration in ms/µs/ns -> ``[-]HH:MM:SS[.f]`` (MySQL TIME, hours beyond 24 allowed).

    >>> format_time(-45296123456, "us", 6)
    '-12:34:56.123456'
    """
    micros = _to_micros(value, unit)
    sign = "-" if micros < 0 else ""
    seconds, frac = divmod(abs(micros), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}" + _fraction(frac, fsp, unit)


def format_zoned(value: str, fsp: int | None) -> str:
    """An ISO-8601 timestamp (``Z`` or an offset) -> ``YYYY-MM-DD HH:MM:SS[.f]`` in UTC.

    >>> format_zoned("2023-11-30T12:34:56.1Z", 3)
    '2023-11-30 12:34:56.100'
    """
    m = _ISO.fullmatch(value.strip())
    if not m:
        raise ValueError(f"expected an ISO-8601 timestamp such as 2023-11-30T12:34:56Z, got {value!r}")
    date_text, time_text, frac, tz = m.group("date"), m.group("time"), m.group("frac") or "", m.group("tz")
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        local = dt.datetime.fromisoformat(f"{date_text}T{time_text}")
        utc = local - sign * offset
        date_text = f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
        time_text = f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    if fsp is not None:
        frac = (frac + "0" * 9)[:fsp] if fsp > 0 else ""
    return f"{date_text} {time_text}" + (f".{frac}" if frac else "")


def _decimal_text(number: Decimal, scale: int | None) -> str:
    if scale is not None:
        number = number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
    return format(number, "f")


def _field_scale(field: Mapping[str, Any] | None) -> int | None:
    params = (field or {}).get("parameters") or {}
    scale = params.get("scale")
    return int(scale) if scale is not None else None


def _decode_decimal(value: Any, name: str | None, scale: int | None) -> Decimal:
    if isinstance(value, Mapping):  # VariableScaleDecimal {"scale": s, "value": base64}
        raw = base64.b64decode(value["value"], validate=True)
        return Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-int(value["scale"]))
    if name == _CONNECT_DECIMAL and isinstance(value, str):
        raw = base64.b64decode(value, validate=True)
        return Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-(scale or 0))
    if isinstance(value, bool):
        raise ValueError(f"expected a decimal number, got {value!r}")
    if isinstance(value, float):
        return Decimal(repr(value))  # the shortest text of the double, not its binary expansion
    return Decimal(str(value))


def convert_debezium_value(value: Any, col: ColumnDef | None = None, field: Mapping[str, Any] | None = None) -> Any:
    """One debezium value -> TiCDC's text form, using the column and/or the field schema.

    Raises ``ValueError`` with the reason when the value does not fit.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType
    >>> convert_debezium_value(-354285, ColumnDef(name="d", type=MySQLType.DATE))
    '1000-01-01'
    >>> convert_debezium_value(-1, ColumnDef(name="u", type=MySQLType.BIGINT, unsigned=True))
    18446744073709551615
    >>> convert_debezium_value("qgI=", ColumnDef(name="b", type=MySQLType.BIT, length=10))
    682
    """
    if value is None:
        return None
    field = field or {}
    name = field.get("name")
    ftype = field.get("type")
    tidb_type = str(field.get("tidb_type") or "").lower()
    ctype = col.type if col is not None else None
    fsp = col.fsp if col is not None else None
    try:
        # DATE
        if ctype is MySQLType.DATE or (ctype is None and name in _DATE_NAMES):
            if isinstance(value, int) and not isinstance(value, bool):
                day = _EPOCH_DATE + dt.timedelta(days=value)
                return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"
            return str(value)
        # DATETIME
        if ctype is MySQLType.DATETIME or (ctype is None and name in _DATETIME_UNITS):
            if isinstance(value, int) and not isinstance(value, bool):
                unit = _DATETIME_UNITS.get(name or "") or ("ms" if (fsp or 0) <= 3 else "us")
                return format_datetime(value, unit, fsp)
            return format_zoned(value, fsp) if isinstance(value, str) and "T" in value else str(value)
        # TIMESTAMP
        if ctype is MySQLType.TIMESTAMP or (ctype is None and name == _ZONED):
            if isinstance(value, int) and not isinstance(value, bool):
                unit = _DATETIME_UNITS.get(name or "") or ("ms" if (fsp or 0) <= 3 else "us")
                return format_datetime(value, unit, fsp)
            return format_zoned(str(value), fsp)
        # TIME
        if ctype is MySQLType.TIME or (ctype is None and name in _TIME_UNITS):
            if isinstance(value, int) and not isinstance(value, bool):
                return format_time(value, _TIME_UNITS.get(name or "", "us"), fsp)
            return str(value)
        # DECIMAL
        if (
            ctype is MySQLType.DECIMAL
            or (ctype is None and (name in (_CONNECT_DECIMAL, _VARIABLE_DECIMAL) or tidb_type.startswith("decimal")))
        ):
            scale = col.scale if col is not None and col.scale is not None else _field_scale(field)
            return _decimal_text(_decode_decimal(value, name, _field_scale(field) or scale), scale)
        # BIT
        if ctype is MySQLType.BIT or (ctype is None and (name == _BITS or ftype == "boolean")):
            if isinstance(value, bool):
                return int(value)
            if isinstance(value, int):
                return value
            raw = base64.b64decode(str(value), validate=True)
            return int.from_bytes(raw, "little")  # Debezium's Bits are little-endian
        # integers
        if ctype in INT_TYPES or (ctype is None and ftype in _INT_FIELD_TYPES):
            if name == _CONNECT_DECIMAL and isinstance(value, str):  # bigint.unsigned.handling.mode=precise
                number = int(_decode_decimal(value, name, 0))
            elif isinstance(value, bool):
                number = int(value)
            elif isinstance(value, int):
                number = value
            elif isinstance(value, float) and value.is_integer():
                number = int(value)
            else:
                number = int(str(value))
            unsigned = col.unsigned if col is not None else "unsigned" in tidb_type
            if unsigned and number < 0:
                number += 1 << 64  # TiCDC cast the uint64 to int64
            return number
        # FLOAT / DOUBLE
        if ctype in (MySQLType.FLOAT, MySQLType.DOUBLE) or (ctype is None and ftype in ("float", "double")):
            return float(value)
        # binary strings
        if (col is not None and (col.binary or ctype in BINARY_TYPES)) or (
            col is None and (tidb_type in _BINARY_TIDB_TYPES or ftype == "bytes")
        ):
            if isinstance(value, (bytes, bytearray)):
                return bytes(value)
            return base64.b64decode(str(value), validate=True)
        # ENUM / SET / JSON / text
        if isinstance(value, (dict, list)):
            return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        if col is None and not ftype:
            return value  # nothing says what it is: keep the JSON value
        return value if isinstance(value, str) else str(value)
    except (ValueError, TypeError, KeyError, OverflowError, InvalidOperation, binascii.Error) as exc:
        raise ValueError(f"cannot convert {value!r}: {exc}") from None


# --------------------------------------------------------------------------------------------------
# Table definitions from tableChanges

_TYPE_ALIASES = {
    "INTEGER": MySQLType.INT, "BOOL": MySQLType.TINYINT, "BOOLEAN": MySQLType.TINYINT,
    "NUMERIC": MySQLType.DECIMAL, "DEC": MySQLType.DECIMAL, "FIXED": MySQLType.DECIMAL,
    "REAL": MySQLType.DOUBLE, "DOUBLE PRECISION": MySQLType.DOUBLE, "CHARACTER": MySQLType.CHAR,
    "VAR_STRING": MySQLType.VARCHAR,
}
_STRING_LENGTH_TYPES = frozenset(
    {MySQLType.CHAR, MySQLType.VARCHAR, MySQLType.BINARY, MySQLType.VARBINARY, MySQLType.BIT}
)
_TABLE_ID = re.compile(r'"((?:[^"]|"")*)"\."((?:[^"]|"")*)"')


def _enum_member(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1].replace("''", "'")
    return text


def table_from_table_change(change: Mapping[str, Any], schema: str, version: int = 0) -> TableDef | None:
    """The table after a DDL, from one debezium ``tableChanges`` entry (``None`` for DROP or unknown types).

    Debezium does not list unique keys there, so only the primary key is known.
    """
    table = change.get("table")
    m = _TABLE_ID.match(str(change.get("id") or ""))
    if not isinstance(table, Mapping) or not m:
        return None
    schema_name, table_name = m.group(1).replace('""', '"') or schema, m.group(2).replace('""', '"')
    columns: list[ColumnDef] = []
    for raw in sorted(table.get("columns") or [], key=lambda c: c.get("position") or 0):
        type_name = str(raw.get("typeName") or "").upper().strip()
        unsigned = "UNSIGNED" in type_name.split()
        base = " ".join(w for w in type_name.split() if w not in ("UNSIGNED", "ZEROFILL"))
        try:
            mysql_type = _TYPE_ALIASES.get(base) or MySQLType(base)
        except ValueError:
            return None
        length = raw.get("length")
        scale = raw.get("scale")
        kwargs: dict[str, Any] = {}
        if mysql_type is MySQLType.DECIMAL:
            kwargs.update(precision=length, scale=scale if scale is not None else 0)
        elif mysql_type in (MySQLType.DATETIME, MySQLType.TIMESTAMP, MySQLType.TIME):
            kwargs["fsp"] = length or 0
        elif mysql_type in _STRING_LENGTH_TYPES and length:
            kwargs["length"] = length
        elif mysql_type is MySQLType.FLOAT and scale is not None:
            kwargs.update(precision=length, scale=scale)
        enum_values = raw.get("enumValues")
        if enum_values:
            kwargs["elements"] = tuple(_enum_member(str(e)) for e in enum_values)
        default = raw.get("defaultValueExpression")
        columns.append(ColumnDef(
            name=str(raw.get("name")), type=mysql_type, unsigned=unsigned,
            nullable=bool(raw.get("optional", True)),
            binary=mysql_type in BINARY_TYPES or str(raw.get("charsetName") or "").lower() == "binary",
            default=None if default is None else str(default), **kwargs,
        ))
    if not columns:
        return None
    return TableDef(
        schema_name=schema_name, table=table_name, columns=tuple(columns),
        primary_key=tuple(table.get("primaryKeyColumnNames") or ()), version=version,
    )


# --------------------------------------------------------------------------------------------------
# Messages


def _envelope(msg: dict[str, Any]) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """(payload, schema) of a message with or without the Connect envelope."""
    if "payload" in msg and ("schema" in msg or "op" not in msg):
        payload = msg["payload"]
        schema = msg.get("schema")
        return (payload if isinstance(payload, Mapping) else None), (schema if isinstance(schema, Mapping) else None)
    return msg, None


def _field_schemas(schema: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """Column name -> field schema, from the envelope's ``after`` (or ``before``) struct."""
    if not schema:
        return {}
    out: dict[str, Mapping[str, Any]] = {}
    for part in schema.get("fields") or []:
        if isinstance(part, Mapping) and part.get("field") in ("before", "after"):
            for f in part.get("fields") or []:
                if isinstance(f, Mapping) and "field" in f:
                    out.setdefault(str(f["field"]), f)
    return out


def _commit_ts(payload: Mapping[str, Any], src: Mapping[str, Any], where: str, source: str) -> tuple[int, bool]:
    if src.get("commit_ts") is not None:
        return commit_ts_value(src["commit_ts"]), True
    ms = src.get("ts_ms") if src.get("ts_ms") else payload.get("ts_ms")
    if ms is None:
        raise SourceError(f"{where}: debezium message has no source.commit_ts, source.ts_ms or ts_ms.",
                          source=source, reason="no commit ts")
    return commit_ts_from_ms(int(ms)), False


def events_from_debezium(
    message: Mapping[str, Any] | str | bytes | None,
    *,
    tables: TableLookup | None = None,
    source: str = "",
    table_version: int | None = None,
) -> list[SourceEvent]:
    """Interpret one debezium-json message value (envelope or bare payload).

    ``tables`` maps ``(schema, table)`` (or ``"schema.table"``) to definitions; ``table_version``
    overrides the definition's version on the events. Raises :class:`SourceError` when malformed.

    >>> msg = {"op": "c", "before": None, "after": {"id": 1, "d": 19691},
    ...        "source": {"db": "shop", "table": "t", "commit_ts": 42}}
    >>> [(e.op.value, e.after) for e in events_from_debezium(msg)]
    [('insert', {'id': 1, 'd': 19691})]
    """
    if message is None:
        return []
    msg = load_message(message, source)
    where = source or "message"
    payload, schema = _envelope(msg)
    if payload is None:
        return []  # tombstone
    block = payload.get("source")
    src: Mapping[str, Any] = block if isinstance(block, Mapping) else {}
    op = payload.get("op")
    commit_ts, exact = _commit_ts(payload, src, where, source)
    if op == "m":
        return [Watermark(ts=commit_ts, source=source)]
    if op is None:
        query = payload.get("ddl")
        if not isinstance(query, str) or not query:
            raise SourceError(f"{where}: debezium message with neither 'op' nor 'ddl'.", source=source,
                              reason="no op")
        return [_ddl_event(payload, src, query, commit_ts, source)]
    db = src.get("db")
    table_name = src.get("table")
    if not isinstance(db, str) or not isinstance(table_name, str) or not table_name:
        raise SourceError(f"{where}: debezium message without source.db and source.table.", source=source,
                          reason="no db/table")
    if op == "t":
        return [DdlEvent(schema=db, table=table_name, query=f"TRUNCATE TABLE `{db}`.`{table_name}`",
                         commit_ts=commit_ts, source=source, kind="TRUNCATE")]
    if op not in ("c", "r", "u", "d"):
        raise SourceError(f"{where}: unknown debezium op {op!r}; expected c, r, u, d, t or m.", source=source,
                          reason="unknown op")
    table = find_table(tables, db, table_name)
    fields = _field_schemas(schema)
    before = _image(payload.get("before"), table, fields, db, table_name, where, source)
    after = _image(payload.get("after"), table, fields, db, table_name, where, source)
    if op in ("c", "r"):
        kind, before = Op.INSERT, None
        if after is None:
            raise SourceError(f"{where}: insert into {db}.{table_name} without 'after'.", source=source,
                              reason="no after")
    elif op == "u":
        kind = Op.UPDATE
        if after is None:
            raise SourceError(f"{where}: update of {db}.{table_name} without 'after'.", source=source,
                              reason="no after")
    else:
        kind, after = Op.DELETE, None
        if before is None:
            raise SourceError(f"{where}: delete from {db}.{table_name} without 'before'.", source=source,
                              reason="no before")
    version = table_version if table_version is not None else (table.version if table is not None else 0)
    extra: dict[str, Any] = {} if exact else {"commit_ts_exact": False}
    if op == "r":
        extra["snapshot"] = True
    return [ChangeEvent(schema=db, table=table_name, op=kind, commit_ts=commit_ts, after=after, before=before,
                        table_version=version, source=source, extra=extra)]


def _ddl_event(payload: Mapping[str, Any], src: Mapping[str, Any], query: str, commit_ts: int, source: str) -> DdlEvent:
    schema_name = payload.get("databaseName") or src.get("db") or ""
    table_name = src.get("table") or ""
    changes = payload.get("tableChanges") or []
    kind = ""
    defs: list[TableDef] = []
    for change in changes:
        if not isinstance(change, Mapping):
            continue
        kind = kind or str(change.get("type") or "")
        m = _TABLE_ID.match(str(change.get("id") or ""))
        if m and not table_name:
            table_name = m.group(2).replace('""', '"')
        table = table_from_table_change(change, str(schema_name), commit_ts)
        if table is not None:
            defs.append(table)
    return DdlEvent(schema=str(schema_name), table=str(table_name), query=query, commit_ts=commit_ts, source=source,
                    kind=kind, tables=tuple(defs))


def _image(
    row: Any,
    table: TableDef | None,
    fields: Mapping[str, Mapping[str, Any]],
    db: str,
    table_name: str,
    where: str,
    source: str,
) -> dict[str, Any] | None:
    if row is None:
        return None
    if not isinstance(row, Mapping):
        raise SourceError(f"{where}: a row image of {db}.{table_name} is not a JSON object.", source=source,
                          reason="row not an object")
    image: dict[str, Any] = {}
    if table is None:
        for name, value in row.items():
            image[name] = _convert(value, None, fields.get(name), f"{db}.{table_name}", name, where, source)
        return image
    by_lower = {name.lower(): (name, value) for name, value in row.items()}
    check_known_columns(row, table, where, source)
    for col in table.columns:
        hit = by_lower.get(col.name.lower())
        if hit is None:
            continue
        image[col.name] = _convert(hit[1], col, fields.get(hit[0]), table.qualified_name, col.name, where, source)
    return image


def _convert(value: Any, col: ColumnDef | None, field: Mapping[str, Any] | None, table: str, column: str,
             where: str, source: str) -> Any:
    try:
        return convert_debezium_value(value, col, field)
    except ValueError as exc:
        kind = f" ({col.sql_type()})" if col is not None else ""
        raise SourceError(f"{where}: column {column!r} of {table}{kind}: {exc}.", source=source, table=table,
                          column=column, reason=str(exc)) from None


# --------------------------------------------------------------------------------------------------
# Peek


def peek(msg: Mapping[str, Any]) -> tuple[str, str | None, str | None, int | None]:
    """What a decoded message is: ``(kind, schema, table, commit_ts)``, kind ``dml``, ``ddl``,
    ``watermark`` or ``skip`` (a null payload).

    >>> peek({"op": "c", "source": {"db": "s", "table": "t", "commit_ts": 7}})
    ('dml', 's', 't', 7)
    """
    payload: Any = msg
    if "payload" in msg and ("schema" in msg or "op" not in msg):
        payload = msg["payload"]
    if payload is None:
        return "skip", None, None, None
    if not isinstance(payload, Mapping):
        raise SourceError("debezium payload is not a JSON object.", reason="payload not an object")
    block = payload.get("source")
    src: Mapping[str, Any] = block if isinstance(block, Mapping) else {}
    commit_ts: int | None = None
    if src.get("commit_ts") is not None:
        commit_ts = commit_ts_value(src["commit_ts"])
    elif ts_ms := src.get("ts_ms") or payload.get("ts_ms"):
        commit_ts = commit_ts_from_ms(int(ts_ms))
    op = payload.get("op")
    if op == "m":
        return "watermark", None, None, commit_ts
    if op is None or op == "t":
        return "ddl", src.get("db"), src.get("table"), commit_ts
    db, table = src.get("db"), src.get("table")
    if not isinstance(db, str) or not isinstance(table, str) or not table:
        raise SourceError("debezium message without source.db and source.table.", reason="no db/table")
    if commit_ts is None:
        raise SourceError("debezium message has no source.commit_ts, source.ts_ms or ts_ms.", reason="no commit ts")
    return "dml", db, table, commit_ts


class DebeziumJson(InputFormat):
    """debezium-json: TiCDC's (and Debezium's) debezium-json message values, envelopes or bare payloads."""

    name = "debezium-json"
    is_changelog = True
    has_tombstones = True

    def peek(self, msg: Mapping[str, Any]) -> tuple[str, str | None, str | None, int | None]:
        return peek(msg)

    def events(self, message: Any, *, source: str = "", table: TableDef | None = None,
               tables: TableLookup | None = None, table_version: int | None = None) -> list[SourceEvent]:
        """As :func:`events_from_debezium`: the table is looked up in ``tables`` by the message's own names."""
        return events_from_debezium(message, tables=tables, source=source, table_version=table_version)

    def arrow_rows(self, messages: Any, versions: Any) -> Any:
        from avro_registry_sink.formats.changelog_arrow import debezium_rows

        return debezium_rows(messages, versions)

    def summary_peek(self, texts: Any, body: Any, rows: Any) -> Any:
        from avro_registry_sink.formats.changelog_arrow import debezium_summary_peek

        return debezium_summary_peek(texts, body, rows)


#: The debezium-json format object (see :mod:`avro_registry_sink.formats.base`).
DEBEZIUM_JSON = register(DebeziumJson())
