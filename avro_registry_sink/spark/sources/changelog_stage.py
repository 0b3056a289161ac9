"""The changelog path's executor passes: a batch's messages -> what the driver must know (a summary), and
messages -> Kafka records in one pass.

A micro-batch of a changelog source (Kafka records, or the lines of changelog files) is read twice, never
cached:

1. :func:`summarize_changelog`: a light, vectorized look at every message (Arrow's JSON reader takes only
   ``database``, ``table``, ``type``, ``isDdl`` and the commit ts; ``mysqlType`` is cut out of the text as
   it is), aggregated where it runs: per table and column set the message count, the commit-ts range and the
   first message (to describe a table nothing else describes), plus every DDL message. Only that reaches the
   driver, which applies the DDLs, describes new tables and registers the schemas.
2. :func:`encode_changelog`: parse -> typed Arrow columns (:mod:`~avro_registry_sink.formats.changelog_arrow`)
   -> the columnar encoder (:func:`~avro_registry_sink.spark.stages.stage.encode_typed`) -> records
   (:data:`~avro_registry_sink.model.ENCODED_DDL`), with no JSON text or Python object per value in
   between. The messages the vectorized reader does not take (malformed ones, unknown tables, values of an
   unusual form) are read one by one with the per-message readers
   (:func:`~avro_registry_sink.spark.sources.sources.peek_message`, :func:`~avro_registry_sink.spark.sources.sources.parse_message`),
   which dead-letter a bad message on its own; the others stay on the vectorized path.

Every refused row comes out as a complete dead-letter record (with the message's bytes), so the driver
never has to look the message up again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import AccumulatorParam

from avro_registry_sink.formats import format_named
from avro_registry_sink.formats.canal_json import message_shape
from avro_registry_sink.formats.changelog_arrow import Body, TableVersions, _candidates, utf8_messages
from avro_registry_sink.model import CHANGE_SCHEMA, ENCODED_DDL, KAFKA_SCHEMA, dead_letter_json
from avro_registry_sink.spark.sources.sources import (
    _arrow_schema,
    _arrow_schema_of_encoded,
    _error_json,
    file_messages,
    location_of,
    parse_message,
    peek_message,
)
from avro_registry_sink.spark.stages.plan import topic_partitions
from avro_registry_sink.spark.stages.plan_cache import map_in_arrow
from avro_registry_sink.spark.stages.stage import stage_for
from avro_registry_sink.spark.stages.tally import StageOutput
from avro_registry_sink.storage_fs import parse_storage_uri
from avro_registry_sink.table import TableDef
from avro_registry_sink.tabledef.catalog import pick_version
from avro_registry_sink.workers import settle

# The changelog readers (formats/) are imported by the functions that read messages: a storage tree's run imports
# this module through the job's batch sources and reads no changelog (0.1-0.2 s here).

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from avro_registry_sink.spark.sources.sources import SourceSpec

__all__ = ["SUMMARY_DDL", "Summary", "encode_changelog", "summarize_changelog"]

#: What :func:`summarize_changelog` hands the driver: per (kind, table, column set) counts and the first message;
#: one row per DDL.
SUMMARY_DDL = (
    "kind STRING, schema STRING, table STRING, shape STRING, mtype STRING, n BIGINT, low BIGINT, high BIGINT, "
    "first STRING, first_source STRING, first_ts BIGINT, first_file STRING, first_line BIGINT"
)

#: Messages handled at once (Spark hands Arrow batches of 10,000 rows; a bigger piece keeps per-table work few).
_CHUNK_ROWS = 131_072
_CHUNK_BYTES = 64 << 20


# --------------------------------------------------------------------------------------------------
# The batch's messages, from Kafka records or changelog files


class _Sources(Sequence[str]):
    """Each message's location text (``topic/partition@offset`` or ``file:line``), made when asked for."""

    def __init__(self, texts: list[str] | None = None, topics: pa.Array | None = None,
                 partitions: pa.Array | None = None, offsets: np.ndarray | None = None) -> None:
        self._texts = texts
        self._topics, self._partitions, self._offsets = topics, partitions, offsets

    def __len__(self) -> int:
        return len(self._texts) if self._texts is not None else len(self._offsets)  # type: ignore[arg-type]

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if self._texts is not None:
            return self._texts[i]
        assert self._topics is not None and self._partitions is not None and self._offsets is not None
        return f"{self._topics[i].as_py()}/{self._partitions[i].as_py()}@{int(self._offsets[i])}"

    def take(self, rows: np.ndarray) -> _Sources:
        if self._texts is not None:
            return _Sources([self._texts[int(i)] for i in rows])
        assert self._topics is not None and self._partitions is not None and self._offsets is not None
        index = pa.array(rows)
        return _Sources(None, self._topics.take(index), self._partitions.take(index), self._offsets[rows])


@dataclass
class _Chunk:
    """Messages with where they come from: ``order_file``/``order_line`` order the output, ``errors`` holds a
    dead-letter record for lines that are bad before parsing (invalid UTF-8 in a file)."""

    messages: pa.Array  # binary or string
    order_file: pa.Array
    order_line: np.ndarray
    sources: _Sources
    errors: pa.Array | None = None


#: What the executor passes read of a batch: of Kafka records, or of changelog files.
_INPUT_COLUMNS = {True: ("value", "topic", "partition", "offset"), False: ("path", "content")}


def _input_frame(batch_df: DataFrame, spec: SourceSpec) -> DataFrame:
    return batch_df.select(*_INPUT_COLUMNS[spec.is_kafka])


def _kafka_chunk(batches: list[pa.RecordBatch]) -> _Chunk:
    table = pa.Table.from_batches(batches)
    topic = table.column("topic").combine_chunks()
    partition = table.column("partition").combine_chunks()
    joined = pc.binary_join_element_wise(topic.cast(pa.string()), partition.cast(pa.string()), "\x00")
    encoded = pc.dictionary_encode(joined)
    files = [f"{t}/{int(p):010d}" for t, p in (text.split("\x00") for text in encoded.dictionary.to_pylist())]
    order_file = pa.array(files, pa.string()).take(encoded.indices)
    offsets = table.column("offset").combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64)
    sources = _Sources(None, topic, partition, offsets)
    return _Chunk(table.column("value").combine_chunks(), order_file, offsets, sources)


def _file_chunk(batches: list[pa.RecordBatch], spec: SourceSpec) -> _Chunk:
    location = spec.location or parse_storage_uri(spec.path or ".")
    messages: list[str | None] = []
    sources: list[str] = []
    files: list[str] = []
    lines: list[int] = []
    errors: list[str | None] = []
    for message, source, name, line, error in file_messages(batches, location, spec.kind):
        messages.append(message)
        sources.append(source)
        files.append(name)
        lines.append(line)
        errors.append(error)
    return _Chunk(pa.array(messages, pa.string()), pa.array(files, pa.string()), np.asarray(lines, np.int64),
                  _Sources(sources), pa.array(errors, pa.string()) if any(e is not None for e in errors) else None)


def _chunks(batches: Iterator[pa.RecordBatch], spec: SourceSpec) -> Iterator[_Chunk]:
    """The task's messages in pieces of at most :data:`_CHUNK_ROWS` messages or :data:`_CHUNK_BYTES` bytes."""
    pending: list[pa.RecordBatch] = []
    rows = size = 0

    def flush() -> _Chunk:
        return _kafka_chunk(pending) if spec.is_kafka else _file_chunk(pending, spec)

    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= _CHUNK_ROWS or size >= _CHUNK_BYTES or not spec.is_kafka:
            yield flush()
            pending, rows, size = [], 0, 0
    if pending:
        yield flush()


def _text(messages: pa.Array, i: int) -> tuple[str | None, bool]:
    """Message ``i`` as text, and whether it is valid UTF-8."""
    value = messages[i].as_py()
    if value is None or isinstance(value, str):
        return value, True
    try:
        return value.decode("utf-8"), True
    except UnicodeDecodeError:
        return value.decode("utf-8", "surrogateescape"), False


# --------------------------------------------------------------------------------------------------
# 1. The summary


@dataclass
class Summary:
    """What the driver learns of a batch (:func:`summarize_changelog`): the message count, per (kind, schema,
    table, shape) rows with ``n``, ``low``, ``high``, ``first``, ``first_source`` (DMLs), and the DDL messages
    in commit order."""

    inputs: int
    groups: list[dict[str, Any]]
    ddls: list[dict[str, Any]]


def _summarize_chunk(chunk: _Chunk, fmt: str, groups: dict[tuple[Any, ...], list[Any]], ddls: list[dict[str, Any]],
                     counts: dict[str, int]) -> None:
    n = len(chunk.messages)
    counts["n"] += n
    texts, not_utf8 = utf8_messages(chunk.messages)
    pre = np.zeros(n, bool) if chunk.errors is None else chunk.errors.is_valid().to_numpy(zero_copy_only=False)
    body = Body(texts)
    fast = _candidates(texts, body) & ~not_utf8 & ~pre
    one_by_one = np.flatnonzero(~fast & ~pre)
    order_file = chunk.order_file.to_pylist()
    rows = np.flatnonzero(fast)
    light = None
    if rows.size:
        light = format_named(fmt).summary_peek(texts, body, rows)
    if light is None:
        one_by_one = np.flatnonzero(~pre)
    else:
        kind = light["kind"]
        one_by_one = np.sort(np.concatenate([one_by_one, rows[kind < 0]]))
        ts = light["ts"]
        for i in np.flatnonzero(kind == 1):
            r = int(rows[i])
            ddls.append({"schema": light["schema"][i].as_py(), "table": light["table"][i].as_py(),
                         "commit_ts": int(ts[i]) if light["has_ts"][i] else None,
                         "message": light["sub"][i].as_py(), "source": chunk.sources[r], "order_file": order_file[r],
                         "order_line": int(chunk.order_line[r])})
        dml = np.flatnonzero(kind == 0)
        if dml.size:
            key = pc.binary_join_element_wise(light["schema"].take(pa.array(dml)), light["table"].take(pa.array(dml)),
                                              light["mtype"].take(pa.array(dml)).fill_null("\x01"), "\x00")
            encoded = pc.dictionary_encode(key)
            codes = encoded.indices.to_numpy(zero_copy_only=False)
            for code, text in enumerate(encoded.dictionary.to_pylist()):
                members = dml[codes == code]
                schema, table, mtype = text.split("\x00", 2)
                _add_group(groups, ("dml", schema, table, None, None if mtype == "\x01" else mtype), members, ts,
                           rows, chunk, light["sub"], order_file)
    for position in one_by_one:
        r = int(position)
        text, utf8 = _text(chunk.messages, r)
        if not utf8:
            counts["error"] += 1
            continue
        kind_text, schema, table, commit_ts, message, _error, shape = peek_message(text, chunk.sources[r], fmt)
        if kind_text == "ddl":
            ddls.append({"schema": schema, "table": table, "commit_ts": commit_ts, "message": message,
                         "source": chunk.sources[r], "order_file": order_file[r], "order_line": int(chunk.order_line[r])})
        elif kind_text == "dml":
            _add_group(groups, ("dml", schema, table, shape, None), np.array([0]), np.array([commit_ts], np.int64),
                       np.array([r]), chunk, pa.array([message], pa.string()), order_file)
        else:
            counts[kind_text] = counts.get(kind_text, 0) + 1
    counts["error"] += int(pre.sum())


def _add_group(groups: dict[tuple[Any, ...], list[Any]], key: tuple[Any, ...], members: np.ndarray, ts: np.ndarray,
               rows: np.ndarray, chunk: _Chunk, texts: pa.Array, order_file: list[str]) -> None:
    """Fold messages (``members``: indexes into ``ts``/``rows``/``texts``) into the group ``key``:
    ``[n, low, high, (first order), first message, first source]``."""
    member_ts = ts[members]
    lines = chunk.order_line[rows[members]]
    files = [order_file[int(rows[i])] for i in members] if members.size < 64 else None
    if files is None:
        file_arr = np.asarray(order_file, object)[rows[members]]
        best = np.lexsort((lines, file_arr, member_ts))[0]
    else:
        best = min(range(members.size), key=lambda j: (int(member_ts[j]), files[j], int(lines[j])))  # type: ignore[index]
    i = int(members[best])
    r = int(rows[i])
    order = (int(ts[i]), order_file[r], int(chunk.order_line[r]))
    have = groups.get(key)
    if have is None:
        groups[key] = [int(members.size), int(member_ts.min()), int(member_ts.max()), order, texts[i].as_py(),
                       chunk.sources[r]]
        return
    have[0] += int(members.size)
    have[1] = min(have[1], int(member_ts.min()))
    have[2] = max(have[2], int(member_ts.max()))
    if order < have[3]:
        have[3], have[4], have[5] = order, texts[i].as_py(), chunk.sources[r]


def summarize_changelog(batch_df: DataFrame, spec: SourceSpec, *, sample: bool = False) -> Summary:
    """Executor pass 1 (see the module docs), collected on the driver.

    ``sample``: only the first :data:`SAMPLE` messages of the batch (``limit``: each task stops reading there,
    and the first task's messages come first, so the sample is the start of the first input partition): what
    the batch starts with, to plan the tables it names before a strict pass. A table only other partitions
    hold (a topic TiCDC dispatches by table) is found by the strict pass, which then reads the batch again
    with its full summary."""
    fmt = spec.kind

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        settle()
        groups: dict[tuple[Any, ...], list[Any]] = {}
        ddls: list[dict[str, Any]] = []
        counts = {"n": 0, "error": 0}
        for chunk in _chunks(batches, spec):
            _summarize_chunk(chunk, fmt, groups, ddls, counts)
        out: list[dict[str, Any]] = [{"kind": "count", "n": counts["n"]}]
        for (kind, schema, table, shape, mtype), (n, low, high, order, first, source) in groups.items():
            out.append({"kind": kind, "schema": schema, "table": table, "shape": shape, "mtype": mtype, "n": n,
                        "low": low, "high": high, "first": first, "first_source": source, "first_ts": order[0],
                        "first_file": order[1], "first_line": order[2]})
        for ddl in ddls:
            out.append({"kind": "ddl", "schema": ddl["schema"], "table": ddl["table"], "n": 1, "low": ddl["commit_ts"],
                        "high": ddl["commit_ts"], "first": ddl["message"], "first_source": ddl["source"],
                        "first_ts": ddl["commit_ts"], "first_file": ddl["order_file"], "first_line": ddl["order_line"]})
        for kind in ("error", "skip", "watermark"):
            if counts.get(kind):
                out.append({"kind": kind, "n": counts[kind]})

        yield pa.RecordBatch.from_pylist(out, schema=_arrow_schema(SUMMARY_DDL))

    frame = _input_frame(batch_df, spec)
    if sample:
        frame = frame.limit(SAMPLE)
    rows = frame.mapInArrow(run, SUMMARY_DDL).collect()
    return _merge_summary([r.asDict() for r in rows], fmt)


#: Messages a sample of a batch reads (see :func:`summarize_changelog`).
SAMPLE = 5000


def _merge_summary(rows: list[dict[str, Any]], fmt: str) -> Summary:
    carries_types = format_named(fmt).carries_types

    inputs = sum(int(r["n"] or 0) for r in rows if r["kind"] == "count")
    shapes: dict[str, str | None] = {}
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        if r["kind"] != "dml":
            continue
        shape = r["shape"]
        if r["mtype"] is not None:
            if r["mtype"] not in shapes:
                try:
                    shapes[r["mtype"]] = message_shape({"mysqlType": json.loads(r["mtype"])})
                except ValueError:
                    shapes[r["mtype"]] = None
            shape = shapes[r["mtype"]]
        key = (r["schema"], r["table"], shape if carries_types else None)
        order = (r["first_ts"], r["first_file"], r["first_line"])
        have = merged.get(key)
        if have is None:
            merged[key] = {"kind": "dml", "schema": r["schema"], "table": r["table"], "shape": key[2], "n": r["n"],
                           "low": r["low"], "high": r["high"], "first": r["first"], "first_source": r["first_source"],
                           "order": order}
            continue
        have["n"] += r["n"]
        have["low"], have["high"] = min(have["low"], r["low"]), max(have["high"], r["high"])
        if order < have["order"]:
            have["order"], have["first"], have["first_source"] = order, r["first"], r["first_source"]
    ddls = sorted((r for r in rows if r["kind"] == "ddl"),
                  key=lambda r: (r["low"] or 0, r["first_file"] or "", r["first_line"] or 0))
    ddl_rows = [{"kind": "ddl", "schema": r["schema"], "table": r["table"], "n": 1, "message": r["first"],
                 "source": r["first_source"], "commit_ts": r["low"]} for r in ddls]
    return Summary(inputs=inputs, groups=list(merged.values()), ddls=ddl_rows)


# --------------------------------------------------------------------------------------------------
# 2. Messages -> records


def _encoded_schema() -> pa.Schema:
    return _arrow_schema_of_encoded()


def _dead_letter(error: str, fmt: str, raw: bytes | str | None) -> str:
    """The encode stage's error (source, reason, message, table...) as a complete dead-letter record."""
    record = json.loads(error)
    if "raw_base64" in record:
        return error
    source = str(record.get("source"))
    fields = {k: v for k, v in record.items() if k not in ("source", "reason", "message")}
    fields.update(location_of(source))
    return dead_letter_json(fmt=fmt, source=source, reason=str(record.get("reason")), message=str(record.get("message")),
                            raw=raw, **fields)


def _finish(records: pa.RecordBatch, order_version: np.ndarray, order_file: pa.Array, order_line: np.ndarray,
            errors: pa.Array) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [*records.select(KAFKA_SCHEMA.names).columns, pa.array(order_version, pa.int64()), order_file,
         pa.array(order_line, pa.int64()), errors], schema=_encoded_schema())


def _with_raw(errors: pa.Array, raw_of: Any, fmt: str) -> pa.Array:
    """The records' ``error`` column with the message bytes added to each refused row (``raw_of(row)``)."""
    if errors.null_count == len(errors):
        return errors
    values = errors.to_pylist()
    return pa.array([None if e is None else _dead_letter(e, fmt, raw_of(i)) for i, e in enumerate(values)], pa.string())


#: In the text of the exception a strict pass raises (see :class:`NeedsSummary`).
NEEDS_SUMMARY = "AVRO_SINK_NEEDS_SUMMARY"


class NeedsSummary(Exception):
    """Raised by a strict pass (see :func:`encode_changelog`): the batch holds something the driver must see
    before anything is encoded. It fails the Spark job before any record is handed on (the encode stage ends
    in a shuffle, or is counted before the write), and the job reads the batch again with its summary."""

    def __init__(self, why: str) -> None:
        super().__init__(f"{NEEDS_SUMMARY}: {why}")


class CountsParam(AccumulatorParam):  # type: ignore[type-arg]
    """A Spark accumulator of what a strict pass saw: ``{"n": messages, "filtered": {"schema.table": n}}``."""

    def zero(self, value: dict[str, Any]) -> dict[str, Any]:
        return {"n": 0, "filtered": {}}

    def addInPlace(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        a["n"] += b.get("n", 0)
        for name, count in b.get("filtered", {}).items():
            a["filtered"][name] = a["filtered"].get(name, 0) + count
        return a


def _check_message(versions: Any, kind: str, schema: Any, table: Any, commit_ts: Any, shape: str | None,
                   filtered: dict[tuple[str, str], int]) -> bool:
    """A message read one by one, in a strict pass: whether it is left out (counted), or raise
    :class:`NeedsSummary` when the driver must see it first."""
    if kind not in ("dml", "ddl"):
        return False
    name = (schema, table)
    if schema is not None and table is not None and versions.left_out(name):
        filtered[name] = filtered.get(name, 0) + 1
        return True
    if not versions.strict:
        return False
    if kind == "ddl":
        raise NeedsSummary("a DDL")
    history = versions.history.get(name)
    if not history:
        raise NeedsSummary(f"table {schema}.{table}")
    version = pick_version(list(history), commit_ts).version
    if (schema, table, version) not in versions.planned:
        raise NeedsSummary(f"version {version} of {schema}.{table}")
    if shape is not None and name in versions.shapes and shape != versions.shapes[name]:
        raise NeedsSummary(f"the columns of {schema}.{table}")
    return False


def _same_bodies(tables: list[Any], plans: Mapping[tuple[str, str, int], Any]) -> list[list[Any]]:
    """The chunk's table versions in groups whose encoders write the same Avro bodies (tables of one shape),
    encoded in one call each (:func:`~avro_registry_sink.spark.stages.stage.encode_typed_group`)."""
    groups: list[tuple[Any, list[Any]]] = []
    for rows in tables:
        signature = stage_for(plans[rows.key]).encoder.body_signature()
        for known, members in groups:
            if known == signature:
                members.append(rows)
                break
        else:
            groups.append((signature, [rows]))
    return [members for _, members in groups]


def _encode_chunk(chunk: _Chunk, fmt: str, versions: Any, plans: Mapping[tuple[str, str, int], Any],
                  history: Mapping[tuple[str, str], list[tuple[int, TableDef]]],
                  excluded: frozenset[tuple[str, str]], filtered: dict[tuple[str, str], int] | None = None
                  ) -> Iterator[pa.RecordBatch]:
    # read at call time: tests/unit/test_changelog_arrow.py replaces stage.encode_typed_group to watch the calls
    from avro_registry_sink.spark.stages.stage import encode_change_batch, encode_typed, encode_typed_group

    n = len(chunk.messages)
    pre = np.zeros(n, bool) if chunk.errors is None else chunk.errors.is_valid().to_numpy(zero_copy_only=False)
    filtered = {} if filtered is None else filtered
    read = format_named(fmt).arrow_rows
    found = read(chunk.messages if not pre.any() else pc.if_else(pa.array(pre), pa.scalar(None, chunk.messages.type),
                                                                chunk.messages), versions)
    if found.needs is not None:
        raise NeedsSummary(found.needs)
    tables, slow = found.tables, found.slow
    for name, count in found.filtered.items():
        filtered[name] = filtered.get(name, 0) + count
    messages = chunk.messages
    for group in _same_bodies(tables, plans):
        together = encode_typed_group([(rows.columns, rows.op_codes, rows.commit_ts, plans[rows.key])
                                       for rows in group])
        for k, rows in enumerate(group):
            plan = plans[rows.key]
            records = (together[k] if together is not None else
                       encode_typed(rows.columns, rows.op_codes, rows.commit_ts, plan, chunk.sources.take(rows.message)))
            errors = _with_raw(records.column("error"), lambda i, rows=rows: messages[int(rows.message[i])].as_py(),
                               fmt)
            yield _finish(records, rows.commit_ts, chunk.order_file.take(pa.array(rows.message)),
                          chunk.order_line[rows.message], errors)
    # The messages read one by one: the per-message readers, then the same encoder

    slow = np.union1d(slow, np.flatnonzero(pre)).astype(np.int64)
    if not slow.size and not found.crashed.size:
        return
    order_file = chunk.order_file.to_pylist()
    parsed: list[tuple[Any, ...]] = []
    raw: list[str | None] = []
    failed: list[tuple[str, int, str]] = []  # error JSON, row, order_file
    failed_ts: list[Any] = []
    for r in found.crashed.tolist():  # the compiled scanner crashed reading them: set aside unread
        source, (text, _) = chunk.sources[r], _text(messages, r)
        failed.append((_error_json(source, "native scanner crashed", f"{source}: the compiled debezium-json scanner "
                                   "crashed reading this message; it is set aside, the other messages are read. "
                                   "Report it with this record's raw bytes.", fmt=fmt,
                                   raw=(text or "").encode("utf-8", "surrogateescape")), r, order_file[r]))
        failed_ts.append(None)
    for r in slow:
        r = int(r)
        source = chunk.sources[r]
        if pre[r]:
            failed.append((chunk.errors[r].as_py(), r, order_file[r]))  # type: ignore[index]
            failed_ts.append(None)
            continue
        text, utf8 = _text(messages, r)
        if not utf8:
            failed.append((_error_json(source, "invalid UTF-8", f"{source}: invalid UTF-8 bytes in the message.", fmt=fmt,
                                       raw=(text or "").encode("utf-8", "surrogateescape")), r, order_file[r]))
            failed_ts.append(None)
            continue
        kind, schema, table, commit_ts, message, error, shape = peek_message(text, source, fmt)
        if kind == "error":
            failed.append((error or "{}", r, order_file[r]))
            failed_ts.append(None)
            continue
        if _check_message(versions, kind, schema, table, commit_ts, shape, filtered) or kind != "dml":
            continue
        order = (commit_ts, order_file[r], int(chunk.order_line[r]))
        for row in parse_message(message or "", source, fmt, schema or "", table or "", commit_ts or 0, order, history):
            if row[-1] is not None:
                failed.append((row[-1], r, order_file[r]))
                failed_ts.append(commit_ts)
            else:
                parsed.append(row)
                raw.append(message)
    if parsed:
        batch = pa.RecordBatch.from_pylist([dict(zip(CHANGE_SCHEMA.names, row[:8], strict=True)) for row in parsed],
                                           schema=CHANGE_SCHEMA)
        records = encode_change_batch(batch, plans, isolate=True)
        errors = _with_raw(records.column("error"), lambda i: raw[i], fmt)
        yield _finish(records, np.array([row[8] for row in parsed], np.int64), pa.array([row[9] for row in parsed],
                                                                                          pa.string()),
                      np.array([row[10] for row in parsed], np.int64), errors)
    if failed:
        k = len(failed)
        empty = pa.RecordBatch.from_arrays([pa.nulls(k, f.type) for f in KAFKA_SCHEMA], schema=KAFKA_SCHEMA)
        yield _finish(empty, np.array([ts if ts is not None else 0 for ts in failed_ts], np.int64),
                      pa.array([f[2] for f in failed], pa.string()),
                      np.array([int(chunk.order_line[f[1]]) for f in failed], np.int64),
                      pa.array([f[0] for f in failed], pa.string()))


def encode_changelog(batch_df: DataFrame, spec: SourceSpec, history: Mapping[tuple[str, str], list[tuple[int, TableDef]]],
                     plans: Mapping[tuple[str, str, int], Any], excluded: frozenset[tuple[str, str]] = frozenset(),
                     output: Any = None, *, strict: bool = False, shapes: Mapping[tuple[str, str], str] | None = None,
                     table_filter: Any = None, counts: Any = None) -> DataFrame:
    """Executor pass 2 (see the module docs): the batch's messages -> :data:`~avro_registry_sink.model.ENCODED_DDL`.

    ``history`` holds each table's versions (a message is read with the newest version at or before its commit
    ts), ``plans`` the :class:`~avro_registry_sink.spark.stages.stage.StagePlan` of every version the batch uses,
    ``excluded`` the tables ``[filter] rules`` leave out; ``output`` a
    :class:`~avro_registry_sink.spark.stages.tally.StageOutput`.

    ``strict``: the batch was not summarized (the plans are those of earlier batches): a message the driver
    must see first (a DDL, a table or version without a plan, canal-json columns other than ``shapes`` names)
    raises :class:`NeedsSummary`; ``table_filter`` leaves tables out, counted with the messages in ``counts``
    (an accumulator of :class:`CountsParam`).
    """

    fmt = spec.kind
    history = {key: list(versions) for key, versions in history.items()}
    plans = dict(plans)
    excluded = frozenset(excluded)
    versions = TableVersions(history=history, planned=frozenset(plans), excluded=excluded, strict=strict,
                             shapes=dict(shapes or {}), table_filter=table_filter)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for chunk in _chunks(batches, spec):
            seen: dict[tuple[str, str], int] = {}
            yield from _encode_chunk(chunk, fmt, versions, plans, history, excluded, seen)
            if counts is not None:
                counts.add({"n": len(chunk.messages), "filtered": {f"{s}.{t}": k for (s, t), k in seen.items()}})

    func, ddl = (output or StageOutput()).wrap(run, ENCODED_DDL, topic_partitions(plans))
    return map_in_arrow(batch_df, func, ddl, _INPUT_COLUMNS[spec.is_kafka])
