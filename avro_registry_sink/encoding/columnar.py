"""Columnar Avro encoder: an Arrow batch of row changes -> Confluent-framed key and value binary arrays.

Same bytes as the per-row reference encoder the tests keep (``tests/support/reference_encoder.py``), without a Python
object per value: every column is converted and validated with numpy / ``pyarrow.compute`` on whole
arrays, and the Avro body of each row is assembled from per-column pieces in one pass.

How a batch is encoded
----------------------
1. **Datums.** Each input column becomes the Avro datums of its field, as arrays: ``int64`` for Avro
   ``int``/``long`` (ranges checked with min/max; BIGINT UNSIGNED wraps as Go's ``int64(uint64)``),
   ``float32``/``float64`` (NaN and +-Inf -> 0), offsets + data buffer for ``string``/``bytes`` (Arrow's
   own buffers, zero-copy), and a little-endian two's-complement matrix for precise decimals.
2. **Parts.** A field is written as parts: *fixed* (the 5-byte header, doubles, floats), *var* (a
   varint, a union branch byte plus a varint, a decimal's length byte plus its bytes; each row
   left-aligned in a small ``(rows, width)`` byte matrix with its length) and *body* (string/bytes
   payloads, referenced in place). Zig-zag varints are computed on whole columns: one ``uint64`` shift
   per 7-bit group up to the column's widest value, continuation bits from the next group being non-zero.
3. **Assembly.** Consecutive fixed/var parts are merged into one matrix per row segment; each segment of
   each row becomes an Arrow *binary view* (inline when <= 12 bytes, else pointing into the segment
   matrix or the string buffer), and one ``cast(binary_view -> binary)`` copies all segments, row-major,
   into the contiguous output buffer. The row offsets are every P-th offset of that cast.

Decimals
--------
``DECIMAL(p,s)`` in precise mode is ``floor(v * 10**s)`` as minimal big-endian two's complement.
Input as ``decimal128``/``decimal256`` at the column scale is used as is (its buffer *is* the unscaled
two's complement); at a smaller scale it is rescaled with an exact Arrow cast. Decimal text is parsed with
Arrow's ``cast(string -> decimal128(38, s))`` (``decimal256(76, s)`` when ``p > 38``), which handles all
of MySQL's 65 digits without Python objects. Minimal lengths and the big-endian bytes come from the
16-byte (or 32-byte) two's-complement matrix; values that fit in 64 bits (18 digits and less, the usual
case) take a faster ``int64`` path (shift-left by the unused bytes, then byteswap).

Limits (values that take the per-value path)
-------------------------------------------
Inputs the vectorized paths do not cover are converted value by value with the reference converters of
:mod:`avro_registry_sink.typemap.mysql` (exact, but at Python speed, for that column of that chunk):
decimal text with more fractional digits than the column scale (flooring), decimal input at a larger
scale than the column's, decimals in ``string`` decimal mode given as Arrow decimals, integers given as
text Arrow cannot parse as an integer (whitespace, ``1_000``), floats given as decimals, BIT given as
bytes, temporal Arrow types (date/time/timestamp), booleans, lists and structs. Binary columns given as
``string`` are their UTF-8 bytes (as in the reference); base64 decoding is the Spark stage's job.
A batch's output must stay below 2 GiB per array (Arrow ``binary``); split larger batches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.encoding.avro_binary import (
    I32,
    I64,
    U8,
    U64,
    Bits,
    Body,
    Bytes,
    Decimals,
    Floats,
    Longs,
    Mat,
    Scratch,
    Word,
    assemble,
    be_word,
    byte_len_signed,
    byte_len_unsigned,
    len_varint,
    sized_bytes,
    u64,
    varint,
    wide_twos,
    zigzag,
)
from avro_registry_sink.encoding.plan import MAGIC_BYTE, EncodingPlan
from avro_registry_sink.errors import EncodingError
from avro_registry_sink.model import Op
from avro_registry_sink.table import ColumnDef
from avro_registry_sink.typemap.mysql import (
    YEAR_RANGE,
    YEAR_REFUSAL,
    ValueKind,
    converter_for,
    decimal_encoding,
    range_refusal,
    rule_for,
)

__all__ = ["CHUNK_ROWS", "ColumnarEncoder", "decode_base64", "parse_ops", "record_fields"]

#: Rows encoded per internal chunk: bounds the temporary memory (about 300 bytes per row of a 12-column
#: table) and keeps the working set in cache; results are concatenated.
CHUNK_ROWS = 65536


# Op codes of the ``ops`` array, after parsing.
_INSERT, _UPDATE, _DELETE = 0, 1, 2


# --------------------------------------------------------------------------------------------------
# Errors: found vectorized, reported as the reference would, with the first bad row of the batch.


class _ColumnFailure(Exception):
    """A column cannot be encoded; ``index`` is the first bad position in the column's array."""

    def __init__(self, index: int, error: EncodingError | None = None, *, value: Any = None, reason: str = "") -> None:
        super().__init__(reason)
        self.index = index
        self.error = error
        self.value = value
        self.reason = reason


@dataclass(frozen=True)
class _Failure:
    row: int  # row of the batch
    phase: int  # 0 key, 1 value (the reference encodes a row's key before its value)
    order: int  # field position
    error: EncodingError


# --------------------------------------------------------------------------------------------------
# Field specifications (from the registered schema text: union order decides the branch indexes).


@dataclass(frozen=True)
class _Field:
    column: ColumnDef
    avro: str  # int | long | float | double | string | bytes
    null_branch: int | None  # index of "null" in the union, None when not a union
    kind: ValueKind
    order: int
    name: str  # the Avro field's name (TiCDC's sanitised column name)


def record_fields(schema_json: str | None, columns: Sequence[ColumnDef]) -> list[_Field]:
    """One field spec per field of a registered record schema, paired with its column in order."""
    if schema_json is None:
        return []
    schema = json.loads(schema_json)
    out = []
    for order, (field, col) in enumerate(zip(schema["fields"], columns, strict=False)):
        type_ = field["type"]
        null_branch = None
        if isinstance(type_, list):
            null_branch = type_.index("null")
            type_ = type_[1 - null_branch]
        avro = type_["type"] if isinstance(type_, dict) else type_
        out.append(_Field(col, avro, null_branch, rule_for(col).kind, order, field["name"]))
    return out


# --------------------------------------------------------------------------------------------------
# Arrow helpers.


def _plain(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if isinstance(arr.type, pa.ExtensionType):
        arr = arr.storage
    return arr


def _validity(arr: pa.Array) -> np.ndarray | None:
    if arr.null_count == 0:
        return None
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _numpy(arr: pa.Array, dtype: Any) -> np.ndarray:
    if arr.null_count:
        arr = arr.fill_null(pa.scalar(0, arr.type))
    return arr.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _is_int(t: pa.DataType) -> bool:
    return pa.types.is_integer(t)


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_binary(t: pa.DataType) -> bool:
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
            or pa.types.is_binary_view(t))


def _rebased(arr: pa.Array) -> pa.Array:
    """A sliced (large) string/binary array as an unsliced one over the same bytes.

    Arrow's cast to a view type works from the start of the offsets buffer, so a slice deep into a large
    array would cost as much as everything before it."""
    n = len(arr)
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=I64 if large else I32)[arr.offset: arr.offset + n + 1]
    start = int(offsets[0])
    data = buffers[2].slice(start, int(offsets[-1]) - start) if buffers[2] is not None else None
    bitmap = None
    if arr.null_count:
        bitmap = pa.py_buffer(np.packbits(arr.is_valid().to_numpy(zero_copy_only=False), bitorder="little"))
    return pa.Array.from_buffers(arr.type, n, [bitmap, pa.py_buffer(offsets - offsets[0]), data],
                                 null_count=arr.null_count)


def _bytes_of(arr: pa.Array, valid: np.ndarray | None) -> Bytes:
    """A string/binary column as Arrow binary views (zero-copy over its data buffers)."""
    t = arr.type
    if arr.offset and not (pa.types.is_string_view(t) or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t)):
        arr = _rebased(arr)
    if _is_text(t):
        viewed = arr if pa.types.is_string_view(t) else arr.cast(pa.string_view())
    else:
        viewed = arr if pa.types.is_binary_view(t) else arr.cast(pa.binary_view())
    buffers = viewed.buffers()
    views = np.frombuffer(buffers[1], dtype=I32).reshape(-1, 4)[viewed.offset: viewed.offset + len(viewed)]
    return Bytes(views, [b for b in buffers[2:] if b is not None], valid)


def _first(mask: np.ndarray) -> int | None:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else None


_HEX = "x"


def _parse_ints(arr: pa.Array, target: pa.DataType) -> pa.Array | None:
    """Text -> integers with Arrow's parser, or None when some text needs Python's ``int()``."""
    try:
        parsed = arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if pc.any(pc.match_substring(arr, _HEX, ignore_case=True)).as_py():
        return None  # Arrow reads 0x10 as 16; Python's int() refuses it
    return parsed


def _fixed_point_text(arr: pa.Array, scale: int) -> pa.Array:
    """Decimals as ``format(value.quantize(10**-scale), "f")`` prints them (never scientific notation).

    The unscaled integers are printed by Arrow (a decimal at scale 0 prints plainly), zero-padded, and
    the point is put ``scale`` digits from the right."""
    wide = pa.types.is_decimal256(arr.type) or arr.type.precision + (scale - arr.type.scale) > 38
    target = pa.decimal256(76, scale) if wide else pa.decimal128(38, scale)
    if arr.type != target:
        arr = arr.cast(target)
    unscaled = pa.Array.from_buffers(pa.decimal256(76, 0) if wide else pa.decimal128(38, 0), len(arr),
                                     arr.buffers(), offset=arr.offset)
    negative = pc.less(unscaled, pa.scalar(0, pa.int8()).cast(unscaled.type))
    digits = pc.cast(pc.abs(unscaled), pa.string())
    if scale == 0:
        body = digits
    else:
        digits = pc.utf8_lpad(digits, width=scale + 1, padding="0")
        body = pc.binary_join_element_wise(pc.utf8_slice_codeunits(digits, 0, -scale), ".",
                                           pc.utf8_slice_codeunits(digits, -scale), "")
    return pc.binary_join_element_wise(pc.if_else(negative, "-", ""), body, "")


def _decimal_limbs(arr: pa.Array) -> np.ndarray:
    """The (n, 2) little-endian uint64 limbs of a decimal128 array (values of null slots unspecified)."""
    return np.frombuffer(arr.buffers()[1], dtype=U64)[2 * arr.offset: 2 * (arr.offset + len(arr))].reshape(-1, 2)


def _decimal_le(arr: pa.Array) -> np.ndarray:
    width = 16 if pa.types.is_decimal128(arr.type) else 32
    return np.frombuffer(arr.buffers()[1], dtype=U8)[width * arr.offset: width * (arr.offset + len(arr))].reshape(-1, width)


# --------------------------------------------------------------------------------------------------
# The encoder.


class ColumnarEncoder:
    """Encode Arrow batches of one table version into framed keys and values.

    >>> # enc = ColumnarEncoder(plan)
    >>> # keys, values = enc.encode(batch, ops=pa.array(["insert", "delete"]), commit_ts=pa.array([5, 6]))

    ``batch`` holds the table's columns, found by name (case-insensitive); a DELETE row gives the
    pre-image (only its key columns are read). Values of DELETE rows are null (Kafka tombstones). ``ops``
    (``insert|update|delete``, ``c|u|d``, ``I|U|D``; null = insert) and ``commit_ts`` (int64; null = 0)
    default to all inserts at ts 0. Raises :class:`EncodingError` naming the table, column, schema id
    and the first bad row of the batch, the error the reference encoder raises first.
    """

    def __init__(self, plan: EncodingPlan) -> None:
        self.plan = plan
        table = plan.table
        self._table = table.qualified_name
        self._options = plan.options
        key_columns = table.handle_key_columns() if plan.key_schema_json is not None else ()
        self._key_fields = record_fields(plan.key_schema_json, key_columns)
        self._value_fields = record_fields(plan.value_schema_json, table.columns)
        self._by_lower = {c.name.lower(): c for c in table.columns}
        self._omitted = {name.lower() for name in plan.omitted}
        self._ext = plan.options.enable_tidb_extension
        self._key_header = self._header(plan.key_schema_id) if plan.key_schema_id is not None else None
        self._value_header = self._header(plan.value_schema_id)
        self._converters = {c.name: converter_for(c) for c in table.columns}
        self._scratch = Scratch()
        self._signature = (tuple(self._key_fields), tuple(self._value_fields), self._options,
                           tuple(sorted(self._omitted)), self._key_header is None)

    def body_signature(self) -> tuple[Any, ...]:
        """What the Avro bodies this encoder writes depend on: two encoders of equal signatures write the same
        bytes after the 5-byte header for the same input (tables of one shape), whatever their names and ids."""
        return self._signature

    @staticmethod
    def _header(schema_id: int) -> np.ndarray:
        return np.frombuffer(bytes([MAGIC_BYTE]) + int(schema_id).to_bytes(4, "big"), dtype=U8)

    # -- public -----------------------------------------------------------------------------------

    def encode(
        self,
        batch: pa.RecordBatch | pa.Table,
        *,
        ops: pa.Array | pa.ChunkedArray | None = None,
        commit_ts: pa.Array | pa.ChunkedArray | None = None,
    ) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        """Framed keys (null when the table has no key schema) and values (null for DELETE rows)."""
        n = batch.num_rows
        columns = self._columns(batch)
        op_codes = parse_ops(ops, n) if ops is not None else np.zeros(n, U8)
        ts = self._commit_ts(commit_ts, n)
        key_chunks: list[pa.Array] = []
        value_chunks: list[pa.Array] = []
        for start in range(0, max(n, 1), CHUNK_ROWS):
            stop = min(n, start + CHUNK_ROWS)
            sliced = {name: arr.slice(start, stop - start) for name, arr in columns.items()}
            k, v = self._encode_chunk(sliced, op_codes[start:stop], ts[start:stop], start, stop - start)
            key_chunks.append(k)
            value_chunks.append(v)
        if len(key_chunks) == 1:
            return key_chunks[0], value_chunks[0]
        return _concat(key_chunks), _concat(value_chunks)

    # -- batch-level checks -----------------------------------------------------------------------

    def _columns(self, batch: pa.RecordBatch | pa.Table) -> dict[str, pa.Array]:
        out: dict[str, pa.Array] = {}
        unknown = []
        for name, arr in zip(batch.schema.names, batch.columns, strict=True):
            col = self._by_lower.get(name.lower())
            if col is None:
                if name.lower() not in self._omitted:
                    unknown.append(name)
            else:
                out[col.name] = _plain(arr)
        if unknown:
            raise EncodingError(
                f"Batch for table {self._table} has columns {', '.join(map(repr, unknown))} that its "
                f"definition (version {self.plan.table.version}) lacks; columns are: "
                + ", ".join(c.name for c in self.plan.table.columns)
                + ". The table definition is stale: apply the DDL that added them.",
                table=self._table,
                column=unknown[0],
                schema_id=self.plan.value_schema_id,
            )
        return out

    def _commit_ts(self, commit_ts: pa.Array | pa.ChunkedArray | None, n: int) -> np.ndarray:
        if commit_ts is None:
            return np.zeros(n, I64)
        arr = _plain(commit_ts)
        if len(arr) != n:
            raise EncodingError(f"commit_ts has {len(arr)} values for a batch of {n} rows of table {self._table}.",
                                table=self._table)
        if pa.types.is_uint64(arr.type):
            values = _numpy(arr, U64)
            bad = _first(values >= U64(1 << 63))
            if bad is not None:
                raise EncodingError(
                    f"commit_ts {int(values[bad])} of batch row {bad} does not fit Avro's long (table {self._table}, "
                    f"schema id {self.plan.value_schema_id}).", table=self._table, schema_id=self.plan.value_schema_id,
                    row=bad)
            return values.view(I64)
        if not _is_int(arr.type):
            try:
                arr = arr.cast(pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise EncodingError(f"commit_ts of table {self._table} must be integers, not {arr.type}.",
                                    table=self._table) from None
        return _numpy(arr, I64)

    # -- one chunk --------------------------------------------------------------------------------

    def _encode_chunk(self, columns: dict[str, pa.Array], ops: np.ndarray, ts: np.ndarray, base: int,
                      n: int) -> tuple[pa.Array, pa.Array]:
        rows = np.arange(base, base + n, dtype=I64)
        deletes = ops == _DELETE
        live = None if not deletes.any() else np.flatnonzero(~deletes)
        failures: list[_Failure] = []
        cache: dict[tuple[str, bool], Any] = {}

        def datums(fields: list[_Field], phase: int, subset: np.ndarray | None) -> list[Any]:
            out = []
            m = n if subset is None else subset.size
            for field in fields:
                name = field.column.name
                key = (name, subset is None)
                if key in cache:
                    out.append(cache[key])
                    continue
                arr = columns.get(name)
                row_of = rows if subset is None else rows[subset]
                if arr is None:
                    if m:
                        failures.append(_Failure(int(row_of[0]), phase, field.order, self._missing(field, phase)))
                    out.append(None)
                    continue
                if subset is not None:
                    arr = arr.take(pa.array(subset))
                try:
                    datum = self._prepare(field, arr)
                except _ColumnFailure as failure:
                    failures.append(self._failure(field, phase, failure, row_of, arr))
                    datum = None
                cache[key] = datum
                out.append(datum)
            return out

        key_datums = datums(self._key_fields, 0, None) if self._key_header is not None else []
        value_datums = []
        if live is None or live.size:
            value_datums = datums(self._value_fields, 1, live)
        if failures:
            raise min(failures, key=lambda f: (f.row, f.phase, f.order)).error
        keys: pa.Array
        if self._key_header is not None:
            keys = self._write(self._key_header, self._key_fields, key_datums, n)
        else:
            keys = pa.nulls(n, pa.binary())
        if live is None:
            values = self._write(self._value_header, self._value_fields, value_datums, n, ops, ts)
        elif live.size == 0:
            values = pa.nulls(n, pa.binary())
        else:
            dense = self._write(self._value_header, self._value_fields, value_datums, live.size, ops[live], ts[live])
            values = _spread(dense, live, n)
        return keys, values

    def _missing(self, field: _Field, phase: int) -> EncodingError:
        schema_id = self.plan.key_schema_id if phase == 0 else self.plan.value_schema_id
        return EncodingError(
            f"Batch for table {self._table} has no column {field.column.name!r} (schema id {schema_id}); "
            "give every column, with null for NULL.",
            table=self._table, column=field.column.name, schema_id=schema_id,
        )

    def _failure(self, field: _Field, phase: int, failure: _ColumnFailure, row_of: np.ndarray, arr: pa.Array) -> _Failure:
        schema_id = self.plan.key_schema_id if phase == 0 else self.plan.value_schema_id
        row = int(row_of[failure.index])
        col = field.column
        error = failure.error
        if error is None and failure.reason == "null":
            error = EncodingError(
                f"Column {col.name!r} of table {self._table} is NOT NULL but the row has NULL "
                f"(schema id {schema_id}, batch row {row}).",
                table=self._table, column=col.name, schema_id=schema_id, row=row,
            )
            return _Failure(row, phase, field.order, error)
        if error is None:
            value = failure.value if failure.value is not None else arr[failure.index].as_py()
            try:
                self._converters[col.name](col, value, self._options, self._table)
            except EncodingError as exc:
                error = exc
            else:  # the vectorized check and the reference disagree: report the vectorized reason
                shown = repr(value)
                error = EncodingError(
                    f"Cannot encode value {shown[:80]} for column {col.name!r} of table {self._table} "
                    f"({col.sql_type()}): {failure.reason}.", table=self._table, column=col.name, value=shown[:80])
        error = EncodingError(
            f"{error.message} (schema id {schema_id}, batch row {row})",
            **{**error.context, "schema_id": schema_id, "row": row},
        )
        return _Failure(row, phase, field.order, error)

    # -- conversion: input column -> datums -------------------------------------------------------

    def _prepare(self, field: _Field, arr: pa.Array) -> Any:
        col = field.column
        valid = _validity(arr)
        if valid is not None and not col.nullable:
            raise _ColumnFailure(int(np.argmin(valid)), reason="null")
        if pa.types.is_null(arr.type):
            valid = np.zeros(len(arr), bool)
            return self._all_null(field, len(arr), valid)
        handler = _KIND_HANDLERS[field.kind]
        datum = handler(self, field, arr, valid)
        if datum is None:  # no vectorized path for this input type: the reference, value by value
            datum = self._per_value(field, arr, valid)
        return datum

    def _all_null(self, field: _Field, n: int, valid: np.ndarray) -> Any:
        if field.avro in ("int", "long"):
            return Longs(np.zeros(n, I64), valid)
        if field.avro in ("float", "double"):
            return Floats(np.zeros(n, np.float32 if field.avro == "float" else np.float64), valid)
        return Bytes(np.zeros((n, 4), I32), [], valid)

    def _per_value(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        """The reference converter on each value (exact, Python speed) for inputs without a fast path."""
        col = field.column
        convert = self._converters[col.name]
        out: list[Any] = []
        for i, value in enumerate(arr.to_pylist()):
            if value is None:
                out.append(None)
                continue
            try:
                out.append(convert(col, value, self._options, self._table))
            except EncodingError as exc:
                raise _ColumnFailure(i, exc) from None
        if field.avro in ("int", "long"):
            return Longs(_numpy(pa.array(out, pa.int64()), I64), valid)
        if field.avro == "float":
            return Floats(_numpy(pa.array(out, pa.float64()), np.float64).astype(np.float32), valid)
        if field.avro == "double":
            return Floats(_numpy(pa.array(out, pa.float64()), np.float64), valid)
        typed = pa.array(out, pa.string() if field.avro == "string" else pa.binary())
        return _bytes_of(typed, valid)

    # integers ------------------------------------------------------------------------------------

    def _ints(self, field: _Field, arr: pa.Array, valid: np.ndarray | None, low: int, high: int,
              why: str) -> np.ndarray | None:
        """Integer input (ints, uints, decimal(p,0), text) -> int64 values checked against low..high.

        For ``high`` above int64 (BIGINT UNSIGNED) the result holds the uint64 bits (Go's wrap)."""
        t = arr.type
        wide = high > (1 << 63) - 1
        if _is_text(t):
            parsed = _parse_ints(arr, pa.uint64() if wide and low >= 0 else pa.int64())
            if parsed is None:
                return None
            arr, t = parsed, parsed.type
        if pa.types.is_decimal128(t) and t.scale == 0:
            limbs = _decimal_limbs(arr)
            lo, hi = limbs[:, 0], limbs[:, 1].view(I64)
            if wide and low >= 0:
                bad = hi != 0
            else:
                bad = hi != (lo.view(I64) >> 63)
            if valid is not None:
                bad &= valid
            first = _first(bad)
            if first is not None:
                raise _ColumnFailure(first, reason=why)
            values = lo.view(I64)
            if wide and low >= 0:
                return values if valid is None else np.where(valid, values, 0)
            return self._check_range(values if valid is None else np.where(valid, values, 0), valid, low, high, why)
        if not _is_int(t):
            return None
        if pa.types.is_uint64(t):
            values = _numpy(arr, U64)
            if wide:
                return values.view(I64)  # 0..2^64-1: wraps as Go's int64(uint64)
            first = _first(values > U64(high))
            if first is not None:
                raise _ColumnFailure(first, reason=why)
            return self._check_range(values.view(I64), valid, low, high, why)
        values = _numpy(arr, I64)
        if wide:
            first = _first(values < low) if low >= 0 else None
            if first is not None:
                raise _ColumnFailure(first, reason=why)
            return values
        return self._check_range(values, valid, low, high, why)

    @staticmethod
    def _check_range(values: np.ndarray, valid: np.ndarray | None, low: int, high: int, why: str) -> np.ndarray:
        if values.size and (int(values.min()) < low or int(values.max()) > high):
            first = _first((values < low) | (values > high))
            assert first is not None
            raise _ColumnFailure(first, reason=why)
        return values

    def _int_kind(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        col = field.column
        rule = rule_for(col)
        if col.unsigned:
            assert rule.unsigned_max is not None
            low, high = 0, rule.unsigned_max
        else:
            assert rule.signed_range is not None
            low, high = rule.signed_range
        why = range_refusal(low, high)
        values = self._ints(field, arr, valid, low, high, why)
        if values is None:
            return None
        if field.avro == "string":  # BIGINT UNSIGNED in string mode: the decimal text of the number
            text = pa.array(values.view(U64), pa.uint64(), mask=None if valid is None else ~valid).cast(pa.string())
            return _bytes_of(text, valid)
        return Longs(values, valid)

    def _year(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        values = self._ints(field, arr, valid, -(1 << 63), (1 << 63) - 1, "expected an integer")
        if values is None:
            return None
        bad = (values != 0) & ((values < YEAR_RANGE[0]) | (values > YEAR_RANGE[1]))
        if valid is not None:
            bad &= valid
        first = _first(bad)
        if first is not None:
            raise _ColumnFailure(first, reason=YEAR_REFUSAL)
        return Longs(values, valid)

    def _bit(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        width = field.column.length if field.column.length is not None else 1
        t = arr.type
        if not (_is_int(t) or _is_text(t) or (pa.types.is_decimal128(t) and t.scale == 0)):
            return None
        values = self._ints(field, arr, valid, 0, (1 << 64) - 1, f"does not fit in BIT({width})")
        if values is None:
            return None
        bits = values.view(U64)
        if width < 64:
            first = _first(bits >= U64(1 << width))
            if first is not None:
                raise _ColumnFailure(first, reason=f"does not fit in BIT({width})")
        return Bits(bits, valid)

    # floats --------------------------------------------------------------------------------------

    def _float(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        t = arr.type
        if _is_text(t):
            try:
                arr = arr.cast(pa.float64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
            t = arr.type
        if not (pa.types.is_floating(t) or _is_int(t)):
            return None
        values = _numpy(arr, np.float64)
        values = np.where(np.isfinite(values), values, 0.0)  # TiCDC's mounter: NaN and +-Inf -> 0
        if field.avro == "float":
            with np.errstate(over="ignore"):
                return Floats(values.astype(np.float32), valid)
        return Floats(values, valid)

    # decimals ------------------------------------------------------------------------------------

    def _decimal(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        as_text, precision, scale = decimal_encoding(field.column, self._options)
        t = arr.type
        if as_text:
            if pa.types.is_decimal(t):
                return _bytes_of(_fixed_point_text(arr, scale), valid) if t.scale <= scale else None
            if not _is_text(t):
                return None
            target = pa.decimal128(38, min(scale, 38)) if precision <= 38 else pa.decimal256(76, scale)
            try:
                arr.cast(target)  # validate (the text itself is written unchanged)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
            return _bytes_of(arr, valid)
        wide = precision > 38
        target = pa.decimal256(76, scale) if wide else pa.decimal128(38, scale)
        if _is_text(t) or _is_int(t):
            try:
                arr = arr.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        elif pa.types.is_decimal(t):
            if t.scale > scale:
                return None  # floor to a smaller scale: per value
            if t.scale < scale or (pa.types.is_decimal256(t) and not wide) or t.precision > target.precision:
                try:
                    arr = arr.cast(target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    return None
            elif pa.types.is_decimal32(t) or pa.types.is_decimal64(t):
                arr = arr.cast(target)
        else:
            return None
        t = arr.type
        digits = max(precision, 1)  # the reference: len(str(abs(unscaled))) > max(precision, 1)
        le = _decimal_le(arr)
        small = None
        if le.shape[1] == 16:
            limbs = le.view(U64)
            lo = limbs[:, 0].view(I64)
            fits = limbs[:, 1].view(I64) == (lo >> 63)
            if valid is not None:
                fits |= ~valid
            if fits.all():
                small = lo if valid is None else np.where(valid, lo, 0)
        if small is not None:
            if digits <= 18:
                bound = 10 ** digits
                first = _first((small >= bound) | (small <= -bound))
                if first is not None:
                    raise _ColumnFailure(first, reason=f"more than {precision} digits at scale {scale}")
            return Decimals(None, small, valid)
        if digits < t.precision:
            from decimal import Decimal

            bound = pa.scalar(Decimal(10 ** digits).scaleb(-t.scale), t)
            over = pc.greater_equal(pc.abs(arr), bound).fill_null(False).to_numpy(zero_copy_only=False)
            first = _first(over)
            if first is not None:
                raise _ColumnFailure(first, reason=f"more than {precision} digits at scale {scale}")
        if valid is not None:
            le = le * valid[:, None].view(U8)
        return Decimals(le, None, valid)

    # text-like -----------------------------------------------------------------------------------

    def _text(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        t = arr.type
        if _is_text(t):
            return _bytes_of(arr, valid)
        if _is_int(t):
            return _bytes_of(arr.cast(pa.string()), valid)
        if _is_binary(t):
            try:
                arr.cast(pa.string())  # UTF-8 check
            except pa.ArrowInvalid:
                return None
            return _bytes_of(arr, valid)
        return None

    def _blob(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        if _is_binary(arr.type) or _is_text(arr.type):
            return _bytes_of(arr, valid)
        return None

    def _enum(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        elements = field.column.elements
        t = arr.type
        if _is_text(t):
            if elements:
                member = pc.is_in(arr, value_set=pa.array(elements, pa.string())).to_numpy(zero_copy_only=False)
                bad = ~member if valid is None else (~member & valid)
                first = _first(bad)
                if first is not None:
                    raise _ColumnFailure(first, reason="not a member")
            return _bytes_of(arr, valid)
        if not _is_int(t) or not elements:
            return None
        values = _numpy(arr, I64) if not pa.types.is_uint64(t) else None
        if values is None:
            return None
        bad = (values < 1) | (values > len(elements))
        if valid is not None:
            bad &= valid
        first = _first(bad)
        if first is not None:
            raise _ColumnFailure(first, reason="ENUM index out of range")
        names = pa.array(elements, pa.string()).take(pa.array(np.maximum(values - 1, 0)))
        return _bytes_of(names, valid)

    def _set(self, field: _Field, arr: pa.Array, valid: np.ndarray | None) -> Any:
        elements = field.column.elements
        t = arr.type
        if _is_text(t):
            if elements:
                nonempty = pc.greater(pc.binary_length(arr), 0).fill_null(False)
                parts = pc.split_pattern(arr, ",")
                flat = pc.list_flatten(parts)
                member = pc.is_in(flat, value_set=pa.array(elements, pa.string())).to_numpy(zero_copy_only=False)
                if not member.all():
                    counts = pc.list_value_length(parts).fill_null(0).to_numpy(zero_copy_only=False)
                    owner = np.repeat(np.arange(len(arr)), counts)
                    bad = np.zeros(len(arr), bool)
                    bad[owner[~member]] = True
                    bad &= nonempty.to_numpy(zero_copy_only=False)
                    first = _first(bad)
                    if first is not None:
                        raise _ColumnFailure(first, reason="unknown members")
            return _bytes_of(arr, valid)
        if not _is_int(t) or not elements or pa.types.is_uint64(t):
            return None
        values = _numpy(arr, I64)
        bad = (values < 0) | (values >= (1 << len(elements)))
        if valid is not None:
            bad &= valid
        first = _first(bad)
        if first is not None:
            raise _ColumnFailure(first, reason="SET bitmask out of range")
        uniques, inverse = np.unique(values, return_inverse=True)
        names = [",".join(e for i, e in enumerate(elements) if int(u) >> i & 1) for u in uniques]
        return _bytes_of(pa.array(names, pa.string()).take(pa.array(inverse.reshape(-1))), valid)

    # -- writing: datums -> parts -> bytes --------------------------------------------------------

    def _write(self, header: np.ndarray, fields: list[_Field], datums: list[Any], n: int,
               ops: np.ndarray | None = None, ts: np.ndarray | None = None) -> pa.BinaryArray:
        parts: list[Any] = [Word(np.uint64(int.from_bytes(header.tobytes(), "little")), None, 5, 5)]
        for field, datum in zip(fields, datums, strict=False):
            parts.extend(_field_parts(field, datum, n))
        if ts is not None and self._ext:
            assert ops is not None
            op = np.where(ops == _UPDATE, u64(2 | ord("u") << 8), u64(2 | ord("c") << 8))  # length 1, then c/u
            parts.append(Word(op, None, 2, 2))
            parts.append(varint(zigzag(ts)))
            parts.append(varint(zigzag(ts >> 18)))
        return assemble(parts, n, self._scratch)


def _field_parts(field: _Field, datum: Any, n: int) -> list[Any]:
    valid = datum.valid
    parts: list[Any]
    if isinstance(datum, Longs):
        values = datum.values if valid is None else np.where(valid, datum.values, 0)
        parts = [varint(zigzag(values))]
    elif isinstance(datum, Floats):
        if field.avro == "float":
            bits = datum.values.astype(np.float32, copy=False).view(np.uint32).astype(U64)
            parts = [Word(bits, None, 4, 4)]
        else:
            parts = [Word(datum.values.astype(np.float64, copy=False).view(U64), None, 8, 8)]
    elif isinstance(datum, Bytes):
        lens = datum.lens
        parts = [len_varint(lens), Body(datum.views, lens, datum.buffers)]
    elif isinstance(datum, Decimals):
        if datum.small is not None:
            lens = byte_len_signed(datum.small)
            parts = [sized_bytes(lens, be_word(datum.small, lens))]
        else:
            assert datum.le is not None
            body, lens = wide_twos(datum.le)
            matrix = np.empty((n, 1 + body.shape[1]), U8)
            matrix[:, 0] = lens << 1  # zig-zag length, < 64 so one byte
            matrix[:, 1:] = body
            parts = [Mat(matrix, lens + 1)]
    elif isinstance(datum, Bits):
        bits = datum.values if valid is None else np.where(valid, datum.values, u64(0))
        lens = byte_len_unsigned(bits)
        parts = [sized_bytes(lens, be_word(bits, lens))]
    else:  # pragma: no cover
        raise TypeError(type(datum))
    if field.null_branch is None:
        return parts
    return _union(field.null_branch, valid, parts, n)


def _union(null_branch: int, valid: np.ndarray | None, parts: list[Any], n: int) -> list[Any]:
    """Prefix the union branch (zig-zag index) and drop the value bytes of null rows."""
    null_byte = 2 * null_branch
    value_byte = 2 * (1 - null_branch)
    if valid is None:
        return [Word(u64(value_byte), None, 1, 1), *parts]
    first = parts[0]
    if isinstance(first, Mat):
        matrix = np.empty((n, 1 + first.matrix.shape[1]), U8)
        matrix[:, 0] = np.where(valid, value_byte, null_byte)
        matrix[:, 1:] = first.matrix * valid[:, None].view(U8)
        return [Mat(matrix, 1 + np.where(valid, first.lens, 0)), *parts[1:]]
    lo = np.where(valid, (first.lo << u64(8)) | u64(value_byte), u64(null_byte))
    hi = None
    if first.width >= 8:
        hi = first.lo >> u64(56)
        if first.hi is not None:
            hi = hi | (first.hi << u64(8))
        hi = np.where(valid, hi, u64(0))
    lens = 1 + np.where(valid, first.lens, 0)
    return [Word(lo, hi, lens, first.width + 1), *parts[1:]]  # a body after it has length 0 for nulls


def _spread(dense: pa.BinaryArray, rows: np.ndarray, n: int) -> pa.BinaryArray:
    """Place ``dense`` values at ``rows`` of an n-long array, null elsewhere (tombstones)."""
    offsets = np.frombuffer(dense.buffers()[1], dtype=I32)[dense.offset: dense.offset + len(dense) + 1]
    lens = np.zeros(n, I64)
    lens[rows] = np.diff(offsets)
    full = np.zeros(n + 1, I32)
    np.cumsum(lens, out=full[1:])
    full += offsets[0]
    valid = np.zeros(n, bool)
    valid[rows] = True
    bitmap = np.packbits(valid, bitorder="little")
    return pa.BinaryArray.from_buffers(pa.binary(), n, [pa.py_buffer(bitmap), pa.py_buffer(full), dense.buffers()[2]],
                                       null_count=n - rows.size)


def _concat(chunks: list[pa.Array]) -> pa.BinaryArray:
    total = sum(c.nbytes for c in chunks)
    if total >= 1 << 31:
        raise EncodingError(f"The batch's Avro output is about {total} bytes, over Arrow binary's 2 GiB; "
                            "encode smaller batches.")
    return pa.concat_arrays(chunks)


# --------------------------------------------------------------------------------------------------
# Operations.

_OP_TEXT = ("insert", "c", "i", "create", "I", "update", "u", "U", "delete", "d", "D")
_OP_VALUE = np.array([_INSERT, _INSERT, _INSERT, _INSERT, _INSERT, _UPDATE, _UPDATE, _UPDATE,
                      _DELETE, _DELETE, _DELETE], U8)


# --------------------------------------------------------------------------------------------------
# Base64 text -> bytes, vectorized (TiCDC's CSV writes binary-charset values so)


_B64 = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"):
    _B64[_c] = _i
_B64[ord("=")] = 64


def decode_base64(arr: pa.Array) -> pa.Array | None:
    """Standard padded base64 per value, with numpy (large_binary out); ``None`` when a value is not that.

    Every value is a multiple of 4 characters, so the concatenated text decodes in 4-character groups;
    the bytes standing for ``=`` padding are dropped at the end of their value."""
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None
    arr = arr.cast(pa.large_binary())
    if valid is not None:
        arr = arr.fill_null(b"")
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + n + 1]
    lens = np.diff(offsets)
    if (lens % 4).any():
        return None
    data = arr.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8)[offsets[0]: offsets[-1]] if n and data is not None else np.zeros(0, np.uint8)
    values = _B64[raw]
    if (values == 255).any():
        return None
    ends = np.cumsum(lens)
    has = lens > 0
    last = np.zeros(n, bool)
    second = np.zeros(n, bool)
    last[has] = values[ends[has] - 1] == 64
    second[has] = values[ends[has] - 2] == 64
    if (second & ~last).any() or int((values == 64).sum()) != int(last.sum() + second.sum()):
        return None  # '=' anywhere but the last one or two characters
    pad = last.astype(np.int64) + second
    values = np.where(values == 64, 0, values).astype(np.uint8).reshape(-1, 4)
    out = np.empty((values.shape[0], 3), np.uint8)
    out[:, 0] = (values[:, 0] << 2) | (values[:, 1] >> 4)
    out[:, 1] = ((values[:, 1] & 15) << 4) | (values[:, 2] >> 2)
    out[:, 2] = ((values[:, 2] & 3) << 6) | values[:, 3]
    flat = out.reshape(-1)
    if pad.any():
        full_ends = np.cumsum(lens // 4 * 3)
        keep = np.ones(flat.size, bool)
        keep[(full_ends - 1)[pad >= 1]] = False
        keep[(full_ends - 2)[pad >= 2]] = False
        flat = flat[keep]
    new_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens // 4 * 3 - pad, out=new_offsets[1:])
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [bitmap, pa.py_buffer(new_offsets), pa.py_buffer(flat)])


def parse_ops(ops: pa.Array | pa.ChunkedArray, n: int | None = None) -> np.ndarray:
    """Operation texts (as :meth:`Op.parse` accepts them; null = insert) -> uint8 codes 0/1/2.

    >>> parse_ops(pa.array(["c", "update", None, "D"])).tolist()
    [0, 1, 0, 2]
    """
    arr = _plain(ops)
    if n is not None and len(arr) != n:
        raise EncodingError(f"ops has {len(arr)} values for a batch of {n} rows.")
    if not _is_text(arr.type):
        arr = arr.cast(pa.string())
    index = pc.index_in(arr, value_set=pa.array(_OP_TEXT, pa.string()))
    if index.null_count > arr.null_count:
        lowered = pc.utf8_lower(arr)
        index = pc.coalesce(index, pc.index_in(lowered, value_set=pa.array(_OP_TEXT, pa.string())))
        missing = pc.and_(pc.is_null(index), pc.is_valid(arr)).to_numpy(zero_copy_only=False)
        first = _first(missing)
        if first is not None:
            try:
                Op.parse(arr[first].as_py())
            except EncodingError as exc:
                raise EncodingError(f"{exc.message} (batch row {first})", **{**exc.context, "row": first}) from None
    codes = index.fill_null(0).to_numpy(zero_copy_only=False)
    return _OP_VALUE[codes]


_KIND_HANDLERS: dict[ValueKind, Callable[..., Any]] = {
    ValueKind.INT: ColumnarEncoder._int_kind,
    ValueKind.BIGINT_UNSIGNED: ColumnarEncoder._int_kind,
    ValueKind.FLOAT32: ColumnarEncoder._float,
    ValueKind.FLOAT64: ColumnarEncoder._float,
    ValueKind.DECIMAL: ColumnarEncoder._decimal,
    ValueKind.BIT: ColumnarEncoder._bit,
    ValueKind.TEXT: ColumnarEncoder._text,
    ValueKind.BLOB: ColumnarEncoder._blob,
    ValueKind.ENUM: ColumnarEncoder._enum,
    ValueKind.SET: ColumnarEncoder._set,
    ValueKind.JSON: ColumnarEncoder._text,
    ValueKind.TEMPORAL: ColumnarEncoder._text,
    ValueKind.YEAR: ColumnarEncoder._year,
    ValueKind.VECTOR: ColumnarEncoder._text,
}

