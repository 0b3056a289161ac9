"""What a micro-batch's encode stage hands on: counted where it runs (per topic, and the rows it set
aside), and shaped for its sink (Kafka records, or the file sink's lines).

The job writes each batch in one Spark job (encode -> order -> sink) instead of caching the encoded
batch and counting it in a second one. The counts the run summary, the bad-row budget and the
dead-letter file need are gathered on the way by a Spark accumulator that the Python encode stage adds
to for every Arrow batch it yields (:func:`tally_of`): a few numbers per topic, and the ``error`` text of
the rows the stage refused (few, by nature). Spark merges a task's additions once the task has
succeeded, so a failed and retried task is counted once.

For the file sink the stage also builds the lines themselves (:mod:`~avro_registry_sink.spark.file_lines`)
and hands on only them and their order (:class:`StageOutput`).

>>> import pyarrow as pa
>>> batch = pa.RecordBatch.from_pydict({"topic": ["t", "t", "t"], "value": [b"v", None, None],
...     "commit_ts": [5, 7, 9], "error": [None, None, '{"reason": "bad"}']})
>>> tally = tally_of(batch)
>>> tally["topics"], tally["errors"]
({'t': [2, 1, 7]}, ['{"reason": "bad"}'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.accumulators import AccumulatorParam

from avro_registry_sink.model import FILE_LINES_DDL

__all__ = ["StageOutput", "Tally", "TallyParam", "empty_tally", "tallied", "tally_of"]

#: ``{"topics": {topic: [records, tombstones, newest commit ts]}, "errors": [dead-letter JSON, ...]}``
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
    encoded = pc.dictionary_encode(batch.column("topic"))
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    for code, topic in enumerate(encoded.dictionary.to_pylist()):
        rows = codes == code
        out["topics"][topic] = [int(np.count_nonzero(rows)), int(np.count_nonzero(tombstone & rows)),
                                int(ts[rows].max())]
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
    #: yields ``ddl`` rows instead (an exactly-once slice writer: :func:`~avro_registry_sink.delivery.fused_writer`).
    then: Any = None

    def __post_init__(self) -> None:
        if self.lines_of_batch is not None and self.tally is None:
            raise ValueError("StageOutput: lines leave out the rows set aside, so they need a tally")

    def wrap(self, encode: Callable[[Iterator[Any]], Iterator[Any]], ddl: str) -> tuple[Callable[[Iterator[Any]], Iterator[Any]], str]:
        """``encode`` (a ``mapInArrow`` function yielding Kafka columns, order columns and ``error``) and its
        output DDL, as this output wants them."""
        counted = tallied(encode, self.tally)
        if self.then is not None:
            after, after_ddl = self.then
            return (lambda batches: after(counted(batches))), after_ddl
        if self.lines_of_batch is None:
            return counted, ddl
        batch_id = self.lines_of_batch

        def lines(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow.compute as pc

            from avro_registry_sink.spark.file_lines import line_batch

            for out in counted(batches):
                if "error" in out.schema.names and out.column("error").null_count < out.num_rows:
                    out = out.filter(pc.is_null(out.column("error")))
                if out.num_rows:
                    yield line_batch(out, batch_id)

        return lines, FILE_LINES_DDL


def tallied(encode: Callable[[Iterator[Any]], Iterator[Any]], accumulator: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """``encode`` (a ``mapInArrow`` function) adding a :func:`tally_of` each batch it yields to ``accumulator``
    (and passing the ``stage.encoded`` failpoint, :mod:`~avro_registry_sink.failpoints`, with each)."""
    from avro_registry_sink.failpoints import failpoint

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        from avro_registry_sink.workers import settle

        settle()
        for out in encode(batches):
            if accumulator is not None:
                accumulator.add(tally_of(out))
            failpoint("stage.encoded")
            yield out

    return run


def _merge(into: Tally, other: Tally) -> Tally:
    for topic, (n, tombstones, newest) in other.get("topics", {}).items():
        have = into["topics"].get(topic)
        into["topics"][topic] = ([n, tombstones, newest] if have is None
                                 else [have[0] + n, have[1] + tombstones, max(have[2], newest)])
    into["errors"].extend(other.get("errors", ()))
    return into


class TallyParam(AccumulatorParam):  # type: ignore[type-arg]
    """Spark's accumulator rules for a :data:`Tally`."""

    def zero(self, value: Tally) -> Tally:
        return empty_tally()

    def addInPlace(self, value1: Tally, value2: Tally) -> Tally:
        return _merge(value1, value2)
