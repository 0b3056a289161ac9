"""Structured logs (``run --log-format json``): one JSON object a line on stderr, for log shippers.

Three kinds of line, each with ``ts``, ``level`` and ``event``:

* the progress events of :class:`~avro_registry_sink.ops.progress.JsonLogProgress` (``start``, ``batch`` with its
  ``batch_id``, ``finish``; a failed run's ``finish`` is ``level`` ``error`` with ``error_class`` and
  ``batch_id``);
* after each committed batch, one ``table`` line per table it delivered: ``batch_id``, ``table``, ``rows``;
* the product's own log records (``avro_registry_sink.*`` loggers, INFO and up: the registry client's retries, the
  JVM writer, ...) as ``event`` ``log`` with ``logger`` and ``message``, and the ``batch_id`` of the batch that was
  running when they were logged (:data:`CURRENT_BATCH`, set by the job around each batch).

>>> import io
>>> out = io.StringIO()
>>> from avro_registry_sink.ops.progress import BatchReport, JobTotals
>>> JsonLogs(out).batch(BatchReport(batch_id=4, rows=3, per_table={"shop.orders": 3}), JobTotals())
>>> [json.loads(line)["event"] for line in out.getvalue().splitlines()]
['batch', 'table']
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import IO, Any

from avro_registry_sink.ops.progress import BatchReport, JobTotals, JsonLogProgress
from avro_registry_sink.redact import redact_text

__all__ = ["CURRENT_BATCH", "LOG_FORMATS", "JsonLogFormatter", "JsonLogs", "json_logging"]

#: ``--log-format``: the progress display or JSON lines (``text``), or JSON lines with tables and log records.
LOG_FORMATS = ("text", "json")
#: The id of the micro-batch running in this thread (``None``: none), set by the job around each batch.
CURRENT_BATCH: ContextVar[int | None] = ContextVar("avro_sink_batch", default=None)
#: The logger whose records ``--log-format json`` writes (the product's modules log under it).
LOGGER = "avro_registry_sink"


class JsonLogs(JsonLogProgress):
    """:class:`JsonLogProgress` with a ``level`` on every line and a ``table`` line per table of each batch."""

    def _emit(self, event: str, **fields: Any) -> None:
        super()._emit(event, **{"level": fields.pop("level", "info"), **fields})

    def batch(self, report: BatchReport, totals: JobTotals) -> None:
        super().batch(report, totals)
        for table, rows in sorted(report.per_table.items()):
            self._emit("table", batch_id=report.batch_id, table=table, rows=rows)

    def finish(self, totals: JobTotals, error: BaseException | None = None) -> None:
        if error is None:
            super().finish(totals)
            return
        fields = totals.to_json()
        fields["error"] = redact_text(" ".join(str(error).split()))
        self._emit("finish", level="error", status="failed", error_class=type(error).__name__,
                   batch_id=getattr(error, "batch", None), **fields)


class JsonLogFormatter(logging.Formatter):
    """A log record as one JSON line: ``ts``, ``level``, ``event`` ``log``, ``logger``, ``message``, ``batch_id``
    (the record's ``batch_id`` extra, else :data:`CURRENT_BATCH`) and ``table`` (the record's extra, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        batch = getattr(record, "batch_id", None)
        out: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(), "event": "log",
                               "logger": record.name, "message": redact_text(record.getMessage()),
                               "batch_id": batch if batch is not None else CURRENT_BATCH.get()}
        table = getattr(record, "table", None)
        if table is not None:
            out["table"] = table
        if record.exc_info and record.exc_info[1] is not None:
            out["error_class"] = type(record.exc_info[1]).__name__
        return json.dumps(out, default=str, ensure_ascii=False)


@contextlib.contextmanager
def json_logging(stream: IO[str] | None = None, level: int = logging.INFO) -> Iterator[JsonLogs]:
    """The product's log records as JSON lines on ``stream`` (stderr) while the block runs; yields the progress
    reporter that writes the other lines to the same stream."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    logger = logging.getLogger(LOGGER)
    before = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False  # the CLI keeps the root logger quiet (Spark's, py4j's records)
    try:
        yield JsonLogs(stream)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before[0])
        logger.propagate = before[1]
