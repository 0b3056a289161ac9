"""Progress of a running job: a live display on a terminal, JSON log lines otherwise.

The job calls a :class:`ProgressReporter` on the driver: ``start`` once, ``batch`` after every
committed micro-batch with a :class:`BatchReport`, ``finish`` at the end (and ``stopping``, when the reporter has
it, as soon as SIGINT or SIGTERM asks the job to stop). :class:`JobTotals` accumulates the reports (rows per table
and topic, tombstones, bad input, the schema versions registered, the newest commit ts; ``stop``: how a stop by a
signal ended, see :func:`stop_sentence`) and is what the CLI prints at the end.

* :class:`RichProgress` - a ``rich`` live table: rows/s, per-table rows, schema versions registered,
  lag (now minus the physical time of the newest row's commit ts).
* :class:`JsonLogProgress` - one JSON object per line (``event`` = ``start`` | ``batch`` | ``finish``).
* :func:`make_progress` picks one: rich when the stream is a TTY, JSON otherwise.

>>> totals = JobTotals()
>>> totals.add(BatchReport(batch_id=0, rows=3, tombstones=1, per_table={"shop.orders": 3}))
>>> totals.rows, totals.per_table["shop.orders"]
(3, 3)
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Protocol

from avro_registry_sink.redact import redact_mapping, redact_text

__all__ = [
    "BatchReport",
    "JobTotals",
    "JsonLogProgress",
    "NullProgress",
    "ProgressReporter",
    "RichProgress",
    "SchemaVersion",
    "lag_seconds",
    "make_progress",
    "stop_sentence",
]


def lag_seconds(commit_ts: int | None, now: float | None = None) -> float | None:
    """Seconds between now and the physical time of a TiDB commit ts (``None`` when unknown).

    >>> lag_seconds(1000 << 18, now=3.5)
    2.5
    """
    if not commit_ts:
        return None
    now = time.time() if now is None else now
    return max(0.0, now - (commit_ts >> 18) / 1000.0)


@dataclass(frozen=True)
class SchemaVersion:
    """A schema the job registered (or found registered) for a subject."""

    subject: str
    schema_id: int
    version: int | None = None
    table: str = ""


@dataclass
class BatchReport:
    """What one micro-batch did."""

    batch_id: int
    inputs: int = 0  # files or messages read
    rows: int = 0  # Kafka records written (tombstones included)
    tombstones: int = 0
    errors: int = 0  # bad lines/messages, sent to the dead-letter file
    per_table: dict[str, int] = field(default_factory=dict)
    per_topic: dict[str, int] = field(default_factory=dict)
    tombstones_per_topic: dict[str, int] = field(default_factory=dict)
    new_schemas: list[SchemaVersion] = field(default_factory=list)
    max_commit_ts: int = 0
    seconds: float = 0.0
    dead_letter: str | None = None
    warnings: list[str] = field(default_factory=list)
    filtered: dict[str, int] = field(default_factory=dict)  # per table: inputs left out by [filter] rules
    missing_files: list[str] = field(default_factory=list)  # data files gone before they were read
    new_majors: list[dict[str, Any]] = field(default_factory=list)  # --on-incompatible new-major: NewMajor.to_json()
    #: exactly-once delivery: per table, the highest commit ts whose rows are all delivered (the control topic's)
    resolved_ts: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["new_schemas"] = [asdict(s) for s in self.new_schemas]
        if not self.resolved_ts:
            out.pop("resolved_ts")
        return out


@dataclass
class JobTotals:
    """Running totals over every committed batch."""

    started: float = field(default_factory=time.time)
    batches: int = 0
    inputs: int = 0
    rows: int = 0
    tombstones: int = 0
    errors: int = 0
    per_table: dict[str, int] = field(default_factory=dict)
    per_topic: dict[str, int] = field(default_factory=dict)
    tombstones_per_topic: dict[str, int] = field(default_factory=dict)
    schemas: list[SchemaVersion] = field(default_factory=list)
    max_commit_ts: int = 0
    last_batch_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    filtered: dict[str, int] = field(default_factory=dict)  # per table: files/messages left out by [filter] rules
    dead_letter_files: list[str] = field(default_factory=list)
    missing_files: list[str] = field(default_factory=list)  # data files gone before they were read
    new_majors: list[dict[str, Any]] = field(default_factory=list)  # breaking changes registered as new majors
    resolved_ts: dict[str, int] = field(default_factory=dict)  # exactly once: after the last batch
    #: a stop by SIGINT or SIGTERM: signal, exit_status, outcome (between-batches, finished, abandoned), batch,
    #: batch_inputs, stop_timeout, seconds, message (see the job's run_job)
    stop: dict[str, Any] | None = None

    def add(self, report: BatchReport) -> None:
        self.batches += 1
        self.inputs += report.inputs
        self.rows += report.rows
        self.tombstones += report.tombstones
        self.errors += report.errors
        for source, target in (
            (report.filtered, self.filtered),
            (report.per_table, self.per_table),
            (report.per_topic, self.per_topic),
            (report.tombstones_per_topic, self.tombstones_per_topic),
        ):
            for name, count in source.items():
                target[name] = target.get(name, 0) + count
        known = {(s.subject, s.schema_id) for s in self.schemas}
        self.schemas.extend(s for s in report.new_schemas if (s.subject, s.schema_id) not in known)
        self.max_commit_ts = max(self.max_commit_ts, report.max_commit_ts)
        self.last_batch_seconds = report.seconds
        self.warnings.extend(report.warnings)
        self.missing_files.extend(report.missing_files)
        self.new_majors.extend(report.new_majors)
        if report.dead_letter and report.dead_letter not in self.dead_letter_files:
            self.dead_letter_files.append(report.dead_letter)
        if report.resolved_ts:
            self.resolved_ts = dict(report.resolved_ts)

    @property
    def elapsed(self) -> float:
        return max(time.time() - self.started, 1e-9)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.elapsed

    def lag(self, now: float | None = None) -> float | None:
        return lag_seconds(self.max_commit_ts, now)

    def to_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "inputs": self.inputs,
            "rows": self.rows,
            "nothing_read": not (self.inputs or self.rows or self.errors),  # no file or message at all
            "tombstones": self.tombstones,
            "errors": self.errors,
            "dead_lettered": self.errors,
            "dead_letter_files": list(self.dead_letter_files),
            "per_table": dict(sorted(self.per_table.items())),
            "per_topic": dict(sorted(self.per_topic.items())),
            "filtered": dict(sorted(self.filtered.items())),
            "missing_files": list(self.missing_files),
            "schemas": [asdict(s) for s in self.schemas],
            "new_majors": list(self.new_majors),
            "max_commit_ts": self.max_commit_ts,
            "warnings": list(self.warnings),
            "elapsed_seconds": round(self.elapsed, 3),
            **({"resolved_ts": dict(sorted(self.resolved_ts.items()))} if self.resolved_ts else {}),
            **({"stop": dict(self.stop)} if self.stop else {}),
        }


def stop_sentence(stop: Mapping[str, Any], totals: JobTotals) -> str:
    """What a stop by a signal did, in one sentence or two: the batch it finished or abandoned, what this run
    committed, what a rerun does.

    >>> t = JobTotals(batches=2, rows=40)
    >>> print(stop_sentence({"signal": "SIGTERM", "outcome": "abandoned", "batch": 2, "batch_inputs": 3,
    ...                      "stop_timeout": 30.0, "why": "timeout"}, t).split(": nothing")[0])
    Stopped by SIGTERM: batch 2 (3 files or messages) did not finish within the stop timeout (30 s) and was abandoned
    """
    signal = stop.get("signal", "a signal")
    batch = stop.get("batch")
    inputs = stop.get("batch_inputs")
    what = f"batch {batch}" + (f" ({inputs} files or messages)" if inputs else "")
    committed = (f"This run committed {totals.batches} batch{'es' if totals.batches != 1 else ''} "
                 f"({totals.rows} rows)")
    outcome = stop.get("outcome")
    if outcome == "abandoned":
        why = ("at the second signal" if stop.get("why") == "second signal"
               else f"did not finish within the stop timeout ({stop.get('stop_timeout', 0):g} s) and")
        return (f"Stopped by {signal}: {what} {why} was abandoned: nothing of it is committed (exactly once: its "
                f"open transactions aborted), and a rerun with the same checkpoint processes it again. {committed}.")
    if outcome == "finished":
        return (f"Stopped by {signal}: {what} finished {stop.get('seconds', 0):g} s after the signal (stop timeout "
                f"{stop.get('stop_timeout', 0):g} s) and was committed; no further batch was started. {committed}; "
                "a rerun with the same checkpoint reads what is left.")
    return (f"Stopped by {signal} between batches: nothing was being processed. {committed}; a rerun with the same "
            "checkpoint reads what is left.")


class ProgressReporter(Protocol):
    """Called on the driver by the job."""

    def start(self, info: Mapping[str, Any]) -> None: ...

    def batch(self, report: BatchReport, totals: JobTotals) -> None: ...

    def finish(self, totals: JobTotals, error: BaseException | None = None) -> None: ...


class NullProgress:
    """Reports nothing (library use, tests)."""

    def start(self, info: Mapping[str, Any]) -> None:
        pass

    def batch(self, report: BatchReport, totals: JobTotals) -> None:
        pass

    def finish(self, totals: JobTotals, error: BaseException | None = None) -> None:
        pass

    def stopping(self, info: Mapping[str, Any]) -> None:
        pass


class JsonLogProgress:
    """Structured logs: one JSON object per line on ``stream`` (stderr by default).

    >>> import io
    >>> out = io.StringIO(); log = JsonLogProgress(out)
    >>> log.batch(BatchReport(batch_id=0, rows=2), JobTotals())
    >>> json.loads(out.getvalue())["event"]
    'batch'
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def _emit(self, event: str, **fields: Any) -> None:
        record = {"ts": round(time.time(), 3), "event": event, **fields}
        line = json.dumps(record, default=str, ensure_ascii=False)
        with self._lock:
            stream = self._stream or sys.stderr
            stream.write(line + "\n")
            stream.flush()

    def start(self, info: Mapping[str, Any]) -> None:
        self._emit("start", **redact_mapping(dict(info)))

    def batch(self, report: BatchReport, totals: JobTotals) -> None:
        lag = totals.lag()
        self._emit(
            "batch",
            **report.to_json(),
            total_rows=totals.rows,
            rows_per_second=round(totals.rows_per_second, 1),
            lag_seconds=None if lag is None else round(lag, 3),
        )

    def finish(self, totals: JobTotals, error: BaseException | None = None) -> None:
        fields = totals.to_json()
        if error is not None:
            fields["error"] = redact_text(" ".join(str(error).split()))
        self._emit("finish", status="failed" if error is not None else "stopped" if totals.stop else "ok", **fields)

    def stopping(self, info: Mapping[str, Any]) -> None:
        """A stop was asked for (SIGINT or SIGTERM): what the job does now."""
        self._emit("stopping", **info)


def _format_lag(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


class RichProgress:
    """A live table on a terminal: per-table rows, rows/s, schema versions registered, lag."""

    def __init__(self, console: Any = None, *, title: str = "avro-registry-sink") -> None:
        from rich.console import Console

        self._console = console or Console(stderr=False)
        self._title = title
        self._totals = JobTotals()
        self._info: dict[str, Any] = {}
        self._live: Any = None
        self._lock = threading.Lock()

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            totals = self._totals
            header = Text.assemble(
                (f"{self._title}  ", "bold"),
                (f"{self._info.get('source', '')} -> {self._info.get('sink', '')}", "dim"),
            )
            stats = Text(
                f"batches {totals.batches}   rows {totals.rows}   {totals.rows_per_second:,.0f} rows/s   "
                f"tombstones {totals.tombstones}   dead-lettered {totals.errors}   "
                f"schema versions {len(totals.schemas)}   lag {_format_lag(totals.lag())}"
            )
            grid = Table(show_edge=False, expand=False)
            grid.add_column("table")
            grid.add_column("rows", justify="right")
            if totals.resolved_ts:  # exactly once: every row up to this commit ts is delivered
                grid.add_column("resolved ts (lag)", justify="right")
            grid.add_column("schemas registered")
            by_table: dict[str, list[str]] = {}
            for schema in totals.schemas:
                by_table.setdefault(schema.table, []).append(
                    f"{schema.subject} v{schema.version if schema.version is not None else '?'} (id {schema.schema_id})"
                )
            for name in sorted(set(totals.per_table) | set(by_table)):
                resolved = totals.resolved_ts.get(name)
                shown = ([f"{resolved} ({_format_lag(lag_seconds(resolved))})" if resolved else "-"]
                         if totals.resolved_ts else [])
                grid.add_row(name, str(totals.per_table.get(name, 0)), *shown, ", ".join(by_table.get(name, [])))
            return Group(header, stats, grid)

    def start(self, info: Mapping[str, Any]) -> None:
        from rich.live import Live

        self._info = redact_mapping(dict(info))
        self._totals = JobTotals()
        self._live = Live(self, console=self._console, refresh_per_second=4, transient=False)
        self._live.start()

    def batch(self, report: BatchReport, totals: JobTotals) -> None:
        with self._lock:
            self._totals = totals
        if self._live is not None:
            self._live.refresh()

    def finish(self, totals: JobTotals, error: BaseException | None = None) -> None:
        with self._lock:
            self._totals = totals
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None
        if error is not None:
            self._console.print(f"[red]job failed:[/red] {redact_text(' '.join(str(error).split()))}")

    def stopping(self, info: Mapping[str, Any]) -> None:
        """A stop was asked for (SIGINT or SIGTERM): what the job does now, under the live table."""
        self._console.print(f"[yellow]{info.get('signal')}[/yellow]: {info.get('message')}", highlight=False)


def make_progress(mode: str = "auto", stream: IO[str] | None = None) -> ProgressReporter:
    """``auto`` (rich on a TTY, JSON lines otherwise), ``rich``, ``json`` or ``none``."""
    if mode not in ("auto", "rich", "json", "none"):
        raise ValueError(f"Invalid progress mode {mode!r}: valid values are auto, rich, json or none.")
    if mode == "none":
        return NullProgress()
    if mode == "auto":
        target = stream or sys.stdout
        mode = "rich" if getattr(target, "isatty", lambda: False)() else "json"
    if mode == "rich":
        from rich.console import Console

        return RichProgress(Console(file=stream) if stream is not None else None)
    return JsonLogProgress(stream)
