"""What a micro-batch's encode stage hands on: counted where it runs (per topic, and the rows it set
aside), and shaped for its sink (Kafka records, or the file sink's lines).

The job writes each batch in one Spark job (encode -> order -> sink) instead of caching the encoded
batch and counting it in a second one. The counts the run summary, the bad-row budget and the
dead-letter file need are gathered on the way by a Spark accumulator that the Python encode stage adds
to for every Arrow batch it yields (:func:`tally_of`): a few numbers per topic, and the ``error`` text of
the rows the stage refused (few, by nature). Spark merges a task's additions once the task has
succeeded, so a failed and retried task is counted once.

For the file sink the stage also builds the lines themselves (:mod:`~avro_registry_sink.spark.stages.file_lines`)
and hands on only them and their order (:class:`StageOutput`).

>>> import pyarrow as pa
>>> batch = pa.RecordBatch.from_pydict({"topic": ["t", "t", "t"], "value": [b"v", None, None],
...     "commit_ts": [5, 7, 9], "error": [None, None, '{"reason": "bad"}']})
>>> tally = tally_of(batch)
>>> tally["topics"], tally["errors"]
({'t': [2, 1, 7, 1]}, ['{"reason": "bad"}'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.accumulators import AccumulatorParam

from avro_registry_sink.failpoints import failpoint
from avro_registry_sink.model import FILE_LINES_DDL, is_misconfiguration
from avro_registry_sink.spark.stages.file_lines import line_batch
from avro_registry_sink.workers import settle

__all__ = ["StageOutput", "Tally", "TallyParam", "empty_tally", "spread_verdicts", "tallied", "tally_of"]

#: ``{"topics": {topic: [records, tombstones, newest commit ts, bytes of key and value]}, "errors": [dead-letter JSON,
#: ...]}``
Tally = dict[str, Any]


def empty_tally() -> Tally:
    """A tally of nothing."""
    return {"topics": {}, "errors": []}


def tally_of(batch: Any) -> Tally:
    """Count one Arrow batch of encoded records (``topic``, ``value``, ``commit_ts``, optional ``error``).

    Rows with an ``error`` are not records: their error text is kept instead.
    """
    import numpy as np
    import pyarrow.compute as pc

    out = empty_tally()
    n = batch.num_rows
    if n == 0:
        return out
    names = batch.schema.names
    if "error" in names:
        error = batch.column("error")
        if error.null_count < n:
            bad = pc.is_valid(error)
            out["errors"] = pc.filter(error, bad).to_pylist()
            batch = batch.filter(pc.invert(bad))
            if batch.num_rows == 0:
                return out
    tombstone = pc.is_null(batch.column("value")).to_numpy(zero_copy_only=False)
    ts = batch.column("commit_ts").fill_null(0).to_numpy(zero_copy_only=False)
    size = np.zeros(batch.num_rows, np.int64)  # what the job's metrics report as bytes out
    for name in ("key", "value"):
        if name in batch.schema.names:
            size += pc.binary_length(batch.column(name)).fill_null(0).to_numpy(zero_copy_only=False)
    encoded = pc.dictionary_encode(batch.column("topic"))
    topics = encoded.dictionary.to_pylist()
    if len(topics) == 1:  # the usual Arrow batch: one table's rows
        out["topics"][topics[0]] = [int(batch.num_rows), int(np.count_nonzero(tombstone)), int(ts.max()),
                                    int(size.sum())]
        return out
    indices = encoded.indices
    if indices.null_count:  # a row without a topic is no record of any topic
        keep = pc.is_valid(indices).to_numpy(zero_copy_only=False)
        indices, tombstone, ts, size = indices.drop_null(), tombstone[keep], ts[keep], size[keep]
    codes = indices.to_numpy(zero_copy_only=False).astype(np.intp, copy=False)
    # one pass over the rows for every topic's numbers (a mask per topic is a pass per topic: 100 topics, 100 passes)
    records = np.bincount(codes, minlength=len(topics))
    tombstones = np.bincount(codes[tombstone], minlength=len(topics))
    sizes = np.bincount(codes, weights=size, minlength=len(topics))  # float64: exact below 2**53 bytes
    newest = np.full(len(topics), np.iinfo(np.int64).min, np.int64)
    np.maximum.at(newest, codes, ts)
    for code, topic in enumerate(topics):
        if records[code]:
            out["topics"][topic] = [int(records[code]), int(tombstones[code]), int(newest[code]), int(sizes[code])]
    return out


@dataclass(frozen=True)
class StageOutput:
    """How an encode stage hands on its records (plain data: it travels to the executors).

    ``tally``: an accumulator of :class:`TallyParam` counting every Arrow batch the stage yields.
    ``lines_of_batch``: for the file sink, the batch id: the stage then yields the file sink's lines
    (:data:`FILE_LINES_DDL`) instead of Kafka columns, and leaves out the rows it set aside (the tally
    holds them, so it is required).
    """

    tally: Any = None
    lines_of_batch: int | None = None
    #: ``(function, ddl)``: the counted Arrow batches go through ``function`` in the same Python worker, which
    #: yields ``ddl`` rows instead (an exactly-once slice writer: :func:`~avro_registry_sink.kafka.delivery.fused_writer`).
    then: Any = None
    #: Exactly once, records shuffled to their slice writers: each misconfiguration verdict row is handed on once
    #: for every Kafka partition of its topic (see :func:`spread_verdicts`), after it is counted once.
    spread_verdicts: bool = False

    def __post_init__(self) -> None:
        if self.lines_of_batch is not None and self.tally is None:
            raise ValueError("StageOutput: lines leave out the rows set aside, so they need a tally")

    def wrap(self, encode: Callable[[Iterator[Any]], Iterator[Any]], ddl: str,
             topics: Mapping[str, int] | None = None) -> tuple[Callable[[Iterator[Any]], Iterator[Any]], str]:
        """``encode`` (a ``mapInArrow`` function yielding Kafka columns, order columns and ``error``) and its
        output DDL, as this output wants them. ``topics``: the Kafka partition count of each topic the stage
        writes (what :attr:`spread_verdicts` needs)."""
        counted = tallied(encode, self.tally)
        if self.spread_verdicts and self.then is None and self.lines_of_batch is None:
            if topics is None:
                raise ValueError("StageOutput: spreading verdicts needs the partition count of each topic")
            counted = spread_verdicts(counted, topics)
        if self.then is not None:
            after, after_ddl = self.then
            return (lambda batches: after(counted(batches))), after_ddl
        if self.lines_of_batch is None:
            return counted, ddl
        batch_id = self.lines_of_batch

        def lines(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow.compute as pc

            for out in counted(batches):
                if "error" in out.schema.names and out.column("error").null_count < out.num_rows:
                    out = out.filter(pc.is_null(out.column("error")))
                if out.num_rows:
                    yield line_batch(out, batch_id)

        return lines, FILE_LINES_DDL


def tallied(encode: Callable[[Iterator[Any]], Iterator[Any]], accumulator: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``encode`` (a ``mapInArrow`` function) adding a :func:`tally_of` each batch it yields to ``accumulator``
    (and passing the ``stage.encoded`` failpoint, :mod:`~avro_registry_sink.failpoints`, with each)."""
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        settle()
        for out in encode(batches):
            if accumulator is not None:
                accumulator.add(tally_of(out))
            failpoint("stage.encoded")
            yield out

    return run


def spread_verdicts(encode: Callable[[Iterator[Any]], Iterator[Any]],
                    topics: Mapping[str, int]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``encode`` (a ``mapInArrow`` function yielding Kafka columns and ``error``) with each row it refused as a
    misconfiguration (see :class:`~avro_registry_sink.model.RefusalReason`) yielded once for every Kafka partition
    of its topic instead, ``topic`` and ``partition`` set to each (of every topic in ``topics``, topic -> partition
    count, when it names none of them): an exactly-once write shuffles records by (topic, partition) to its slice
    writers, and every slice holding a partition of that topic must see the verdict, to abort rather than commit.
    Made here, where the few such rows are, rather than by a Spark ``explode`` that every record would go through
    (0.4 s a million records). Other rows pass as they are.

    >>> import pyarrow as pa
    >>> def stage(batches):
    ...     yield pa.RecordBatch.from_pydict({"topic": ["t", "t", None], "partition": pa.array([1, None, None], pa.int32()),
    ...         "error": [None, '{"reason": "misconfiguration"}', '{"reason": "bad value"}']})
    >>> [(r["topic"], r["partition"], r["error"] is not None) for b in spread_verdicts(stage, {"t": 2, "u": 1})([])
    ...  for r in b.to_pylist()]
    [('t', 1, False), (None, None, True), ('t', 0, True), ('t', 1, True)]
    """
    targets = {topic: [(topic, p) for p in range(max(1, int(n)))] for topic, n in topics.items()}
    every = [pair for pairs in targets.values() for pair in pairs]

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        for out in encode(batches):
            names = out.schema.names
            if "error" not in names or out.column("error").null_count == out.num_rows:
                yield out
                continue
            verdict = np.array([is_misconfiguration(text) for text in out.column("error").to_pylist()], bool)
            if not verdict.any():
                yield out
                continue
            rows: list[int] = []
            to: list[tuple[str, int]] = []
            topic_of = out.column("topic").to_pylist()
            for i in np.flatnonzero(verdict):
                pairs = targets.get(topic_of[i], every)
                rows.extend([int(i)] * len(pairs))
                to.extend(pairs)
            rest = out.filter(pa.array(~verdict))
            if rest.num_rows:
                yield rest
            if rows:
                copies = out.take(pa.array(rows, pa.int64()))
                columns = list(copies.columns)
                t, p = names.index("topic"), names.index("partition")
                columns[t] = pa.array([pair[0] for pair in to], copies.schema.field(t).type)
                columns[p] = pa.array([pair[1] for pair in to], copies.schema.field(p).type)
                yield pa.RecordBatch.from_arrays(columns, schema=copies.schema)

    return run


def _merge(into: Tally, other: Tally) -> Tally:
    for topic, (n, tombstones, newest, size) in other.get("topics", {}).items():
        have = into["topics"].get(topic)
        into["topics"][topic] = ([n, tombstones, newest, size] if have is None
                                 else [have[0] + n, have[1] + tombstones, max(have[2], newest), have[3] + size])
    into["errors"].extend(other.get("errors", ()))
    return into


class TallyParam(AccumulatorParam):  # type: ignore[type-arg]
    """Spark's accumulator rules for a :data:`Tally`."""

    def zero(self, value: Tally) -> Tally:
        return empty_tally()

    def addInPlace(self, value1: Tally, value2: Tally) -> Tally:
        return _merge(value1, value2)
