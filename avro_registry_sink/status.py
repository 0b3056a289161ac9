"""``status``: what a running or stopped job has delivered, read from its checkpoint alone (no Spark, no broker).

::

    <checkpoint>/job.json                   the source the checkpoint belongs to
    <checkpoint>/spark/commits/<id>         the batches Spark committed (the newest is the last committed batch)
    <checkpoint>/spark/offsets/<id>         each batch's trigger time (batchTimestampMs)
    <checkpoint>/state/progress/<id>.json   per table rows and newest commit ts, resolved ts (exactly once)
    <checkpoint>/state/held/<id>.json       storage data files held (no usable schema file yet)
    <checkpoint>/dead-letter/               dead-lettered rows; those no replay delivered are pending
    <checkpoint>/delivery.json              exactly once: the query id and the writer ids (commit tokens' owners)
    <checkpoint>/last-error.json            a failed run's error

Side state is read as of the last committed batch (a batch that failed after writing its state is not
committed: its files are newer and ignored). The verdict: ``failed`` when the last error is newer than the last
commit (or the path is no checkpoint), ``behind`` when a table's lag is over ``max_lag``, else ``healthy``.

>>> # report = read_status("ck", max_lag=600); report.verdict, report.to_json()["tables"]
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from avro_registry_sink.storage_fs import StoreFS, parse_storage_uri

__all__ = ["EXIT_STATUS", "JobStatus", "read_status"]

#: The exit status of each verdict (``status``'s, for scripts and liveness probes).
EXIT_STATUS = {"healthy": 0, "behind": 1, "failed": 2}
_BATCH_FILE = re.compile(r"\d+")
_STATE_FILE = re.compile(r"(\d{10})\.json")


def _lag(commit_ts: int | None, now: float) -> float | None:
    return None if not commit_ts else round(max(0.0, now - (int(commit_ts) >> 18) / 1000.0), 3)


@dataclass
class JobStatus:
    """What :func:`read_status` found; :meth:`to_json` is ``status --json``'s output."""

    checkpoint: str
    verdict: str = "healthy"
    reasons: list[str] = field(default_factory=list)
    source: str | None = None
    last_batch: int | None = None
    last_batch_time: float | None = None  # when the last committed batch was triggered (Unix seconds)
    last_commit_time: float | None = None  # when its side state was written (Unix seconds)
    rows: int = 0
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    dead_lettered: int = 0
    dead_letters_pending: int = 0
    held_files: list[str] = field(default_factory=list)
    last_error: dict[str, Any] | None = None
    exactly_once: dict[str, Any] | None = None

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.verdict]

    def to_json(self) -> dict[str, Any]:
        return {"status": self.verdict, "reasons": list(self.reasons), "checkpoint": self.checkpoint,
                "source": self.source, "last_batch": self.last_batch, "last_batch_time": self.last_batch_time,
                "last_commit_time": self.last_commit_time, "rows": self.rows,
                "tables": dict(sorted(self.tables.items())), "dead_lettered": self.dead_lettered,
                "dead_letters_pending": self.dead_letters_pending, "held_files": list(self.held_files),
                "last_error": self.last_error, "exactly_once": self.exactly_once}


def _newest_id(store: StoreFS, directory: str, pattern: re.Pattern[str], below: int | None = None) -> int | None:
    """The highest batch id of the files of ``directory`` (``below``: lower than it); one listing."""
    best = None
    for relpath in store.list_files(directory):
        m = pattern.fullmatch(relpath.rpartition("/")[2])
        if m:
            batch = int(m.group(1) if m.groups() else m.group(0))
            if (below is None or batch < below) and (best is None or batch > best):
                best = batch
    return best


def _side(store: StoreFS, name: str, last: int | None) -> Any:
    """The side state ``name`` as the committed batches left it (the newest file at or before ``last``)."""
    if last is None:
        return None
    found = _newest_id(store, f"state/{name}", _STATE_FILE, below=last + 1)
    return None if found is None else json.loads(store.read_text(f"state/{name}/{found:010d}.json"))


def _pending_dead_letters(checkpoint: str) -> tuple[int, int]:
    """(rows dead-lettered by the job's batches, records no replay delivered yet) of a local checkpoint: what
    :func:`avro_registry_sink.spark.audit.replay.pending_records` counts (the newest record per ``id``, less the ids of
    ``replayed/replay-*.json``), read here without importing Spark (a test checks that both agree)."""
    directory = Path(checkpoint) / "dead-letter"
    if not directory.is_dir():
        return 0, 0
    delivered: set[str] = set()
    for marker in sorted((directory / "replayed").glob("replay-*.json")):
        delivered.update(json.loads(marker.read_text(encoding="utf-8")).get("delivered") or ())
    total, ids = 0, set()
    for path in sorted(directory.glob("batch-*.jsonl")) + sorted(directory.glob("replay-*.jsonl")):
        from_batch = path.name.startswith("batch-")
        for line in path.read_bytes().splitlines():
            if not line.strip():
                continue
            total += from_batch
            record = json.loads(line)
            if record.get("id") and record["id"] not in delivered:
                ids.add(record["id"])
    return total, len(ids)


def read_status(checkpoint: str | Path, *, max_lag: float | None = None, now: float | None = None) -> JobStatus:
    """The status of the job of ``checkpoint`` (a directory or a storage URI; see the module docs).

    ``max_lag`` (seconds): a table whose newest delivered commit ts (exactly once: its resolved ts) is older makes
    the job ``behind``. A checkpoint error (unreadable, damaged) makes it ``failed`` with the reason."""
    now = time.time() if now is None else now
    uri = parse_storage_uri(str(checkpoint), option="checkpoint")
    status = JobStatus(checkpoint=str(checkpoint))
    store = StoreFS(uri, option="checkpoint")
    if not store.exists("job.json"):
        status.verdict = "failed"
        status.reasons.append(f"{str(checkpoint)!r} is not a job's checkpoint (no job.json): give the --checkpoint "
                              "of a run.")
        return status
    try:
        status.source = json.loads(store.read_text("job.json")).get("source")
        last = _newest_id(store, "spark/commits", _BATCH_FILE)
        status.last_batch = last
        if last is not None and store.exists(f"spark/offsets/{last}"):
            lines = store.read_text(f"spark/offsets/{last}").splitlines()
            if len(lines) > 1 and lines[1].startswith("{"):
                status.last_batch_time = json.loads(lines[1]).get("batchTimestampMs", 0) / 1000.0 or None
        progress = _side(store, "progress", last) or {}
        status.last_commit_time = progress.get("time")
        status.rows = int(progress.get("rows", 0))
        resolved = progress.get("resolved_ts") or {}
        for table, entry in sorted(progress.get("tables", {}).items()):
            newest = int(entry.get("newest_commit_ts", 0))
            status.tables[table] = {"rows": int(entry.get("rows", 0)), "newest_commit_ts": newest or None,
                                    "lag_seconds": _lag(newest, now)}
        for table, ts in sorted(resolved.items()):
            status.tables.setdefault(table, {"rows": 0, "newest_commit_ts": None, "lag_seconds": None}).update(
                resolved_ts=ts, resolved_lag_seconds=_lag(ts, now))
        held = _side(store, "held", last) or {}
        status.held_files = sorted(held.get("held", {}))
        if uri.is_local:
            status.dead_lettered, status.dead_letters_pending = _pending_dead_letters(uri.path)
        else:
            status.dead_lettered = int(progress.get("dead_lettered", 0))
        if store.exists("delivery.json"):
            delivery = json.loads(store.read_text("delivery.json"))
            status.exactly_once = {"query": delivery.get("query"), "writers": delivery.get("writers", {})}
        if store.exists("last-error.json"):
            status.last_error = json.loads(store.read_text("last-error.json"))
    except (OSError, ValueError) as exc:
        status.verdict = "failed"
        status.reasons.append(f"checkpoint {str(checkpoint)!r} could not be read: {' '.join(str(exc).split())}")
        return status
    except Exception as exc:  # noqa: BLE001 - a CheckpointError (damaged dead letters), named as it is
        status.verdict = "failed"
        status.reasons.append(" ".join(str(exc).split()))
        return status
    error = status.last_error
    if error is not None and (status.last_commit_time is None or float(error.get("time", 0)) > status.last_commit_time):
        status.verdict = "failed"
        status.reasons.append(f"the last run failed in batch {error.get('batch')}: {error.get('error_class')}: "
                              f"{error.get('message')}")
        return status
    if max_lag is not None:
        for table, entry in status.tables.items():
            lag = entry.get("resolved_lag_seconds", entry.get("lag_seconds"))
            if lag is not None and lag > max_lag:
                status.verdict = "behind"
                status.reasons.append(f"table {table} is {lag:.0f} s behind its source (over --max-lag {max_lag:g} s)")
    return status
