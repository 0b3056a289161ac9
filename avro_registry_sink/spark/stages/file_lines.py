"""The file sink's JSON lines built from Arrow columns, where the encode stage runs (no Spark SQL per row).

A line is what ``json.dumps(record, separators=(",", ":"))`` gives for a record of the file sink: the
fields ``topic, partition, key, value, headers, commit_ts, batch`` in this order, bytes as lower-case
hex, nulls kept. Built with numpy (hex) and Arrow's string kernels, it costs the encode stage a fraction
of what the same text costs Spark SQL (``lower(hex(...))`` and ``concat`` over every row), and the JVM
then only writes text. This is the one implementation of the format: the job's encode stage builds the
lines where it runs (:class:`~avro_registry_sink.spark.stages.tally.StageOutput`), and
:class:`~avro_registry_sink.spark.sinks.sinks.FileSink` turns Kafka-shaped records it is handed into lines with
the same function (:func:`to_lines`).

>>> import pyarrow as pa
>>> from avro_registry_sink.model import KAFKA_SCHEMA
>>> records = pa.RecordBatch.from_pylist([{"topic": "t", "partition": 1, "key": b"\\x00\\x01", "value": None,
...     "headers": [{"key": "op", "value": b"d"}], "commit_ts": 7}], schema=KAFKA_SCHEMA)
>>> lines_of(records, batch_id=3).to_pylist()
['{"topic":"t","partition":1,"key":"0001","value":null,"headers":[{"key":"op","value":"64"}],"commit_ts":7,"batch":3}']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.model import FILE_LINE_COLUMNS

__all__ = ["hex_text", "line_batch", "lines_of", "to_lines"]


_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)


def hex_text(values: Any) -> pa.StringArray:
    """Lower-case hex of each value of a binary array (nulls stay null)."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if values.type != pa.binary():
        values = values.cast(pa.binary())
    n = len(values)
    validity, offsets_buffer, data_buffer = values.buffers()[:3]
    offsets = np.frombuffer(offsets_buffer, np.int32)[values.offset: values.offset + n + 1] if n else np.zeros(1, np.int32)
    first, last = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(data_buffer, np.uint8)[first:last] if data_buffer is not None else np.zeros(0, np.uint8)
    digits = np.empty(2 * data.size, np.uint8)
    digits[0::2] = _HEX_DIGITS[data >> 4]
    digits[1::2] = _HEX_DIGITS[data & 15]
    if validity is not None and values.offset:  # the new offsets start at 0: so must the validity bits
        validity = pc.is_valid(values).buffers()[1]
    return pa.StringArray.from_buffers(n, pa.py_buffer(((offsets - first) * 2).astype(np.int32)), pa.py_buffer(digits),
                                       validity, values.null_count, 0)


def _json_hex(values: Any) -> pa.Array:
    """Each value as a JSON string of lower-case hex, or ``null``."""
    quoted = pc.binary_join_element_wise('"', hex_text(values), '"', "")
    return pc.fill_null(quoted, "null") if quoted.null_count else quoted


def _json_number(values: Any) -> pa.Array:
    text = pc.cast(values, pa.string())
    return pc.fill_null(text, "null") if text.null_count else text


def _headers_json(headers: Any) -> pa.Array:
    """``[{"key":"op","value":"63"},...]`` per row (a null list is ``[]``)."""
    headers = headers.combine_chunks() if isinstance(headers, pa.ChunkedArray) else headers
    if headers.null_count:
        headers = pc.fill_null(headers, pa.scalar([], headers.type))
    entries = headers.flatten()
    texts = pc.binary_join_element_wise('{"key":"', entries.field("key"), '","value":', _json_hex(entries.field("value")),
                                        "}", "")
    offsets = headers.offsets
    if offsets.offset or int(offsets[0].as_py()):
        offsets = pc.subtract(offsets, offsets[0])
    lists = pa.ListArray.from_arrays(offsets, texts)
    return pc.binary_join_element_wise("[", pc.binary_join(lists, ","), "]", "")


def lines_of(records: pa.RecordBatch, batch_id: int) -> pa.StringArray:
    """The file sink's line of each Kafka-shaped record (``topic, partition, key, value, headers, commit_ts``).

    Topics and header keys are Kafka names (``[A-Za-z0-9._-]``, checked by the router), so nothing in
    them needs escaping."""
    n = records.num_rows
    if n == 0:
        return pa.array([], pa.string())
    return pc.binary_join_element_wise(
        '{"topic":"', records.column("topic"),
        '","partition":', _json_number(records.column("partition")),
        ',"key":', _json_hex(records.column("key")),
        ',"value":', _json_hex(records.column("value")),
        ',"headers":', _headers_json(records.column("headers")),
        ',"commit_ts":', _json_number(records.column("commit_ts")),
        f',"batch":{int(batch_id)}}}', "",
    )


def line_batch(records: pa.RecordBatch, batch_id: int, keep: Sequence[str] = FILE_LINE_COLUMNS[2:]) -> pa.RecordBatch:
    """``topic``, ``line`` and the ``keep`` columns (by default the order columns) of Kafka-shaped records."""
    return pa.RecordBatch.from_arrays([records.column("topic"), lines_of(records, batch_id),
                                       *(records.column(name) for name in keep)], names=["topic", "line", *keep])


def to_lines(batch_id: int, keep: Sequence[str]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function: Kafka-shaped records -> :func:`line_batch` (same row order)."""
    keep = tuple(keep)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield line_batch(batch, batch_id, keep)

    return run
