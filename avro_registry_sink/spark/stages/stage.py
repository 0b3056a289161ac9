"""The Spark encoding stage: rows of change events -> Kafka records, with the columnar encoder in ``mapInArrow``.

Two entry points, both returning a DataFrame shaped like :data:`~avro_registry_sink.model.KAFKA_DDL`
(``topic, partition, key, value, headers, commit_ts``) in the input's row order within each partition:

* :func:`encode_table` - a DataFrame with one table's own columns, plus optional ``_op`` (string,
  default insert) and ``_commit_ts`` (long, default 0);
* :func:`encode_changes` - a DataFrame shaped like :data:`~avro_registry_sink.model.CHANGE_DDL`
  (several tables and versions; row images as JSON text). Rows are grouped by (schema, table, version)
  inside each Arrow batch; each group's images are parsed in one ``pyarrow.json.read_json`` call against
  an explicit schema, base64 binary columns are decoded with numpy, and the group is encoded by
  :class:`~avro_registry_sink.encoding.columnar.ColumnarEncoder`. A group the vectorized parse cannot take as it is
  (an integer given as ``1.0``, a JSON object for a JSON column, keys in another case, a missing key,
  pretty-printed JSON...) is parsed row by row with :func:`~avro_registry_sink.changes.load_image` and
  encoded by the same :class:`~avro_registry_sink.encoding.columnar.ColumnarEncoder` in one-row batches (its
  per-value path converts what its vectorized paths do not take): same bytes, Python speed.

Records get ``headers = [("op", b"c"|b"u"|b"d"), ("commit_ts", b"<decimal>")]`` so that consumers of
tombstones still see the commit ts. Partitions follow :func:`~avro_registry_sink.routing.rules.partition_for`,
vectorized: CRC-32 of the route's schema, table and key texts (see :func:`partition_numbers`).

A row whose table version has no plan, or that cannot be encoded, fails the batch: the error names
``schema.table``, the version, the column and the row's ``source``. Executors receive only plain data
(:class:`~avro_registry_sink.spark.stages.plan.StagePlan`); encoders are built lazily in the Python workers and cached by plan.

>>> # out = encode_changes(changes_df, {("shop", "orders", 3): StagePlan(plan, "shop_orders", 6, route)})
>>> # out.write.format("kafka")...
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.changes import load_image
from avro_registry_sink.encoding.columnar import ColumnarEncoder, decode_base64, parse_ops
from avro_registry_sink.errors import AvroSinkError, ConfigError, EncodingError
from avro_registry_sink.model import (
    HEADERS_TYPE,
    KAFKA_DDL,
    KAFKA_ERROR_SCHEMA,
    KAFKA_SCHEMA,
    MESSAGE_OVERHEAD,
    OVERSIZE_ADVICE,
    Op,
    PlanKey,
    RefusalReason,
)
from avro_registry_sink.routing.rules import Route
from avro_registry_sink.settings.config import PartitionStrategy
from avro_registry_sink.spark.stages.jvm_stage import jvm_encode_table, jvm_stage_gap
from avro_registry_sink.spark.stages.plan import StagePlan, topic_partitions
from avro_registry_sink.spark.stages.tally import StageOutput
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = [
    "encode_change_batch",
    "encode_changes",
    "encode_table",
    "encode_typed",
    "images_to_batch",
    "oversize_reason",
    "partition_numbers",
    "stage_for",
]

_OP_LETTERS = np.frombuffer(b"cud", dtype=np.uint8)  # op code 0/1/2 -> header byte


def oversize_reason(size: int, limit: int) -> str | None:
    """Why a message of ``size`` bytes (key + value + :data:`MESSAGE_OVERHEAD`) is refused, or ``None``."""
    if not limit or size <= limit:
        return None
    return f"message too large: {size} bytes (key + value + {MESSAGE_OVERHEAD}) > max-message-bytes {limit}; {OVERSIZE_ADVICE}"


# --------------------------------------------------------------------------------------------------
# Per-worker caches: encoders and parse schemas are built once per plan in each Python worker.

_CACHE_LIMIT = 512
_ENCODERS: dict[StagePlan, _TableStage] = {}


def stage_for(plan: StagePlan) -> _TableStage:
    """The (per-worker cached) encoder of one table version: ``encode_checked(batch, op_codes, commit_ts)``."""
    return _stage_for(plan)


def _stage_for(plan: StagePlan) -> _TableStage:
    stage = _ENCODERS.get(plan)
    if stage is None:
        if len(_ENCODERS) >= _CACHE_LIMIT:
            _ENCODERS.clear()
        stage = _ENCODERS[plan] = _TableStage(plan)
    return stage


# --------------------------------------------------------------------------------------------------
# Partition dispatch, vectorized


def _crc_table() -> np.ndarray:
    table = np.zeros(256, np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table[i] = c
    return table


_CRC_TABLE = _crc_table()
_CRC_TABLE16: np.ndarray | None = None


def _crc_table16() -> np.ndarray:
    """The register after two zero bytes, for every low 16 bits (CRC-32 is linear, so a step can
    consume two input bytes at once)."""
    global _CRC_TABLE16
    if _CRC_TABLE16 is None:
        r = np.arange(1 << 16, dtype=np.uint32)
        for _ in range(2):
            r = _CRC_TABLE[r & np.uint32(0xFF)] ^ (r >> np.uint32(8))
        _CRC_TABLE16 = r
    return _CRC_TABLE16


def _crc32_rows(messages: pa.Array, start: int, suffix: int | None = None) -> np.ndarray:
    """``zlib.crc32(message + suffix, start)`` of every row (``suffix``: one optional byte), with numpy.

    CRC-32 is linear: the register after a message equals the register of the message alone (from 0)
    XOR the start register run through as many zero bytes. Messages are taken right-aligned (leading
    zeros leave a zero register unchanged), so all rows advance together, one byte position at a time;
    the start's contribution comes from a small table indexed by message length."""
    messages = messages.cast(pa.large_binary())
    n = len(messages)
    if n == 0:
        return np.zeros(0, np.uint32)
    offsets = np.frombuffer(messages.buffers()[1], dtype=np.int64)[messages.offset: messages.offset + n + 1]
    lens = np.diff(offsets)
    width = int(lens.max())
    buffer = messages.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(1, np.uint8)
    ends = offsets[1:]
    ragged = bool((lens != width).any())

    def column(back: int) -> np.ndarray:  # byte ``width - back`` of every right-aligned message
        if not ragged:
            return data[ends - back].astype(np.uint32)
        return np.where(lens >= back, data[np.maximum(ends - back, 0)], 0).astype(np.uint32)

    register = np.zeros(n, np.uint32)
    back = width
    if back % 2:
        register = _CRC_TABLE[column(back)]  # (0 ^ byte) & 0xFF
        back -= 1
    table16 = _crc_table16()
    while back:  # two bytes per step through a 64K-entry table
        register ^= column(back) | (column(back - 1) << np.uint32(8))
        register = table16[register & np.uint32(0xFFFF)] ^ (register >> np.uint32(16))
        back -= 2
    if suffix is not None:
        register = _CRC_TABLE[(register ^ np.uint32(suffix)) & np.uint32(0xFF)] ^ (register >> np.uint32(8))
        lens = lens + 1
        width += 1
    zeros = np.empty(width + 1, np.uint32)  # the start register after k zero bytes
    r = (~start) & 0xFFFFFFFF
    for k in range(width + 1):
        zeros[k] = r
        r = int(_CRC_TABLE[r & 0xFF]) ^ (r >> 8)
    return ~(register ^ zeros[lens]) & np.uint32(0xFFFFFFFF)


_SEPARATOR = pa.scalar(b"\x1f", pa.large_binary())
_EMPTY = pa.scalar(b"", pa.large_binary())


def _key_texts(arr: pa.Array) -> pa.Array:
    """Each value as ``routing._crc`` hashes it: bytes as they are, text encoded, others as ``str()``."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_decimal(t) and t.scale == 0:  # BIGINT parsed from JSON numbers and text
        for target in (pa.int64(), pa.uint64()):
            try:
                arr, t = arr.cast(target), target
                break
            except pa.ArrowInvalid:
                continue
    if pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        text = arr.cast(pa.string()) if pa.types.is_integer(t) else arr
        return text.cast(pa.large_binary()).fill_null(b"\x00")
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return arr.cast(pa.large_binary()).fill_null(b"\x00")
    values = [None if v is None else (v if isinstance(v, bytes) else str(v).encode()) for v in arr.to_pylist()]
    return pa.array(values, pa.large_binary()).fill_null(b"\x00")


def partition_numbers(route: Route, partitions: int, *, key_columns: Sequence[pa.Array] = (),
                      commit_ts: np.ndarray | None = None, column_values: Sequence[pa.Array] = (),
                      rows: int = 0) -> np.ndarray:
    """:func:`~avro_registry_sink.routing.rules.partition_for` for every row, as int32.

    ``key_columns`` hold the handle-key values and ``column_values`` the route's partition columns, as
    the row images give them (the hash covers ``str(value)``, bytes as they are, null as ``"\\x00"``).
    """
    n = len(key_columns[0]) if key_columns else (len(commit_ts) if commit_ts is not None else rows)
    if partitions <= 1:
        return np.zeros(n, np.int32)
    strategy = route.partition
    if strategy is PartitionStrategy.TABLE:
        table_crc = zlib.crc32(route.table.encode() + b"\x1f", zlib.crc32(route.schema.encode() + b"\x1f"))
        return np.full(n, table_crc % partitions, np.int32)
    if strategy is PartitionStrategy.TS:
        ts = commit_ts if commit_ts is not None else np.zeros(n, np.int64)
        return np.mod(ts, partitions).astype(np.int32)
    parts = column_values if strategy is PartitionStrategy.COLUMNS else key_columns
    start = zlib.crc32(route.table.encode() + b"\x1f", zlib.crc32(route.schema.encode() + b"\x1f"))
    if not parts:
        return np.full(n, start % partitions, np.int32)
    if len(parts) == 1:  # the text, then the separator byte (no joined copy)
        crc = _crc32_rows(_key_texts(parts[0]), start, suffix=0x1F)
    else:
        pieces: list[Any] = []
        for arr in parts:
            pieces.extend([_key_texts(arr), _SEPARATOR])
        crc = _crc32_rows(pc.binary_join_element_wise(*pieces, _EMPTY), start)
    return (crc % np.uint32(partitions)).astype(np.int32)


# --------------------------------------------------------------------------------------------------
# Output batches


def _headers(op_codes: np.ndarray, commit_ts: np.ndarray) -> pa.Array:
    """``[("op", b"c"|b"u"|b"d"), ("commit_ts", b"<decimal>")]`` per row, built from buffers."""
    n = op_codes.size
    letters = pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)),
                                                          pa.py_buffer(_OP_LETTERS[op_codes])])
    changes = np.flatnonzero(commit_ts[1:] != commit_ts[:-1]) + 1 if n else np.zeros(0, np.int64)
    if changes.size < 64:  # rows of one transaction share a commit ts: format each run once
        starts = np.concatenate([[0], changes]) if n else changes
        run = np.zeros(n, np.int64)
        run[changes] = 1
        np.cumsum(run, out=run)
        texts = [letter + str(int(ts)).encode() for ts in commit_ts[starts] for letter in (b"c", b"u", b"d")]
        joined = pa.array(texts, pa.binary()).take(pa.array(run * 3 + op_codes))
    else:
        stamps = pa.array(commit_ts, pa.int64()).cast(pa.string())
        stamps = pa.BinaryArray.from_buffers(pa.binary(), n, stamps.buffers()[:3])
        joined = pc.binary_join_element_wise(letters, stamps, _EMPTY_BINARY)  # per row: letter, then the digits
    row_offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset: joined.offset + n + 1]
    value_offsets = np.empty(2 * n + 1, np.int32)
    value_offsets[0:-1:2] = row_offsets[:-1]
    value_offsets[1::2] = row_offsets[:-1] + 1
    value_offsets[-1] = row_offsets[-1]
    values = pa.BinaryArray.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(value_offsets), joined.buffers()[2]])
    keys = pa.StringArray.from_buffers(2 * n, pa.py_buffer(_key_offsets(n)), pa.py_buffer(b"opcommit_ts" * n))
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    list_offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(np.arange(0, 2 * n + 1, 2, dtype=np.int32))])
    return pa.ListArray.from_arrays(list_offsets, entries, type=HEADERS_TYPE)


_EMPTY_BINARY = pa.scalar(b"", pa.binary())
_KEY_OFFSETS = np.zeros(1, np.int32)


def _key_offsets(n: int) -> np.ndarray:
    """Offsets of ``"op", "commit_ts"`` repeated n times (cached, grown on demand)."""
    global _KEY_OFFSETS
    if _KEY_OFFSETS.size < 2 * n + 1:
        size = max(2 * n + 1, 2 * _KEY_OFFSETS.size)
        lengths = np.tile(np.array([2, 9], np.int32), (size + 1) // 2)[: size - 1]
        offsets = np.zeros(size, np.int32)
        np.cumsum(lengths, out=offsets[1:])
        _KEY_OFFSETS = offsets
    return _KEY_OFFSETS[: 2 * n + 1]


def _kafka_batch(topic: str, partition: np.ndarray, keys: pa.Array, values: pa.Array, op_codes: np.ndarray,
                 commit_ts: np.ndarray) -> pa.RecordBatch:
    n = len(keys)
    name = topic.encode()
    topics = pa.StringArray.from_buffers(n, pa.py_buffer(np.arange(0, len(name) * (n + 1), len(name), dtype=np.int32)),
                                         pa.py_buffer(name * n))
    return pa.RecordBatch.from_arrays(
        [topics, pa.array(partition, pa.int32()), keys, values, _headers(op_codes, commit_ts),
         pa.array(commit_ts, pa.int64())],
        schema=KAFKA_SCHEMA,
    )


# --------------------------------------------------------------------------------------------------
# JSON images -> typed Arrow columns


def _parse_type(col: ColumnDef) -> pa.DataType:
    """The Arrow type a column's JSON value is parsed as on the vectorized path."""
    t = col.type
    if t is MySQLType.BIGINT or (t is MySQLType.BIT and (col.length or 1) > 53):
        return pa.decimal128(20, 0)  # numbers, and text for values past 2^53 (changes.dump_image)
    if t in (MySQLType.TINYINT, MySQLType.SMALLINT, MySQLType.MEDIUMINT, MySQLType.INT, MySQLType.YEAR,
             MySQLType.BIT):
        return pa.int64()
    if t in (MySQLType.FLOAT, MySQLType.DOUBLE):
        return pa.float64()  # FLOAT is rounded to float32 from the double, as the reference does
    return pa.string()


class _FallBack(Exception):
    """The vectorized parse cannot take this group as it is: parse it row by row."""


def _b64decode(arr: pa.Array) -> pa.Array:
    """Standard padded base64 per value (:func:`~avro_registry_sink.encoding.columnar.decode_base64`); raises
    _FallBack for anything else."""
    decoded = decode_base64(arr)
    if decoded is None:
        raise _FallBack
    return decoded


def images_to_batch(images: pa.Array, table: TableDef, *, required: np.ndarray | None = None,
                    omitted: tuple[str, ...] = ()) -> pa.RecordBatch:
    """JSON images (one object per value) -> a typed RecordBatch of the table's columns, vectorized.

    ``required`` marks, per row, whether every column must be present (INSERT/UPDATE) or only the key
    columns (DELETE). ``omitted`` columns (left out by a column selector) may appear in the images and are
    ignored. Raises ``_FallBack`` when the texts need the row-by-row parse.
    """
    import pyarrow.json as pj

    n = len(images)
    if images.null_count:
        raise _FallBack
    schema = _json_schema(table)
    text = pc.binary_join_element_wise(images.cast(pa.large_string()), pa.scalar("\n", pa.large_string()),
                                       pa.scalar("", pa.large_string()))
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)[text.offset: text.offset + n + 1]
    data = text.buffers()[2]
    body = data[offsets[0]: offsets[-1]] if data is not None else pa.py_buffer(b"")
    try:
        parsed = pj.read_json(
            pa.BufferReader(body),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, body.size + 1)),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore" if omitted else "error",
                                          newlines_in_values=False),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise _FallBack from None
    if parsed.num_rows != n:
        raise _FallBack
    columns = []
    key_names = set(table.handle_key_names() or ())
    for col in table.columns:
        arr = parsed.column(col.name).combine_chunks()
        if arr.null_count:
            _check_present(images, arr, col, required if col.name not in key_names else None)
        if col.binary:
            arr = _b64decode(arr)
        columns.append(arr)
    return pa.RecordBatch.from_arrays(columns, names=[c.name for c in table.columns])


def _check_present(images: pa.Array, arr: pa.Array, col: ColumnDef, required: np.ndarray | None) -> None:
    """A null must be an explicit ``null`` (a missing key is an error in the reference encoder)."""
    nulls = arr.is_null().to_numpy(zero_copy_only=False)
    if required is not None:
        nulls &= required
    rows = np.flatnonzero(nulls)
    if not rows.size:
        return
    subset = images.take(pa.array(rows))
    name = col.name.replace("\\", "\\\\").replace('"', '\\"')
    present = pc.match_substring(subset, f'"{name}":null')
    if not pc.all(present).as_py():
        import re

        pattern = '"' + re.escape(name) + r'"\s*:\s*null'
        present = pc.or_(present, pc.match_substring_regex(subset, pattern))
        if not pc.all(present).as_py():
            raise _FallBack


_SCHEMAS: dict[TableDef, pa.Schema] = {}


def _json_schema(table: TableDef) -> pa.Schema:
    schema = _SCHEMAS.get(table)
    if schema is None:
        if len(_SCHEMAS) >= _CACHE_LIMIT:
            _SCHEMAS.clear()
        schema = _SCHEMAS[table] = pa.schema([pa.field(c.name, _parse_type(c)) for c in table.columns])
    return schema


# --------------------------------------------------------------------------------------------------
# One table version


class _TableStage:
    """Encoder, key columns and partition settings of one plan, cached per worker."""

    def __init__(self, plan: StagePlan) -> None:
        self.plan = plan
        self.encoder = ColumnarEncoder(plan.encoding)
        table = plan.encoding.table
        self.table = table
        self.key_names = table.handle_key_names() or ()
        self.columns = {c.name.lower() for c in table.columns}
        self.name = table.qualified_name

    def partitions(self, batch: pa.RecordBatch, commit_ts: np.ndarray) -> np.ndarray:
        route = self.plan.route
        lookup = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        keys = [batch.column(lookup[k.lower()]) for k in self.key_names if k.lower() in lookup]
        exact = {name: i for i, name in enumerate(batch.schema.names)}
        nulls = pa.nulls(batch.num_rows, pa.string())
        columns = [batch.column(exact[c]) if c in exact else nulls for c in route.partition_columns]
        return partition_numbers(route, self.plan.partitions, key_columns=keys, commit_ts=commit_ts,
                                 column_values=columns, rows=batch.num_rows)

    def encode(self, batch: pa.RecordBatch, op_codes: np.ndarray, commit_ts: np.ndarray) -> pa.RecordBatch:
        keys, values = self.encoder.encode(batch, ops=_op_array(op_codes), commit_ts=pa.array(commit_ts, pa.int64()))
        self.check_sizes(keys, values, commit_ts)
        partition = self.partitions(batch, commit_ts)
        return _kafka_batch(self.plan.topic, partition, keys, values, op_codes, commit_ts)

    def encode_checked(self, batch: pa.RecordBatch, op_codes: np.ndarray,
                       commit_ts: np.ndarray) -> tuple[pa.RecordBatch, dict[int, str]]:
        """:meth:`encode`, but records over ``max-message-bytes`` are reported per row (row -> reason)."""
        keys, values = self.encoder.encode(batch, ops=_op_array(op_codes), commit_ts=pa.array(commit_ts, pa.int64()))
        oversize: dict[int, str] = {}
        limit = self.plan.max_message_bytes
        if limit and len(keys):
            sizes = _record_sizes(keys, values)
            for i in np.flatnonzero(sizes > limit):
                oversize[int(i)] = f"{oversize_reason(int(sizes[i]), limit)}"
        partition = self.partitions(batch, commit_ts)
        return _kafka_batch(self.plan.topic, partition, keys, values, op_codes, commit_ts), oversize

    def check_sizes(self, keys: pa.Array, values: pa.Array, commit_ts: np.ndarray) -> None:
        """Refuse a record Kafka would refuse, as TiCDC does (``ErrMessageTooLarge``), naming the change."""
        limit = self.plan.max_message_bytes
        if not limit or len(keys) == 0:
            return
        sizes = _record_sizes(keys, values)
        over = np.flatnonzero(sizes > limit)
        if over.size:
            i = int(over[0])
            raise EncodingError(
                f"Table {self.name} at commit ts {int(commit_ts[i])} (topic {self.plan.topic!r}, {over.size} such "
                f"message(s) in this batch): {oversize_reason(int(sizes[i]), limit)}.",
                table=self.name, topic=self.plan.topic, length=int(sizes[i]), limit=limit,
            )


def _record_sizes(keys: pa.Array, values: pa.Array) -> np.ndarray:
    """Each record's size as TiCDC checks it against ``max-message-bytes``: key + value + its overhead."""
    return (pc.binary_length(keys).fill_null(0).to_numpy(zero_copy_only=False)
            + pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False) + MESSAGE_OVERHEAD)


def _op_array(op_codes: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(op_codes.astype(np.int8)), pa.array(["insert", "update", "delete"]))


def _row_error(exc: BaseException, plan: StagePlan, version: int, source: str | None) -> EncodingError:
    table = plan.encoding.table.qualified_name
    reason = exc.message if isinstance(exc, AvroSinkError) else str(exc)
    context = dict(exc.context) if isinstance(exc, AvroSinkError) else {}
    column = context.get("column")
    where = f" (column {column!r})" if column and f"'{column}'" not in reason else ""
    context.update(table=table, version=version, source=source, reason=reason)
    return EncodingError(
        f"Cannot encode the change at {source or '<unknown source>'} for table {table} version {version}{where}: {reason}",
        **context,
    )


# --------------------------------------------------------------------------------------------------
# encode_table


#: ``engine`` values of :func:`encode_table`: the one engine table.
#:
#: * ``arrow`` - the columnar encoder in ``mapInArrow`` (this module): the product's engine. The streaming
#:   job (``run``), ``verify``, replay and the changelog/storage one-pass stages encode only with it: their
#:   input is change rows of many tables and versions, or raw messages, which the JVM stage does not take.
#: * ``jvm`` - Spark's own ``to_avro`` and SQL (:mod:`~avro_registry_sink.spark.stages.jvm_stage`): the same bytes
#:   (``tests/spark/test_jvm_stage.py``), faster for one table's typed DataFrame, where the rows need not
#:   travel to a Python worker; offered by :func:`encode_table` (the notebook API) only.
#: * ``auto`` - ``jvm`` where it has an exact conversion for every column (:func:`~.jvm_stage.jvm_stage_gap`),
#:   else ``arrow``.
ENGINES = ("auto", "jvm", "arrow")


def encode_table(df: DataFrame, plan: StagePlan, *, keep: Sequence[str] = (), engine: str = "auto") -> DataFrame:
    """Encode a DataFrame of one table's rows into Kafka records (:data:`~avro_registry_sink.model.KAFKA_DDL`).

    ``df`` holds the table's columns (by name, case-insensitive) and optionally ``_op`` (string:
    ``insert|update|delete``, ``c|u|d``...; null or absent = insert) and ``_commit_ts`` (long; absent = 0).
    A DELETE row carries the pre-image (its key columns are read) and gives a tombstone. ``keep`` names
    input columns passed through after the Kafka columns (row order is kept within each partition).

    ``engine``: ``"jvm"`` encodes with Spark's own ``to_avro`` and SQL (:mod:`~avro_registry_sink.spark.stages.jvm_stage`;
    the session needs ``spark-avro``), ``"arrow"`` with the columnar encoder in a ``mapInArrow`` pass, ``"auto"``
    (default) the JVM when the session has ``spark-avro`` and every column has an exact SQL conversion, else
    Arrow. Both give the same bytes.

    >>> # out = encode_table(spark.table("orders").withColumn("_op", F.lit("c")), plan)
    """
    keep = tuple(keep)
    if engine not in ENGINES:
        raise ConfigError(f"Invalid engine {engine!r}: valid values are {', '.join(ENGINES)}.", option="engine",
                          value=engine)
    if engine != "arrow":
        gap = jvm_stage_gap(df, plan, keep)
        if gap is None:
            return jvm_encode_table(df, plan, keep)
        if engine == "jvm":
            raise ConfigError(f"The JVM stage cannot encode table {plan.encoding.table.qualified_name}: {gap}; "
                              "use engine='arrow' or 'auto'.", option="engine", value=engine)
    out_schema = _with_kept(KAFKA_DDL, df, keep)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stage = _stage_for(plan)
        for batch in batches:
            names = batch.schema.names
            lowered = {n.lower(): i for i, n in enumerate(names)}
            n = batch.num_rows
            op_codes = parse_ops(batch.column(lowered["_op"]), n) if "_op" in lowered else np.zeros(n, np.uint8)
            if "_commit_ts" in lowered:
                ts = batch.column(lowered["_commit_ts"]).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            else:
                ts = np.zeros(n, np.int64)
            columns = [(name, batch.column(i)) for i, name in enumerate(names)
                       if name.lower() not in ("_op", "_commit_ts") and (name not in keep or name.lower() in stage.columns)]
            table_batch = pa.RecordBatch.from_arrays([c for _, c in columns], names=[nm for nm, _ in columns])
            try:
                out = stage.encode(table_batch, op_codes, ts)
            except EncodingError as exc:
                raise _row_error(exc, plan, plan.encoding.table.version, _row_source(exc)) from None
            yield _append_kept(out, batch, keep)

    return df.mapInArrow(run, out_schema)


def _row_source(exc: EncodingError) -> str | None:
    row = exc.context.get("row")
    return f"row {row} of an Arrow batch" if row is not None else None


def _with_kept(ddl: str, df: DataFrame, keep: tuple[str, ...]) -> Any:
    if not keep:
        return ddl
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema = _parse_datatype_string(ddl)
    assert isinstance(schema, StructType)
    for name in keep:
        schema = schema.add(df.schema[name])
    return schema


def _append_kept(out: pa.RecordBatch, batch: pa.RecordBatch, keep: tuple[str, ...]) -> pa.RecordBatch:
    if not keep:
        return out
    arrays = list(out.columns) + [batch.column(name) for name in keep]
    return pa.RecordBatch.from_arrays(arrays, names=list(out.schema.names) + list(keep))


# --------------------------------------------------------------------------------------------------
# encode_changes


def encode_changes(df: DataFrame, plans: Mapping[PlanKey, StagePlan], *, keep: Sequence[str] = (),
                   isolate: bool = False, output: Any = None) -> DataFrame:
    """Encode a change DataFrame (:data:`~avro_registry_sink.model.CHANGE_DDL`) into Kafka records.

    ``plans`` maps ``(schema, table, table_version)`` to the :class:`~avro_registry_sink.spark.stages.plan.StagePlan` of that version. Output
    rows keep the input order within each partition; ``keep`` names input columns passed through after
    the Kafka columns (for instance ordering columns). With ``isolate`` rows that cannot be encoded come out
    with null key and value and the reason in an ``error`` column (see :func:`encode_change_batch`)
    instead of failing the job. ``output``: a :class:`~avro_registry_sink.spark.stages.tally.StageOutput` (counted,
    or the file sink's lines; those need ``isolate`` and the order columns in ``keep``).
    """
    plans = dict(plans)
    keep = tuple(keep)
    out_schema = _with_kept(KAFKA_DDL + (", error STRING" if isolate else ""), df, keep)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield _append_kept(encode_change_batch(batch, plans, isolate=isolate), batch, keep)

    return df.mapInArrow(*(output or StageOutput()).wrap(run, out_schema, topic_partitions(plans)))


def encode_change_batch(batch: pa.RecordBatch, plans: Mapping[PlanKey, StagePlan], *,
                        isolate: bool = False) -> pa.RecordBatch:
    """One Arrow batch of change rows -> Kafka records, same row order (the body of :func:`encode_changes`).

    The one encode path of the project (the CLI ``encode``, the Spark stage and the job all call it): each
    table version's rows are parsed into typed Arrow columns and encoded by the columnar encoder. With
    ``isolate`` a row that cannot be encoded (a bad value, a missing image, a record over
    ``max-message-bytes``) does not fail the batch: its output row has null key and value and an
    ``error`` column holding the dead-letter JSON (``source``, ``reason``, ``message``, ``table``); every
    other row is encoded as usual. Without it the first such row raises :class:`EncodingError` naming the
    table, version, column and the row's ``source``.
    """
    n = batch.num_rows
    schema = KAFKA_ERROR_SCHEMA if isolate else KAFKA_SCHEMA
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    group_text = pc.binary_join_element_wise(
        batch.column("schema").cast(pa.string()).fill_null(""), "\x1f",
        batch.column("table").cast(pa.string()).fill_null(""), "\x1f",
        batch.column("table_version").cast(pa.string()).fill_null(""), "",
    )
    encoded = pc.dictionary_encode(group_text)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    groups = encoded.dictionary.to_pylist()
    outputs: list[pa.RecordBatch] = []
    order: list[np.ndarray] = []
    for g, text in enumerate(groups):
        rows = np.flatnonzero(codes == g) if len(groups) > 1 else None
        part = batch if rows is None else batch.take(pa.array(rows))
        schema_name, table, version_text = text.split("\x1f")
        version = int(version_text) if version_text else -1
        plan = plans.get((schema_name, table, version))
        if plan is None:
            source = part.column("source")[0].as_py()
            known = ", ".join(f"{s}.{t} v{v}" for s, t, v in sorted(plans)) or "none"
            raise EncodingError(
                f"No encoding plan for table {schema_name}.{table} version {version} (first row at {source or '?'}); "
                f"this batch has plans for: {known}. The schema manager must prepare every table version in "
                "the batch before the encode stage runs.",
                table=f"{schema_name}.{table}", version=version, source=source,
            )
        out, bad = _encode_group(part, plan, version)
        if bad and not isolate:
            raise bad[min(bad)]
        if isolate:
            out = _with_errors(out, bad, plan, version, part.column("source").to_pylist())
        outputs.append(out)
        if rows is not None:
            order.append(rows)
    if len(outputs) == 1:
        return outputs[0]
    combined = pa.Table.from_batches(outputs).combine_chunks()
    inverse = np.empty(n, np.int64)
    inverse[np.concatenate(order)] = np.arange(n)
    return combined.take(pa.array(inverse)).to_batches(max_chunksize=n)[0]


#: Rows set aside one by one before a group is encoded row by row instead (a batch of many bad rows).
_ISOLATE_LIMIT = 8


class RowSources(Protocol):
    """Where each row came from (``relpath:line``, a message's position, or ``None``), by row index: a list, or
    a lazy lookup that makes an entry only when asked (only refused rows need theirs)."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int, /) -> str | None: ...


def _encode_group(part: pa.RecordBatch, plan: StagePlan, version: int) -> tuple[pa.RecordBatch, dict[int, EncodingError]]:
    """Encode one table version's rows; returns the records and the errors of the rows that failed.

    Vectorized first (JSON images -> typed columns -> columnar encoder). Texts the vectorized parse cannot
    take (see :func:`images_to_batch`) go through :func:`~avro_registry_sink.changes.load_image` row by row
    into the same encoder; a row the encoder refuses is set aside and the others are encoded again."""
    stage = _stage_for(plan)
    n = part.num_rows
    sources = part.column("source").to_pylist()
    try:
        op_codes = parse_ops(part.column("op"), n)
    except EncodingError:
        return _encode_rows(part, stage, version, sources)
    ts = part.column("commit_ts").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    deletes = op_codes == 2
    after = part.column("after")
    images = pc.if_else(pa.array(deletes), pc.coalesce(part.column("before"), after), after) if deletes.any() else after
    try:
        typed = images_to_batch(images, stage.table, required=~deletes, omitted=stage.plan.encoding.omitted)
    except _FallBack:
        return _encode_rows(part, stage, version, sources)
    got = _isolated(stage, typed, op_codes, ts, version, sources)
    return got if got is not None else _encode_rows(part, stage, version, sources)


def _isolated(stage: _TableStage, typed: pa.RecordBatch, op_codes: np.ndarray, ts: np.ndarray, version: int,
              sources: RowSources) -> tuple[pa.RecordBatch, dict[int, EncodingError]] | None:
    """Encode typed rows, setting aside up to :data:`_ISOLATE_LIMIT` rows the encoder refuses (the others
    encoded again without them); ``None`` when there are more (the caller goes row by row)."""
    plan = stage.plan
    n = typed.num_rows
    bad: dict[int, EncodingError] = {}
    keep = np.arange(n)
    while True:
        subset = typed if keep.size == n else typed.take(pa.array(keep))
        try:
            out, oversize = stage.encode_checked(subset, op_codes[keep], ts[keep])
        except EncodingError as exc:
            row = exc.context.get("row")
            if row is None or len(bad) >= _ISOLATE_LIMIT:
                return None
            original = int(keep[int(row)])
            bad[original] = _row_error(exc, plan, version, sources[original])
            keep = np.delete(keep, int(row))
            continue
        for i, reason in oversize.items():
            original = int(keep[i])
            bad[original] = _row_error(EncodingError(reason, table=stage.name), plan, version, sources[original])
        break
    return _spread_rows(out, keep, n, plan), bad


def encode_typed(typed: pa.RecordBatch, op_codes: np.ndarray, commit_ts: np.ndarray, plan: StagePlan,
                 sources: RowSources) -> pa.RecordBatch:
    """Typed columns of one table version (the table's column names; values as the columnar encoder takes
    them) -> records (:data:`~avro_registry_sink.model.KAFKA_ERROR_SCHEMA`, same row order): a row the encoder refuses comes out alone
    with its ``error`` (see :func:`encode_change_batch`), every other row is encoded."""
    stage = _stage_for(plan)
    version = plan.encoding.table.version
    n = typed.num_rows
    ts = np.asarray(commit_ts, np.int64)
    got = _isolated(stage, typed, op_codes, ts, version, sources)
    if got is None:  # many refused rows: one at a time
        outputs, keep, bad = [], [], {}
        for i in range(n):
            try:
                out, oversize = stage.encode_checked(typed.slice(i, 1), op_codes[i: i + 1], ts[i: i + 1])
                if oversize:
                    raise EncodingError(oversize[0], table=stage.name)
            except (AvroSinkError, ValueError, TypeError, pa.ArrowException) as exc:
                bad[i] = _row_error(exc, plan, version, sources[i])
                continue
            outputs.append(out)
            keep.append(i)
        out = (pa.Table.from_batches(outputs).combine_chunks().to_batches(max_chunksize=len(keep))[0] if outputs
               else pa.RecordBatch.from_pylist([], schema=KAFKA_SCHEMA))
        got = _spread_rows(out, np.array(keep, np.int64), n, plan), bad
    out, bad = got
    return _with_errors(out, bad, plan, version, sources)


def encode_typed_group(parts: Sequence[tuple[pa.RecordBatch, np.ndarray, np.ndarray, StagePlan]]
                       ) -> list[pa.RecordBatch] | None:
    """:func:`encode_typed` of several table versions at once, when their encoders write the same Avro bodies
    (the same fields, options and columns left out: tables of one shape, as sharded tables are): one encoder call
    for all their rows, then each table's schema ids written into its records' headers, its topic and its
    partitions. Returns each part's records as :func:`encode_typed` does, or ``None`` when a row is refused or
    over ``max-message-bytes`` (the caller then encodes table by table, which names each row's own table)."""
    if len(parts) < 2:
        return None
    stages = [_stage_for(plan) for *_, plan in parts]
    first = stages[0]
    signature = first.encoder.body_signature()
    if any(stage.encoder.body_signature() != signature or stage.plan.max_message_bytes != first.plan.max_message_bytes
           for stage in stages[1:]):
        return None
    batches = [batch for batch, *_ in parts]
    if any(batch.schema != batches[0].schema for batch in batches[1:]):
        return None
    merged = pa.Table.from_batches(batches).combine_chunks()
    merged_batch = merged.to_batches()[0] if merged.num_rows else batches[0]
    ops = np.concatenate([op_codes for _, op_codes, _, _ in parts])
    ts = np.concatenate([np.asarray(commit_ts, np.int64) for _, _, commit_ts, _ in parts])
    try:
        keys, values = first.encoder.encode(merged_batch, ops=_op_array(ops), commit_ts=pa.array(ts, pa.int64()))
    except (AvroSinkError, ValueError, TypeError, pa.ArrowException):
        return None
    limit = first.plan.max_message_bytes
    if limit and len(keys):
        sizes = _record_sizes(keys, values)
        if (sizes > limit).any():
            return None
    bounds = np.cumsum([0] + [batch.num_rows for batch in batches])
    keys = _with_schema_ids(keys, bounds, [stage.plan.encoding.key_schema_id for stage in stages])
    values = _with_schema_ids(values, bounds, [stage.plan.encoding.value_schema_id for stage in stages])
    out = []
    for i, (stage, (batch, op_codes, _ts, plan)) in enumerate(zip(stages, parts, strict=True)):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        ts_i = ts[lo:hi]
        records = _kafka_batch(plan.topic, stage.partitions(batch, ts_i), keys.slice(lo, hi - lo),
                               values.slice(lo, hi - lo), op_codes, ts_i)
        out.append(_with_errors(records, {}, plan, plan.encoding.table.version, []))
    return out


def _with_schema_ids(records: pa.Array, bounds: np.ndarray, ids: Sequence[int | None]) -> pa.Array:
    """Confluent-framed records (``0``, a 4-byte schema id, the body) with rows ``bounds[i]:bounds[i + 1]`` given
    schema id ``ids[i]`` (null records stay null; ``None`` ids: no key schema, the records are all null)."""
    n = len(records)
    if n == 0 or records.null_count == n or all(i is None for i in ids):
        return records
    wide = pa.types.is_large_binary(records.type) or pa.types.is_large_string(records.type)
    offsets = np.frombuffer(records.buffers()[1], np.int64 if wide else np.int32)[
        records.offset: records.offset + n + 1].astype(np.int64)
    data = np.frombuffer(records.buffers()[2], np.uint8).copy()
    valid = records.is_valid().to_numpy(zero_copy_only=False)
    for i, schema_id in enumerate(ids):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        rows = np.flatnonzero(valid[lo:hi]) + lo
        if not rows.size or schema_id is None:
            continue
        header = np.frombuffer(int(schema_id).to_bytes(4, "big"), np.uint8)
        data[offsets[rows][:, None] + 1 + np.arange(4)] = header
    return pa.Array.from_buffers(records.type, n, [records.buffers()[0], records.buffers()[1], pa.py_buffer(data)],
                                 null_count=records.null_count, offset=records.offset)


def _encode_rows(part: pa.RecordBatch, stage: _TableStage, version: int,
                 sources: list[str | None]) -> tuple[pa.RecordBatch, dict[int, EncodingError]]:
    """Row by row through the columnar encoder: images loaded with ``load_image`` into one-row batches.

    Exact for every input the encoder accepts (its per-value path uses the reference converters), and
    each row's failure stays with that row."""
    plan = stage.plan
    omitted = {name.lower() for name in getattr(plan.encoding, "omitted", ())}
    rows = part.select(["op", "commit_ts", "before", "after"]).to_pylist()
    outputs: list[pa.RecordBatch] = []
    keep: list[int] = []
    bad: dict[int, EncodingError] = {}
    for i, row in enumerate(rows):
        try:
            op = Op.parse(row["op"]) if row["op"] is not None else Op.INSERT
            before = load_image(row["before"], stage.table)
            after = load_image(row["after"], stage.table)
            image = (before if before is not None else after) if op is Op.DELETE else after
            if image is None:
                raise EncodingError(f"a {op.value} event without a row image", table=stage.name)
            if not isinstance(image, dict):
                raise EncodingError(f"the row image is a JSON {type(image).__name__}, not an object",
                                    table=stage.name)
            if omitted:  # columns a column selector leaves out may still be in the image
                image = {k: v for k, v in image.items() if k.lower() not in omitted}
            columns = [pa.array([value]) for value in image.values()]
            one = pa.RecordBatch.from_arrays(columns, names=list(image.keys()))
            code = np.array([2 if op is Op.DELETE else 1 if op is Op.UPDATE else 0], np.uint8)
            out, oversize = stage.encode_checked(one, code, np.array([int(row["commit_ts"] or 0)], np.int64))
            if oversize:
                raise EncodingError(oversize[0], table=stage.name)
        except (AvroSinkError, ValueError, TypeError, pa.ArrowException) as exc:
            bad[i] = _row_error(exc, plan, version, sources[i])
            continue
        outputs.append(out)
        keep.append(i)
    if outputs:
        out = pa.Table.from_batches(outputs).combine_chunks().to_batches(max_chunksize=len(keep))[0]
    else:
        out = pa.RecordBatch.from_pylist([], schema=KAFKA_SCHEMA)
    return _spread_rows(out, np.array(keep, np.int64), part.num_rows, plan), bad


def _spread_rows(out: pa.RecordBatch, keep: np.ndarray, n: int, plan: StagePlan) -> pa.RecordBatch:
    """Records of the kept rows back at their positions among ``n`` rows; set-aside rows are null records."""
    if keep.size == n:
        return out
    slot = np.full(n, -1, np.int64)
    slot[keep] = np.arange(keep.size)
    indices = pa.array(slot, mask=slot < 0)
    columns = [col.take(indices) for col in out.columns]
    columns[0] = pa.array([plan.topic] * n, pa.string())
    return pa.RecordBatch.from_arrays(columns, schema=KAFKA_SCHEMA)


def _with_errors(out: pa.RecordBatch, bad: Mapping[int, EncodingError], plan: StagePlan, version: int,
                 sources: RowSources) -> pa.RecordBatch:
    """``out`` plus the ``error`` column (dead-letter JSON for the rows in ``bad``)."""
    import json

    table = plan.encoding.table
    errors: list[str | None] = [None] * out.num_rows
    for i, exc in bad.items():
        context = exc.context
        reason, message = str(context.get("reason") or "cannot encode"), exc.message
        if context.get("missing_definition"):  # every such row fails alike: a configuration problem
            reason = RefusalReason.MISCONFIGURATION
            message += (f" The input does not carry the {context['missing_definition']} of {table.qualified_name}: "
                        "give its CREATE TABLE with --tables and rerun (nothing of this batch was committed).")
        errors[i] = json.dumps({
            "source": sources[i], "reason": reason, "message": message,
            "schema": table.schema_name, "table": table.table, "table_version": version,
            "column": context.get("column"), "setting": "tables" if context.get("missing_definition") else None,
        }, ensure_ascii=False, default=str)
    return pa.RecordBatch.from_arrays([*out.columns, pa.array(errors, pa.string())], schema=KAFKA_ERROR_SCHEMA)
