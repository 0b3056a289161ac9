"""The job's Prometheus metrics, served on the driver (``run --metrics-port``).

The job calls a :class:`JobMetrics` on the driver: :meth:`~JobMetrics.start` once, :meth:`~JobMetrics.batch_started`
when a micro-batch begins, :meth:`~JobMetrics.batch` after it is committed (with the numbers its tally and
report hold: executor-side counts reach the driver through the batch's Spark accumulator, never through
another channel), :meth:`~JobMetrics.batch_failed` and :meth:`~JobMetrics.finish`. The registry client reports
each request to :meth:`~JobMetrics.registry_request` (its ``observer``). Every metric lives in the instance's own
:class:`~prometheus_client.CollectorRegistry`, never in prometheus_client's global one, so that two jobs in one
process (tests, notebooks) do not share counts. Lags are computed when Prometheus scrapes, from the timestamps the
batches left. Labels are bounded: ``table``, ``topic``, ``op``, ``phase`` (and the last error's class, one of this
product's exception names). docs/operations.md lists every metric.

>>> metrics = JobMetrics()
>>> metrics.registry_request("register", 0.01)
>>> b"avro_sink_registry_requests_total" in metrics.exposition()
True
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:  # pragma: no cover
    from avro_registry_sink.ops.progress import BatchReport

__all__ = ["JOB_STATES", "NAMESPACE", "JobMetrics", "KafkaEndOffsets", "MetricsServer", "StorageBacklog",
           "commit_ts_seconds", "interval_seconds", "serve_metrics", "storage_refresh_seconds", "watermarks"]

NAMESPACE = "avro_sink"

#: ``avro_sink_job_state``'s values (TiCDC's ``ticdc_owner_status`` is a number too: one series, no state label).
JOB_STATES = {"waiting": 0, "running": 1, "failed": 2, "stopped": 3}

#: Batch and phase durations: a micro-batch takes from tens of milliseconds (a few rows) to minutes (a backlog).
_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: The registry client's operations the job sends (their error counters are exported at 0 from the start).
_REGISTRY_OPS = ("get_latest_with_metadata", "get_schema", "get_version", "get_versions", "lookup", "register")
_REGISTRY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def commit_ts_seconds(commit_ts: int) -> float:
    """The physical time (Unix seconds) of a TiDB commit ts (TSO: physical milliseconds << 18 | logical).

    >>> commit_ts_seconds(1_700_000_000_000 << 18)
    1700000000.0
    """
    return (int(commit_ts) >> 18) / 1000.0


_UNIT_SECONDS = {"millisecond": 0.001, "second": 1.0, "minute": 60.0, "hour": 3600.0, "day": 86400.0}


def interval_seconds(interval: str) -> float:
    """Seconds of a trigger interval as :func:`~avro_registry_sink.settings.config.parse_trigger_interval` returns it.

    >>> interval_seconds("10 seconds"), interval_seconds("500 milliseconds"), interval_seconds("1 hour")
    (10.0, 0.5, 3600.0)
    """
    number, _, unit = interval.strip().partition(" ")
    return float(number) * _UNIT_SECONDS[unit.strip().lower().rstrip("s")]


def _table_of(record: Mapping[str, Any]) -> str:
    """``schema.table`` of a dead-letter record, or ``""`` when its input named none (an unparsable line)."""
    schema, table = record.get("schema"), record.get("table")
    if table and schema:
        return f"{schema}.{table}"
    return str(table or "")


class _LagCollector:
    """Lags computed at scrape time: now minus the timestamps the committed batches left."""

    def __init__(self, metrics: JobMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = self._metrics.clock()
        with self._metrics.lock:
            resolved = dict(self._metrics.resolved_ts)
            newest = self._metrics.newest_commit_ts
            newest_per_topic = dict(self._metrics.newest_per_topic)
        lag = GaugeMetricFamily(f"{NAMESPACE}_commit_ts_lag_seconds",
                                "Now minus the physical time of the newest commit ts delivered (any table).")
        if newest:
            lag.add_metric([], max(0.0, now - commit_ts_seconds(newest)))
        yield lag
        per_topic = GaugeMetricFamily(f"{NAMESPACE}_topic_commit_ts_lag_seconds",
                                      "Now minus the physical time of the newest commit ts delivered to a topic.",
                                      labels=["topic"])
        for topic, ts in sorted(newest_per_topic.items()):
            per_topic.add_metric([topic], max(0.0, now - commit_ts_seconds(ts)))
        yield per_topic
        resolved_lag = GaugeMetricFamily(f"{NAMESPACE}_resolved_ts_lag_seconds",
                                         "Exactly once: now minus the physical time of a table's resolved ts "
                                         "(every row up to it is delivered).", labels=["table"])
        for table, ts in sorted(resolved.items()):
            if ts:
                resolved_lag.add_metric([table], max(0.0, now - commit_ts_seconds(ts)))
        yield resolved_lag


def watermarks(consumer: Any, topics: Iterable[str], timeout: float) -> dict[tuple[str, int], tuple[int, int]]:
    """``{(topic, partition): (low, high)}``: the first and the end offset of every partition of ``topics`` that the
    cluster lists, through a confluent-kafka ``consumer`` (one metadata request, one watermark request a partition,
    each bounded by ``timeout`` seconds; a broker that does not answer raises ``KafkaException``). A topic the
    cluster does not list has no entry."""
    from confluent_kafka import TopicPartition

    meta = consumer.list_topics(timeout=timeout)
    out = {}
    for topic in topics:
        found = meta.topics.get(topic)
        for partition in sorted(found.partitions if found is not None else ()):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
            out[(topic, partition)] = (int(low), int(high))
    return out


class _OnDemand:
    """A value that a daemon thread takes again when a scrape wants it and the last one is ``refresh`` seconds old
    or older: nothing is asked of the broker or the store while nothing scrapes, and at most once every
    ``refresh`` seconds however often something does (a thread listing the input every second whether scraped or
    not cost the driver a second core's share for nothing between Prometheus's scrapes). A scrape that finds the
    last value too old waits for the new one at most ``wait`` seconds and then reads the last one: a slow broker or
    store never makes a scrape time out (every series of the job would vanish). The thread starts at the first
    scrape."""

    _thread_name = "metrics-refresh"

    def __init__(self, *, refresh: float, wait: float, join: float) -> None:
        self._refresh, self._wait, self._join = refresh, wait, join
        self._cond = threading.Condition()
        self._value: Any = None
        self._error: BaseException | None = None
        self._taken: float | None = None  # when the last refresh started (time.monotonic)
        self._done = 0  # refreshes finished
        self._wanted = self._busy = self._closed = False
        self._thread: threading.Thread | None = None

    def _take(self) -> Any:
        """The value now (in the thread; raises when the broker or store does not answer)."""
        raise NotImplementedError

    def _release(self) -> None:
        """Free what :meth:`_take` opened (in the thread, when it ends)."""

    def _fresh(self) -> Any:
        """The last value taken, taken again first when it is ``refresh`` seconds old (see the class docs); raises
        the last refresh's error."""
        with self._cond:
            stale = self._taken is None or time.monotonic() - self._taken >= self._refresh
            if stale and not self._closed:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
                    self._thread.start()
                if not self._busy:  # a refresh under way is waited for, not asked for again
                    self._wanted = True
                    self._cond.notify_all()
                done = self._done
                self._cond.wait_for(lambda: self._done != done or self._closed, timeout=self._wait)
            if self._error is not None:
                raise self._error
            return self._value

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._wanted or self._closed)
                    if self._closed:
                        return
                    self._wanted, self._busy, started = False, True, time.monotonic()
                try:
                    value, error = self._take(), None
                except Exception as exc:  # noqa: BLE001 - reported by the scrapes
                    value, error = None, exc
                with self._cond:
                    if error is None:
                        self._value = value
                    self._error, self._taken, self._busy = error, started, False
                    self._done += 1
                    self._cond.notify_all()
        finally:
            self._release()

    def close(self) -> None:
        """Stop refreshing (the run ended)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(self._join)


class KafkaEndOffsets(_OnDemand):
    """The end offsets (high watermarks) of a Kafka source's partitions, asked of the broker by a daemon thread when
    a scrape wants them, at most every ``refresh`` seconds: one metadata request and one watermark request a
    partition each time, bounded by the topics' partitions (never by rows); a scrape waits for them at most
    ``wait`` seconds, then reads the last refresh (see :class:`_OnDemand`). ``conf``: confluent-kafka consumer
    settings with ``bootstrap.servers``."""

    _thread_name = "metrics-end-offsets"

    def __init__(self, topics: Iterable[str], conf: Mapping[str, Any], *, refresh: float = 1.0,
                 timeout: float = 5.0, wait: float = 1.0) -> None:
        super().__init__(refresh=refresh, wait=wait, join=timeout * 2)
        self.topics = tuple(topics)
        self._conf = {**conf, "group.id": "avro-registry-sink-metrics", "enable.auto.commit": False}
        self._timeout = timeout
        self._consumer: Any = None

    def __call__(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): end offset}`` of the last refresh (empty before the first); raises the last
        refresh's error when the broker did not answer it."""
        return dict(self._fresh() or {})

    def _take(self) -> dict[tuple[str, int], int]:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self._conf)
        return {key: high for key, (_low, high) in watermarks(self._consumer, self.topics, self._timeout).items()}

    def _release(self) -> None:
        if self._consumer is not None:
            self._consumer.close()


def storage_refresh_seconds(trigger_seconds: float) -> float:
    """How often at most a storage tree is listed for its backlog: as often as the job's own trigger lists it, at
    least every second and at most every 30 seconds (an available-now run, trigger 0: every second).

    >>> storage_refresh_seconds(0.0), storage_refresh_seconds(10.0), storage_refresh_seconds(3600.0)
    (1.0, 10.0, 30.0)
    """
    return min(max(trigger_seconds, 1.0), 30.0)


class StorageBacklog(_OnDemand):
    """A storage tree's data files that no committed batch took, per table. A daemon thread lists the tree when a
    scrape wants it, at most every ``refresh`` seconds (``list_tree()``: one recursive listing, no file read; see
    :class:`_OnDemand`: a scrape waits for it at most ``wait`` seconds, then reads the last listing); the scrape
    compares the listing with the last committed batch's offset of the tree (``pending(offset, listing)`` gives
    ``{table: (files, bytes)}``: the storage source's ``pending_files``)."""

    _thread_name = "metrics-storage-listing"

    def __init__(self, list_tree: Callable[[], Any],
                 pending: Callable[[Mapping[str, Any] | None, Any], Mapping[str, tuple[int, int]]], *,
                 refresh: float = 1.0, wait: float = 1.0) -> None:
        super().__init__(refresh=refresh, wait=wait, join=refresh + 30)
        self._list_tree, self._pending = list_tree, pending

    def __call__(self, committed: Mapping[str, Any] | None) -> Mapping[str, tuple[int, int]] | None:
        """``{table: (files, bytes)}`` of the last listing that the batch ending at offset ``committed`` (``None``:
        no batch committed yet) had not taken; ``None`` before the first listing; raises the last listing's error
        when the store did not answer it."""
        listing = self._fresh()
        return None if listing is None else self._pending(committed, listing)

    def _take(self) -> Any:
        return self._list_tree()


class _BacklogCollector:
    """Input backlog at scrape time: a Kafka source's end offsets minus the last committed batch's end offsets; a
    storage tree's data files that no committed batch took."""

    def __init__(self, metrics: JobMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        backlog = GaugeMetricFamily(f"{NAMESPACE}_input_backlog_messages",
                                    "Kafka source: messages past the last committed batch's end offset, per source "
                                    "topic and partition (at scrape time).", labels=["topic", "partition"])
        end_offsets, errors = self._metrics.end_offsets, self._metrics.backlog_errors
        if end_offsets is not None:
            try:
                ends = end_offsets()
            except Exception:  # noqa: BLE001 - an unreachable broker: no series this scrape, counted
                errors.inc()
                ends = {}
            with self._metrics.lock:
                committed = dict(self._metrics.source_offsets)
            for (topic, partition), end in sorted(ends.items()):
                # before the first committed batch: everything from the partition's start (an upper bound)
                done = committed.get((topic, partition), 0)
                backlog.add_metric([topic, str(partition)], max(0, end - done))
        yield backlog
        files = GaugeMetricFamily(f"{NAMESPACE}_input_backlog_files",
                                  "Storage tree: data files that no committed batch took, per table (the tree's "
                                  "last listing).", labels=["table"])
        size = GaugeMetricFamily(f"{NAMESPACE}_input_backlog_bytes",
                                 "Storage tree: bytes of the data files that no committed batch took, per table.",
                                 labels=["table"])
        storage = self._metrics.storage_backlog
        if storage is not None:
            with self._metrics.lock:
                offset = self._metrics.storage_offset
            try:
                pending = storage(offset) or {}
            except Exception:  # noqa: BLE001 - an unreadable store: no series this scrape, counted
                errors.inc()
                pending = {}
            for table, (count, total) in sorted(pending.items()):
                files.add_metric([table], count)
                size.add_metric([table], total)
        yield files
        yield size


class JobMetrics:
    """The metrics of one run of the job (see the module docs); thread-safe."""

    def __init__(self, registry: CollectorRegistry | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.clock = clock
        self.lock = threading.Lock()
        self.resolved_ts: dict[str, int] = {}
        self.newest_commit_ts = 0
        self.newest_per_topic: dict[str, int] = {}
        self.source_offsets: dict[tuple[str, int], int] = {}  # the last committed batch's end offset a partition
        self.end_offsets: Callable[[], Mapping[tuple[str, int], int]] | None = None  # a Kafka source's, at scrape
        self.storage_offset: Mapping[str, Any] | None = None  # the last committed batch's offset of a storage tree
        #: a storage tree's pending files per table for an offset (a :class:`StorageBacklog`), at scrape
        self.storage_backlog: Callable[[Mapping[str, Any] | None], Mapping[str, tuple[int, int]] | None] | None = None
        self._batch_started: float | None = None
        self._registry_seconds = 0.0  # registry time of the batch running
        r, n = self.registry, NAMESPACE
        self.rows_delivered = Counter(f"{n}_rows_delivered", "Records delivered (committed batches), per table and "
                                      "op (record: a value; tombstone: a null value, a delete).", ["table", "op"],
                                      registry=r)
        self.records_out = Counter(f"{n}_records_out", "Records delivered to a topic (committed batches).",
                                   ["topic"], registry=r)
        self.bytes_out = Counter(f"{n}_bytes_out", "Bytes of key and value delivered to a topic (committed batches).",
                                 ["topic"], registry=r)
        self.dead_letters = Counter(f"{n}_dead_letters", "Rows written to the dead-letter files, per table (empty: "
                                    "the input named none).", ["table"], registry=r)
        self.inputs = Counter(f"{n}_inputs_read", "Data files or messages read (committed batches).", registry=r)
        self.batches = Counter(f"{n}_batches", "Micro-batches committed.", registry=r)
        self.batch_failures = Counter(f"{n}_batch_failures", "Micro-batches that failed (not committed).",
                                      registry=r)
        self.batch_seconds = Histogram(f"{n}_batch_duration_seconds", "Wall time of a committed micro-batch.",
                                       buckets=_DURATION_BUCKETS, registry=r)
        self.phase_seconds = Histogram(f"{n}_batch_phase_seconds", "Wall time of a phase of a committed "
                                       "micro-batch (plan, registry, write, commit).", ["phase"],
                                       buckets=_DURATION_BUCKETS, registry=r)
        self.registry_requests = Counter(f"{n}_registry_requests", "Schema registry requests, per operation.",
                                         ["op"], registry=r)
        self.registry_errors = Counter(f"{n}_registry_errors", "Schema registry requests that failed (after "
                                       "retries and failover), per operation.", ["op"], registry=r)
        self.registry_seconds = Histogram(f"{n}_registry_request_duration_seconds", "Schema registry request "
                                          "time (retries included), per operation.", ["op"],
                                          buckets=_REGISTRY_BUCKETS, registry=r)
        self.schemas = Counter(f"{n}_schemas_registered", "Schemas new to the run (registered, or found registered), "
                               "per table.", ["table"], registry=r)
        self.new_majors = Counter(f"{n}_new_majors", "Breaking changes registered as a new major version "
                                  "(--on-incompatible new-major), per table.", ["table"], registry=r)
        self.transactions = Counter(f"{n}_transactions", "Exactly once: transactional slices by outcome (op: "
                                    "committed; committed_before, found committed by a rerun of the batch; aborted, "
                                    "refused by the batch's verdict).", ["op"], registry=r)
        self.missing_files = Counter(f"{n}_missing_files", "Storage data files gone before they were read.",
                                     registry=r)
        self.held_files = Gauge(f"{n}_held_files", "Storage data files held after the last committed batch (their "
                                "schema file missing or broken): retried with every batch.", registry=r)
        self.backlog_errors = Counter(f"{n}_input_backlog_errors", "Scrapes whose input backlog could not be read (a "
                                      "Kafka source's end offsets, a storage tree's listing: no backlog series then; "
                                      "counted from the next scrape on).", registry=r)
        self.state = Gauge(f"{n}_job_state", "The job's state: 0 waiting for the next trigger, 1 running a batch, "
                           "2 failed, 3 stopped.", registry=r)
        self.last_batch = Gauge(f"{n}_last_batch_id", "Id of the last committed micro-batch.", registry=r)
        self.last_batch_time = Gauge(f"{n}_last_batch_timestamp_seconds", "When the last micro-batch was "
                                     "committed (Unix seconds).", registry=r)
        self.last_commit_ts = Gauge(f"{n}_last_commit_ts_seconds", "Physical time (Unix seconds) of the newest "
                                    "commit ts delivered.", registry=r)
        self.trigger_interval = Gauge(f"{n}_trigger_interval_seconds", "The micro-batch interval of a continuous run "
                                      "(0: an available-now run).", registry=r)
        self.started = Gauge(f"{n}_start_timestamp_seconds", "When the run started (Unix seconds).", registry=r)
        self.last_error = Gauge(f"{n}_last_error", "1 for the class of the run's last error (a failed batch).",
                                ["error_class"], registry=r)
        self.last_error_time = Gauge(f"{n}_last_error_timestamp_seconds", "When the last error happened "
                                     "(Unix seconds).", registry=r)
        # Counters alerted on with increase() exist at 0 from the start: a series born at its first error has no
        # earlier sample, and Prometheus's increase() would never see that first outage.
        for op in _REGISTRY_OPS:
            self.registry_errors.labels(op=op)
        self.transactions.labels(op="aborted")
        self.registry.register(_LagCollector(self))  # type: ignore[arg-type]
        self.registry.register(_BacklogCollector(self))  # type: ignore[arg-type]

    # -- the job's calls ---------------------------------------------------------------------------------

    def start(self, trigger_seconds: float = 0.0) -> None:
        """The run starts: waiting for its first trigger (every ``trigger_seconds``; 0: available now)."""
        self.started.set(self.clock())
        self.trigger_interval.set(trigger_seconds)
        self.state.set(JOB_STATES["waiting"])

    def batch_started(self, batch_id: int) -> None:
        """A micro-batch begins (its registry time is summed from here)."""
        with self.lock:
            self._batch_started = self.clock()
            self._registry_seconds = 0.0
        self.state.set(JOB_STATES["running"])

    def batch(self, report: BatchReport, *, topics: Mapping[str, Iterable[int]] | None = None,
              tables: Mapping[str, str] | None = None, dead_letters: Iterable[Mapping[str, Any]] = (),
              phases: Mapping[str, float] | None = None) -> None:
        """A committed micro-batch: ``report`` (rows per table and topic), ``topics`` the batch's tally per topic
        (``[records, tombstones, newest commit ts, bytes]``), ``tables`` each topic's table, ``dead_letters`` the
        records written to its dead-letter file, ``phases`` seconds per phase."""
        tables = tables or {}
        for topic, counts in sorted((topics or {}).items()):
            values = list(counts)
            n, tombstones = int(values[0]), int(values[1])
            newest = int(values[2]) if len(values) > 2 else 0
            if not n:
                continue
            table = tables.get(topic, topic)
            self.records_out.labels(topic=topic).inc(n)
            if len(values) > 3:
                self.bytes_out.labels(topic=topic).inc(int(values[3]))
            if n - tombstones:
                self.rows_delivered.labels(table=table, op="record").inc(n - tombstones)
            if tombstones:
                self.rows_delivered.labels(table=table, op="tombstone").inc(tombstones)
            if newest:
                with self.lock:
                    self.newest_per_topic[topic] = max(self.newest_per_topic.get(topic, 0), newest)
        for record in dead_letters:
            self.dead_letters.labels(table=_table_of(record)).inc()
        self.inputs.inc(report.inputs)
        for schema in report.new_schemas:
            self.schemas.labels(table=schema.table).inc()
        for major in report.new_majors:
            self.new_majors.labels(table=str(major.get("table", ""))).inc()
        if report.missing_files:
            self.missing_files.inc(len(report.missing_files))
        now = self.clock()
        with self.lock:
            if report.max_commit_ts:
                self.newest_commit_ts = max(self.newest_commit_ts, report.max_commit_ts)
            if report.resolved_ts:
                self.resolved_ts = dict(report.resolved_ts)
            newest_ts = self.newest_commit_ts
            started, self._batch_started = self._batch_started, None
            registry_seconds = self._registry_seconds
        self.batches.inc()
        self.batch_seconds.observe(report.seconds if report.seconds else (now - started if started else 0.0))
        for phase, seconds in (phases or {}).items():
            self.phase_seconds.labels(phase=phase).observe(max(0.0, seconds))
        if phases is not None:
            self.phase_seconds.labels(phase="registry").observe(registry_seconds)
        self.last_batch.set(report.batch_id)
        self.last_batch_time.set(now)
        if newest_ts:
            self.last_commit_ts.set(commit_ts_seconds(newest_ts))
        self.state.set(JOB_STATES["waiting"])

    def committed_offsets(self, offsets: Mapping[str, Mapping[str, int]]) -> None:
        """A Kafka source's end offsets of the last committed batch (``{topic: {partition: offset}}``, as Spark's
        checkpoint writes them): the backlog is counted from there."""
        with self.lock:
            for topic, parts in offsets.items():
                for partition, offset in parts.items():
                    self.source_offsets[(str(topic), int(partition))] = int(offset)

    def committed_storage_offset(self, offset: Mapping[str, Any]) -> None:
        """A storage tree's offset at the end of the last committed batch (as Spark's offset log holds it): the
        backlog is the tree's data files it does not cover."""
        with self.lock:
            self.storage_offset = dict(offset)

    def held(self, count: int) -> None:
        """Storage data files held after the last committed batch."""
        self.held_files.set(count)

    def slices(self, statuses: Mapping[str, int]) -> None:
        """Exactly once: a batch's transactional slices by status (``committed``, ``committed-before``,
        ``refused``)."""
        names = {"committed": "committed", "committed-before": "committed_before", "refused": "aborted"}
        for status, count in statuses.items():
            self.transactions.labels(op=names.get(status, status.replace("-", "_"))).inc(count)

    def batch_empty(self) -> None:
        """A micro-batch with nothing to do ended (no report): waiting again."""
        with self.lock:
            self._batch_started = None
        self.state.set(JOB_STATES["waiting"])

    def batch_failed(self, error: BaseException) -> None:
        """A micro-batch failed: counted, and its error's class kept."""
        self.batch_failures.inc()
        self._error(error)

    def finish(self, error: BaseException | None = None) -> None:
        """The run ended: stopped, or failed with ``error``."""
        if error is not None:
            self._error(error)
        self.state.set(JOB_STATES["failed" if error is not None else "stopped"])
        for refreshed in (self.end_offsets, self.storage_backlog):
            close = getattr(refreshed, "close", None)
            if close is not None:
                close()

    def registry_request(self, op: str, seconds: float, error: BaseException | None = None) -> None:
        """One schema registry request (the registry client's ``observer``): ``error`` is the request's
        ``RegistryError``, ``None`` when it was answered. Errors count only an unreachable or failing registry
        (no answer, HTTP 5xx, an answer of the wrong shape), not the answers the job expects (a 404 of a lookup
        before a registration, a 409 of an incompatible schema)."""
        self.registry_requests.labels(op=op).inc()
        self.registry_seconds.labels(op=op).observe(seconds)
        status = getattr(error, "status_code", None)
        if error is not None and (status is None or status >= 500 or (getattr(error, "error_code", 0) is None
                                  and status < 400)):
            self.registry_errors.labels(op=op).inc()
        with self.lock:
            if self._batch_started is not None:
                self._registry_seconds += seconds

    def _error(self, error: BaseException) -> None:
        self.last_error.clear()  # one series: the last error's class
        self.last_error.labels(error_class=type(error).__name__).set(1)
        self.last_error_time.set(self.clock())
        self.state.set(JOB_STATES["failed"])

    # -- serving -------------------------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The metrics in Prometheus's text format."""
        return generate_latest(self.registry)


class MetricsServer:
    """The HTTP server of ``/metrics`` (prometheus_client's WSGI app and threaded server) in a daemon thread that
    sleeps until a request comes: prometheus_client's own ``start_http_server`` polls for its shutdown every
    0.5 s, so its ``shutdown()`` held the end of every run up to half a second (0.25 s on average: 2.5% of a
    10-second available-now run). :meth:`shutdown` wakes the thread with a connection of its own and returns at once."""

    def __init__(self, metrics: JobMetrics, port: int, addr: str) -> None:
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        from prometheus_client import make_wsgi_app
        from prometheus_client.exposition import ThreadingWSGIServer

        class _Server(ThreadingWSGIServer):
            """prometheus_client's threaded server, in the address family of ``addr`` (IPv4 or IPv6)."""

        class _Quiet(WSGIRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """No line on stderr for each scrape."""

        family, _, _, _, sockaddr = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        _Server.address_family = family
        self._httpd = make_server(str(sockaddr[0]), port, make_wsgi_app(metrics.registry), _Server, handler_class=_Quiet)
        self._httpd.timeout = None  # handle_request() blocks until a connection: no polling
        self.server_address = self._httpd.server_address
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="metrics-http", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            self._httpd.handle_request()

    def shutdown(self) -> None:
        """Stop serving and close the port (the run ended)."""
        if not self._stop.is_set():
            self._stop.set()
            host, port = self.server_address[:2]
            wake = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(str(host), str(host))
            with contextlib.suppress(OSError), socket.create_connection((wake, port), timeout=1):
                pass  # handle_request() returns, and the loop sees the stop
            self._thread.join(5)
        self._httpd.server_close()

    def server_close(self) -> None:
        """:meth:`shutdown` (the name of socketserver's servers, which prometheus_client's was): the port closed."""
        self.shutdown()


def serve_metrics(metrics: JobMetrics, port: int, addr: str = "0.0.0.0") -> tuple[MetricsServer, int]:
    """Serve ``metrics`` at ``http://addr:port/metrics`` in a daemon thread; ``(server, port)`` (``port`` 0: a free
    one, the one taken is returned). ``server.shutdown()`` stops it."""
    server = MetricsServer(metrics, port, addr)
    return server, int(server.server_address[1])
