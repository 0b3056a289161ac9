"""Changelog messages -> typed Arrow columns per table version, vectorized (Arrow's JSON reader, numpy).

The per-message readers (:func:`~avro_registry_sink.formats.canal_json.events_from_canal`,
:func:`~avro_registry_sink.formats.debezium_json.events_from_debezium`) define what a message means; this
module computes the same rows for a whole Arrow batch of messages at once, without a Python object per
message or value, and hands on only what it can take exactly:

* the messages are parsed once, by ``pyarrow.json.read_json`` against an explicit schema built from the
  table definitions (every canal-json value as text; unknown keys are inferred, so a column the definition
  lacks shows up as an extra field). canal-json's ``sqlType`` and ``mysqlType`` are cut out of the text first
  (:func:`_cut_types`): turned into Arrow columns they cost as much as the rest of a message, and all that is
  needed of them is their keys, the same for every message of a table version (each distinct pair is read
  once, with ``json``);
* each value is converted as the per-message reader converts it (:func:`_canal_column`), and checked to be
  of the form that makes the conversion exact (integers as plain digits, numbers as JSON numbers, ...);
* JSON cannot tell a missing key from an explicit ``null`` once parsed, but the readers can (a missing column
  is refused, a missing key of an UPDATE's ``old`` keeps the new value): where a ``null`` matters, the key
  is counted in the message text (``"name":`` occurs only as a key in valid JSON) and set against the keys
  the parse saw.

A message this module does not take exactly (malformed, an unknown table, a value of an unusual form, a
DDL, a watermark...) is listed in :attr:`Rows.slow` (or :attr:`Rows.skipped`): the caller reads it with
the per-message reader, which reports it on its own. The result of a message is therefore the same on both
paths: :mod:`tests.unit.test_changelog_arrow` checks it byte for byte through the encoders.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.formats.json_text import has_lone_surrogate
from avro_registry_sink.formats.native_scan import scan_debezium
from avro_registry_sink.model import PlanKey
from avro_registry_sink.table import BINARY_TYPES, ColumnDef, MySQLType, TableDef
from avro_registry_sink.typemap.mysql import FLOAT_TYPES, INT_TYPES

# Imported inside functions, for start-up: the columnar encoder loads only where a batch is encoded (the
# formats are imported by every Spark Python worker and by the CLI).

__all__ = ["Body", "Rows", "TableRows", "TableVersions", "canal_rows", "canal_summary_peek", "debezium_rows",
           "debezium_summary_peek", "latin1_bytes", "utf8_messages"]

_OP_INSERT, _OP_UPDATE, _OP_DELETE = 0, 1, 2


@dataclass(frozen=True)
class TableVersions:
    """What the executors know of the tables: each table's versions (``history``, oldest first, as
    :meth:`~avro_registry_sink.tabledef.catalog.TableCatalog.history` gives them), the versions that have an
    encoding plan, and the tables ``[filter] rules`` leave out."""

    history: Mapping[tuple[str, str], Sequence[tuple[int, TableDef]]]
    planned: frozenset[PlanKey] = frozenset()
    excluded: frozenset[tuple[str, str]] = frozenset()
    #: Known in advance (no summary of the batch): a message the driver must see first (a DDL, a table or table
    #: version without a plan, a canal-json column set other than ``shapes`` says) sets :attr:`Rows.needs`.
    strict: bool = False
    #: Per table (canal-json, tables without ``--tables``): its newest version's column names, lower case,
    #: sorted and joined by commas (what a message's ``mysqlType`` must list).
    shapes: Mapping[tuple[str, str], str] = field(default_factory=dict)
    #: ``[filter] rules`` (a :class:`~avro_registry_sink.routing.table_filter.TableFilter`), for tables not in ``history``.
    table_filter: Any = None
    #: Only DML messages belong here (a storage-sink data file): a DDL or watermark is read one by one (and refused).
    dml_only: bool = False

    def left_out(self, name: tuple[str, str]) -> bool:
        """Whether ``[filter] rules`` leave the table out."""
        if name in self.excluded:
            return True
        return self.table_filter is not None and not self.table_filter.matches(*name)


@dataclass
class TableRows:
    """The rows of one table version, in message order: typed columns (the table's own names), op codes
    (0 insert, 1 update, 2 delete), commit ts and the index of each row's message in the input."""

    key: PlanKey
    columns: pa.RecordBatch
    op_codes: np.ndarray
    commit_ts: np.ndarray
    message: np.ndarray


@dataclass
class Rows:
    """What a batch of messages holds: rows per table version, the messages to read one by one (``slow``),
    those that give no rows (``skipped``: DDLs, watermarks, tables left out) and those to dead-letter unread
    (``crashed``: the compiled scanner crashed reading them, see :mod:`~avro_registry_sink.formats.native_scan`)."""

    tables: list[TableRows] = field(default_factory=list)
    slow: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    skipped: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    crashed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    needs: str | None = None  # (strict) why the driver must see the batch first
    filtered: dict[tuple[str, str], int] = field(default_factory=dict)  # messages of tables left out


# --------------------------------------------------------------------------------------------------
# Messages as text


def utf8_messages(messages: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Messages (binary or string) as a string array, and a mask of those that are not UTF-8 (null there)."""
    if pa.types.is_string(messages.type) or pa.types.is_large_string(messages.type):
        return messages, np.zeros(len(messages), bool)
    try:
        return messages.cast(pa.large_string() if pa.types.is_large_binary(messages.type) else pa.string()), \
            np.zeros(len(messages), bool)
    except pa.ArrowInvalid:
        pass
    values = messages.to_pylist()
    bad = np.zeros(len(values), bool)
    texts: list[str | None] = []
    for i, raw in enumerate(values):
        if raw is None:
            texts.append(None)
            continue
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            bad[i] = True
            texts.append(None)
    return pa.array(texts, pa.string()), bad


def _lines(texts: pa.Array) -> pa.Buffer:
    """The messages joined by newlines (one JSON document per line for Arrow's reader)."""
    joined = pc.binary_join_element_wise(texts.cast(pa.large_string()), pa.scalar("\n", pa.large_string()),
                                         pa.scalar("", pa.large_string()))
    n = len(joined)
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)[joined.offset: joined.offset + n + 1]
    data = joined.buffers()[2]
    return data[int(offsets[0]): int(offsets[-1])] if data is not None else pa.py_buffer(b"")


def _read(texts: pa.Array, schema: pa.Schema, behaviour: str = "infer") -> pa.Table | None:
    """Arrow's JSON reader over the messages (one per line), or ``None`` when it refuses any of them."""
    if len(texts) == 0:
        return None
    return _read_body(_lines(texts), len(texts), schema, behaviour)


def _read_body(body: pa.Buffer, count: int, schema: pa.Schema, behaviour: str = "infer") -> pa.Table | None:
    """:func:`_read` over ``count`` messages already joined by newlines."""
    import pyarrow.json as pj

    try:
        table = pj.read_json(
            pa.BufferReader(body),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, body.size + 1)),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior=behaviour,
                                          newlines_in_values=False),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return table if table.num_rows == count else None


def _offsets_and_data(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The value offsets (n + 1, relative to the data shown) and the data bytes of a string/binary array."""
    n = len(arr)
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    offsets = np.frombuffer(arr.buffers()[1], np.int64 if large else np.int32)[arr.offset: arr.offset + n + 1]
    buffer = arr.buffers()[2]
    start, stop = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(buffer, np.uint8)[start:stop] if buffer is not None and stop > start else np.zeros(0, np.uint8)
    return offsets.astype(np.int64) - start, data


class Body:
    """The bytes of a string/binary array as one ``bytes`` object with each value's offsets: searched with
    ``bytes.find``/``count`` (memchr speed), without a copy per value."""

    def __init__(self, arr: pa.Array) -> None:
        offsets, data = _offsets_and_data(arr)
        self.offsets = offsets
        self.starts = offsets[:-1].tolist()
        self.ends = offsets[1:].tolist()
        self.bytes = data.tobytes()

    def rows_with(self, pattern: bytes) -> np.ndarray:
        """Indexes of the values holding ``pattern``."""
        hits = []
        find = self.bytes.find
        at = find(pattern)
        while at >= 0:
            row = int(np.searchsorted(self.offsets, at, side="right")) - 1
            hits.append(row)
            at = find(pattern, self.ends[row])
        return np.asarray(hits, np.int64)

    def count(self, rows: np.ndarray, pattern: bytes) -> np.ndarray:
        """How often ``pattern`` occurs in each value ``rows``."""
        count = self.bytes.count
        starts, ends = self.starts, self.ends
        return np.fromiter((count(pattern, starts[i], ends[i]) for i in rows.tolist()), np.int64, rows.size)


def _candidates(texts: pa.Array, body: Body | None = None) -> np.ndarray:
    """Messages Arrow's reader may take: starting with ``{`` and on one line (a message that is blank, starts with
    whitespace or spans lines is read one by one)."""
    valid = texts.is_valid().to_numpy(zero_copy_only=False)
    if not valid.any():
        return valid
    ok = pc.starts_with(texts, "{").fill_null(False).to_numpy(zero_copy_only=False) & valid
    body = body or Body(texts)
    for pattern in (b"\n", b"\r"):
        rows = body.rows_with(pattern)
        if rows.size:
            ok[rows] = False
    return ok


def _np(arr: pa.Array | pa.ChunkedArray, fill: Any = None) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if fill is not None:
        arr = arr.fill_null(fill)
    return arr.to_numpy(zero_copy_only=False)


def _valid(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _key_pattern(name: str) -> str:
    return json.dumps(name, ensure_ascii=False) + ":"


def _key_counts(body: Body, rows: np.ndarray, name: str) -> np.ndarray:
    """How often ``"name":`` occurs in each of the messages ``rows``: in valid JSON only as an object key
    (inside strings every quote is escaped), so the number of objects with that key (written without a space
    before the colon; a writer that puts one is counted short, and its messages go the per-message way)."""
    if rows.size == 0:
        return np.zeros(0, np.int64)
    return body.count(rows, _key_pattern(name).encode("utf-8"))


# --------------------------------------------------------------------------------------------------
# Values: canal-json text -> what convert_canal_value gives, typed

#: Integers as int() takes them and Arrow's cast reads them alike (no sign, space, underscore, other digits).
_INT_TEXT = r"^-?[0-9]{1,18}$"
_WIDE_INT_TEXT = r"^-?[0-9]{1,20}$"
#: JSON's number grammar (what float() and Arrow's cast read to the same double).
_FLOAT_TEXT = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$"


def _is_binary_column(col: ColumnDef) -> bool:
    return col.binary or col.type in BINARY_TYPES


def latin1_bytes(texts: pa.Array) -> pa.Array:
    """``text.encode("latin-1")`` per value, or its UTF-8 bytes when a character is above U+00FF (what the
    canal-json reader does with binary-charset values: TiCDC writes each byte as one ISO-8859-1 character)."""
    n = len(texts)
    arr = texts.cast(pa.large_string())
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset: arr.offset + n + 1]
    buffer = arr.buffers()[2]
    start, stop = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(buffer, np.uint8)[start:stop] if buffer is not None and stop > start else np.zeros(0, np.uint8)
    rel = offsets - start
    lead = (data == 0xC2) | (data == 0xC3)
    high = data >= 0xC4
    if not lead.any() and not high.any():  # ASCII: the same bytes
        return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [arr.buffers()[0], pa.py_buffer(rel),
                                                                        pa.py_buffer(data.copy())],
                                                null_count=arr.null_count, offset=arr.offset)
    owner = np.repeat(np.arange(n), np.diff(rel))
    wide = np.zeros(n, bool)
    if high.any():
        wide[np.unique(owner[high])] = True
    convert = ~wide[owner]
    out = data.copy()
    follows = np.zeros(data.size, bool)
    follows[1:] = lead[:-1] & convert[1:]
    prev = np.zeros(data.size, np.uint8)
    prev[1:] = data[:-1]
    out[follows] = ((prev[follows] & 0x03) << 6) | (data[follows] & 0x3F)
    keep = ~(lead & convert)
    counts = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(owner[keep], minlength=n) if data.size else np.zeros(n, np.int64), out=counts[1:])
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [bitmap, pa.py_buffer(counts),
                                                                    pa.py_buffer(out[keep])])


def _canal_column(col: ColumnDef, values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """One column of canal-json values (text, null for NULL) -> (typed values, rows not taken exactly).

    The typed values are what :func:`~avro_registry_sink.formats.canal_json.convert_canal_value` gives, as
    Arrow: integers (int64, or decimal(20,0) for BIGINT and wide BIT), float64, bytes for binary-charset
    columns, ENUM/SET indexes as int64 when they are numbers, text otherwise."""
    n = len(values)
    bad = np.zeros(n, bool)
    kind = col.type
    if values.null_count == n:
        return pa.nulls(n, _typed_as(col)), bad
    if kind in INT_TYPES:
        wide = kind is MySQLType.BIGINT or (kind is MySQLType.BIT and (col.length or 1) > 53)
        ok = pc.match_substring_regex(values, _WIDE_INT_TEXT if wide else _INT_TEXT)
        bad = ~_np(ok, True)
        if bad.any():
            values = pc.if_else(ok, values, pa.scalar(None, pa.string()))
        return _cast(values, pa.decimal128(20, 0) if wide else pa.int64(), bad)
    if kind in FLOAT_TYPES:
        ok = pc.match_substring_regex(values, _FLOAT_TEXT)
        bad = ~_np(ok, True)
        if bad.any():
            values = pc.if_else(ok, values, pa.scalar(None, pa.string()))
        return _cast(values, pa.float64(), bad)
    if kind in (MySQLType.ENUM, MySQLType.SET):
        encoded = pc.dictionary_encode(values)
        words = encoded.dictionary.to_pylist()
        digit = np.array([w.isdigit() for w in words], bool)
        if not digit.any():
            return values, bad
        indexes = encoded.indices
        if digit.all():
            try:
                numbers = pa.array([int(w) for w in words], pa.int64())
            except ValueError:  # a digit int() does not take (a superscript): the reader refuses it
                return values, _np(indexes.is_valid(), False) & ~bad
            return numbers.take(indexes), bad
        # numbers and names in one column: the numbers are read one by one
        bad = np.where(_valid(indexes), digit[_np(indexes, 0)], False)
        return values, bad
    if _is_binary_column(col):
        return latin1_bytes(values), bad
    return values, bad


def _typed_as(col: ColumnDef) -> pa.DataType:
    """The Arrow type :func:`_canal_column` gives a column (ENUM/SET: text, unless every value is a number)."""
    if col.type in INT_TYPES:
        wide = col.type is MySQLType.BIGINT or (col.type is MySQLType.BIT and (col.length or 1) > 53)
        return pa.decimal128(20, 0) if wide else pa.int64()
    if col.type in FLOAT_TYPES:
        return pa.float64()
    if col.type not in (MySQLType.ENUM, MySQLType.SET) and _is_binary_column(col):
        return pa.large_binary()
    return pa.string()


def _cast(values: pa.Array, target: pa.DataType, bad: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """``values`` cast to ``target``; when Arrow refuses one (a number out of its range), every value is read
    the per-message way."""
    try:
        return values.cast(target), bad
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.nulls(len(values), target), _valid(values) | bad


def _same(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Python's ``a == b`` per row for converted values (``None == None``; NaN differs from itself)."""
    equal = _np(pc.equal(a, b), False)
    both_null = ~_valid(a) & ~_valid(b)
    return equal | both_null


# --------------------------------------------------------------------------------------------------
# canal-json

_CANAL_TOP = ("id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql", "sqlType", "mysqlType", "old",
              "data", "_tidb")


def _canal_schema(columns: Sequence[str], *, cut: bool = False) -> pa.Schema:
    """The explicit schema of a canal-json message whose rows have ``columns`` (``cut``: with ``sqlType`` and
    ``mysqlType`` emptied by :func:`_cut_types`)."""
    row = pa.struct([pa.field(name, pa.string()) for name in columns])
    return pa.schema([
        ("id", pa.int64()), ("database", pa.string()), ("table", pa.string()), ("pkNames", pa.list_(pa.string())),
        ("isDdl", pa.bool_()), ("type", pa.string()), ("es", pa.int64()), ("ts", pa.int64()), ("sql", pa.string()),
        ("sqlType", pa.struct([] if cut else [pa.field(name, pa.int64()) for name in columns])),
        ("mysqlType", pa.struct([] if cut else [pa.field(name, pa.string()) for name in columns])),
        ("old", pa.list_(row)), ("data", pa.list_(row)),
        ("_tidb", pa.struct([("commitTs", pa.int64()), ("watermarkTs", pa.int64())])),
    ])


_PEEK_SCHEMA = pa.schema([("database", pa.string()), ("table", pa.string()), ("isDdl", pa.bool_()),
                          ("type", pa.string()), ("es", pa.int64()), ("_tidb", pa.struct([("commitTs", pa.int64())]))])

#: Above this, ``es << 18`` is not an int64 (the per-message reader takes it as a Python int).
_ES_LIMIT = (1 << 45) - 1


def _canal_commit_ts(parsed: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each message's commit ts (``_tidb.commitTs``, else ``es << 18``) and whether it has one."""
    tidb = parsed.column("_tidb").combine_chunks()
    commit = pc.struct_field(tidb, [0])
    has_commit = _valid(commit)
    es = parsed.column("es").combine_chunks()
    es_values = _np(es, 0).astype(np.int64)
    has_es = _valid(es) & (es_values >= 0) & (es_values <= _ES_LIMIT)
    ts = np.where(has_commit, _np(commit, 0).astype(np.int64), es_values << 18)
    return ts, has_commit | has_es


def _table_names(dictionary: pa.Array) -> list[tuple[str, str]]:
    """The (database, table) pairs of a dictionary of ``database \\x00 table`` texts."""
    return [(database, table) for database, _, table in (text.partition("\x00") for text in dictionary.to_pylist())]


def _table_codes(parsed: pa.Table) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Per message, an index into the list of distinct (database, table) pairs (-1: either is missing)."""
    db = parsed.column("database").combine_chunks()
    tb = parsed.column("table").combine_chunks()
    both = _valid(db) & _valid(tb)
    joined = pc.binary_join_element_wise(db.fill_null(""), tb.fill_null(""), "\x00")
    encoded = pc.dictionary_encode(joined)
    codes = _np(encoded.indices, -1).astype(np.int64)
    codes[~both] = -1
    return codes, _table_names(encoded.dictionary)


def _pick(history: Sequence[tuple[int, TableDef]], ts: np.ndarray) -> np.ndarray:
    """:func:`~avro_registry_sink.tabledef.catalog.pick_version` for every commit ts: indexes into ``history``."""
    starts = np.array([v for v, _ in history], np.int64)
    return np.maximum(np.searchsorted(starts, ts, side="right") - 1, 0)


def _planned_groups(name: tuple[str, str], rows: np.ndarray, ts: np.ndarray, versions: TableVersions, out: Rows,
                    reject: np.ndarray) -> Iterator[tuple[PlanKey, TableDef, np.ndarray]]:
    """Rows ``rows`` of table ``name`` grouped by the table version their commit ts picks: ``(plan key, definition,
    rows)`` for each version the batch planned. Rows of an unknown table or of a version not planned are marked in
    ``reject`` (the per-message reader reports them); in a strict pass ``out.needs`` says what the driver must see."""
    history = versions.history.get(name)
    if not history:
        if versions.strict:
            out.needs = out.needs or f"table {name[0]}.{name[1]}"
        reject[rows] = True
        return
    picked = _pick(history, ts[rows])
    for i in np.unique(picked):
        version, definition = history[int(i)]
        key = (name[0], name[1], version)
        chosen = rows[picked == i]
        if key not in versions.planned:
            if versions.strict:
                out.needs = out.needs or f"version {version} of {name[0]}.{name[1]}"
            reject[chosen] = True
            continue
        yield key, definition, chosen


def canal_rows(messages: pa.Array, versions: TableVersions) -> Rows:
    """A batch of canal-json messages (binary or text) -> :class:`Rows` (see the module docs)."""
    return _rows(messages, versions, _CANAL)


def debezium_rows(messages: pa.Array, versions: TableVersions) -> Rows:
    """A batch of debezium-json messages (binary or text) -> :class:`Rows`: bare payloads (TiCDC's
    ``debezium-disable-schema=true``, Debezium's ``schemas.enable=false``) on the vectorized path; messages with
    the Connect envelope (whose field schemas can change a value's unit) are read one by one."""
    return _rows(messages, versions, _DEBEZIUM)


@dataclass(frozen=True)
class _Format:
    shape: Any  # TableDef -> the parse shape of its version (versions of one shape are read by one parse)
    light: Any  # (parsed light table) -> (commit ts, has ts, table codes, table names)
    light_schema: pa.Schema
    part: Any  # the reader of one shape


def _rows(messages: pa.Array, versions: TableVersions, fmt: _Format) -> Rows:
    texts, not_utf8 = utf8_messages(messages)
    n = len(texts)
    body = Body(texts)
    slow = not_utf8 | ~_candidates(texts, body)
    skipped = np.zeros(n, bool)
    out = Rows()
    # The table versions this batch can meet, by their parse shape: one parse per distinct shape.
    shapes: dict[Any, list[PlanKey]] = {}
    for (schema, table), history in versions.history.items():
        for version, definition in history:
            if (schema, table, version) in versions.planned:
                shapes.setdefault(fmt.shape(definition), []).append((schema, table, version))
    todo = np.flatnonzero(~slow)
    if len(shapes) != 1 and todo.size:
        # several shapes: which message is which table version first (a light parse), then one parse per shape
        light = _read(texts.take(pa.array(todo)), fmt.light_schema, "ignore")
        if light is None:
            slow[todo] = True
            todo = todo[:0]
        else:
            ts, _has_ts, codes, names = fmt.light(light)
            shape_of = np.full(todo.size, -1, np.int64)
            shape_list = list(shapes)
            for code, name in enumerate(names):
                found = versions.history.get(name) if name is not None else None
                if not found:
                    continue
                rows = np.flatnonzero(codes == code)
                picked = _pick(found, ts[rows])
                for i, definition in enumerate(h[1] for h in found):
                    shape = fmt.shape(definition)
                    if shape in shapes:
                        shape_of[rows[picked == i]] = shape_list.index(shape)
            for k, shape in enumerate(shape_list):
                part = todo[shape_of == k]
                if part.size:
                    fmt.part(texts, body, part, shape, versions, out, slow, skipped)
            rest = todo[shape_of < 0]  # unknown tables, versions without a plan, no names: one by one
            slow[rest] = True
            todo = todo[:0]
    if todo.size:
        if shapes:
            fmt.part(texts, body, todo, next(iter(shapes)), versions, out, slow, skipped)
        else:
            slow[todo] = True
    out.slow = np.flatnonzero(slow)
    out.skipped = np.flatnonzero(skipped)
    return out


#: A piece of messages Arrow's reader refuses is read again as this many smaller pieces (down to
#: :data:`_SMALLEST_PIECE` messages), so a bad message sends only its own piece the per-message way.
_PIECES = 16
_SMALLEST_PIECE = 64


_SQL_TYPE_KEY = ',"sqlType":{'
_MYSQL_TYPE_KEY = '},"mysqlType":{'


#: What a string view holds inline (longer strings are a buffer, an offset and their first four bytes).
_INLINE = 12
_CUT_TEXT = np.frombuffer((_MYSQL_TYPE_KEY + "\n").encode(), np.uint8)


def _views(sources: Sequence[np.ndarray], which: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A string-view array of the pieces ``sources[which[i]][starts[i]: starts[i] + lengths[i]]``, without a copy
    of any piece longer than :data:`_INLINE` bytes."""
    n = starts.size
    raw = np.zeros((n, 16), np.uint8)  # Arrow's view: length, then the inline bytes, or prefix, buffer, offset
    raw[:, 0:4] = lengths.astype("<i4").view(np.uint8).reshape(n, 4)
    inline = lengths <= _INLINE
    shown = np.where(inline, lengths, 4)
    for index, source in enumerate(sources):
        mine = which == index
        for j in range(_INLINE):
            chosen = np.flatnonzero(mine & (j < shown))
            if chosen.size:
                raw[chosen, 4 + j] = source[starts[chosen] + j]
        long_ = np.flatnonzero(mine & ~inline)
        raw[long_, 8:12] = np.full(long_.size, index, "<i4").view(np.uint8).reshape(-1, 4)
        raw[long_, 12:16] = starts[long_].astype("<i4").view(np.uint8).reshape(-1, 4)
    buffers = [None, pa.py_buffer(raw), *(pa.py_buffer(source) for source in sources)]
    return pa.Array.from_buffers(pa.string_view(), n, buffers)


def _positions(data: np.ndarray, byte: int, block: int = 1 << 20) -> np.ndarray:
    """Where ``byte`` occurs in ``data``, a block at a time (one comparison over a whole chunk's bytes spends
    most of its time in page faults on its result)."""
    parts = [np.flatnonzero(data[i: i + block] == byte) + i for i in range(0, data.size, block)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


@dataclass
class _TypeObjects:
    """The ``sqlType`` and ``mysqlType`` objects of canal-json messages, cut out of the text (parsing them into
    Arrow columns cost as much as the rest of a message): the messages with both objects emptied, one per line,
    and per message the keys each object holds (``codes`` index ``keys``)."""

    body: pa.Buffer
    codes: np.ndarray  # per message cut, in order: an index into ``keys``
    #: Per distinct pair of objects: the keys of sqlType and of mysqlType (repeated keys repeated).
    keys: list[tuple[list[str], list[str]]]

    def count(self, name: str, rows: np.ndarray) -> np.ndarray:
        """How often ``name`` is a key of the two objects, for the messages ``rows``."""
        per = np.array([sql.count(name) + mysql.count(name) for sql, mysql in self.keys], np.int64)
        return per[self.codes[rows]]

    def same_shape(self, rows: np.ndarray, shape: str) -> bool:
        """Whether the messages ``rows`` list exactly the columns ``shape`` names in ``mysqlType`` (or list none),
        as :func:`~avro_registry_sink.formats.canal_json.message_shape` reads it."""
        shapes = {",".join(sorted(k.lower() for k in mysql)) for _, mysql in
                  (self.keys[int(c)] for c in np.unique(self.codes[rows]))}
        shapes.discard("")
        return not shapes or shapes == {shape}


def _cut_types(texts: pa.Array) -> tuple[np.ndarray, _TypeObjects | None]:
    """Which messages carry ``,"sqlType":{...},"mysqlType":{...}`` as TiCDC writes it (two flat objects, one
    after the other, each a JSON object of its own), and those messages with the two objects emptied.

    A message is cut only where no reading of it can differ: ``,"sqlType":`` outside a string is a key (a quote
    inside a string is escaped), and the text cut out, from the first ``}`` after each object's start, must parse
    as those two objects and nothing else (a nested object, a brace in a key or not JSON fails that; a second
    ``sqlType`` shows up in the parse of the rest). The others are read whole."""
    n = len(texts)
    ok = np.zeros(n, bool)
    if n == 0 or texts.null_count:
        return ok, None
    large = pa.types.is_large_string(texts.type)
    offs = np.frombuffer(texts.buffers()[1], np.int64 if large else np.int32)[texts.offset: texts.offset + n + 1]
    spans: np.ndarray = offs.astype(np.int64)
    begin, end = spans[:-1], spans[1:]
    at = _np(pc.find_substring(texts, _SQL_TYPE_KEY), -1).astype(np.int64)
    ok = at >= 0
    if not ok.any():
        return ok, None
    inside = np.where(ok, begin + at + len(_SQL_TYPE_KEY), begin)  # the first byte in sqlType's object
    last = int(end[-1])
    data = np.frombuffer(texts.buffers()[2], np.uint8)
    closes = _positions(data[:last], ord("}"))  # every "}": the first after each object's start ends it
    closes = np.append(closes, last)
    sql_end = closes[np.searchsorted(closes, inside)]  # sqlType's "}"
    ok &= sql_end + len(_MYSQL_TYPE_KEY) < end
    sql_end = np.where(ok, sql_end, begin)
    follows = data[np.minimum(sql_end[:, None] + np.arange(len(_MYSQL_TYPE_KEY)), last - 1)]
    ok &= (follows == np.frombuffer(_MYSQL_TYPE_KEY.encode(), np.uint8)).all(axis=1)
    inside2 = sql_end + len(_MYSQL_TYPE_KEY)
    mysql_end = closes[np.searchsorted(closes, np.where(ok, inside2, begin))]  # mysqlType's "}"
    ok &= mysql_end < end
    if not ok.any():
        return ok, None
    ok &= (inside - begin > _INLINE) & (end - mysql_end > _INLINE)  # (pieces that views cannot hold inline)
    rows = np.flatnonzero(ok)
    if not rows.size:
        return ok, None
    objects = _views([data], np.zeros(rows.size, np.int32), inside[rows], mysql_end[rows] - inside[rows])
    encoded = pc.dictionary_encode(objects)
    keys: list[tuple[list[str], list[str]]] = []
    good = np.ones(len(encoded.dictionary), bool)
    for i, inner in enumerate(encoded.dictionary.to_pylist()):
        try:
            pairs = json.loads('{"sqlType":{' + inner + "}}", object_pairs_hook=lambda p: p)
            if has_lone_surrogate(inner, pairs):  # the per-message reader refuses the message
                pairs = None
        except ValueError:
            pairs = None
        if (not isinstance(pairs, list) or [k for k, _ in pairs] != ["sqlType", "mysqlType"]
                or not all(isinstance(v, list) for _, v in pairs)):
            good[i] = False
            keys.append(([], []))
            continue
        keys.append(([k for k, _ in pairs[0][1]], [k for k, _ in pairs[1][1]]))
    codes_kept = _np(encoded.indices, -1).astype(np.int64)
    if not good.all():  # a pair that is not JSON: those messages are read whole
        bad = ~good[codes_kept]
        ok[rows[bad]] = False
        rows, codes_kept = rows[~bad], codes_kept[~bad]
        if not rows.size:
            return ok, None
    # The lines Arrow's reader takes: per message [its start, inside sqlType) + '},"mysqlType":{' + [mysqlType's
    # "}", its end) + a newline, as views, copied once into one buffer by the cast
    k = rows.size
    starts = np.empty(4 * k, np.int64)
    lengths = np.empty(4 * k, np.int64)
    which = np.zeros(4 * k, np.int32)
    starts[0::4], lengths[0::4] = begin[rows], inside[rows] - begin[rows]
    starts[1::4], lengths[1::4], which[1::4] = 0, len(_MYSQL_TYPE_KEY), 1
    starts[2::4], lengths[2::4] = mysql_end[rows], end[rows] - mysql_end[rows]
    starts[3::4], lengths[3::4], which[3::4] = len(_MYSQL_TYPE_KEY), 1, 1
    lines = _views([data, _CUT_TEXT], which, starts, lengths).cast(pa.large_string())
    offsets = np.frombuffer(lines.buffers()[1], np.int64)[lines.offset: lines.offset + len(lines) + 1]
    body = lines.buffers()[2]
    body = body[int(offsets[0]): int(offsets[-1])] if body is not None else pa.py_buffer(b"")
    return ok, _TypeObjects(body=body, codes=codes_kept, keys=keys)


# --------------------------------------------------------------------------------------------------
# The skeleton both formats' readers share: a parse of some messages -> per message its op, commit ts and
# table, the table versions taken, the keys no column has, and the output rows. What a format adds (how it
# parses, where its rows and images are, how a null is told from a missing key) is in its own part.

#: A fits check of a table version (see :func:`_take_versions`): (table, definition, its rows, the first version
#: taken or None) -> True: taken, False: its rows read one by one, None: left for the driver (``out.needs``).
_Fits = Callable[[tuple[str, str], TableDef, np.ndarray, TableDef | None], bool | None]
#: An output column (see :func:`_emit`): (column name, the rows taken, rows that are a key change's DELETE half,
#: the rows' op codes) -> the column's values.
_Column = Callable[[str, pa.Array, np.ndarray, np.ndarray], pa.Array]


@dataclass
class _Part:
    """A parse of the messages ``todo`` (indexes into the batch) on its way to rows, per message: its op code,
    commit ts and table (an index into ``names``), whether it gives no rows (``quiet``) or is read one by one
    (``reject``), and the table version it belongs to (``key_code``, an index into ``keys`` and ``tables``)."""

    todo: np.ndarray
    op: np.ndarray
    ts: np.ndarray
    codes: np.ndarray
    names: list[Any]
    quiet: np.ndarray
    reject: np.ndarray
    key_code: np.ndarray = field(init=False)
    keys: list[PlanKey] = field(default_factory=list)
    tables: list[TableDef] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.key_code = np.full(len(self.todo), -1, np.int64)

    def live(self) -> np.ndarray:
        return ~self.quiet & ~self.reject


def _split_or_slow(todo: np.ndarray, can_split: bool, again: Callable[[np.ndarray], None], slow: np.ndarray) -> None:
    """A piece Arrow's reader refused: read ``todo`` again as smaller pieces (``again(piece)``, down to
    :data:`_SMALLEST_PIECE` messages), else one by one."""
    if can_split and todo.size > _SMALLEST_PIECE:
        for piece in np.array_split(todo, min(_PIECES, -(-todo.size // _SMALLEST_PIECE))):
            again(piece)
    else:
        slow[todo] = True


def _op_codes(text: pa.Array, words: Sequence[tuple[int, tuple[str, ...]]]) -> np.ndarray:
    """Each message's op code from its op text (``words``: each code's texts), -1 for any other."""
    op = np.full(len(text), -1, np.int8)
    for code, texts in words:
        for word in texts:
            op[_np(pc.equal(text, word), False)] = code
    return op


def _unknown_objects(parsed: pa.Table, top: tuple[str, ...]) -> np.ndarray:
    """Messages with a top-level key outside ``top`` holding an object or a list: it could hide keys of the row
    objects from the key counts."""
    found = np.zeros(parsed.num_rows, bool)
    for name in parsed.column_names:
        kind_of = parsed.schema.field(name).type
        if name not in top and (pa.types.is_struct(kind_of) or pa.types.is_list(kind_of)):
            found |= _valid(parsed.column(name))
    return found


def _take_versions(part: _Part, versions: TableVersions, out: Rows, fits: _Fits,
                   also_left: np.ndarray | None = None) -> None:
    """Each table's messages (neither quiet nor rejected) by table version (:func:`_planned_groups`), each version
    ``fits`` takes given its key code. The messages of a table ``[filter] rules`` leave out turn quiet, counted in
    ``out.filtered`` with those ``also_left`` marks."""
    for code, name in enumerate(part.names):
        mine = part.codes == code
        rows = np.flatnonzero(mine & ~part.quiet & ~part.reject)
        if versions.left_out(name):
            left = rows.size + (int(np.count_nonzero(mine & also_left)) if also_left is not None else 0)
            if left:
                out.filtered[name] = out.filtered.get(name, 0) + left
            part.quiet[rows] = True
            continue
        if not rows.size:
            continue
        for key, definition, chosen in _planned_groups(name, rows, part.ts, versions, out, part.reject):
            taken = fits(name, definition, chosen, part.tables[0] if part.tables else None)
            if taken is False:
                part.reject[chosen] = True
            if not taken:
                continue
            part.key_code[chosen] = len(part.keys)
            part.keys.append(key)
            part.tables.append(definition)


def _settle(part: _Part, skipped: np.ndarray, slow: np.ndarray) -> bool:
    """Mark the quiet messages skipped; with no table version taken or no live message left, the rejected ones
    slow, and False (nothing more to read)."""
    skipped[part.todo[part.quiet]] = True
    if not part.keys or not part.live().any():
        slow[part.todo[part.reject]] = True
        return False
    return True


def _reject_unknown_keys(part: _Part, body: Body, extra: Sequence[str],
                         images: Sequence[tuple[pa.Array, np.ndarray | None, np.ndarray | None]]) -> None:
    """Reject the messages holding a key ``extra`` names (a column the definition lacks, or a column in another
    case): a value of it in one of the ``images`` (row objects; ``(rows, each row's message or None: one per
    message, the messages where that image counts or None: all)``), or the key in the text (an explicit null)."""
    for name in extra:
        for image, owner, counts in images:
            index = image.type.get_field_index(name)
            if index < 0:
                continue
            valid = _valid(pc.struct_field(image, [index]))
            if owner is None:
                part.reject |= valid
            elif counts is None:
                part.reject[np.unique(owner[valid])] = True
            else:
                hit = np.unique(owner[valid])
                part.reject[hit] |= counts[hit]
        candidates = np.flatnonzero(~part.quiet & ~part.reject)  # an explicit null for an unknown key: in the text
        part.reject[candidates[_key_counts(body, part.todo[candidates], name) > 0]] = True


def _emit(out: Rows, part: _Part, columns: tuple[str, ...], base: np.ndarray, split: np.ndarray,
          message_of: np.ndarray | None, column: _Column) -> None:
    """Output rows: the rows ``base`` (each a message's, ``message_of[row]``; None: rows are messages), a row
    ``split`` marks (an UPDATE that changes the key) as DELETE + INSERT; the rows of each table version together,
    in message order: one take per column, then a slice per table version into ``out.tables``."""
    halves = split[base]
    repeat = np.where(halves, 2, 1)
    take_rows = np.repeat(base, repeat)
    first_half = np.zeros(take_rows.size, bool)
    second_half = np.zeros(take_rows.size, bool)
    if halves.any():
        first = (np.cumsum(repeat) - repeat)[halves]
        first_half[first] = True
        second_half[first + 1] = True
    order = np.argsort(part.key_code[take_rows if message_of is None else message_of[take_rows]], kind="stable")
    take_rows, first_half, second_half = take_rows[order], first_half[order], second_half[order]
    msg = take_rows if message_of is None else message_of[take_rows]
    row_op = part.op[msg].astype(np.uint8)
    row_op[first_half] = _OP_DELETE
    row_op[second_half] = _OP_INSERT
    indices = pa.array(take_rows)
    arrays = [column(name, indices, first_half, row_op) for name in columns]
    batch = pa.RecordBatch.from_arrays(arrays, names=list(columns))
    for k, start, stop in _runs(part.key_code[msg]):
        piece = batch if stop - start == batch.num_rows else batch.slice(start, stop - start)
        out.tables.append(TableRows(key=part.keys[k], columns=piece, op_codes=row_op[start:stop],
                                    commit_ts=part.ts[msg[start:stop]], message=part.todo[msg[start:stop]]))


# --------------------------------------------------------------------------------------------------
# canal-json's part

_CANAL_OPS = ((_OP_INSERT, ("INSERT",)), (_OP_UPDATE, ("UPDATE",)), (_OP_DELETE, ("DELETE",)))


@dataclass
class _CanalRows:
    """The row objects of canal-json messages: ``data`` and ``old`` flattened (``parent``, ``old_parent``: each
    row's message), the rows per message, and each column's values converted (``typed``, ``typed_old``; ``old_rows``:
    the old rows whose messages were live when converted)."""

    flat: pa.Array
    parent: np.ndarray
    old_flat: pa.Array
    old_parent: np.ndarray
    data_len: np.ndarray
    old_len: np.ndarray
    has_old: np.ndarray
    old_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    typed: dict[str, pa.Array] = field(default_factory=dict)
    typed_old: dict[str, pa.Array] = field(default_factory=dict)


def _canal_parse(texts: pa.Array, body: Body, todo: np.ndarray, columns: tuple[str, ...], versions: TableVersions,
                 out: Rows, slow: np.ndarray, skipped: np.ndarray,
                 whole: bool) -> tuple[np.ndarray, pa.Table, _TypeObjects | None] | None:
    """The messages of ``todo`` parsed here, their parse and the type objects cut out of them (None: parsed
    whole); None where every message was handed on (read whole, in smaller pieces, or one by one)."""
    sub = texts if todo.size == len(texts) else texts.take(pa.array(todo))  # (todo: ascending, distinct)
    types: _TypeObjects | None = None
    if columns and not whole:
        cut, types = _cut_types(sub)
        if types is not None and not cut.all():
            _canal_part(texts, body, todo[~cut], columns, versions, out, slow, skipped, whole=True)
            todo = todo[cut]
    if types is not None:
        parsed = _read_body(types.body, todo.size, _canal_schema(columns, cut=True))
        if parsed is not None and any(parsed.schema.field(name).type.num_fields for name in ("sqlType", "mysqlType")):
            _canal_part(texts, body, todo, columns, versions, out, slow, skipped, whole=True)  # a second sqlType...
            return None
    else:
        parsed = _read(sub, _canal_schema(columns)) if columns else None
    if parsed is None:
        _split_or_slow(todo, bool(columns), lambda piece: _canal_part(texts, body, piece, columns, versions, out, slow,
                                                                      skipped), slow)
        return None
    return todo, parsed, types


def _canal_rows_of(parsed: pa.Table, part: _Part) -> _CanalRows:
    """The row objects of each message; a message without rows, with ``old`` rows other in number than ``data``'s,
    or with a row that is not an object is rejected."""
    data = parsed.column("data").combine_chunks()
    old = parsed.column("old").combine_chunks()
    data_len = _np(pc.list_value_length(data), 0).astype(np.int64)
    old_len = _np(pc.list_value_length(old), 0).astype(np.int64)
    has_old = (part.op == _OP_UPDATE) & _valid(old)
    live = part.live()
    part.reject |= live & (data_len == 0)  # no rows in data (or no data)
    part.reject |= live & has_old & (old_len != data_len)
    rows = _CanalRows(flat=pc.list_flatten(data), parent=_np(pc.list_parent_indices(data)).astype(np.int64),
                      old_flat=pc.list_flatten(old), old_parent=_np(pc.list_parent_indices(old)).astype(np.int64),
                      data_len=data_len, old_len=old_len, has_old=has_old)
    if rows.flat.null_count:
        part.reject[np.unique(rows.parent[~_valid(rows.flat)])] = True  # a row that is not an object
    if rows.old_flat.null_count:
        hit = np.unique(rows.old_parent[~_valid(rows.old_flat)])
        part.reject[hit] |= has_old[hit]
    return rows


def _canal_typed(rows: _CanalRows, part: _Part, columns: tuple[str, ...], definition: TableDef) -> None:
    """Converted values (data rows, then old rows); a message with a value that cannot be taken as it is is
    rejected."""
    live = part.live()
    data_rows = live[rows.parent]
    rows.old_rows = (live & rows.has_old)[rows.old_parent]
    by_name = {c.name: c for c in definition.columns}
    for name in columns:
        col = by_name[name]
        conv, bad = _canal_column(col, pc.struct_field(rows.flat, [rows.flat.type.get_field_index(name)]))
        part.reject[np.unique(rows.parent[bad & data_rows])] = True
        rows.typed[name] = conv
        if rows.old_parent.size:
            old_index = rows.old_flat.type.get_field_index(name)
            conv_old, bad_old = _canal_column(col, pc.struct_field(rows.old_flat, [old_index]))
            part.reject[np.unique(rows.old_parent[bad_old & rows.old_rows])] = True
            rows.typed_old[name] = conv_old


def _canal_nulls(rows: _CanalRows, part: _Part, body: Body, columns: tuple[str, ...], key_names: set[str],
                 meta: _MetaKeys) -> None:
    """Nulls: present as null, or missing? Only where it matters (see the module docs): a message where that
    cannot be told from its text, or where a key is missing, is rejected."""
    m = len(part.todo)
    old_rows_n = np.where(rows.has_old, rows.old_len, 0)
    for name in columns:
        live = part.live()
        data_null = ~_valid(rows.typed[name]) & live[rows.parent]
        if not data_null.any():
            continue
        msgs = np.unique(rows.parent[data_null])
        if name in key_names:
            part.reject[msgs[part.op[msgs] == _OP_DELETE]] = True  # a DELETE without its key: the reader reports it
        check = msgs[part.op[msgs] != _OP_DELETE]
        if not check.size:
            continue
        extra_meta, unknown = meta.count(name, check)
        counts = _key_counts(body, part.todo[check], name) - extra_meta
        all_present = counts == rows.data_len[check] + old_rows_n[check]
        old_valid_n = (np.bincount(rows.old_parent[_valid(rows.typed_old[name]) & rows.old_rows], minlength=m)[check]
                       if rows.old_parent.size else np.zeros(check.size, np.int64))
        data_present = np.where(old_valid_n == old_rows_n[check], counts - old_rows_n[check], -1)
        ok = ~unknown & (all_present | (data_present == rows.data_len[check]))
        part.reject[check[~ok]] = True


def _canal_before_keys(rows: _CanalRows, part: _Part, body: Body, key_names: set[str],
                       meta: _MetaKeys) -> tuple[dict[str, pa.Array], np.ndarray]:
    """UPDATEs with old rows: the before image's key is the old value where old has the key, else the new one.
    Returns the before images' key columns, and the data rows whose key changes (each a DELETE + INSERT)."""
    live = part.live()
    before_key: dict[str, pa.Array] = {}
    if not (key_names and (live & rows.has_old).any()):
        return before_key, np.zeros(len(rows.flat), bool)
    m = len(part.todo)
    parent, old_parent = rows.parent, rows.old_parent
    data_start = np.zeros(m + 1, np.int64)
    np.cumsum(rows.data_len, out=data_start[1:])
    old_start = np.zeros(m + 1, np.int64)
    np.cumsum(rows.old_len, out=old_start[1:])
    paired_rows = np.flatnonzero(live[parent] & rows.has_old[parent])
    pair = np.full(len(rows.flat), -1, np.int64)  # data row -> the old row at the same position
    pair[paired_rows] = old_start[parent[paired_rows]] + (paired_rows - data_start[parent[paired_rows]])
    has_pair = pair >= 0
    differs = np.zeros(len(rows.flat), bool)
    for name in sorted(key_names):
        new = rows.typed[name]
        old_values = rows.typed_old[name]
        if old_values.type != new.type:  # ENUM/SET numbers on one side, names on the other
            if old_values.null_count == len(old_values):
                old_values = pa.nulls(len(old_values), new.type)
            elif new.null_count == len(new):
                new = pa.nulls(len(new), old_values.type)
            else:
                part.reject[np.unique(parent[has_pair])] = True
                continue
        paired = old_values.take(pa.array(np.maximum(pair, 0)))
        old_null = ~_valid(paired) & has_pair
        if old_null.any():
            msgs = np.unique(parent[old_null])
            extra_meta, unknown = meta.count(name, msgs)
            in_old = _key_counts(body, part.todo[msgs], name) - extra_meta - rows.data_len[msgs]
            valid_in_old = np.bincount(old_parent[_valid(old_values) & rows.old_rows], minlength=m)[msgs]
            # every null key in old must be a missing key (the before image keeps the new value)
            part.reject[msgs[unknown | (in_old != valid_in_old)]] = True
            paired = pc.if_else(pa.array(old_null), new, paired)
        before = pc.if_else(pa.array(has_pair), paired, new)
        before_key[name] = before
        differs |= ~_same(before, new)
    return before_key, differs & has_pair


def _canal_part(texts: pa.Array, body: Body, todo: np.ndarray, columns: tuple[str, ...], versions: TableVersions,
                out: Rows, slow: np.ndarray, skipped: np.ndarray, *, whole: bool = False) -> None:
    """Read the messages ``todo`` (indexes into ``texts``) whose table versions have the column names ``columns``
    (``whole``: with their ``sqlType`` and ``mysqlType`` parsed, not cut out; see :func:`_cut_types`)."""
    read = _canal_parse(texts, body, todo, columns, versions, out, slow, skipped, whole)
    if read is None:
        return
    todo, parsed, types = read
    kind = parsed.column("type").combine_chunks()
    is_ddl = _np(parsed.column("isDdl"), False).astype(bool)
    watermark = _np(pc.equal(kind, "TIDB_WATERMARK"), False)
    op = _op_codes(kind, _CANAL_OPS)
    ts, has_ts = _canal_commit_ts(parsed)
    codes, names = _table_codes(parsed)
    # DDLs and watermarks give no rows (the driver applies DDLs, and reports one it cannot read)
    quiet = watermark | is_ddl
    reject = ~quiet & ((op < 0) | ~has_ts | (codes < 0))
    if versions.dml_only:
        reject |= quiet
        quiet = np.zeros(len(todo), bool)
    reject |= _unknown_objects(parsed, _CANAL_TOP)
    part = _Part(todo, op, ts, codes, names, quiet, reject)
    if versions.strict:
        for code in np.unique(codes[is_ddl]):
            if code < 0 or not versions.left_out(names[code]):
                out.needs = out.needs or "a DDL"

    def fits(name: tuple[str, str], definition: TableDef, chosen: np.ndarray, first: TableDef | None) -> bool | None:
        if tuple(c.name for c in definition.columns) != columns:
            return False
        if versions.strict and name in versions.shapes and not (
                types.same_shape(chosen, versions.shapes[name]) if types is not None
                else _same_shape(parsed, chosen, versions.shapes[name])):
            out.needs = out.needs or f"the columns of {name[0]}.{name[1]}"
            return None
        # a type change without a name change: rare, one by one
        return first is None or not any(_converts_differently(a, b)
                                        for a, b in zip(definition.columns, first.columns, strict=False))

    _take_versions(part, versions, out, fits, also_left=is_ddl & ~watermark)
    if not _settle(part, skipped, slow):
        return
    rows = _canal_rows_of(parsed, part)
    _reject_unknown_keys(part, body, [f.name for f in rows.flat.type if f.name not in columns],
                         [(rows.flat, rows.parent, None), (rows.old_flat, rows.old_parent, rows.has_old)])
    definition = part.tables[0]
    _canal_typed(rows, part, columns, definition)
    meta = _MetaKeys(parsed) if types is None else _MetaKeys(parsed, ("_tidb",), types)
    key_names = set(definition.handle_key_names() or ())
    _canal_nulls(rows, part, body, columns, key_names, meta)
    before_key, split = _canal_before_keys(rows, part, body, key_names, meta)
    live = part.live()
    slow[todo[part.reject]] = True
    if not live.any():
        return

    def column(name: str, indices: pa.Array, first_half: np.ndarray, _row_op: np.ndarray) -> pa.Array:
        values = rows.typed[name].take(indices)
        if first_half.any() and name in before_key:
            values = pc.if_else(pa.array(first_half), before_key[name].take(indices), values)
        return values

    _emit(out, part, columns, np.flatnonzero(live[rows.parent]), split, rows.parent, column)


def _runs(groups: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(group, start, stop) of each run of one value in sorted ``groups``, leaving out negative groups (rows of
    no table version)."""
    if not groups.size:
        return
    edges = np.flatnonzero(np.diff(groups)) + 1
    starts = np.concatenate(([0], edges))
    stops = np.concatenate((edges, [groups.size]))
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        if groups[start] >= 0:
            yield int(groups[start]), start, stop


def _same_shape(parsed: pa.Table, rows: np.ndarray, shape: str) -> bool:
    """Whether the messages ``rows`` list exactly the columns ``shape`` names in ``mysqlType`` (or have none)."""
    mysql = parsed.column("mysqlType").combine_chunks().take(pa.array(rows))
    present = _valid(mysql)
    if not present.any():
        return True
    names = []
    for index, f in enumerate(mysql.type):
        valid = _valid(pc.struct_field(mysql, [index]))[present]
        if valid.all():
            names.append(f.name.lower())
        elif valid.any():
            return False  # messages of two column sets (or a null type): the driver decides
    return ",".join(sorted(names)) == shape


def _converts_differently(a: ColumnDef, b: ColumnDef) -> bool:
    """Whether two columns of one name take a canal-json value to different things (see :func:`_canal_column`)."""
    return (a.type != b.type or a.unsigned != b.unsigned or _is_binary_column(a) != _is_binary_column(b)
            or ((a.length or 1) > 53) != ((b.length or 1) > 53))


class _MetaKeys:
    """Keys named like a column outside the row objects (``mysqlType``, ``sqlType``, ``_tidb``, the top level),
    per message: how many, and whether that cannot be told (a ``null`` there)."""

    def __init__(self, parsed: pa.Table, containers: tuple[str, ...] = ("mysqlType", "sqlType", "_tidb"),
                 cut: _TypeObjects | None = None) -> None:
        self.parsed = parsed
        self.containers = containers
        self.cut = cut  # the objects cut out of the text before the parse, counted from the cut

    def count(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        total = np.zeros(rows.size, np.int64) if self.cut is None else self.cut.count(name, rows)
        unknown = np.zeros(rows.size, bool)
        idx = pa.array(rows)
        top = self.parsed.schema.names
        if name in top:
            present = _valid(self.parsed.column(name).combine_chunks().take(idx))
            total += present
            unknown |= ~present
        for container in self.containers:
            if container not in top or not pa.types.is_struct(self.parsed.schema.field(container).type):
                continue
            struct = self.parsed.column(container).combine_chunks().take(idx)
            index = struct.type.get_field_index(name)
            if index < 0:
                continue
            inner = _valid(pc.struct_field(struct, [index]))
            outer = _valid(struct)
            total += inner
            unknown |= outer & ~inner
        return total, unknown


def _canal_light(light: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Any]]:
    ts, has_ts = _canal_commit_ts(light)
    codes, names = _table_codes(light)
    return ts, has_ts, codes, names


_CANAL = _Format(shape=lambda table: tuple(c.name for c in table.columns), light=_canal_light,
                 light_schema=_PEEK_SCHEMA, part=_canal_part)


# --------------------------------------------------------------------------------------------------
# debezium-json (bare payloads)

_DEBEZIUM_TOP = ("before", "after", "op", "ts_ms", "source", "transaction")
_DEBEZIUM_SOURCE = pa.struct([("db", pa.string()), ("table", pa.string()), ("commit_ts", pa.int64()),
                              ("ts_ms", pa.int64())])
#: ``source`` as the full parse declares it: the fields above first (read by position), then the rest of what
#: TiCDC and Debezium's MySQL connector write, each of the one JSON type they write it as (declared fields convert
#: faster than inferred ones; a value of another type makes the parse refuse the piece, which is then read again
#: in smaller pieces, and one by one).
_DEBEZIUM_SOURCE_FULL = pa.struct([*_DEBEZIUM_SOURCE, *(pa.field(name, kind) for name, kind in (
    ("version", pa.string()), ("connector", pa.string()), ("name", pa.string()), ("snapshot", pa.string()),
    ("server_id", pa.int64()), ("gtid", pa.string()), ("file", pa.string()), ("pos", pa.int64()),
    ("row", pa.int64()), ("thread", pa.int64()), ("query", pa.string()), ("cluster_id", pa.string())))])
_DEBEZIUM_LIGHT = pa.schema([("op", pa.string()), ("ts_ms", pa.int64()), ("source", _DEBEZIUM_SOURCE),
                             ("payload", pa.struct([])), ("schema", pa.struct([]))])
_EPOCH_DAY_LOW, _EPOCH_DAY_HIGH = -719162, 2932896  # 0001-01-01 .. 9999-12-31, Python's date range
_DAY_US = 86_400_000_000
_ZONED = r"^(?P<d>[0-9]{4}-[0-9]{2}-[0-9]{2})T(?P<t>[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<f>[0-9]+))?Z$"


def _debezium_type(col: ColumnDef) -> pa.DataType:
    """The JSON type of a column's value in a debezium payload (TiCDC's and Debezium MySQL's encoders)."""
    kind = col.type
    if kind is MySQLType.BIT:
        return pa.bool_() if (col.length or 1) == 1 else pa.string()
    if kind in INT_TYPES or kind in (MySQLType.DATE, MySQLType.DATETIME, MySQLType.TIME):
        return pa.int64()
    if kind in FLOAT_TYPES or kind is MySQLType.DECIMAL:
        return pa.float64()
    return pa.string()


def _debezium_shape(table: TableDef) -> tuple[tuple[str, str], ...]:
    return tuple((c.name, str(_debezium_type(c))) for c in table.columns)


def _debezium_schema(shape: tuple[tuple[str, str], ...], table: TableDef) -> pa.Schema:
    row = pa.struct([pa.field(c.name, _debezium_type(c)) for c in table.columns])
    return pa.schema([("before", row), ("after", row), ("op", pa.string()), ("ts_ms", pa.int64()),
                      ("source", _DEBEZIUM_SOURCE_FULL)])


def _debezium_commit_ts(parsed: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """``source.commit_ts``, else ``source.ts_ms`` (else the payload's ``ts_ms``) ``<< 18`` when not 0."""
    source = parsed.column("source").combine_chunks()
    commit = pc.struct_field(source, [2])
    has_commit = _valid(commit)
    src_ms = _np(pc.struct_field(source, [3]), 0).astype(np.int64)
    top_ms = _np(parsed.column("ts_ms"), 0).astype(np.int64)
    ms = np.where(src_ms != 0, src_ms, top_ms)
    has_ms = (ms != 0) & (ms >= 0) & (ms <= _ES_LIMIT)
    return np.where(has_commit, _np(commit, 0).astype(np.int64), ms << 18), has_commit | has_ms


def _debezium_codes(parsed: pa.Table) -> tuple[np.ndarray, list[tuple[str, str]]]:
    source = parsed.column("source").combine_chunks()
    db, tb = pc.struct_field(source, [0]), pc.struct_field(source, [1])
    ok = _valid(db) & _valid(tb) & _np(pc.greater(pc.utf8_length(tb), 0), False)
    joined = pc.binary_join_element_wise(db.fill_null(""), tb.fill_null(""), "\x00")
    encoded = pc.dictionary_encode(joined)
    codes = _np(encoded.indices, -1).astype(np.int64)
    codes[~ok] = -1
    return codes, _table_names(encoded.dictionary)


def _debezium_light(light: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Any]]:
    ts, has_ts = _debezium_commit_ts(light)
    codes, names = _debezium_codes(light)
    envelope = _valid(light.column("payload")) | _valid(light.column("schema"))
    codes[envelope] = -1
    return ts, has_ts, codes, names


def _digits_text(values: np.ndarray, width: int) -> pa.Array:
    return pc.utf8_lpad(pa.array(values, pa.int64()).cast(pa.string()), width=width, padding="0")


def _fraction_text(micros: np.ndarray, fsp: int | None, unit_digits: int) -> pa.Array:
    """``debezium_json._fraction``: ``"." + f"{micros:06d}"[:digits]`` (empty for fsp 0; fsp None: the unit's
    digits, and empty when the fraction is 0)."""
    six = _digits_text(micros, 6)
    if fsp is None:
        cut = pc.utf8_slice_codeunits(six, 0, min(unit_digits, 6))
        return pc.if_else(pa.array(micros == 0), "", pc.binary_join_element_wise(".", cut, ""))
    if fsp <= 0:
        return pa.array([""] * len(micros), pa.string())
    return pc.binary_join_element_wise(".", pc.utf8_slice_codeunits(six, 0, fsp), "")


def _debezium_column(col: ColumnDef, values: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """One column of debezium values -> (what ``convert_debezium_value(value, col)`` gives, typed; rows not
    taken exactly)."""
    from avro_registry_sink.encoding.columnar import decode_base64

    n = len(values)
    bad = np.zeros(n, bool)
    kind = col.type
    valid = _valid(values)
    if not valid.any():
        return pa.nulls(n, _typed_as_debezium(col)), bad
    if kind is MySQLType.BIT:
        if pa.types.is_boolean(values.type):
            return values.cast(pa.int64()), bad
        raw = decode_base64(values)
        if raw is None:
            return pa.nulls(n, pa.int64()), valid
        offsets, data = _offsets_and_data(raw)
        lens = np.diff(offsets)
        bad = valid & (lens > 8)
        number = np.zeros(n, np.uint64)
        for k in range(8):
            has = (lens > k) & ~bad
            number[has] |= data[offsets[:-1][has] + k].astype(np.uint64) << np.uint64(8 * k)
        return pa.array(number, pa.uint64(), mask=~valid), bad
    if kind in INT_TYPES:
        if col.unsigned:
            numbers = _np(values, 0).astype(np.int64).view(np.uint64)
            return pa.array(numbers, pa.uint64(), mask=~valid), bad
        return values, bad
    if kind in FLOAT_TYPES:
        return values, bad
    if kind is MySQLType.DECIMAL:
        return _debezium_decimal(col, values, valid)
    if _is_binary_column(col):
        raw = decode_base64(values)
        if raw is None:
            return pa.nulls(n, pa.large_binary()), valid
        return raw, bad
    if kind in (MySQLType.DATE, MySQLType.DATETIME, MySQLType.TIME, MySQLType.TIMESTAMP):
        return _debezium_temporal(col, values, valid)
    return values, bad


def _debezium_decimal(col: ColumnDef, values: pa.Array, valid: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """A DECIMAL column of debezium values (JSON numbers) -> its text at the column's scale (see
    :func:`_debezium_column`)."""
    n = len(values)
    scale = col.scale
    if scale is None:
        return pa.nulls(n, pa.string()), valid
    text = values.cast(pa.string())  # the shortest digits of the double, as repr() gives them
    exponent = _np(pc.match_substring(text, "e"), False)
    point = _np(pc.find_substring(text, "."), -1)
    length = _np(pc.utf8_length(text), 0)
    negative = _np(pc.starts_with(text, "-"), False)
    frac_digits = np.where(point >= 0, length - point - 1, 0)
    int_digits = np.where(point >= 0, point, length) - negative
    zero = _np(pc.equal(values, 0.0), False)
    # more fractional digits than the scale (rounding), past Decimal's 28 digits, or -0: one by one
    bad = valid & (exponent | (frac_digits > scale) | (int_digits + scale > 28) | (negative & zero))
    if bad.any():
        text = pc.if_else(pa.array(bad), pa.scalar(None, pa.string()), text)
    number, bad = _cast(text, pa.decimal128(38, scale), bad)
    if bad.all():
        return pa.nulls(n, pa.string()), bad
    from avro_registry_sink.encoding.columnar import _fixed_point_text

    # the text the reader hands on: the value at the column's scale (a key's partition hashes this text)
    return _fixed_point_text(number, scale), bad


def _debezium_temporal(col: ColumnDef, values: pa.Array, valid: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """A DATE, DATETIME, TIME or TIMESTAMP column of debezium values -> its text (see :func:`_debezium_column`)."""
    n = len(values)
    bad = np.zeros(n, bool)
    kind = col.type
    if kind is MySQLType.DATE:
        days = _np(values, 0).astype(np.int64)
        bad = valid & ((days < _EPOCH_DAY_LOW) | (days > _EPOCH_DAY_HIGH))
        days = np.where(bad | ~valid, 0, days)
        text = pa.array(days.astype(np.int32), pa.int32()).cast(pa.date32()).cast(pa.string())
        return pc.if_else(pa.array(valid & ~bad), text, pa.scalar(None, pa.string())), bad
    if kind is MySQLType.DATETIME:
        fsp = col.fsp
        unit_ms = (fsp or 0) <= 3
        raw = _np(values, 0).astype(np.int64)
        limit = (_EPOCH_DAY_HIGH + 1) * (_DAY_US // 1000 if unit_ms else _DAY_US)
        low = _EPOCH_DAY_LOW * (_DAY_US // 1000 if unit_ms else _DAY_US)
        bad = valid & ((raw < low) | (raw >= limit))
        micros = np.where(bad | ~valid, 0, raw) * (1000 if unit_ms else 1)
        days = np.floor_divide(micros, _DAY_US)
        rest = micros - days * _DAY_US
        seconds, frac = np.divmod(rest, 1_000_000)
        hours, rest_s = np.divmod(seconds, 3600)
        minutes, secs = np.divmod(rest_s, 60)
        date = pa.array(days.astype(np.int32), pa.int32()).cast(pa.date32()).cast(pa.string())
        text = pc.binary_join_element_wise(date, " ", _digits_text(hours, 2), ":", _digits_text(minutes, 2), ":",
                                           _digits_text(secs, 2), "")
        text = pc.binary_join_element_wise(text, _fraction_text(frac, fsp, 3 if unit_ms else 6), "")
        return pc.if_else(pa.array(valid & ~bad), text, pa.scalar(None, pa.string())), bad
    if kind is MySQLType.TIME:
        fsp = col.fsp
        raw = _np(values, 0).astype(np.int64)
        magnitude = np.abs(raw)
        seconds, frac = np.divmod(magnitude, 1_000_000)
        hours, rest = np.divmod(seconds, 3600)
        minutes, secs = np.divmod(rest, 60)
        sign = pc.if_else(pa.array(raw < 0), "-", "")
        text = pc.binary_join_element_wise(sign, _digits_text(hours, 2), ":", _digits_text(minutes, 2), ":",
                                           _digits_text(secs, 2), _fraction_text(frac, fsp, 6), "")
        return pc.if_else(pa.array(valid), text, pa.scalar(None, pa.string())), bad
    if kind is MySQLType.TIMESTAMP:
        found = pc.extract_regex(values, _ZONED)
        matched = _valid(found)
        bad = valid & ~matched
        date, clock, frac = (pc.struct_field(found, [i]) for i in range(3))
        fsp = col.fsp
        if fsp is not None:
            frac = pc.utf8_slice_codeunits(pc.utf8_rpad(frac.fill_null(""), width=max(fsp, 1), padding="0"), 0, fsp) \
                if fsp > 0 else pa.array([""] * n, pa.string())
        frac = frac.fill_null("")
        dotted = pc.if_else(pc.equal(frac, ""), "", pc.binary_join_element_wise(".", frac, ""))
        text = pc.binary_join_element_wise(date, " ", clock, dotted, "")
        return pc.if_else(pa.array(matched), text, pa.scalar(None, pa.string())), bad
    return values, bad


def _typed_as_debezium(col: ColumnDef) -> pa.DataType:
    kind = col.type
    if kind is MySQLType.BIT:
        return pa.int64() if (col.length or 1) == 1 else pa.uint64()
    if kind in INT_TYPES:
        return pa.uint64() if col.unsigned else pa.int64()
    if kind in FLOAT_TYPES:
        return pa.float64()
    if _is_binary_column(col) and kind is not MySQLType.DECIMAL:
        return pa.large_binary()
    return pa.string()


_DEBEZIUM_OPS = ((_OP_INSERT, ("c", "r")), (_OP_UPDATE, ("u",)), (_OP_DELETE, ("d",)))


def _debezium_parse(texts: pa.Array, body: Body, todo: np.ndarray, shape: Any, versions: TableVersions, out: Rows,
                    slow: np.ndarray, skipped: np.ndarray, scan: bool) -> tuple[np.ndarray, pa.Table] | None:
    """The payloads of ``todo`` parsed here and their parse; None where every payload was handed on (declined by
    the scanner or crashed it, read in smaller pieces, or one by one)."""
    tables_of_shape = [d for h in versions.history.values() for _, d in h if _debezium_shape(d) == shape]
    sub = texts if todo.size == len(texts) else texts.take(pa.array(todo))
    scanned = scan_debezium(sub, shape) if tables_of_shape and scan else None
    if scanned is not None:
        parsed, declined, crashed = scanned
        if crashed.any():
            out.crashed = np.union1d(out.crashed, todo[crashed]).astype(np.int64)
        if declined.any():
            _debezium_part(texts, body, todo[declined], shape, versions, out, slow, skipped, scan=False)
        done = declined | crashed
        if done.all():
            return None
        if done.any():
            todo, parsed = todo[~done], parsed.filter(pa.array(~done))
    else:
        parsed = _read(sub, _debezium_schema(shape, tables_of_shape[0])) if tables_of_shape else None
    if parsed is None:
        _split_or_slow(todo, bool(tables_of_shape), lambda piece: _debezium_part(
            texts, body, piece, shape, versions, out, slow, skipped, scan=False), slow)
        return None
    return todo, parsed


def _debezium_nulls(part: _Part, body: Body, parsed: pa.Table, columns: tuple[str, ...], key_names: set[str],
                    after: dict[str, pa.Array], before: dict[str, pa.Array], has_before: np.ndarray) -> None:
    """A key's null (or missing key) is left to the per-message reader; another column's null in ``after`` must
    be a key in the text (present as null, not missing)."""
    meta = _MetaKeys(parsed, containers=("source", "transaction"))
    is_delete = part.op == _OP_DELETE
    for name in columns:
        live = part.live()
        after_null = live & ~is_delete & ~_valid(after[name])
        before_null = live & has_before & ~_valid(before[name])
        if name in key_names:  # a key's null (or missing key): the per-message reader decides
            part.reject |= (before_null & (is_delete | (part.op == _OP_UPDATE))) | after_null
            continue
        check = np.flatnonzero(after_null)
        if not check.size:
            continue
        extra_meta, unknown = meta.count(name, check)
        counts = _key_counts(body, part.todo[check], name) - extra_meta
        # after has the key (as null) when the key occurs once more than before can hold it
        ok = ~unknown & (counts == 1 + has_before[check].astype(np.int64))
        part.reject[check[~ok]] = True


def _debezium_part(texts: pa.Array, body: Body, todo: np.ndarray, shape: Any, versions: TableVersions, out: Rows,
                   slow: np.ndarray, skipped: np.ndarray, *, scan: bool = True) -> None:
    """Read the bare debezium payloads ``todo`` whose table versions have the parse shape ``shape``: with the
    compiled scanner (:mod:`~avro_registry_sink.formats.native_scan`) where it is built, and with Arrow's reader
    what it declines (or all, ``scan=False``)."""
    read = _debezium_parse(texts, body, todo, shape, versions, out, slow, skipped, scan)
    if read is None:
        return
    todo, parsed = read
    columns = tuple(name for name, _ in shape)
    op_text = parsed.column("op").combine_chunks()
    op = _op_codes(op_text, _DEBEZIUM_OPS)
    ts, has_ts = _debezium_commit_ts(parsed)
    codes, names = _debezium_codes(parsed)
    watermark = _np(pc.equal(op_text, "m"), False) & has_ts
    quiet = watermark.copy()
    # an envelope, another op (a DDL, TRUNCATE), or no table or commit ts: read one by one
    reject = ~quiet & ((op < 0) | ~has_ts | (codes < 0))
    if "payload" in parsed.column_names or "schema" in parsed.column_names:
        reject |= ~quiet  # the Connect envelope: field schemas may change units
    reject |= _unknown_objects(parsed, _DEBEZIUM_TOP)
    part = _Part(todo, op, ts, codes, names, quiet, reject)
    if versions.strict:
        for i in np.flatnonzero(~watermark & (op < 0) & _valid(op_text)):
            if op_text[int(i)].as_py() in ("t",) and (codes[i] < 0 or not versions.left_out(names[codes[i]])):
                out.needs = out.needs or "a DDL"

    def fits(name: tuple[str, str], definition: TableDef, chosen: np.ndarray, first: TableDef | None) -> bool:
        return not (_debezium_shape(definition) != shape or (first is not None and any(
            _converts_differently(a, b) or a.fsp != b.fsp or a.scale != b.scale
            for a, b in zip(definition.columns, first.columns, strict=False))))

    _take_versions(part, versions, out, fits)
    if not _settle(part, skipped, slow):
        return
    before = parsed.column("before").combine_chunks()
    after = parsed.column("after").combine_chunks()
    has_before, has_after = _valid(before), _valid(after)
    is_delete = op == _OP_DELETE
    live = part.live()
    part.reject |= live & ~is_delete & ~has_after  # an insert/update without after
    part.reject |= live & is_delete & ~has_before  # a delete without before
    extra = {f.name for image in (after, before) for f in image.type if f.name not in columns}
    _reject_unknown_keys(part, body, sorted(extra), [(after, None, None), (before, None, None)])  # "unknown column"
    definition = part.tables[0]
    by_name = {c.name: c for c in definition.columns}
    key_names = set(definition.handle_key_names() or ())
    typed_after: dict[str, pa.Array] = {}
    typed_before: dict[str, pa.Array] = {}
    live = part.live()
    for name in columns:
        typed_after[name], bad = _debezium_column(by_name[name],
                                                  pc.struct_field(after, [after.type.get_field_index(name)]))
        part.reject |= bad & live & has_after
        typed_before[name], bad = _debezium_column(by_name[name],
                                                   pc.struct_field(before, [before.type.get_field_index(name)]))
        part.reject |= bad & live & has_before
    _debezium_nulls(part, body, parsed, columns, key_names, typed_after, typed_before, has_before)
    live = part.live()
    # UPDATEs with a before image: a key change becomes DELETE + INSERT (split_key_change)
    differs = np.zeros(len(todo), bool)
    for name in sorted(key_names):
        differs |= ~_same(typed_before[name], typed_after[name])
    split = live & (op == _OP_UPDATE) & has_before & differs
    slow[todo[part.reject]] = True
    if not live.any():
        return

    def column(name: str, indices: pa.Array, _first_half: np.ndarray, row_op: np.ndarray) -> pa.Array:
        return pc.if_else(pa.array(row_op == _OP_DELETE), typed_before[name].take(indices),
                          typed_after[name].take(indices))

    _emit(out, part, columns, np.flatnonzero(live), split, None, column)


_DEBEZIUM = _Format(shape=_debezium_shape, light=_debezium_light, light_schema=_DEBEZIUM_LIGHT, part=_debezium_part)


# --------------------------------------------------------------------------------------------------
# The summary's light parse: what the driver learns of a batch (kinds, tables, commit ts, canal-json's column
# types) without reading the rows: each changelog format's InputFormat.summary_peek. ``kind``: 0 dml, 1 ddl,
# 2 watermark, -1 read message by message.

def _mysql_types(body: Body, rows: np.ndarray) -> tuple[list[str | None], np.ndarray]:
    """The ``mysqlType`` object of each message ``rows`` (of a :class:`Body`)
    as its text (``None``: none, or ``null``), cut out of the message as it is; and the messages where the cut is
    unsure (read one by one instead).

    A cut ends at the first ``}``: every distinct cut is checked to be a JSON object, so a ``}`` inside a type
    text (which leaves the cut unterminated) is caught."""
    text = body.bytes
    find, starts, ends = text.find, body.starts, body.ends
    out: list[str | None] = []
    unsure = np.zeros(rows.size, bool)
    checked: dict[bytes, str | None] = {}
    key, key_null = b'"mysqlType":{', b'"mysqlType":null'
    for j, i in enumerate(rows.tolist()):
        start, end = starts[i], ends[i]
        at = find(key, start, end)
        if at >= 0 and find(b'"mysqlType"', start, at) < 0:
            close = find(b"}", at, end)
            cut = text[at + 12: close + 1] if close >= 0 else b""
        elif (find(b'"mysqlType"', start, end) < 0  # no mysqlType, or a null one first
              or (find(key_null, start, end) >= 0 and find(b'"mysqlType"', start, find(key_null, start, end)) < 0)):
            out.append(None)
            continue
        else:  # spaces around the colon, or the key elsewhere first: the cut of the general form
            general = _general_cut(text, start, end)
            if general is None:
                out.append(None)
                continue
            cut = general
        good = checked.get(cut, "?")
        if good == "?":
            try:
                good = cut.decode("utf-8") if isinstance(json.loads(cut), dict) else None
            except ValueError:
                good = None
            checked[cut] = good
        if good is None:
            unsure[j] = True
        out.append(good)
    return out, unsure


def _general_cut(text: bytes, start: int, end: int) -> bytes | None:
    """The ``mysqlType`` cut with spaces around the colon (``None``: the key holds ``null``); an empty cut
    (refused by the check) when it is something else."""
    at = text.find(b'"mysqlType"', start, end) + len(b'"mysqlType"')
    while at < end and text[at] in b" \t":
        at += 1
    if at >= end or text[at] != 0x3A:  # ':'
        return b""
    at += 1
    while at < end and text[at] in b" \t":
        at += 1
    if text.startswith(b"null", at):
        return None
    close = text.find(b"}", at, end) if at < end and text[at] == 0x7B else -1
    return text[at: close + 1] if close >= 0 else b""


def canal_summary_peek(texts: pa.Array, body: Body, rows: np.ndarray) -> dict[str, Any] | None:
    """The light parse of canal-json messages ``rows``: kind (0 dml, 1 ddl, 2 watermark, -1 per message),
    schema, table, commit ts and the ``mysqlType`` text of each."""
    sub = texts.take(pa.array(rows))
    parsed = _read(sub, _PEEK_SCHEMA, "ignore")
    if parsed is None:
        return None
    kind_text = parsed.column("type").combine_chunks()
    watermark = _np(pc.equal(kind_text, "TIDB_WATERMARK"), False)
    ddl = _np(parsed.column("isDdl"), False).astype(bool) & ~watermark
    ts, has_ts = _canal_commit_ts(parsed)
    schema = parsed.column("database").combine_chunks()
    table = parsed.column("table").combine_chunks()
    named = _valid(schema) & _valid(table)
    kind = np.where(watermark, 2, np.where(ddl, 1, np.where(named & has_ts, 0, -1)))
    dml = np.flatnonzero(kind == 0)
    cuts, unsure = _mysql_types(body, rows[dml])
    kind[dml[unsure]] = -1  # a mysqlType the cut cannot take: the whole message is read
    mtype = pa.array(_spread_values(cuts, dml, len(sub)), pa.string())
    return {"kind": kind, "schema": schema, "table": table, "ts": ts, "has_ts": has_ts, "mtype": mtype, "sub": sub}


def debezium_summary_peek(texts: pa.Array, body: Body, rows: np.ndarray) -> dict[str, Any] | None:
    """The light parse of bare debezium payloads ``rows``: kind (0 dml, 2 watermark, -1 per message: envelopes,
    DDLs, anything else), schema, table and commit ts."""
    sub = texts.take(pa.array(rows))
    parsed = _read(sub, _DEBEZIUM_LIGHT, "ignore")
    if parsed is None:
        return None
    op = parsed.column("op").combine_chunks()
    ts, has_ts = _debezium_commit_ts(parsed)
    source = parsed.column("source").combine_chunks()
    schema, table = pc.struct_field(source, [0]), pc.struct_field(source, [1])
    named = _valid(schema) & _valid(table) & _np(pc.greater(pc.utf8_length(table), 0), False)
    dml = _np(pc.is_in(op, value_set=pa.array(["c", "r", "u", "d"])), False)
    envelope = _valid(parsed.column("payload")) | _valid(parsed.column("schema"))
    kind = np.where(envelope, -1, np.where(dml & named & has_ts, 0,
                                           np.where(_np(pc.equal(op, "m"), False) & has_ts, 2, -1)))
    return {"kind": kind, "schema": schema, "table": table, "ts": ts, "has_ts": has_ts,
            "mtype": pa.nulls(len(sub), pa.string()), "sub": sub}


def _spread_values(values: list[Any], rows: np.ndarray, n: int) -> list[Any]:
    out: list[Any] = [None] * n
    for value, row in zip(values, rows.tolist(), strict=False):
        out[row] = value
    return out
