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
committed: its files are newer and ignored). The backlog is the input that no committed batch took, measured now
against the source (``job.json``'s, or the ``source`` given): a storage tree's data files (and bytes) per table
that the last committed batch's offset (``spark/offsets/<batch>``) does not cover, a Kafka source's end offsets
minus that offset per partition. The verdict: ``failed`` when the last error is newer than the last commit (or
the path is no checkpoint), ``behind`` when a table's lag is over ``max_lag`` or a table's (storage) or topic's
(Kafka) backlog over ``max_backlog``, else ``healthy``. A backlog that cannot be measured (a broker or store that
does not answer) says why and leaves the verdict as it is, as a table without a commit ts does.

>>> # report = read_status("ck", max_lag=600); report.verdict, report.to_json()["tables"], report.backlog
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from avro_registry_sink.errors import AvroSinkError, ConfigError
from avro_registry_sink.kafka.options import kafka_options
from avro_registry_sink.ops.checkpoint_logs import batch_source_offset, last_committed_batch
from avro_registry_sink.redact import redact_url
from avro_registry_sink.storage_fs import STORE_OF_SCHEME, StorageURI, StoreFS, parse_storage_uri

# Imported inside functions, for start-up: `status` answers in a fraction of a second; the Kafka client,
# pyarrow (through the storage offsets) and the metrics server load only when the checkpoint's source needs them.

__all__ = ["BACKLOG_TIMEOUT", "EXIT_STATUS", "JobStatus", "input_backlog", "read_status"]

#: The exit status of each verdict (``status``'s, for scripts and liveness probes).
EXIT_STATUS = {"healthy": 0, "behind": 1, "failed": 2}
#: Seconds a Kafka source's brokers have to answer each request for the backlog.
BACKLOG_TIMEOUT = 5.0
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
    #: the input no committed batch took (:func:`input_backlog`); ``None``: not asked (``backlog=False``)
    backlog: dict[str, Any] | None = None

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.verdict]

    def to_json(self) -> dict[str, Any]:
        return {"status": self.verdict, "reasons": list(self.reasons), "checkpoint": self.checkpoint,
                "source": self.source, "last_batch": self.last_batch, "last_batch_time": self.last_batch_time,
                "last_commit_time": self.last_commit_time, "rows": self.rows,
                "tables": dict(sorted(self.tables.items())), "dead_lettered": self.dead_lettered,
                "dead_letters_pending": self.dead_letters_pending, "held_files": list(self.held_files),
                "last_error": self.last_error, "exactly_once": self.exactly_once, "backlog": self.backlog}


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


def _parse_source(text: str) -> tuple[str, Any]:
    """A ``--source`` as the backlog needs it, without the Spark wing's parser (which loads Spark): ``("storage",
    StorageURI)``, ``("kafka", (brokers, topics, KafkaOptions))`` or ``("files", None)`` (changelog files)."""
    if "://" not in text:
        return "storage", parse_storage_uri(text, option="source", allowed=frozenset({"pathGlobFilter"}))
    split = urlsplit(text)
    scheme = split.scheme.lower()
    if scheme in ("storage", "local"):  # this project's (and TiCDC's local) spelling of a directory
        query = f"?{split.query}" if split.query else ""
        return "storage", parse_storage_uri(f"file://{unquote(split.netloc + split.path)}{query}", option="source",
                                            allowed=frozenset({"pathGlobFilter"}))
    if scheme in STORE_OF_SCHEME:
        return "storage", parse_storage_uri(text, option="source", allowed=frozenset({"pathGlobFilter"}))
    from avro_registry_sink.formats import FORMATS  # the formats' modules only for a changelog source

    kind, _, transport = scheme.partition("+")
    if kind not in FORMATS or not FORMATS[kind].is_changelog or not transport:
        raise ConfigError(f"Invalid source {redact_url(text)!r}: expected a storage tree (a path, storage:///dir, "
                          "s3://bucket/prefix, ...), canal-json+kafka://host:port/topic or "
                          "debezium-json+kafka://host:port/topic (or a changelog directory).",
                          option="source", value=redact_url(text))
    if transport != "kafka":
        return "files", None
    params = dict(parse_qsl(split.query, keep_blank_values=True))
    brokers = tuple(b for b in split.netloc.rpartition("@")[2].split(",") if b)
    topics = tuple(t for t in unquote(split.path.lstrip("/")).split(",") if t)
    return "kafka", (brokers, topics, kafka_options(params))


def _storage_backlog(location: StorageURI, committed: Any) -> dict[str, Any]:
    # the storage tree's modules load the input formats (0.3-0.5 s): only a storage source's status needs them
    from avro_registry_sink.sources.storage import StorageLayout
    from avro_registry_sink.sources.storage_offsets import list_tree, pending_files

    if location.is_local and not Path(location.path).is_dir():
        return {"unknown": f"the source directory {location.path!r} does not exist (or is no directory)"}
    pending = pending_files(committed, list_tree(StorageLayout(location)))
    tables = {table: {"files": files, "bytes": size} for table, (files, size) in sorted(pending.items())}
    return {"files": sum(t["files"] for t in tables.values()), "bytes": sum(t["bytes"] for t in tables.values()),
            "tables": tables}


def _kafka_backlog(brokers: tuple[str, ...], topics: tuple[str, ...], opts: Any, committed: Any,
                   timeout: float) -> dict[str, Any]:
    from confluent_kafka import Consumer, KafkaException

    from avro_registry_sink.kafka.client import client_conf, explain
    from avro_registry_sink.ops.metrics import watermarks

    where = ",".join(brokers)
    conf = {**client_conf(where, opts, "consumer"), "group.id": "avro-registry-sink-status",
            "enable.auto.commit": False}
    consumer = Consumer(conf)
    try:
        marks = watermarks(consumer, topics, timeout)
    except KafkaException as exc:
        error: Any = exc.args[0] if exc.args else None
        name, text = (error.name(), error.str()) if hasattr(error, "name") else ("", str(exc))
        return {"unknown": f"{explain(name, text, where, opts)} (each request given {timeout:g} s)"}
    finally:
        consumer.close()
    done = committed if isinstance(committed, dict) else {}
    out: dict[str, Any] = {}
    for topic in topics:
        parts = {p: (low, high) for (t, p), (low, high) in marks.items() if t == topic}
        if not parts:
            out[topic] = {"messages": None, "unknown": f"the cluster at {where} does not list topic {topic!r}"}
            continue
        partitions = {}
        for partition, (low, high) in sorted(parts.items()):
            taken = (done.get(topic) or {}).get(str(partition))
            # before the first committed batch (or a partition added since): from the partition's first offset
            start = low if taken is None else max(low, int(taken))
            partitions[str(partition)] = max(0, high - start)
        out[topic] = {"messages": sum(partitions.values()), "partitions": partitions}
    return {"messages": sum(t["messages"] or 0 for t in out.values()), "topics": out}


def input_backlog(source: str, committed: Any, *, timeout: float = BACKLOG_TIMEOUT) -> dict[str, Any]:
    """The input of ``source`` (a ``--source`` URI) that the offset ``committed`` (the source's offset of the last
    committed batch, as Spark's offset log holds it; ``None``: no batch committed) does not cover, measured now:

    * a storage tree: ``{"kind": "storage", "files", "bytes", "tables": {table: {"files", "bytes"}}}``, the data
      files above each data directory's highest number taken and gap files that appeared since (the metrics'
      :func:`~avro_registry_sink.sources.storage_offsets.pending_files`); held files were taken;
    * Kafka topics: ``{"kind": "kafka", "messages", "topics": {topic: {"messages", "partitions": {partition:
      messages}}}}``, each partition's end offset less the committed offset (none: its first offset);
    * ``"unknown"``: why it could not be measured (a broker or store that does not answer, changelog files)."""
    kind, where = _parse_source(source)
    head: dict[str, Any] = {"kind": kind, "source": str(where) if kind == "storage" else redact_url(source)}
    if kind == "files":
        return {**head, "unknown": "not measured for changelog files (only storage trees and Kafka topics)"}
    try:
        if kind == "storage":
            return {**head, **_storage_backlog(where, committed)}
        brokers, topics, opts = where
        return {**head, **_kafka_backlog(brokers, topics, opts, committed, timeout)}
    except (AvroSinkError, OSError, ValueError) as exc:
        return {**head, "unknown": " ".join(str(exc).split())}


def _read_backlog(store: StoreFS, status: JobStatus, source: str | None, timeout: float) -> dict[str, Any]:
    """The backlog of ``status``'s job: from ``source`` (``--source``), else the source ``job.json`` records."""
    text = source or status.source
    if not text:
        return {"unknown": "the checkpoint's job.json records no source: give the run's --source"}
    if source is None and "***" in text:
        return {"source": text, "unknown": "job.json records the source without its credentials (***): give the "
                                           "run's --source"}
    try:
        committed = None if status.last_batch is None else batch_source_offset(store, status.last_batch)
    except (OSError, ValueError) as exc:
        return {"source": redact_url(text), "unknown": f"the last committed batch's offsets (spark/offsets/"
                                                       f"{status.last_batch}) cannot be read: {' '.join(str(exc).split())}"}
    try:
        return input_backlog(text, committed, timeout=timeout)
    except ConfigError as exc:
        if source is not None:  # the --source given is wrong: the caller's error
            raise
        return {"source": text, "unknown": f"job.json's source cannot be read ({exc}): give the run's --source"}


def read_status(checkpoint: str | Path, *, max_lag: float | None = None, max_backlog: int | None = None,
                source: str | None = None, backlog: bool = True, timeout: float = BACKLOG_TIMEOUT,
                now: float | None = None) -> JobStatus:
    """The status of the job of ``checkpoint`` (a directory or a storage URI; see the module docs).

    ``max_lag`` (seconds): a table whose newest delivered commit ts (exactly once: its resolved ts) is older makes
    the job ``behind``; so does a table (storage tree: data files) or topic (Kafka: messages) whose backlog is over
    ``max_backlog``. ``backlog``: measure the backlog (:func:`input_backlog`) against ``source`` (a ``--source`` URI;
    default: the one ``job.json`` records), each Kafka request bounded by ``timeout`` seconds. A checkpoint error
    (unreadable, damaged) makes it ``failed`` with the reason."""
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
        last = last_committed_batch(store)
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
    if backlog:
        status.backlog = _read_backlog(store, status, source, timeout)
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
    if max_backlog is not None and status.backlog is not None:
        for table, entry in status.backlog.get("tables", {}).items():
            if entry["files"] > max_backlog:
                status.verdict = "behind"
                status.reasons.append(f"table {table} has {entry['files']} data files no committed batch took "
                                      f"(over --max-backlog {max_backlog})")
        for topic, entry in status.backlog.get("topics", {}).items():
            if (entry.get("messages") or 0) > max_backlog:
                status.verdict = "behind"
                status.reasons.append(f"topic {topic} has {entry['messages']} messages past the last committed batch "
                                      f"(over --max-backlog {max_backlog})")
    return status
