"""Exactly-once delivery to Kafka: a transaction per writer, and a commit token in the same transaction.

Kafka has no two-phase commit a Spark driver could drive (KIP-939 is not usable in released brokers and
clients): a transaction can only be committed by the producer that opened it. So each Spark task that
writes a slice of a micro-batch (one Spark partition of the write: whole Kafka partitions, each in input
order) commits its own transaction, and puts into it, beside the records, a **commit token** for the
slice: a record in this product's compacted **control topic** (one partition) saying which (topic, Kafka
partition)s of which batch it delivered and the newest commit ts per topic and input. Records and token
become visible together, to ``read_committed`` consumers, or not at all. Then:

* **A rerun skips what was committed.** Before a batch is written the driver knows the committed tokens of
  its query (read with ``read_committed``); the Kafka partitions they name are left out of the write. A
  rerun of a batch (after a kill, a failed task, a broker restart, a failed verdict) therefore writes
  exactly the partitions no earlier attempt committed. Batches are byte-deterministic (same input, same
  records in the same order per Kafka partition), and a Kafka partition's rows of a batch are in one slice,
  so "partition p of topic t of batch b is committed" is all-or-nothing.
* **Zombies are fenced.** A writer's ``transactional.id`` is ``avro-registry-sink-<query>-<stream><n>``
  (``n``: the Spark partition of the write, the same across task attempts and reruns), so a retried task's
  ``init_transactions`` aborts what the failed attempt left open, and fences an attempt still running in a
  dead driver's Python worker. A task attempt checks, after ``init_transactions``, whether an earlier
  attempt committed its slice (its token after the batch's start) and then writes nothing (the Python writer
  in every attempt; the JVM writer in a retried task or stage, which Spark's ``TaskContext`` tells it).
* **Nothing lingers.** At start the driver initialises every writer id the query has used (recorded in the
  checkpoint's ``delivery.json``), which aborts the transactions a killed run left open at once: the
  partitions' last stable offset never waits for ``transaction.timeout.ms`` (the stall that Flink's
  lingering transactions cause, FLINK-40626).
* **Two writers.** :func:`slice_writer` writes a slice with confluent-kafka in a Python worker; the Spark
  layer's JVM writer (:mod:`avro_registry_sink.spark.sinks.jvm_writer`, given to :class:`TransactionalWriter` as
  ``jvm``) writes it with the Kafka client in the executors' JVM, by the same protocol, ids and tokens.
* **A verdict is given before anything commits.** A misconfiguration found while encoding (CSV settings
  contradicted by a file, ENUM members missing) reaches every slice holding a partition of the table's
  topic, and those slices abort: the rerun with the corrected settings writes that topic whole.

After a batch is complete the driver writes the query's **resolved** record to the control topic: per
table, the highest commit ts whose rows are all delivered (for each input of the table, a TiCDC data
directory partition or a source Kafka partition, the newest commit ts written; the table's value is the
lowest of them). :func:`resolved_ts` reads it.

Executors receive only plain data (dicts, strings); producers and consumers are built where they are used.

>>> transactional_id("0f3a", "w", 2)
'avro-registry-sink-0f3a-w2'
>>> token_key("0f3a", "w", 2), resolved_key("0f3a")
('0f3a/w2', '0f3a/resolved')
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from avro_registry_sink.errors import AvroSinkError
from avro_registry_sink.failpoints import failpoint
from avro_registry_sink.kafka.client import client_conf, kafka_logger, refresh, wait_hosted
from avro_registry_sink.kafka.options import DEFAULT_KAFKA, KafkaOptions
from avro_registry_sink.model import REPLAY_BATCH_BASE, is_misconfiguration
from avro_registry_sink.redact import redact_text, secret_values
from avro_registry_sink.settings.config import DELIVERY_MODES
from avro_registry_sink.storage_fs import StorageURI, StoreFS, parse_storage_uri
from avro_registry_sink.workers import settle

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from avro_registry_sink.storage_fs import StoreFS

__all__ = [
    "CONTROL_PARTITION",
    "DELIVERY_MODES",
    "STATE_FILE",
    "DeliveryError",
    "Token",
    "TransactionalWriter",
    "fused_writer",
    "query_of",
    "resolved_key",
    "resolved_record",
    "resolved_ts",
    "token_key",
    "transactional_id",
]

#: The control topic has one partition: every token and resolved record of every query is in it.
CONTROL_PARTITION = 0
#: The checkpoint's file with the query's id and the writer ids it used (``{"query": ..., "writers": {...}}``).
STATE_FILE = "delivery.json"
#: Streams of writer ids: the job's micro-batches, and ``replay``'s batches (their own ids and tokens).
RUN, REPLAY = "w", "r"
#: Spark's output of a slice writer: one row per slice that had records.
RESULT_DDL = "writer INT, status STRING, token STRING"
#: A slice writer's local queue: librdkafka's default of 100,000 messages made a writer wait for deliveries
#: again and again (a slice is usually larger); bounded by bytes instead. Fuller produce requests (up to 100,000
#: messages, 50 ms to fill; ``batch.size`` stays librdkafka's 1,000,000 bytes, under a broker's default
#: ``max.message.bytes``) cost librdkafka and the broker less CPU; the commit's flush sends at once, whatever
#: ``linger.ms`` says. Sink options override all of these.
WRITER_QUEUE = {"queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 262_144,
                "linger.ms": 50, "batch.num.messages": 100_000}
#: How long a reader waits for open transactions (of other queries) on the control topic to end.
READ_TIMEOUT = 120.0

_PREFIX = "avro-registry-sink"


#: The JVM slice writer (given by the Spark layer): ``(records, spec) -> results`` (:data:`RESULT_DDL` rows).
SliceWrites = Callable[["DataFrame", Mapping[str, Any]], "DataFrame"]


class DeliveryError(AvroSinkError):
    """Exactly-once delivery could not be set up or a slice could not be committed; the batch is not committed."""


def transactional_id(query: str, stream: str, writer: int) -> str:
    """The ``transactional.id`` of writer ``writer`` (a Spark partition of the write) of ``query``."""
    return f"{_PREFIX}-{query}-{stream}{writer}"


def token_key(query: str, stream: str, writer: int) -> str:
    """The control-topic key of a writer's tokens (compaction keeps the newest per writer)."""
    return f"{query}/{stream}{writer}"


def resolved_key(query: str) -> str:
    """The control-topic key of a query's resolved record."""
    return f"{query}/resolved"


@dataclass
class Token:
    """One committed slice: ``parts`` (topic -> Kafka partitions of ``batch`` delivered, by this slice or by
    earlier attempts of the batch), ``inputs`` (topic -> input -> newest commit ts of the slice's rows)."""

    query: str
    batch: int
    writer: int
    stream: str = RUN
    parts: dict[str, list[int]] = field(default_factory=dict)
    inputs: dict[str, dict[str, int]] = field(default_factory=dict)
    rows: int = 0

    def to_json(self) -> str:
        return json.dumps({"v": 1, "kind": "token", "query": self.query, "batch": self.batch, "writer": self.writer,
                           "stream": self.stream, "parts": self.parts, "inputs": self.inputs, "rows": self.rows,
                           "time": round(time.time(), 3)}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Token:
        raw = json.loads(text)
        return cls(query=raw["query"], batch=int(raw["batch"]), writer=int(raw["writer"]),
                   stream=raw.get("stream", RUN), parts={t: [int(p) for p in ps] for t, ps in raw["parts"].items()},
                   inputs={t: {i: int(ts) for i, ts in v.items()} for t, v in raw.get("inputs", {}).items()},
                   rows=int(raw.get("rows", 0)))

    def part_set(self) -> set[tuple[str, int]]:
        return {(topic, p) for topic, ps in self.parts.items() for p in ps}


def resolved_record(query: str, batch: int, inputs: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """The resolved record: per table the lowest, over its inputs, of the newest commit ts delivered.

    >>> resolved_record("q", 4, {"shop.a": {"0": 7, "1": 5}, "shop.b": {"": 9}})["tables"]
    {'shop.a': 5, 'shop.b': 9}
    """
    return {"v": 1, "kind": "resolved", "query": query, "batch": batch, "time": round(time.time(), 3),
            "tables": {table: min(by_input.values()) for table, by_input in sorted(inputs.items()) if by_input},
            "inputs": {table: dict(sorted(by_input.items())) for table, by_input in sorted(inputs.items())}}


# --------------------------------------------------------------------------------------------------
# Reading the control topic


def _consumer_conf(conf: Mapping[str, Any], isolation: str) -> dict[str, Any]:
    out = {k: v for k, v in conf.items() if k != "logger"}
    out.update({"group.id": f"{_PREFIX}-control", "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "isolation.level": isolation, "enable.partition.eof": False, "fetch.wait.max.ms": 20,
                "logger": kafka_logger(conf=out)})
    return out


def _watermarks(consumer: Any, topic: str, timeout: float = 10.0) -> tuple[int, int]:
    from confluent_kafka import KafkaException, TopicPartition

    deadline = time.monotonic() + max(timeout, 1.0)
    while True:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, CONTROL_PARTITION), timeout=5.0,
                                                       cached=False)
            return int(low), int(high)
        except KafkaException:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def _consume(consumer: Any, topic: str, start: int, end: int, match: Callable[[str], bool],
             deadline: float) -> list[tuple[int, str, bytes | None]]:
    """The records of ``[start, end)`` whose key ``match``es: ``(offset, key, value)``."""
    from confluent_kafka import KafkaError, TopicPartition

    out: list[tuple[int, str, bytes | None]] = []
    tp = TopicPartition(topic, CONTROL_PARTITION, start)
    consumer.assign([tp])
    position = start
    while position < end:
        if time.monotonic() > deadline:
            raise DeliveryError(f"Reading the control topic {topic!r} up to offset {end} timed out at {position}.")
        msg = consumer.poll(0.2)
        if msg is not None:
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise DeliveryError(f"Reading the control topic {topic!r} failed: {msg.error()}")
            key = (msg.key() or b"").decode("utf-8", "replace")
            if start <= msg.offset() < end and match(key):  # (a reused consumer may hold older fetches)
                out.append((msg.offset(), key, msg.value()))
        got = consumer.position([TopicPartition(topic, CONTROL_PARTITION)])[0].offset
        if got is not None and got >= 0:
            position = max(position, got)
    return out


def read_committed(conf: Mapping[str, Any], topic: str, match: Callable[[str], bool], *, start: int = 0,
                   timeout: float = READ_TIMEOUT) -> list[tuple[int, str, bytes | None]]:
    """The committed records of the control topic from ``start`` on whose key ``match``es, in offset order.

    First every record up to the high watermark is read without isolation (cheap, never blocked), which
    finds the candidates; when there are any, the partition's last stable offset must pass the last one
    (transactions of other queries still open before it end within their ``transaction.timeout.ms``) and
    the candidates' range is read again with ``read_committed``: aborted records are not returned.
    ``conf``: librdkafka client settings (``bootstrap.servers``, security).
    """
    deadline = time.monotonic() + timeout
    with _consumer(conf, "read_uncommitted") as plain:
        low, high = _watermarks(plain, topic)
        start = max(start, low)
        candidates = _consume(plain, topic, start, high, match, deadline) if high > start else []
    if not candidates:
        return []
    first, last = candidates[0][0], candidates[-1][0]
    with _consumer(conf, "read_committed") as isolated:
        while True:
            _, stable = _watermarks(isolated, topic)
            if stable > last:
                break
            if time.monotonic() > deadline:
                raise DeliveryError(
                    f"A transaction stays open on the control topic {topic!r} (its last stable offset is {stable}, "
                    f"below {last + 1}): another writer died within its transaction.timeout.ms. Retry later.")
            time.sleep(0.05)
        return _consume(isolated, topic, first, stable, match, deadline)


#: Consumers of the control topic kept by this process (a Python worker reads it in every slice it writes):
#: (settings, isolation) -> idle consumers.
_IDLE: dict[tuple[str, str], list[Any]] = {}
_IDLE_LOCK = threading.Lock()


@contextlib.contextmanager
def _consumer(conf: Mapping[str, Any], isolation: str) -> Iterator[Any]:
    """A consumer of ``conf`` with ``isolation``, from this process's idle ones or new; kept for the next
    read unless it failed."""
    from confluent_kafka import Consumer

    key = (json.dumps({k: str(v) for k, v in conf.items() if k != "logger"}, sort_keys=True), isolation)
    with _IDLE_LOCK:
        idle = _IDLE.setdefault(key, [])
        consumer = idle.pop() if idle else None
    if consumer is None:
        consumer = Consumer(_consumer_conf(conf, isolation))
    try:
        yield consumer
    except BaseException:
        consumer.close()
        raise
    with contextlib.suppress(Exception):
        consumer.unassign()
    with _IDLE_LOCK:
        _IDLE.setdefault(key, []).append(consumer)


def close_consumers() -> None:
    """Close the idle consumers this process keeps."""
    with _IDLE_LOCK:
        consumers = [c for idle in _IDLE.values() for c in idle]
        _IDLE.clear()
    for consumer in consumers:
        with contextlib.suppress(Exception):
            consumer.close()


def resolved_ts(bootstrap: str | Iterable[str], control_topic: str, query: str, *,
                kafka: KafkaOptions = DEFAULT_KAFKA, options: Mapping[str, Any] | None = None,
                timeout: float = READ_TIMEOUT) -> dict[str, int]:
    """Per table (``schema.table``), the highest commit ts whose rows the query ``query`` has all delivered,
    from its newest resolved record in ``control_topic`` (read committed); ``{}`` before its first batch.

    ``bootstrap``: the brokers; ``kafka``: their TLS/SASL settings; ``options``: extra librdkafka settings.
    The query id is in the checkpoint (:func:`query_of`) and in the job's ``start`` progress event.

    >>> # resolved_ts("127.0.0.1:9092", "_avro_registry_sink_commits", "0f3a9c...")  -> {"shop.orders": 4496...}
    """
    brokers = bootstrap if isinstance(bootstrap, str) else ",".join(bootstrap)
    conf = {**client_conf(brokers, kafka, "consumer"), **dict(options or {})}
    key = resolved_key(query)
    records = read_committed(conf, control_topic, lambda k: k == key, timeout=timeout)
    for _, _, value in reversed(records):
        if value is not None:
            return {table: int(ts) for table, ts in json.loads(value)["tables"].items()}
    return {}


def query_of(checkpoint: Any) -> str | None:
    """The query id of an exactly-once job's ``checkpoint`` (a directory, a storage URI or a
    :class:`~avro_registry_sink.storage_fs.StorageURI`), from its ``delivery.json``; ``None`` if it has none."""

    uri = checkpoint if isinstance(checkpoint, StorageURI) else parse_storage_uri(str(checkpoint), option="checkpoint")
    store = StoreFS(uri, option="checkpoint")
    if not store.exists(STATE_FILE):
        return None
    return str(json.loads(store.read_text(STATE_FILE))["query"])


# --------------------------------------------------------------------------------------------------
# The executor side: one slice, one transaction


def _partition_input(order_file: Any, input_chars: int | None) -> Any:
    """The input of each row: storage ``order_file`` is ``<partition:020d>/<date>/<number:020d>`` (the first 20
    characters: the TiDB partition's data directory, in commit-ts order), Kafka's ``<topic>/<partition>`` (whole);
    changelog files are one input (``input_chars`` 0)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if input_chars is None:
        return order_file.fill_null("")
    if input_chars == 0:
        return pa.array([""] * len(order_file), pa.string())
    return pc.utf8_slice_codeunits(order_file.fill_null(""), 0, input_chars)


def _values_of(column: Any) -> Iterable[Any]:
    """A column's values as Python objects: one object repeated when they are all equal (a batch's rows of one
    topic and Kafka partition, the usual case), else one per row."""
    import pyarrow.compute as pc

    if len(column) and not column.null_count and len(pc.unique(column)) == 1:
        return itertools.repeat(column[0].as_py(), len(column))
    return column.to_pylist()


def _headers_of(column: Any) -> Iterator[Any]:
    """Each row's headers as confluent-kafka takes them (a list of (key, value)), ``None`` for none; made row by
    row, as they are produced (a batch's worth kept alive at once makes Python's garbage collector the cost).

    The stage gives every record the same header keys in the same order (``op``, ``commit_ts``): then each
    distinct combination of values (the rows of one commit ts and op) gets one list, shared by its rows, and
    no Python object is made per row (making them was half the writer's Python time)."""
    import numpy as np
    import pyarrow.compute as pc

    n = len(column)
    if n == 0 or column.null_count == n:
        return itertools.repeat(None, n)
    offsets = column.offsets.to_numpy(zero_copy_only=False)
    flat = column.flatten()
    keys, values = flat.field("key"), flat.field("value")
    lengths = np.diff(offsets)
    width = int(lengths[0])
    if column.null_count == 0 and width and bool((lengths == width).all()):
        names = keys.slice(0, width).to_pylist()
        if all(pc.all(pc.equal(pc.take(keys, np.arange(j, len(keys), width)), names[j])).as_py()
               for j in range(width)):
            combined = np.zeros(n, np.int64)
            distinct: list[list[Any]] = []
            codes: list[list[int]] = []
            for j in range(width):
                encoded = pc.dictionary_encode(pc.take(values, np.arange(j, len(values), width)),
                                               null_encoding="encode")
                distinct.append(encoded.dictionary.to_pylist())
                code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
                codes.append(code.tolist())
                if int(combined.max()) >= (1 << 62) // max(1, len(distinct[-1])):
                    combined = np.unique(combined, return_inverse=True)[1].astype(np.int64)  # (no overflow)
                combined = combined * len(distinct[-1]) + code
            _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
            lists = [[(names[j], distinct[j][codes[j][r]]) for j in range(width)] for r in first.tolist()]
            return map(lists.__getitem__, inverse.tolist())
    pairs = list(zip(keys.to_pylist(), values.to_pylist(), strict=True))
    starts = (offsets - offsets[0]).tolist()
    return (pairs[starts[i]:starts[i + 1]] or None for i in range(n))


def _kafka_error(exc: BaseException) -> Any:
    return exc.args[0] if exc.args and hasattr(exc.args[0], "retriable") else None


def _retrying(call: Callable[[], Any], what: str, deadline: float) -> Any:
    """``call`` again while librdkafka says its error is retriable (a timeout, a coordinator moving)."""
    from confluent_kafka import KafkaException

    while True:
        try:
            return call()
        except KafkaException as exc:
            err = _kafka_error(exc)
            if err is not None and err.retriable() and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            raise


def slice_writer(spec: Mapping[str, Any]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function writing one slice of batch ``spec["batch"]`` in one transaction.

    ``spec`` is plain data: ``producer``/``consumer`` (librdkafka settings, no ``transactional.id``),
    ``query``, ``stream``, ``batch``, ``control_topic``, ``start_offset`` (the control topic's end before the
    batch), ``committed`` (topic -> partitions of the batch committed before), ``input_chars`` (see
    :func:`_partition_input`), ``timeout`` (seconds). Input columns: ``topic, partition, key, value, headers,
    commit_ts, order_file`` and an optional ``error`` (a verdict row: the slice aborts). Yields one
    :data:`RESULT_DDL` row per slice that had rows: ``committed``, ``committed-before`` (an earlier attempt of
    this task committed it) or ``refused`` (a verdict row: nothing committed).
    """

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext


        settle()
        ctx = TaskContext.get()
        writer = ctx.partitionId() if ctx is not None else 0
        schema = pa.schema([("writer", pa.int32()), ("status", pa.string()), ("token", pa.string())])
        # The producer's round trips (initialising its transactions, looking for an earlier attempt's token)
        # overlap the computing of the task's input, which pulling the first Arrow batch starts.
        start = _SliceStart(spec, writer)
        batches = iter(batches)
        first = next((b for b in batches if b.num_rows), None)
        producer, before = start.result()
        if first is None:  # nothing of the batch in this slice: no transaction at all
            return
        token: str | None
        if before is not None:
            status, token = "committed-before", before
        else:
            status, token = _write_slice(spec, writer, producer, start.failures, first, batches)
        for _ in batches:  # a slice committed before, or refused, leaves input unread: Spark's worker wants it read
            pass
        yield pa.RecordBatch.from_pylist([{"writer": writer, "status": status, "token": token}], schema=schema)

    return write


def fused_writer(spec: Mapping[str, Any]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """:func:`slice_writer` for the encode stage's own output (the storage stage's columns, with ``error``), when
    each topic's rows come from one data file read whole by one task: the task that encodes a file writes its
    rows, in their order, with no shuffle or sort and no second trip through the JVM. Rows of the Kafka
    partitions committed before are left out, rows set aside (dead letters, counted by the tally) too; a
    misconfiguration row stays, as the verdict that aborts the slice."""
    committed = {(t, p) for t, ps in (spec.get("committed") or {}).items() for p in ps}
    write = slice_writer(spec)
    columns = ("topic", "partition", "key", "value", "headers", "commit_ts", "order_file", "error")

    def records(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            batch = batch.select(list(columns))
            error = batch.column("error")
            if error.null_count < n:
                verdict = [is_misconfiguration(text) for text in error.to_pylist()]
                batch = batch.filter(pc.or_(pc.is_null(error), pa.array(verdict)))
            if committed and batch.num_rows:
                keep = pa.array([(t, p) not in committed for t, p in zip(batch.column("topic").to_pylist(),
                                                                          batch.column("partition").to_pylist(), strict=True)])
                batch = batch.filter(pc.or_(keep, pc.is_valid(batch.column("error"))))
            if batch.num_rows:
                yield batch

    return lambda batches: write(records(batches))


class _SliceStart:
    """A slice's transactional producer, initialised, and whether an earlier attempt of its task committed the
    slice (its token), made in a thread started with the task."""

    def __init__(self, spec: Mapping[str, Any], writer: int) -> None:
        self.spec, self.writer = spec, writer
        self.failures: list[str] = []
        self._out: tuple[Any, str | None] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"slice-{writer}-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._out = _start_slice(self.spec, self.writer, self.failures)
        except BaseException as exc:  # noqa: BLE001 - raised again in the task's thread
            self._error = exc

    def result(self) -> tuple[Any, str | None]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._out is not None
        return self._out


def _start_slice(spec: Mapping[str, Any], writer: int, failures: list[str]) -> tuple[Any, str | None]:
    """The slice's producer with its transactions initialised (which aborts what an earlier attempt left open
    and fences it), and the token of an earlier attempt of this task that committed the slice, if any."""
    from confluent_kafka import KafkaException, Producer

    query, stream, batch, topic = spec["query"], spec["stream"], int(spec["batch"]), spec["control_topic"]
    secrets = secret_values(spec["producer"])

    def delivered(err: Any, msg: Any) -> None:  # only failed deliveries are reported (delivery.report.only.error)
        if err is not None and len(failures) < 5:
            failures.append(redact_text(f"{msg.topic()}[{msg.partition()}]: {err}", secrets))

    timeout = float(spec["timeout"])
    conf = {**WRITER_QUEUE, **spec["producer"], "transactional.id": transactional_id(query, stream, writer),
            "transaction.timeout.ms": int(timeout * 1000), "delivery.report.only.error": True,
            "on_delivery": delivered}
    conf["logger"] = kafka_logger(conf=conf)
    failpoint("eos.before-init")
    producer = Producer(conf)
    deadline = time.monotonic() + 2 * timeout
    try:
        _retrying(lambda: producer.init_transactions(timeout), "init_transactions", deadline)
    except KafkaException as exc:
        raise DeliveryError(redact_text(
            f"Writer {writer} of batch {batch} cannot start its Kafka transaction: {exc}. A broker's "
            f"transaction.max.timeout.ms below transaction-timeout ({timeout:g} s), or a missing "
            f"TransactionalId ACL for {transactional_id(query, stream, writer)!r}, stop it here.", secrets)) from None
    # An earlier attempt of this task (Spark retried it, or resubmitted it after losing its executor) may have
    # committed before it died: its token is then after the batch's start. PySpark's TaskContext has no stage
    # attempt number, so every attempt looks; the first finds nothing (no record of its key), cheaply.
    key = token_key(query, stream, writer)
    for _, _, value in reversed(read_committed(spec["consumer"], topic, lambda k: k == key,
                                               start=int(spec["start_offset"]))):
        if value is not None and Token.from_json(value).batch == batch:
            return producer, value.decode("utf-8")
    return producer, None


def _write_slice(spec: Mapping[str, Any], writer: int, producer: Any, failures: list[str], first: Any,
                 rest: Iterator[Any]) -> tuple[str, str | None]:
    import gc

    # Millions of short-lived tuples (headers) would make the cyclic collector run and rescan again and again
    gc.disable()
    try:
        return _write_slice_gc_off(spec, writer, producer, failures, first, rest)
    finally:
        gc.enable()


def _write_slice_gc_off(spec: Mapping[str, Any], writer: int, producer: Any, failures: list[str], first: Any,
                        rest: Iterator[Any]) -> tuple[str, str | None]:
    from confluent_kafka import KafkaException

    query, stream, batch, topic = spec["query"], spec["stream"], int(spec["batch"]), spec["control_topic"]
    secrets = secret_values(spec["producer"])
    timeout = float(spec["timeout"])
    deadline = time.monotonic() + 2 * timeout
    producer.begin_transaction()
    parts: dict[str, set[int]] = {}
    newest: dict[tuple[str, str], int] = {}
    rows = 0
    refused: str | None = None
    produce, poll = producer.produce, producer.poll
    try:
        for record_batch in itertools.chain([first], rest):
            n = record_batch.num_rows
            if n == 0:
                continue
            names = record_batch.schema.names
            if "error" in names and record_batch.column("error").null_count < n:
                import pyarrow.compute as pc

                refused = pc.drop_null(record_batch.column("error"))[0].as_py()
                break
            _tally_slice(record_batch, spec.get("input_chars"), parts, newest)
            topics = _values_of(record_batch.column("topic"))
            partitions = _values_of(record_batch.column("partition"))
            keys = record_batch.column("key").to_pylist()
            values = record_batch.column("value").to_pylist()
            headers = _headers_of(record_batch.column("headers"))
            for t, p, k, v, h in zip(topics, partitions, keys, values, headers, strict=True):
                try:  # positional: topic, value, key, partition, callback, on_delivery, timestamp, headers
                    produce(t, v, k, p, None, None, 0, h)
                except BufferError:  # the local queue is full: let deliveries drain
                    while True:
                        poll(0.005)
                        try:
                            produce(t, v, k, p, None, None, 0, h)
                            break
                        except BufferError:
                            continue
            # No poll per batch: with only failed deliveries reported there is nothing to serve, yet each poll
            # contends with librdkafka's threads (measured: the loop takes 1.3-2x as long); the commit's flush
            # serves the failures' callbacks.
            rows += n
            failpoint("eos.produced")
        if refused is not None:
            _retrying(lambda: producer.abort_transaction(timeout), "abort_transaction", deadline)
            return "refused", refused
        committed = {t: set(ps) for t, ps in (spec.get("committed") or {}).items()}
        for t, ps in parts.items():
            committed.setdefault(t, set()).update(ps)
        token = Token(query=query, batch=batch, writer=writer, stream=stream,
                      parts={t: sorted(ps) for t, ps in sorted(committed.items())},
                      inputs=_inputs_json(newest), rows=rows)
        text = token.to_json()
        produce(topic, text.encode("utf-8"), token_key(query, stream, writer).encode("utf-8"), CONTROL_PARTITION)
        failpoint("eos.before-commit")
        _commit(producer, timeout, deadline)
        failpoint("eos.after-commit")
        return "committed", text
    except KafkaException as exc:
        err = _kafka_error(exc)
        detail = "; ".join(failures) or str(exc)
        if err is not None and err.txn_requires_abort():
            with contextlib.suppress(KafkaException):  # the next attempt's init_transactions aborts it anyway
                producer.abort_transaction(timeout)
        raise DeliveryError(redact_text(
            f"Writer {writer} of batch {batch} could not commit its Kafka transaction: {detail}. Nothing of this "
            "slice is visible to read_committed consumers; the batch is not committed and a rerun writes it.",
            secrets)) from None


def _commit(producer: Any, timeout: float, deadline: float) -> None:
    from confluent_kafka import KafkaException

    while True:
        try:
            producer.commit_transaction(timeout)
            return
        except KafkaException as exc:
            err = _kafka_error(exc)
            if err is not None and err.retriable() and not err.txn_requires_abort() and time.monotonic() < deadline:
                continue
            raise


def _tally_slice(record_batch: Any, input_chars: int | None, parts: dict[str, set[int]],
                 newest: dict[tuple[str, str], int]) -> None:
    """Add an Arrow batch's (topic, Kafka partition)s and newest commit ts per (topic, input)."""
    import pyarrow as pa

    table = pa.table({"topic": record_batch.column("topic"), "partition": record_batch.column("partition"),
                      "input": _partition_input(record_batch.column("order_file"), input_chars),
                      "commit_ts": record_batch.column("commit_ts").fill_null(0)})
    for row in table.group_by(["topic", "partition"]).aggregate([]).to_pylist():
        parts.setdefault(row["topic"], set()).add(int(row["partition"]))
    for row in table.group_by(["topic", "input"]).aggregate([("commit_ts", "max")]).to_pylist():
        key = (row["topic"], row["input"])
        newest[key] = max(newest.get(key, 0), int(row["commit_ts_max"] or 0))


def _inputs_json(newest: Mapping[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, input_), ts in sorted(newest.items()):
        out.setdefault(topic, {})[input_] = ts
    return out


# --------------------------------------------------------------------------------------------------
# The driver side


class TransactionalWriter:
    """Exactly-once writes of a :class:`~avro_registry_sink.spark.sinks.sinks.KafkaSink` (driver side).

    ``producer_conf``: the librdkafka producer settings of the sink (no ``transactional.id``); ``store``: the
    checkpoint (``delivery.json``: the query id and the writer ids used); ``input_chars``: how a record's
    ``order_file`` names its input (see :func:`_partition_input`). :meth:`start` aborts what a killed run
    left open and reads the committed tokens; :meth:`write` writes a batch.
    """

    def __init__(self, brokers: str, kafka: KafkaOptions, producer_conf: Mapping[str, Any], *,
                 control_topic: str, transaction_timeout: float, store: StoreFS | None = None,
                 admin_timeout: float = 30.0, jvm: tuple[SliceWrites, Mapping[str, Any]] | None = None) -> None:
        self.brokers = brokers
        self.kafka = kafka
        self.producer_conf = {k: v for k, v in producer_conf.items() if k != "logger"}
        self.producer_conf["enable.idempotence"] = True  # transactions need it (acks=all is checked by the sink)
        self.consumer_conf = {k: v for k, v in client_conf(brokers, kafka, "consumer").items() if k != "logger"}
        self.control_topic = control_topic
        self.timeout = transaction_timeout
        self.store = store
        self.admin_timeout = admin_timeout
        self.jvm = jvm
        self.query: str | None = None
        self.input_chars: int | None = None
        self.resolved: dict[str, int] = {}  # per table, after the last complete batch
        #: ``(batch id, {slice status: count})`` of the last batch whose slices ran (the job's metrics)
        self.last_slices: tuple[int, dict[str, int]] | None = None
        self._writers: dict[str, int] = {}
        self._tokens: dict[tuple[str, int], dict[int, Token]] = {}  # (stream, batch) -> writer -> newest token
        self._inputs: dict[str, dict[str, int]] = {}  # table -> input -> newest commit ts delivered
        self._resolved_batch = -1
        self._started = False
        self._lock = threading.Lock()
        self._producer: Any = None  # the driver's producer of resolved records (idempotent, no transactions)

    # -- start ---------------------------------------------------------------------------------------

    def start(self, admin: Any = None) -> None:
        """Once per run, before the first batch: the query id, the control topic (created compacted when
        missing), every writer id the query used initialised (their open transactions aborted), the
        committed tokens and the newest resolved record read. ``admin``: an ``AdminClient`` of the cluster
        to use (else one is made)."""
        with self._lock:
            if self._started:
                return
            state = self._load_state()
            self.query = str(state["query"])
            self._writers = {s: int(n) for s, n in state.get("writers", {}).items()}
            self._ensure_topic(admin)
            self._resolved_producer()
            self._abort(self._writers)
            failpoint("eos.after-abort")
            prefix = self.query + "/"
            records = read_committed(self.consumer_conf, self.control_topic, lambda k: k.startswith(prefix),
                                     timeout=max(READ_TIMEOUT, 2 * self.timeout))
            newest: dict[str, bytes] = {}
            for _, key, value in records:
                if value is None:
                    newest.pop(key, None)
                else:
                    newest[key] = value
            for value in newest.values():
                raw = json.loads(value)
                if raw.get("kind") == "token":
                    token = Token.from_json(value)
                    self._tokens.setdefault((token.stream, token.batch), {})[token.writer] = token
                    seen = self._writers.get(token.stream, 0)
                    if token.writer >= seen:
                        self._writers[token.stream] = token.writer + 1
                elif raw.get("kind") == "resolved":
                    self._inputs = {t: {i: int(ts) for i, ts in v.items()} for t, v in raw.get("inputs", {}).items()}
                    self.resolved = {t: int(ts) for t, ts in raw.get("tables", {}).items()}
                    self._resolved_batch = int(raw.get("batch", -1))
            self._started = True

    def _load_state(self) -> dict[str, Any]:
        if self.store is not None and self.store.exists(STATE_FILE):
            return dict(json.loads(self.store.read_text(STATE_FILE)))
        state = {"query": uuid.uuid4().hex, "writers": {}}
        if self.store is not None:
            self.store.make_dirs()
            self.store.write_text(STATE_FILE, json.dumps(state))
        return state

    def _save_state(self) -> None:
        if self.store is not None:
            self.store.write_text(STATE_FILE, json.dumps({"query": self.query, "writers": self._writers}))

    def _ensure_topic(self, admin: Any = None) -> None:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic

        admin, metadata = refresh(admin, self.brokers, self.kafka)
        if self.control_topic in metadata.topics:
            return
        config = {"cleanup.policy": "compact", "segment.ms": "3600000", "min.cleanable.dirty.ratio": "0.1"}
        futures = admin.create_topics([NewTopic(self.control_topic, num_partitions=1,
                                                replication_factor=self.kafka.replication_factor or -1,
                                                config=config)], operation_timeout=self.admin_timeout)
        for future in futures.values():
            try:
                future.result(self.admin_timeout)
            except KafkaException as exc:
                if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                raise DeliveryError(redact_text(f"Cannot create the control topic {self.control_topic!r} on "
                                                f"{self.brokers}: {exc}", secret_values(self.kafka))) from None
        for _ in range(100):
            topic = admin.list_topics(timeout=self.admin_timeout).topics.get(self.control_topic)
            if topic is not None and topic.error is None and topic.partitions:
                wait_hosted(admin, {self.control_topic: len(topic.partitions)}, self.admin_timeout)
                return
            time.sleep(0.1)

    def _abort(self, writers: Mapping[str, int]) -> None:
        """``init_transactions`` for every writer id: aborts their open transactions, fences their zombies."""
        from confluent_kafka import KafkaException, Producer

        ids = [transactional_id(self.query or "", stream, n) for stream, count in writers.items() for n in range(count)]
        if not ids:
            return

        def init(tid: str) -> None:
            conf = {**self.producer_conf, "transactional.id": tid, "transaction.timeout.ms": int(self.timeout * 1000)}
            conf["logger"] = kafka_logger(conf=conf)
            producer = Producer(conf)
            try:
                _retrying(lambda: producer.init_transactions(self.timeout), "init_transactions",
                          time.monotonic() + 2 * self.timeout)
            except KafkaException as exc:
                raise DeliveryError(redact_text(f"Cannot initialise the Kafka transactions of {tid!r} (to abort "
                                                f"what a stopped run left open): {exc}",
                                                secret_values(self.kafka))) from None

        with ThreadPoolExecutor(max_workers=min(16, len(ids))) as pool:
            list(pool.map(init, ids))

    def abort_open(self) -> None:
        """Abort the open transactions of every writer id the query used (a batch abandoned by a stop: its slices
        cannot commit after this, and read_committed consumers are not held up until the next run)."""
        if self.query is not None:
            self._abort(dict(self._writers))

    # -- a batch -------------------------------------------------------------------------------------

    def committed(self, batch_id: int) -> dict[str, list[int]]:
        """Topic -> the Kafka partitions of ``batch_id`` already committed (by earlier attempts)."""
        out: dict[str, set[int]] = {}
        for token in self._tokens.get((_stream(batch_id), batch_id), {}).values():
            for topic, ps in token.parts.items():
                out.setdefault(topic, set()).update(ps)
        return {t: sorted(ps) for t, ps in sorted(out.items())}

    def write(self, records: DataFrame, batch_id: int, *, slices: int | None = None,
              check: Callable[[], None] | None = None, tables: Mapping[str, str] | None = None) -> None:
        """Write a batch's records (each Kafka partition's rows in one Spark partition, in order; optional
        ``error`` column: verdict rows) in one transaction per Spark partition, skipping the Kafka partitions
        earlier attempts committed; then ``check`` (the batch's verdict), then the resolved record.
        ``slices``: an upper bound of the Spark partitions of ``records`` (recorded before any transaction
        starts, so that the next run aborts whatever this one leaves open); ``tables``: topic -> table."""
        from pyspark.sql import functions as F

        spec = self.spec(batch_id, slices)
        committed = spec["committed"]
        if committed:
            done = [f"{t}\x00{p}" for t, ps in committed.items() for p in ps]
            records = records.filter(~F.concat_ws("\x00", "topic", F.col("partition").cast("string")).isin(done))
        columns = ["topic", "partition", "key", "value", "headers", "commit_ts", "order_file"]
        if "error" in records.columns:
            columns.append("error")
        if self.jvm is not None:
            write_slices, java = self.jvm
            results = write_slices(records.select(*columns), {**spec, **java})
        else:
            results = records.select(*columns).mapInArrow(slice_writer(spec), RESULT_DDL)
        self.finish(results, batch_id, check=check, tables=tables)

    @property
    def in_python(self) -> bool:
        """Whether the slices are written by :func:`slice_writer` in Python workers (else by the JVM writer of
        the Spark layer, ``jvm``), which is what lets an encode stage write its own output
        (:func:`fused_writer`)."""
        return self.jvm is None

    def spec(self, batch_id: int, slices: int | None = None) -> dict[str, Any]:
        """What the slice writers of ``batch_id`` get (plain data); the writer ids up to ``slices`` recorded first."""
        self.start()
        assert self.query is not None
        stream = _stream(batch_id)
        if slices is not None and slices > self._writers.get(stream, 0):
            self._writers[stream] = slices
            self._save_state()
        return {"producer": self.producer_conf, "consumer": self.consumer_conf, "query": self.query,
                "stream": stream, "batch": batch_id, "control_topic": self.control_topic,
                "start_offset": self._end_offset(), "committed": self.committed(batch_id),
                "input_chars": self.input_chars, "timeout": self.timeout}

    def finish(self, results: DataFrame, batch_id: int, *, check: Callable[[], None] | None = None,
               tables: Mapping[str, str] | None = None) -> None:
        """Run the slice writers (``results``: their :data:`RESULT_DDL` rows, which Spark computes now), then
        ``check`` (the batch's verdict), then the batch's resolved record."""
        stream = _stream(batch_id)
        rows = results.collect()
        statuses: dict[str, int] = {}
        for row in rows:
            statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        self.last_slices = (batch_id, statuses)
        tokens = self._tokens.setdefault((stream, batch_id), {})
        refused = []
        for row in rows:
            if row["status"] == "refused":
                refused.append(row["token"])
            elif row["token"]:
                tokens[int(row["writer"])] = Token.from_json(row["token"])
        top = max((int(r["writer"]) for r in rows), default=-1)
        if top >= self._writers.get(stream, 0):
            self._writers[stream] = top + 1
            self._save_state()
        if check is not None:
            check()
        if refused:
            raise DeliveryError(f"{len(refused)} slice(s) of batch {batch_id} were not committed: the batch was "
                                f"refused while it was encoded ({str(refused[0])[:300]}).")
        if stream == RUN:
            failpoint("eos.before-resolved")
            self._publish_resolved(batch_id, tables or {})
        for key in [k for k in self._tokens if k[0] == stream and k[1] < batch_id]:  # never written again
            del self._tokens[key]

    def _end_offset(self) -> int:
        with _consumer(self.consumer_conf, "read_uncommitted") as consumer:
            return _watermarks(consumer, self.control_topic)[1]

    def _publish_resolved(self, batch_id: int, tables: Mapping[str, str]) -> None:
        """Merge the batch's tokens into the per-table inputs; write the query's resolved record."""
        for token in self._tokens.get((RUN, batch_id), {}).values():
            for topic, by_input in token.inputs.items():
                table = tables.get(topic, topic)
                have = self._inputs.setdefault(table, {})
                for input_, ts in by_input.items():
                    have[input_] = max(have.get(input_, 0), ts)
        record = resolved_record(self.query or "", max(batch_id, self._resolved_batch), self._inputs)
        self.resolved = dict(record["tables"])
        self._resolved_batch = record["batch"]
        self._resolved_producer().produce(self.control_topic, json.dumps(record, separators=(",", ":")).encode("utf-8"),
                               resolved_key(self.query or "").encode("utf-8"), CONTROL_PARTITION)
        if self._producer.flush(self.admin_timeout):
            raise DeliveryError(f"The resolved record of batch {batch_id} was not delivered to "
                                f"{self.control_topic!r} within {self.admin_timeout:g} s.")

    def _resolved_producer(self) -> Any:
        """The driver's producer of resolved records (idempotent, no transactions), made when the run starts so
        that it has its producer id by the end of the first batch."""
        if self._producer is None:
            from confluent_kafka import Producer

            conf = {**self.producer_conf, "linger.ms": 0}
            conf["logger"] = kafka_logger(conf=conf)
            self._producer = Producer(conf)
            self._producer.poll(0)
        return self._producer

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.admin_timeout)
            self._producer = None
        close_consumers()


def _stream(batch_id: int) -> str:
    return REPLAY if batch_id >= REPLAY_BATCH_BASE else RUN
