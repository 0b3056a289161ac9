"""Where the encoded records of a micro-batch go: a real Kafka cluster, or local files.

Both sinks take the stage's output (:data:`~avro_registry_sink.model.KAFKA_DDL`: ``topic``,
``partition``, ``key``, ``value``, ``headers``, ``commit_ts``) with its order columns (``order_version``,
``order_file``, ``order_line``: table version, input file or partition, line or offset). The job hands the
Kafka sink each Kafka partition's rows in one Spark partition, sorted by :data:`RECORD_ORDER`; the file
sink orders each topic's rows itself (:data:`FILE_ORDER`), with no shuffle.

* :class:`KafkaSink` - topics are created on the driver (``partition-num`` partitions, ``replication-factor``
  or the broker's) when missing (unless ``auto-create-topic=false``), and the partition count a topic
  really has is what the dispatch uses. Records are written by Spark's Kafka sink (``spark-sql-kafka-0-10``),
  or, when that package is not on the session, by confluent-kafka's producer inside ``foreachPartition``,
  flushed before the task ends; both idempotent with ``acks=all`` under the default ``required-acks=-1``,
  and both given the same TLS/SASL/compression settings (:mod:`avro_registry_sink.kafka.options`). The
  connection is checked once before the first batch (:meth:`KafkaSink.check`). A delivery failure fails
  the task, so the batch is not committed and is replayed on restart (at least once). With
  ``delivery="exactly-once"`` the records go through a transactional producer (the JVM slice writer of
  :mod:`~avro_registry_sink.spark.sinks.jvm_writer` with ``producer="spark"``/``"auto"``, confluent-kafka's in Python
  workers with ``"confluent"``), one transaction
  per Spark partition of the write with a commit token in the control topic
  (:class:`~avro_registry_sink.kafka.delivery.TransactionalWriter`): a rerun skips the Kafka partitions committed.
* :class:`FileSink` - the embedded default (``file:///dir?protocol=avro``): the same records as JSON Lines,
  one file per (topic, batch, table version, input file or partition), numbered in input order:
  ``<dir>/<topic>/batch-<id>-part-<n>.jsonl``, key and
  value in hex (``00`` + 4-byte schema id + Avro body: the Confluent frame is visible at a glance), a
  tombstone's value ``null``. Spark's own text writer writes them (the JSON is built by Spark SQL) into a
  staging directory, and Hadoop ``FileSystem`` renames move them into place once the batch's checks
  passed. A batch is visible only once complete, and a replayed batch replaces its own files, so the file
  sink is exactly once.
  :func:`read_file_sink` reads them back in order.

Executors get only plain data (paths, a config dict); producers and admin clients are built where
they are used and never cross a process boundary.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from avro_registry_sink.errors import AvroSinkError, ConfigError
from avro_registry_sink.kafka.client import client_conf, connect, kafka_logger, refresh, wait_hosted
from avro_registry_sink.kafka.options import DEFAULT_KAFKA, KafkaOptions, spark_kafka_options
from avro_registry_sink.model import KAFKA_COLUMNS
from avro_registry_sink.redact import redact_text, secret_values
from avro_registry_sink.settings.config import DELIVERY_MODES, DeliveryMode, SinkConfig, SinkKind
from avro_registry_sink.spark.runtime.session import apply_hadoop_conf, has_class
from avro_registry_sink.spark.sinks import jvm_writer
from avro_registry_sink.spark.stages.file_lines import to_lines
from avro_registry_sink.storage_fs import StorageURI, parse_storage_uri

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from avro_registry_sink.kafka.delivery import TransactionalWriter
    from avro_registry_sink.storage_fs import StoreFS

__all__ = [
    "DELIVERY_WRITERS",
    "RECORD_ORDER",
    "SINK_KINDS",
    "STAGING_DIR",
    "FileRecord",
    "FileSink",
    "KafkaSink",
    "KafkaSinkError",
    "Sink",
    "SinkClass",
    "build_sink",
    "has_spark_kafka",
    "read_file_sink",
]


class KafkaSinkError(AvroSinkError):
    """Records could not be delivered to Kafka (the batch is not committed)."""


class Sink(Protocol):
    """What the job asks of a sink, and all it asks: the job reads these members and never probes a sink for
    others (``tests/unit/test_architecture_seams.py`` keeps it so)."""

    #: What the sink is, for progress and results (no credentials).
    description: str

    @property
    def staged(self) -> bool:
        """Whether a batch is written aside and published only after its verdict (``write``'s ``check``): such
        a sink takes a write back, so a bad-row budget needs no count before the write."""
        ...

    @property
    def exactly_once(self) -> bool:
        """Whether the sink writes through Kafka transactions and commit tokens (:attr:`transactions`)."""
        ...

    @property
    def transactions(self) -> TransactionalWriter | None:
        """Exactly once's writer (slices, commit tokens, the resolved ts); ``None`` for any other sink."""
        ...

    @property
    def resolved(self) -> dict[str, int]:
        """Exactly once: per table, the highest commit ts whose rows are all delivered (else empty)."""
        ...

    @property
    def query(self) -> str | None:
        """Exactly once: the query id of the transactional ids and tokens (else ``None``)."""
        ...

    def prepare(self, topics: Mapping[str, int]) -> dict[str, int]:
        """Make sure the topics exist; returns the partition count of each (wanted count when new)."""
        ...

    def check(self) -> None:
        """Once before the first batch: reach the sink (wrong credentials fail here, in seconds)."""
        ...

    def write(self, records: DataFrame, batch_id: int, *, check: Callable[[], None] | None = None,
              tables: Mapping[str, str] | None = None, slices: int | None = None) -> None:
        """Write one batch's records; raise to fail the batch. ``check`` (the batch's verdict, which may
        raise) is called once the records are written and before they are published, where the sink can
        hold them back (:attr:`FileSink.staged`). ``tables`` (topic -> table) and ``slices`` (an upper bound
        of the Spark partitions of ``records``) serve exactly-once Kafka writes."""
        ...

    def fused_spec(self, batch_id: int, slices: int) -> dict[str, Any] | None:
        """The fused write: what the slice writers of ``batch_id`` get when the encode stage writes the records
        itself, in the same Python worker (:func:`~avro_registry_sink.kafka.delivery.fused_writer`); ``None`` when this
        sink cannot take such a write."""
        ...

    def write_fused(self, results: DataFrame, batch_id: int, *, check: Callable[[], None] | None = None,
                    tables: Mapping[str, str] | None = None) -> None:
        """Finish a fused write (``results``: the slice writers' rows, which Spark computes now), then ``check``."""
        ...

    def close(self) -> None: ...


class SinkClass(Protocol):
    """A kind of sink, as :data:`SINK_KINDS` holds it: what is known before one is built, and how it is built."""

    @property
    def staged(self) -> bool: ...

    def from_config(self, config: SinkConfig, spark: SparkSession | None = None, *, producer: str = "auto",
                    default_dir: Path | None = None, checkpoint: StoreFS | None = None) -> Sink: ...


# --------------------------------------------------------------------------------------------------
# File sink

_BATCH_FILE = re.compile(r"batch-(?P<batch>\d+)-part-(?P<part>\d+)\.jsonl")


@dataclass(frozen=True)
class FileRecord:
    """One record of the file sink."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    commit_ts: int | None
    batch: int

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


#: Where :class:`FileSink` stages a batch before moving it into place; a batch with files under
#: ``_staging/batch-<id>/`` is being written (or its writer died): :func:`read_file_sink` skips it.
STAGING_DIR = "_staging"

#: The order of the records a batch hands to the Kafka sink: per Spark partition, by topic and Kafka partition,
#: each partition's rows in input order (table version, file, line / input partition, offset).
RECORD_ORDER = ("topic", "partition", "order_version", "order_file", "order_line")

#: The file sink's order: per topic, by input (table version, file, line / input partition, offset). One staged
#: file per (topic, table version, input file or partition); see :func:`_publish` for how they are numbered.
FILE_ORDER = ("topic", "order_version", "order_file", "order_line")

#: Spark's output file names: ``part-<task partition>-<uuid>.c<file>.txt``.
_SPARK_PART = re.compile(r"part-(\d+)-.*\.txt$")


def _file_lines(records: DataFrame, batch_id: int) -> tuple[DataFrame, tuple[str, ...]]:
    """Each record as the file sink's JSON line, in the order of :data:`FILE_ORDER`; and the columns to
    partition the written files by.

    Records that already are lines (``topic, line`` and the order columns: the job's encode stage builds
    them) are only put in order; Kafka-shaped records are turned into lines by the same Arrow code
    (:mod:`~avro_registry_sink.spark.stages.file_lines`, no Spark SQL per byte). Records with the order columns are
    sorted by :data:`FILE_ORDER` within each Spark partition (no shuffle: every input file or partition is
    read by one task) and written one file per (topic, table version, input file); others keep their order
    within each Spark partition, one file per (topic, Spark partition).
    """
    from pyspark.sql import functions as F

    ordered = set(FILE_ORDER) <= set(records.columns)
    if "line" not in records.columns:
        if not ordered:  # numbered first, so that the sort by topic keeps each topic's rows in their order
            records = records.withColumn("_seq", F.monotonically_increasing_id())
        keep = FILE_ORDER[1:] if ordered else ("_seq",)
        types = {f.name: f.dataType.simpleString() for f in records.schema.fields}
        ddl = ", ".join(f"{name} {kind}" for name, kind in [("topic", "string"), ("line", "string")]
                        + [(name, types[name]) for name in keep])
        records = records.select(*KAFKA_COLUMNS, "commit_ts", *keep).mapInArrow(to_lines(batch_id, keep), ddl)
    if ordered:
        return records.sortWithinPartitions(*FILE_ORDER).select("line", *FILE_ORDER[:-1]), FILE_ORDER[:-1]
    return records.sortWithinPartitions("topic", "_seq").select("line", "topic"), ("topic",)


class FileSink:
    """Kafka-shaped records as JSON Lines under ``path``, a local directory or a storage URI (see the module docs).

    Spark's text writer writes a batch under ``<path>/_staging/batch-<id>/topic=<topic>/...`` (Spark's commit
    protocol); once ``write``'s ``check`` passed, the driver renames its files, in each topic's input order,
    to ``<path>/<topic>/batch-<id>-part-<n>.jsonl`` through
    Hadoop's ``FileSystem`` (the session's Hadoop settings carry the store's credentials, so executors get
    none) and removes the staging directory: a batch is complete once nothing is left under it. A rerun
    of a batch removes what an earlier attempt left and writes it again.

    >>> # sink = FileSink("/tmp/out", partitions=3); sink.write(records_df, batch_id=0)
    >>> # sink = FileSink("s3://bucket/out?endpoint=http://127.0.0.1:9000&access-key=...&secret-access-key=...")
    """

    #: A batch is written to a staging directory and published after its verdict (``write``'s ``check``).
    staged: ClassVar[bool] = True
    #: Exactly once by its staging, without Kafka transactions.
    exactly_once: ClassVar[bool] = False
    transactions: ClassVar[TransactionalWriter | None] = None
    query: ClassVar[str | None] = None

    def __init__(self, path: str | os.PathLike[str] | StorageURI, *, partitions: int = 3) -> None:
        self.location = path if isinstance(path, StorageURI) else parse_storage_uri(str(path), option="sink-uri")
        self.store = self.location.filesystem()
        self.path: Path | str = Path(self.location.path) if self.location.is_local else str(self.location)
        self.partitions = partitions
        self.description = f"file://{self.path}" if self.location.is_local else str(self.location)

    @classmethod
    def from_config(cls, config: SinkConfig, spark: SparkSession | None = None, *, producer: str = "auto",
                    default_dir: Path | None = None, checkpoint: StoreFS | None = None) -> FileSink:
        """The file sink of ``config`` (its ``path``, else ``default_dir``)."""
        path = config.path or (str(default_dir) if default_dir is not None else None)
        if not path:
            raise ConfigError("The file sink needs a directory: file:///path/to/dir?protocol=avro.", option="sink-uri")
        return cls(path, partitions=config.partition_num)

    @property
    def resolved(self) -> dict[str, int]:
        return {}

    def prepare(self, topics: Mapping[str, int]) -> dict[str, int]:
        self.store.make_dirs()
        return {topic: wanted or self.partitions for topic, wanted in topics.items()}

    def check(self) -> None:
        """Nothing to reach before the first batch: the directory is made by :meth:`prepare`."""

    def fused_spec(self, batch_id: int, slices: int) -> dict[str, Any] | None:
        return None  # its lines are built and ordered by Spark's text writer, never in the encode stage

    def write_fused(self, results: DataFrame, batch_id: int, *, check: Callable[[], None] | None = None,
                    tables: Mapping[str, str] | None = None) -> None:
        raise ConfigError(f"The file sink {self.description} takes no fused write (its fused_spec is None); "
                          f"batch {batch_id} goes through write().", option="sink-uri")

    def write(self, records: DataFrame, batch_id: int, *, check: Callable[[], None] | None = None,
              tables: Mapping[str, str] | None = None, slices: int | None = None) -> None:
        spark = records.sparkSession
        apply_hadoop_conf(spark, self.location.hadoop_conf())
        staging = self.location.hadoop_uri(f"{STAGING_DIR}/batch-{batch_id:010d}")
        lines, by = _file_lines(records, batch_id)
        (lines.write.mode("overwrite").partitionBy(*by)
         .option("compression", "none").option("maxRecordsPerFile", 0).text(staging))
        root = self.location.hadoop_uri()
        fs, hpath = _filesystem(spark, root)
        if check is not None:
            try:
                check()
            except BaseException:
                fs.delete(hpath(staging), True)  # nothing of a failed batch is published
                raise
        _publish(fs, hpath, root, self.store, batch_id)

    def close(self) -> None:
        pass


def _filesystem(spark: SparkSession, root: str) -> tuple[Any, Any]:
    """Hadoop's ``FileSystem`` of ``root`` (the raw local one for ``file:``, so that ``.crc`` side files
    stay in the staging directory) and Hadoop's ``Path`` class."""
    jvm = spark._jvm
    if jvm is None:
        raise ConfigError("The file sink needs a classic SparkSession with a JVM on the driver (Hadoop's FileSystem); "
                          "this session has none (Spark Connect).")
    hpath = jvm.org.apache.hadoop.fs.Path
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    if root.startswith("file:"):
        fs = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
        fs.initialize(jvm.java.net.URI("file:///"), conf)
    else:
        fs = hpath(root).getFileSystem(conf)
    return fs, hpath


def _staged_parts(store: Any, staging: str) -> dict[str, list[tuple[tuple[int, str, int, str], str]]]:
    """Spark's part files under a staging directory (``staging``: relative to the sink's ``store``), per topic,
    each with its place in the topic's order: (table version, input file or partition, Spark's task
    partition, file name). Listed by the driver's own filesystem layer in one call."""
    from urllib.parse import unquote

    found: dict[str, list[tuple[tuple[int, str, int, str], str]]] = {}
    for relpath in store.list_files(staging):
        directories, _, name = relpath[len(staging) + 1:].rpartition("/")
        part = _SPARK_PART.match(name)
        if part is None:
            continue
        values = {k: unquote(v) for k, _, v in (d.partition("=") for d in directories.split("/") if "=" in d)}
        if "topic" not in values:
            continue
        version = values.get("order_version", "0")
        place = (int(version) if version.lstrip("-").isdigit() else 0, values.get("order_file", ""), int(part.group(1)),
                 name)
        found.setdefault(values["topic"], []).append((place, relpath))
    return found


def _publish(fs: Any, hpath: Any, root: str, store: Any, batch_id: int) -> None:
    """Move a staged batch into place (Hadoop ``FileSystem`` renames, on the driver): first the files an
    earlier attempt of the batch left are removed, then each topic's staged files are renamed in the
    topic's order to ``<topic>/batch-<id>-part-<n>.jsonl`` (n = 0, 1, ...), then the staging directory goes."""
    prefix = f"batch-{batch_id:010d}-part-"
    for status in fs.listStatus(hpath(root)):
        if status.isDirectory() and status.getPath().getName() != STAGING_DIR:
            for old in fs.globStatus(hpath(status.getPath(), prefix + "*")) or []:
                fs.delete(old.getPath(), False)
    staging = f"{STAGING_DIR}/batch-{batch_id:010d}"
    staged = hpath(root.rstrip("/") + "/" + staging)
    for topic, places in _staged_parts(store, staging).items():
        target = hpath(root.rstrip("/") + "/" + topic)
        fs.mkdirs(target)
        for number, (_, relpath) in enumerate(sorted(places, key=lambda p: p[0])):
            final = hpath(target, f"{prefix}{number:05d}.jsonl")
            if not fs.rename(hpath(root.rstrip("/") + "/" + relpath), final):
                raise OSError(f"Cannot move {relpath} to {final.toString()}; batch {batch_id} "
                              "is not committed and a rerun writes it again.")
    fs.delete(staged, True)
    parent = staged.getParent()
    if fs.exists(parent) and not list(fs.listStatus(parent)):
        fs.delete(parent, True)


def read_file_sink(path: str | os.PathLike[str] | StorageURI, topic: str | None = None) -> Iterator[FileRecord]:
    """The records of a :class:`FileSink` directory (local or a storage URI), per topic in write order.

    >>> # [r for r in read_file_sink("/tmp/out", "shop_orders") if r.is_tombstone]
    """
    location = path if isinstance(path, StorageURI) else parse_storage_uri(str(path), option="sink-uri")
    store = location.filesystem()
    unfinished = {int(m.group(1)) for relpath in store.list_files(STAGING_DIR)
                  if (m := re.match(rf"{STAGING_DIR}/batch-(\d+)/", relpath))}
    files: dict[str, list[tuple[int, int, str]]] = {}
    for relpath in store.list_files(topic or ""):
        name_topic, _, name = relpath.rpartition("/")
        m = _BATCH_FILE.fullmatch(name)
        if m and name_topic and "/" not in name_topic and int(m.group("batch")) not in unfinished:
            files.setdefault(name_topic, []).append((int(m.group("batch")), int(m.group("part")), relpath))
    for name_topic in sorted(files):
        for _, _, relpath in sorted(files[name_topic]):
            for line in store.read_text(relpath).splitlines():
                if not line.strip():
                    continue
                raw = json.loads(line)
                yield FileRecord(
                    topic=raw["topic"],
                    partition=int(raw["partition"]),
                    key=bytes.fromhex(raw["key"]) if raw.get("key") is not None else None,
                    value=bytes.fromhex(raw["value"]) if raw.get("value") is not None else None,
                    headers=tuple(
                        (h["key"], bytes.fromhex(h["value"]) if h.get("value") is not None else None)
                        for h in raw.get("headers") or ()
                    ),
                    commit_ts=raw.get("commit_ts"),
                    batch=int(raw.get("batch", 0)),
                )


# --------------------------------------------------------------------------------------------------
# Kafka sink


def has_spark_kafka(spark: SparkSession) -> bool:
    """Whether Spark's Kafka data source (``spark-sql-kafka-0-10``) is on the session's classpath."""
    return has_class(spark, "org.apache.spark.sql.kafka010.KafkaSourceProvider")


#: Bytes allowed above max-message-bytes for a record batch's framing and the record headers.
_FRAMING_ROOM = 4096

#: confluent-kafka producer settings that keep delivery ordered per partition (idempotence and acks come
#: from :class:`KafkaOptions`: ``required-acks=-1``, the default, makes the producer idempotent).
ORDERED_PRODUCER = {
    "max.in.flight.requests.per.connection": 5,
    "linger.ms": 5,
}

#: Batching of Spark's (Java) Kafka producer. The Java client's default ``batch.size`` (16 KiB) makes one
#: produce request per ~60 records here, and on a small cluster the broker's per-request work then bounds
#: the write (1M records to 3 partitions: 1.6-2.5 s with the defaults, 0.9-1.2 s with 256 KiB). 1 MiB, one
#: batch a request at the client's ``max.request.size``: the write stage of 10^6 debezium-json records took
#: 2.10-2.33 s against 2.45-2.77 s (3 partitions) and 3.34-3.80 s against 4.23-4.44 s (300 partitions, 75 a
#: writer, each partition's records in a row: ``RECORD_ORDER``).
#: librdkafka (the confluent path) already batches up to 1 MB. Sink options (``kafka.*``) override these.
SPARK_PRODUCER_BATCHING = {
    "batch.size": 1048576,
    "linger.ms": 5,
}


def spark_batching(max_request: int | None) -> dict[str, str]:
    """:data:`SPARK_PRODUCER_BATCHING`, a batch never larger than what the topic takes (``max_request``).

    >>> spark_batching(None)["batch.size"], spark_batching(65536)["batch.size"]
    ('1048576', '65536')
    """
    size = SPARK_PRODUCER_BATCHING["batch.size"]
    return {"batch.size": str(min(size, max_request) if max_request else size),
            "linger.ms": str(SPARK_PRODUCER_BATCHING["linger.ms"])}


def _jvm_writer_missing(spark: SparkSession | None) -> str | None:
    """Why the JVM slice writer of exactly-once delivery cannot run on ``spark`` (None: it can)."""
    if spark is None:
        return "no Spark session"
    if not has_spark_kafka(spark):
        return "Spark's Kafka connector (and its Kafka client) is not on the session"

    try:
        jvm_writer.load(spark)
    except jvm_writer.JvmWriterUnavailable as exc:
        return str(exc)
    return None


def _produce_partition(conf: Mapping[str, Any]) -> Any:
    """The ``foreachPartition`` function of the confluent-kafka producer path (closes over a dict)."""

    def produce(rows: Iterable[Any]) -> None:
        from confluent_kafka import KafkaException, Producer

        secrets = secret_values(conf)
        producer = Producer({**conf, "logger": kafka_logger(conf=conf)})
        failures: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None and len(failures) < 5:
                failures.append(redact_text(f"{msg.topic()}[{msg.partition()}]: {err}", secrets))

        for row in rows:
            headers: list[tuple[str, str | bytes | None]] = [
                (h["key"], bytes(h["value"]) if h["value"] is not None else None) for h in row["headers"] or []]
            value = bytes(row["value"]) if row["value"] is not None else None
            key = bytes(row["key"]) if row["key"] is not None else None
            while True:
                try:
                    producer.produce(row["topic"], value=value, key=key, partition=int(row["partition"]),
                                     headers=headers or None, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.5)  # local queue full: let deliveries drain
                except KafkaException as exc:
                    raise KafkaSinkError(redact_text(f"Cannot produce to topic {row['topic']!r}: {exc}", secrets),
                                         topic=row["topic"]) from None
            producer.poll(0)
        remaining = producer.flush(120)
        if remaining:
            raise KafkaSinkError(f"{remaining} records were not delivered to Kafka within 120 s; the batch fails.")
        if failures:
            raise KafkaSinkError("Kafka refused records: " + "; ".join(failures))

    return produce


def _kafka_cause(exc: BaseException) -> str:
    """The Kafka client's exception behind a failed Spark write (``RecordTooLargeException: ...``), else the
    first line of the error."""
    java = getattr(exc, "java_exception", None)
    seen = 0
    while java is not None and seen < 20:
        text = str(java.toString())
        if text.startswith("org.apache.kafka"):
            return text.removeprefix("org.apache.kafka.common.errors.")
        java, seen = java.getCause(), seen + 1
    found = re.search(r"org\.apache\.kafka\.common\.errors\.(\w+: [^\n]*)", str(exc))
    if found:
        return found.group(1)
    text = " ".join(str(exc).split()).split(" Driver stacktrace:")[0]
    return text[:500] + " (the Kafka client's own error is in the executor log)"


class KafkaSink:
    """A real Kafka cluster (see the module docs).

    ``producer`` is ``"spark"`` (Spark's Kafka sink), ``"confluent"`` (confluent-kafka in
    ``foreachPartition``) or ``"auto"`` (Spark's when the session has the package). ``kafka`` holds the
    transport settings (TLS, SASL, acks, compression, topic creation); ``options`` are extra Kafka producer
    settings passed to either path as they are.
    """

    #: Kafka takes no write back: a batch is published as it is written.
    staged: ClassVar[bool] = False

    def __init__(
        self,
        brokers: Iterable[str],
        *,
        partitions: int = 3,
        options: Mapping[str, str] | None = None,
        kafka: KafkaOptions = DEFAULT_KAFKA,
        producer: str = "auto",
        spark: SparkSession | None = None,
        admin_timeout: float = 30.0,
        max_message_bytes: int | None = None,
        delivery: DeliveryMode | str = DeliveryMode.AT_LEAST_ONCE,
        control_topic: str = "_avro_registry_sink_commits",
        transaction_timeout: float = 60.0,
        checkpoint: StoreFS | None = None,
    ) -> None:
        self.brokers = ",".join(brokers)
        if not self.brokers:
            raise ConfigError("The Kafka sink needs at least one broker address.", option="sink-uri")
        if producer not in ("auto", "spark", "confluent"):
            raise ConfigError(
                f"Invalid Kafka producer {producer!r}: valid values are auto, spark or confluent.",
                option="producer", value=producer,
            )
        if delivery not in DELIVERY_MODES:
            raise ConfigError(f"Invalid delivery {delivery!r}: valid values are " + " or ".join(DELIVERY_MODES) + ".",
                              option="delivery", value=delivery)
        delivery = DeliveryMode(delivery)
        slices_in_jvm: str | None = None  # exactly once: why the JVM slice writer is not used (None: it is)
        if delivery is DeliveryMode.EXACTLY_ONCE:
            if not kafka.is_idempotent:
                raise ConfigError(
                    f"--delivery exactly-once needs required-acks=-1 (Kafka transactions need idempotent producers); "
                    f"the sink has required-acks={kafka.required_acks}.", option="required-acks",
                    value=str(kafka.required_acks))
            if producer != "confluent":
                slices_in_jvm = _jvm_writer_missing(spark)
                if slices_in_jvm is not None and producer == "spark":
                    raise ConfigError(
                        f"--delivery exactly-once with --producer spark writes with the JVM slice writer, which "
                        f"cannot run here: {slices_in_jvm}. Use --producer confluent (confluent-kafka's "
                        "transactional producer) or auto.", option="producer", value=producer)
                producer = "spark" if slices_in_jvm is None else "confluent"
                if slices_in_jvm is not None and spark is not None:
                    logging.getLogger(__name__).warning(
                        "Exactly-once slices are written by confluent-kafka in Python workers: the JVM slice writer "
                        "cannot run here (%s).", slices_in_jvm)
        if producer == "auto":
            producer = "spark" if spark is not None and has_spark_kafka(spark) else "confluent"
        self.producer = producer
        self.delivery = delivery
        self.partitions = partitions
        self.options = dict(options or {})
        self.kafka = kafka
        self.admin_timeout = admin_timeout
        # TiCDC's max-message-bytes bounds key + value + 36; the producers' request limit and the topics this
        # sink creates get room for the record batch framing and headers on top.
        self.max_request = (max_message_bytes + _FRAMING_ROOM) if max_message_bytes else None
        self.description = f"kafka://{self.brokers} ({'Spark Kafka sink' if producer == 'spark' else 'confluent-kafka producer'})"
        self._admin: Any = None  # the driver's AdminClient, made by the first connect and kept for the run
        self.transactions: TransactionalWriter | None = DELIVERY_WRITERS[delivery](
            self, control_topic=control_topic, transaction_timeout=transaction_timeout, checkpoint=checkpoint)

    @classmethod
    def from_config(cls, config: SinkConfig, spark: SparkSession | None = None, *, producer: str = "auto",
                    default_dir: Path | None = None, checkpoint: StoreFS | None = None) -> KafkaSink:
        """The Kafka sink of ``config``; ``checkpoint`` keeps an exactly-once sink's query id and writer ids
        (``delivery.json``)."""
        return cls(config.brokers, partitions=config.partition_num, kafka=config.kafka, producer=producer,
                   spark=spark, max_message_bytes=config.max_message_bytes, delivery=config.delivery,
                   control_topic=config.control_topic, transaction_timeout=config.transaction_timeout,
                   checkpoint=checkpoint)

    # -- topics ---------------------------------------------------------------------------------

    def prepare(self, topics: Mapping[str, int]) -> dict[str, int]:
        """Create missing topics (``partitions`` each, broker default replication); return real counts."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic

        if not topics:
            return {}
        admin, metadata = refresh(self._admin, self.brokers, self.kafka)
        self._admin = admin
        missing = [t for t in topics if t not in metadata.topics]
        if missing and not self.kafka.auto_create_topic:
            raise KafkaSinkError(f"`auto-create-topic` is false, and {missing[0]} not found on {self.brokers} "
                                 "(create the topic, or set auto-create-topic=true).", topic=missing[0])
        if missing:
            futures = admin.create_topics(
                [NewTopic(t, num_partitions=topics[t] or self.partitions,
                          replication_factor=self.kafka.replication_factor or -1,
                          config={"max.message.bytes": str(self.max_request)} if self.max_request else {})
                 for t in missing],
                operation_timeout=self.admin_timeout,
            )
            for topic, future in futures.items():
                try:
                    future.result(self.admin_timeout)
                except KafkaException as exc:
                    if exc.args and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                        continue
                    raise KafkaSinkError(redact_text(f"Cannot create topic {topic!r} on {self.brokers}: {exc}",
                                                     secret_values(self.kafka)), topic=topic) from None
        counts: dict[str, int] = {}
        for _ in range(50):
            metadata = admin.list_topics(timeout=self.admin_timeout)
            for topic in topics:
                meta = metadata.topics.get(topic)
                if meta is not None and meta.error is None and meta.partitions:
                    counts[topic] = len(meta.partitions)
            if len(counts) == len(topics):
                if missing:
                    wait_hosted(admin, {t: counts[t] for t in missing}, self.admin_timeout)
                return counts
            import time

            time.sleep(0.2)
        raise KafkaSinkError(f"Topics {sorted(set(topics) - set(counts))} did not appear on {self.brokers}.")

    def check(self) -> None:
        """Connect once (before any batch): wrong credentials or an untrusted CA fail here, within seconds.
        Exactly once: then the transactions a stopped run left open are aborted and the commit tokens read
        (:meth:`~avro_registry_sink.kafka.delivery.TransactionalWriter.start`)."""
        self._admin, _ = connect(self.brokers, self.kafka)
        if self.transactions is not None:
            self.transactions.start(admin=self._admin)

    @property
    def exactly_once(self) -> bool:
        return self.transactions is not None

    @property
    def resolved(self) -> dict[str, int]:
        """Exactly once: per table, the highest commit ts whose rows are all delivered (else empty)."""
        return dict(self.transactions.resolved) if self.transactions is not None else {}

    @property
    def query(self) -> str | None:
        """Exactly once: the query id of the transactional ids and tokens (``delivery.json`` in the checkpoint)."""
        return self.transactions.query if self.transactions is not None else None

    def fused_spec(self, batch_id: int, slices: int) -> dict[str, Any] | None:
        """Exactly once with the slices written in Python workers: the slice writers' spec of ``batch_id``."""
        if self.transactions is None or not self.transactions.in_python:
            return None
        return self.transactions.spec(batch_id, slices=slices)

    def write_fused(self, results: DataFrame, batch_id: int, *, check: Callable[[], None] | None = None,
                    tables: Mapping[str, str] | None = None) -> None:
        if self.transactions is None:
            raise ConfigError(f"The Kafka sink {self.description} delivers at least once and takes no fused write; "
                              f"batch {batch_id} goes through write().", option="delivery")
        self.transactions.finish(results, batch_id, check=check, tables=tables)

    # -- records --------------------------------------------------------------------------------

    def write(self, records: DataFrame, batch_id: int, *, check: Callable[[], None] | None = None,
              tables: Mapping[str, str] | None = None, slices: int | None = None) -> None:
        if self.transactions is not None:  # verdict rows abort their slices; check() raises the verdict
            self.transactions.write(records, batch_id, slices=slices, check=check, tables=tables)
            return
        self._write(records.drop("error") if "error" in records.columns else records, batch_id)
        if check is not None:  # Kafka takes no write back: a batch failing here is delivered, not committed
            check()

    def _producer_conf(self) -> dict[str, Any]:
        """The confluent-kafka producer settings (without the logger, which does not travel)."""
        conf: dict[str, Any] = {**client_conf(self.brokers, self.kafka, "producer"), **ORDERED_PRODUCER}
        conf.pop("logger")  # executors make their own (a logger does not travel)
        if self.max_request:
            conf["message.max.bytes"] = self.max_request
        conf.update(self.options)
        return conf

    def _java_conf(self, role: str) -> dict[str, str]:
        """The Java Kafka client's settings of Spark's Kafka sink (``role="producer"``) and of the JVM slice
        writer's reads of the control topic (``"consumer"``), without the ``kafka.`` prefix."""
        conf = {"bootstrap.servers": self.brokers,
                **{k.removeprefix("kafka."): v for k, v in spark_kafka_options(self.kafka, role).items()}}
        if role == "producer":
            conf["max.in.flight.requests.per.connection"] = "5"
            conf.update(spark_batching(self.max_request))
            if self.max_request:
                conf["max.request.size"] = str(self.max_request)
            conf.update({name: str(value) for name, value in self.options.items()})
        return conf

    def _write(self, records: DataFrame, batch_id: int) -> None:
        if self.producer == "spark":
            writer = records.select(*KAFKA_COLUMNS).write.format("kafka").options(
                **{f"kafka.{name}": value for name, value in self._java_conf("producer").items()})
            try:
                writer.save()
            except Exception as exc:  # py4j: the Kafka producer's own error is somewhere in the Java chain
                raise KafkaSinkError(redact_text(
                    f"Writing batch {batch_id} to Kafka at {self.brokers} failed: {_kafka_cause(exc)}. The batch is "
                    "not committed; a restart retries it.", secret_values(self.kafka)), brokers=self.brokers,
                ) from None
        else:
            records.foreachPartition(_produce_partition(self._producer_conf()))

    def close(self) -> None:
        if self.transactions is not None:
            self.transactions.close()


# --------------------------------------------------------------------------------------------------
# The registries: a writer per delivery mode, a sink class per kind


def _at_least_once(sink: KafkaSink, *, control_topic: str, transaction_timeout: float,
                   checkpoint: StoreFS | None) -> None:
    """At least once: the sink's own producer writes each batch (:meth:`KafkaSink._write`); a rerun writes it again."""
    return None


def _exactly_once(sink: KafkaSink, *, control_topic: str, transaction_timeout: float,
                  checkpoint: StoreFS | None) -> TransactionalWriter:
    """Exactly once: transactional slices and commit tokens (:class:`~avro_registry_sink.kafka.delivery.TransactionalWriter`),
    written by the JVM slice writer when the sink's producer is Spark's, else by confluent-kafka in Python workers."""
    # exactly-once's protocol (0.1 s) only for a sink that delivers exactly once
    from avro_registry_sink.kafka.delivery import TransactionalWriter

    jvm = None
    if sink.producer == "spark":
        jvm = (jvm_writer.write, {"java_producer": sink._java_conf("producer"),
                                  "java_consumer": sink._java_conf("consumer")})
    transactions = TransactionalWriter(sink.brokers, sink.kafka, sink._producer_conf(), control_topic=control_topic,
                                       transaction_timeout=transaction_timeout, store=checkpoint,
                                       admin_timeout=sink.admin_timeout, jvm=jvm)
    writer = ("the Kafka client's transactional producer in the executors' JVM" if sink.producer == "spark"
              else "confluent-kafka transactional producer")
    sink.description = f"kafka://{sink.brokers} ({writer}, exactly once, control topic {control_topic})"
    return transactions


#: The writer of each delivery mode (:class:`~avro_registry_sink.settings.config.DeliveryMode`) of a Kafka sink: what
#: :attr:`KafkaSink.transactions` becomes (``None``: the sink's own producer). One entry per mode, which
#: ``tests/unit/test_architecture_seams.py`` checks.
DELIVERY_WRITERS: Mapping[DeliveryMode, Callable[..., TransactionalWriter | None]] = {
    DeliveryMode.AT_LEAST_ONCE: _at_least_once,
    DeliveryMode.EXACTLY_ONCE: _exactly_once,
}

#: The sink class of each kind of sink URI (:class:`~avro_registry_sink.settings.config.SinkKind`, the parsed scheme): the
#: one place a kind is turned into a sink (:func:`build_sink`) or asked what it is before one is built.
SINK_KINDS: Mapping[SinkKind, SinkClass] = {
    SinkKind.KAFKA: KafkaSink,
    SinkKind.FILE: FileSink,
}


def build_sink(config: SinkConfig, spark: SparkSession | None = None, *, producer: str = "auto",
               default_dir: Path | None = None, checkpoint: StoreFS | None = None) -> Sink:
    """The sink a :class:`~avro_registry_sink.settings.config.SinkConfig` describes (:data:`SINK_KINDS` of its kind): Kafka
    for ``kafka://``, files for ``file://`` or a storage URI. ``checkpoint`` keeps an exactly-once Kafka sink's query
    id and writer ids (``delivery.json``); ``default_dir``: a file sink's directory when the URI names none."""
    return SINK_KINDS[config.scheme].from_config(config, spark, producer=producer, default_dir=default_dir,
                                                 checkpoint=checkpoint)
