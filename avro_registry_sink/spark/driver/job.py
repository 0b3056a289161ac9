"""The streaming job: change events in, Confluent-framed flat Avro out, one micro-batch at a time.

::

    source stream ──foreachBatch──> driver: which (schema, table, version)s are in the batch?
                                     resolve their definitions (schema files / the DDL catalog)
                                     SchemaManager.prepare_batch  (registry calls, once per new schema)
                                     sink.prepare(topics)         (create topics, learn partition counts)
                                   one Spark job per batch, on the executors:
                                              parse input -> change rows | bad-input rows
                                              encode (Avro, partition dispatch), counted on the way (tally)
                                              Kafka: each Kafka partition's rows in one task, in input order
                                              files: each input file's rows in order, no shuffle
                                   driver: the batch's verdict (misconfiguration, bad-row budget), then
                                   the file sink publishes; bad input -> dead-letter file; progress

A stop by SIGINT or SIGTERM starts no new batch, lets the running one finish within ``stop_timeout`` seconds, and
abandons it after that (or at a second signal): its Spark jobs cancelled, exactly once's open transactions aborted,
nothing of it committed (:class:`StopRequested`); :attr:`JobResult.stop` says which (the CLI exits 130 or 143).

A batch that raises (registry incompatibility or unavailability, an unreachable broker) is not
committed: the query stops with the error, and the next run resumes from the checkpoint with that
batch (to Kafka with ``delivery = "exactly-once"``, skipping the Kafka partitions an earlier attempt
committed: :mod:`avro_registry_sink.kafka.delivery`). Bad lines and messages do not fail a batch: they are written, with their location and reason,
to ``<checkpoint>/dead-letter/batch-<id>.jsonl`` and counted. Executors receive only plain data
(plans, table definitions, options); the registry client, the manager and the sink's admin client
stay on the driver.

Checkpoint directory layout: ``spark/`` (the query's offsets and commits), ``state/`` (held files, file
numbers, changelog table versions, the table of each topic and subject: one file per batch, current once
the batch commits, see :mod:`~avro_registry_sink.side_state`), ``dead-letter/``, ``job.json`` (the
source it belongs to: a checkpoint is not reused for another source).

>>> # from avro_registry_sink.spark.driver.job import JobOptions, run_job
>>> # result = run_job(spark, JobOptions(source=parse_source("/data/ticdc"), checkpoint=Path("ck")))
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from avro_registry_sink.errors import AvroSinkError, ConfigError
from avro_registry_sink.failpoints import failpoint
from avro_registry_sink.formats import format_for_file
from avro_registry_sink.history.journal import HistoryJournal, HistoryRecorder, TableSources
from avro_registry_sink.kafka.client import client_conf, connect
from avro_registry_sink.kafka.delivery import RESULT_DDL, fused_writer
from avro_registry_sink.manager import SchemaManager, TablePlan, require_data_contracts
from avro_registry_sink.model import (
    PlanKey,
    RefusalReason,
    dead_letter_record,
    refusal_reason,
)
from avro_registry_sink.ops.logs import CURRENT_BATCH
from avro_registry_sink.ops.metrics import KafkaEndOffsets, StorageBacklog, interval_seconds, storage_refresh_seconds
from avro_registry_sink.ops.progress import (
    BatchReport,
    JobTotals,
    NullProgress,
    ProgressReporter,
    SchemaVersion,
    stop_sentence,
)
from avro_registry_sink.redact import guard_loggers, redact_text, secret_values
from avro_registry_sink.routing.owners import TopicOwners
from avro_registry_sink.routing.rules import TopicRouter, build_router
from avro_registry_sink.routing.selection import TableSelection
from avro_registry_sink.settings.config import (
    DeliveryMode,
    OnIncompatible,
    SinkConfig,
    SinkKind,
    parse_trigger_interval,
)
from avro_registry_sink.side_state import SideState
from avro_registry_sink.sources.storage import StorageLayout
from avro_registry_sink.spark.driver import checkpoint_files
from avro_registry_sink.spark.driver.batch_changelog import ChangelogBatches
from avro_registry_sink.spark.driver.batch_storage import StorageBatches
from avro_registry_sink.spark.driver.job_errors import JobFailed, SparkResourceError
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.runtime.packages import ivy_dir, kafka_package
from avro_registry_sink.spark.runtime.session import (
    ASSUMED_MESSAGE_BYTES,
    PROVIDED_ARTIFACTS,
    apply_hadoop_conf,
    conf_value,
    list_on_driver,
    local_checkpoint_logs,
    local_session,
    master_of,
    memory_bytes,
    spread_file_partitions,
    store_packages,
    trigger_budget,
)
from avro_registry_sink.spark.sinks import sinks
from avro_registry_sink.spark.sinks.sinks import RECORD_ORDER, SINK_KINDS, Sink, has_spark_kafka
from avro_registry_sink.spark.sources.sources import changelog_stream, location_of
from avro_registry_sink.spark.sources.storage_source import list_tree, pending_files, storage_tree_stream
from avro_registry_sink.spark.stages.plan_cache import columns
from avro_registry_sink.spark.stages.tally import StageOutput, TallyParam, empty_tally
from avro_registry_sink.storage_fs import StorageURI, StoreFS, hadoop_settings, parse_storage_uri

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from avro_registry_sink.ops.metrics import JobMetrics

__all__ = [
    "BadInputBudgetExceeded",
    "JobFailed",
    "JobOptions",
    "JobResult",
    "StopRequested",
    "build_sink",
    "check_checkpoint",
    "check_kafka",
    "ensure_spark_kafka",
    "job_session",
    "resource_failure",
    "run_job",
    "trigger_limits",
]

#: The exit status of a run stopped by a signal (128 + the signal's number, as a shell reports it).
STOP_EXIT_STATUS = {"SIGINT": 130, "SIGTERM": 143}

#: What a failure looks like when Spark itself lost a resource: (pattern in the error text, what it is,
#: what to change). The JVM exit statuses come from ``-XX:+ExitOnOutOfMemoryError`` (3) and Spark's own
#: handler of a fatal error in a task (52).
_RESOURCE_FAILURES: tuple[tuple[str, str, str], ...] = (
    ("java.lang.OutOfMemoryError", "the Spark JVM ran out of memory ({detail})", "heap"),
    ("Python worker exited unexpectedly", "a Python worker of Spark died (killed by the system, usually for "
     "lack of memory)", "batch"),
    ("ExecutorLostFailure", "a Spark executor was lost ({detail})", "executor"),
)
_OOM_EXIT_CODES = {3: "exit status 3: java.lang.OutOfMemoryError", 52: "exit status 52: out of memory in a task"}


def resource_failure(error: BaseException | str, exit_code: int | None, settings: Mapping[str, str]) -> str | None:
    """One sentence for a failure caused by Spark's resources (see :data:`_RESOURCE_FAILURES`), else ``None``.

    ``exit_code`` is the Spark JVM's exit status when it died; ``settings`` the values to name
    (``heap``: the JVM heap, ``batch``: the input per batch).

    >>> resource_failure("[Errno 111] Connection refused", 3, {"heap": "1g", "batch": "128m"})[:61]
    'The Spark JVM ran out of memory (exit status 3: java.lang.Out'
    """
    text = " ".join(str(error).split())
    cause = None
    if exit_code is not None:
        if exit_code in _OOM_EXIT_CODES:
            cause, what = f"the Spark JVM ran out of memory ({_OOM_EXIT_CODES[exit_code]})", "heap"
        else:
            cause, what = f"the Spark JVM exited with status {exit_code}", "heap"
    else:
        for pattern, description, what in _RESOURCE_FAILURES:  # noqa: B007 - `what` of the match is read below
            at = text.find(pattern)
            if at >= 0:
                detail = text[at:at + 120].split(" at ")[0].strip()
                cause = description.format(detail=detail)
                break
    if cause is None:
        return None
    advice = {
        "heap": f"raise the JVM heap with AVRO_SINK_DRIVER_MEMORY (spark.driver.memory, now {settings.get('heap', '?')}) "
                f"or take less input per batch (now {settings.get('batch', '?')})",
        "batch": f"take less input per batch (now {settings.get('batch', '?')}) or give the machine more memory",
        "executor": f"give executors more memory (spark.executor.memory) or take less input per batch (now "
                    f"{settings.get('batch', '?')})",
    }[what]
    return f"{cause[0].upper()}{cause[1:]}: {advice}."


@dataclass
class JobResult:
    """What a run did (available-now runs return when the input is drained)."""

    totals: JobTotals
    checkpoint: Path | str
    bad_input: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: list[Path | str] = field(default_factory=list)  # local paths, or URIs (no credentials)
    plans: dict[PlanKey, TablePlan] = field(default_factory=dict)
    sink: str = ""
    #: a stop by SIGINT or SIGTERM (``totals.stop``: signal, exit_status, outcome, batch, message), else ``None``
    stop: dict[str, Any] | None = None


# --------------------------------------------------------------------------------------------------
# Session and sink


def job_session(*, kafka: bool = False, master: str | None = None, app_name: str = "avro-registry-sink",
                stores: Iterable[str] = ()) -> SparkSession:
    """A SparkSession for the CLI (``spark.runtime.session.local_session``), with Spark's Kafka connector when ``kafka``
    and the Hadoop connectors of ``stores`` (``s3``: ``hadoop-aws`` of this Spark's Hadoop version).

    Packages come from Maven Central through Ivy (cache: ``AVRO_SINK_IVY_DIR``, else
    ``~/.cache/avro-registry-sink/ivy``). The master is ``master``, else ``AVRO_SINK_SPARK_MASTER``, else
    ``local[*]``; under spark-submit its own ``--master`` and ``--conf``s win. An already running session is
    reused as it is (see :func:`ensure_spark_kafka` for adding the connector to it).
    """
    conf: dict[str, str] = {"spark.sql.shuffle.partitions": os.environ.get("AVRO_SINK_SHUFFLE_PARTITIONS", "4")}
    packages = ([kafka_package()] if kafka else []) + store_packages(stores)
    if packages:
        conf.update({"spark.jars.packages": ",".join(packages), "spark.jars.ivy": ivy_dir(),
                     "spark.jars.excludes": ",".join(PROVIDED_ARTIFACTS)})
    return local_session(app_name=app_name, master=master or os.environ.get("AVRO_SINK_SPARK_MASTER", "local[*]"),
                         **conf)


#: Jars of the connector that pyspark does not ship (kafka-clients and commons-pool2 come with it).
_CONNECTOR_JARS = ("spark-sql-kafka-0-10_2.13-", "spark-token-provider-kafka-0-10_2.13-", "kafka-clients-",
                   "commons-pool2-")


def ensure_spark_kafka(spark: SparkSession) -> bool:
    """Make Spark's Kafka data source available on a running session; ``False`` if that is impossible.

    A session started without ``spark.jars.packages`` gets the connector with ``ADD JAR``: the jars of
    :func:`kafka_package` from the Ivy cache (``<ivy dir>/jars``) when an earlier run fetched them, else
    from Maven Central by an ``ivy://`` URI (its own dependencies only; pyspark's jars are excluded).
    """
    if has_spark_kafka(spark):
        return True
    coordinate = kafka_package()
    version = coordinate.rsplit(":", 1)[1]
    cached = sorted(Path(ivy_dir(), "jars").glob("*.jar")) if Path(ivy_dir(), "jars").is_dir() else []
    jars = [j for j in cached if any(j.name.split("_", 1)[-1].startswith(p) for p in _CONNECTOR_JARS)]
    have = {p for p in _CONNECTOR_JARS if any(j.name.split("_", 1)[-1].startswith(p) for j in jars)}
    wanted = [j for j in jars if "spark-" not in j.name or f"-{version}.jar" in j.name]
    try:
        if have == set(_CONNECTOR_JARS) and any("spark-sql-kafka" in j.name for j in wanted):
            for jar in wanted:
                spark.sql(f"ADD JAR '{jar}'")
        else:
            exclude = ",".join(PROVIDED_ARTIFACTS)
            spark.sql(f"ADD JAR 'ivy://{coordinate}?transitive=true&exclude={exclude}'")
    except Exception:  # noqa: BLE001 - offline, or no such version: the caller decides what that means
        return False
    return has_spark_kafka(spark)


def build_sink(config: SinkConfig, spark: SparkSession | None = None, *, producer: str = "auto",
               default_dir: Path | None = None, checkpoint: StoreFS | None = None) -> Sink:
    """The sink a :class:`SinkConfig` describes: Kafka for ``kafka://``, files for ``file://`` (the one table of
    sink kinds, :data:`~avro_registry_sink.spark.sinks.sinks.SINK_KINDS`). ``checkpoint`` keeps an exactly-once
    Kafka sink's query id and writer ids (``delivery.json``)."""
    return sinks.build_sink(config, spark, producer=producer, default_dir=default_dir, checkpoint=checkpoint)


def _sink_location(config: SinkConfig) -> StorageURI | None:
    """Where a file sink writes, when that is a storage URI (its store's settings go to Spark too)."""
    if config.scheme != SinkKind.FILE or not config.path:
        return None
    return parse_storage_uri(str(config.path), option="sink-uri")


def _records(encoded: DataFrame) -> DataFrame:
    """The encoded rows that are records (the others carry an ``error`` and go to the dead-letter file;
    the file sink's lines come without them)."""
    return encoded.filter("error IS NULL").drop("error") if "error" in encoded.columns else encoded


def _input_position(error: Mapping[str, Any]) -> tuple[str, str, int, int]:
    """Where a dead-lettered row was in the input, for listing a batch's rows in input order."""
    return (str(error.get("file") or ""), str(error.get("topic") or ""), int(error.get("partition") or 0),
            int(error.get("line") or error.get("offset") or 0))


class StopRequested(AvroSinkError):
    """Raised in a batch the job does not run or finish because a stop was asked for (SIGINT or SIGTERM): the batch
    is not committed, and the next run with the checkpoint processes it."""


class _Stop:
    """The signal handler of a run: the first SIGINT or SIGTERM asks for a stop, a second one abandons the batch."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self.at = 0.0  # time.monotonic() of the first signal
        self.again = False  # a second signal: abandon the running batch now
        self.abandoned = False  # set once the running batch is abandoned: it must not commit
        self.reported = False
        self.batch: int | None = None  # the batch running when the first signal came
        self.inputs: int | None = None

    def __call__(self, signum: int, _frame: Any) -> None:
        import signal as signals

        if self.signal is None:
            self.signal, self.at = signals.Signals(signum).name, time.monotonic()
        else:
            self.again = True

    @property
    def requested(self) -> bool:
        return self.signal is not None


class BadInputBudgetExceeded(AvroSinkError):
    """More rows of a batch were dead-lettered than ``--max-bad-rows`` allows; the batch was not committed."""


def _check_parsed(errors: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Split the parse stage's rows into dead letters and notes; a misconfiguration fails the batch."""
    wrong = [e for e in errors if refusal_reason(e) is RefusalReason.MISCONFIGURATION]
    if wrong:
        setting = wrong[0].get("setting") or "source"
        raise ConfigError(wrong[0]["message"] + (f" ({len(wrong)} such rows or files)" if len(wrong) > 1 else ""),
                          option=setting if setting in ("tables", "source") else "csv", value=setting)
    notes = sorted({e["message"] for e in errors if refusal_reason(e) is RefusalReason.NOTE})
    return [e for e in errors if refusal_reason(e) is not RefusalReason.NOTE], notes


def _check_budget(options: JobOptions, errors: list[dict[str, Any]], delivered: int) -> None:
    """Fail the batch (before anything is written) when it dead-letters more rows than allowed."""
    count, ratio = options.max_bad_rows, options.max_bad_ratio
    if not errors or (count is None and ratio is None):
        return
    total = delivered + len(errors)
    over = (count is not None and len(errors) > count) or (ratio is not None and len(errors) > ratio * total)
    if over:
        limit = f"{count} rows" if count is not None else f"{ratio:.2%} of the batch"
        raise BadInputBudgetExceeded(
            f"{len(errors)} of {total} rows of the batch are bad input (first: {errors[0].get('message')}), over the "
            f"--max-bad-rows budget of {limit}; nothing of the batch was written or committed. Fix the input or "
            "the settings (or raise the budget) and rerun.",
            option="max-bad-rows",
        )


# --------------------------------------------------------------------------------------------------
# foreachBatch


class _BatchProcessor:
    """The ``foreachBatch`` function; lives on the driver with the manager, catalog and sink."""

    def __init__(self, options: JobOptions, manager: SchemaManager, sink: Sink, progress: ProgressReporter,
                 registry: Any, router: TopicRouter, metrics: JobMetrics | None = None) -> None:
        self.options = options
        self.metrics = metrics  # Prometheus metrics (run --metrics-port), fed from each batch's report and tally
        self._batch_topics: dict[str, list[int]] = {}  # the batch's tally per topic, for the metrics
        self.manager = manager
        self.sink = sink
        self.progress = progress
        self.registry = registry
        self.router = router
        self.totals = JobTotals()
        self.failure: BaseException | None = None
        self.failed_batch: int | None = None
        self.current_batch: int | None = None  # the batch running (or the last one): a dead JVM fails it
        self.stop: _Stop | None = None  # run_job's signal handler: no batch starts, or completes, after a stop
        self.in_batch = False  # a batch is running (run_job waits for it, within the stop timeout)
        self.batch_inputs: int | None = None  # the files or messages of the running batch, once known
        self.bad_input: list[dict[str, Any]] = []
        self.dead_letters: list[Path | str] = []
        self.plans: dict[PlanKey, TablePlan] = {}
        self._schemas_seen: set[tuple[str, int]] = set()
        self._partitions: dict[str, int] = {}
        self._topics_pending: Future[dict[str, int]] | None = None  # new topics being created (_topics_ahead)
        self._side_batch: int | None = None  # the batch whose committed side state is in memory
        self._side_loaded_from_store = False  # this batch read its side state from the checkpoint
        self._single_input = False  # this batch: each topic's records come from one data file
        self._fused: dict[str, Any] | None = None  # exactly once: this batch is written by its encode stage
        self._tally_accumulator: Any = None  # see _tally
        self._lock = threading.Lock()
        self.state = StoreFS(options.checkpoint_uri, option="checkpoint")  # side files of the checkpoint
        self.side = SideState(self.state)
        self.owners = TopicOwners(self.side)  # claimed in the router before the first batch
        self._owners_claimed = False

        spec = options.source
        self.batches: StorageBatches | ChangelogBatches  # the batch source of the input's kind
        if spec.is_storage:
            layout = StorageLayout(spec.location or spec.path or ".")
            self.sources = TableSources(layout, options.tables, changelog=False)
            self.batches = StorageBatches(options, manager, layout, self.state, self.side, self._topics,
                                          self._fuse_write)
        else:
            self.sources = TableSources(None, options.tables, changelog=True)
            self.batches = ChangelogBatches(options, manager, self.side, self.sources, self._topics)
        self.history = HistoryRecorder(HistoryJournal(self.state), registry, self.sources, defer=True,  # <checkpoint>/history/
                                       majors=manager.on_incompatible is OnIncompatible.NEW_MAJOR)
        manager.on_register, manager.on_refused = self.history.registered, self.history.refused
        manager.on_registering = self.history.registering
        manager.on_routed = self._topics_ahead

    def ddl_history(self, schema: str, table: str) -> list[tuple[int, str]]:
        """``[(table version, DDL text)]`` of a table: its storage schema files' ``Query``, or the DDL messages
        the changelog catalog applied."""
        return self.batches.ddl_history(schema, table)

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        if self.stop is not None and self.stop.requested:  # raised, so that Spark does not commit the batch
            raise StopRequested(f"Batch {batch_id} was not started: the job is stopping ({self.stop.signal}).")
        with self._lock:
            self.current_batch = batch_id
            self.in_batch, self.batch_inputs = True, None
            side = self._side_batch
            if self.metrics is not None:
                self.metrics.batch_started(batch_id)
            logged = CURRENT_BATCH.set(batch_id)  # --log-format json: the batch id of its log records
            try:
                try:
                    self._process(batch_df, batch_id)
                except Exception:
                    if not self.batches.read_again(batch_df, batch_id):
                        raise
                    # The batch holds what the driver must see first (a DDL, a new table or version, new
                    # columns): the strict pass stopped before handing on any record; read it with its summary.
                    self._side_batch = side
                    self._process(batch_df, batch_id)
            except BaseException as exc:
                self.failure = exc
                self.failed_batch = batch_id
                if self.metrics is not None:
                    self._slices_to_metrics(batch_id)
                    self.metrics.batch_failed(exc)
                if self.stop is not None and self.stop.abandoned:
                    # its cancelled jobs' error, whose long text Spark's check of a stopped query's failure
                    # overflows the JVM's stack on: a short one instead
                    raise StopRequested(f"Batch {batch_id} was abandoned: the job is stopping "
                                        f"({self.stop.signal}).") from None
                raise
            finally:
                self.in_batch = False
                CURRENT_BATCH.reset(logged)

    def _unless_abandoned(self, batch_id: int) -> None:
        """Raise :class:`StopRequested` once a stop abandoned this batch: what follows would write or commit it."""
        if self.stop is not None and self.stop.abandoned:
            raise StopRequested(f"Batch {batch_id} was abandoned: the job is stopping ({self.stop.signal}).")

    # -- steps ---------------------------------------------------------------------------------------

    def _topics_ahead(self, topics: list[str]) -> None:
        """Start creating the batch's new topics while its schemas register (the manager's ``on_routed``):
        against a remote registry and cluster both mostly wait on their servers (on one 2-core machine that runs
        the broker and an embedded registry too, both are CPU work, and the overlap saves nothing measurable).
        :meth:`_topics` waits for them; a failure is raised there, where it was raised before."""
        self._settle_topics(raise_errors=False)  # an earlier failure: its topics are still new, so tried again
        new = {t: self.options.sink.partition_num for t in topics if t not in self._partitions}
        if not new:
            return
        future: Future[dict[str, int]] = Future()

        def create() -> None:
            try:
                future.set_result(self.sink.prepare(new))
            except BaseException as exc:  # noqa: BLE001 - handed to the batch's thread by _topics
                future.set_exception(exc)

        threading.Thread(target=create, name="avro-sink-topics", daemon=True).start()
        self._topics_pending = future

    def _settle_topics(self, *, raise_errors: bool) -> None:
        """Wait for the topics :meth:`_topics_ahead` is creating; keep their partition counts."""
        future, self._topics_pending = self._topics_pending, None
        if future is None:
            return
        try:
            self._partitions.update(future.result())
        except Exception:
            if raise_errors:
                raise

    def _topics(self, plans: Mapping[PlanKey, TablePlan]) -> dict[str, int]:
        self._settle_topics(raise_errors=True)
        wanted = {plan.route.topic: self.options.sink.partition_num for plan in plans.values()}
        new = {t: n for t, n in wanted.items() if t not in self._partitions}
        if new:
            self._partitions.update(self.sink.prepare(new))
        return {t: self._partitions[t] for t in wanted}

    def _new_schemas(self, plans: Mapping[PlanKey, TablePlan]) -> list[SchemaVersion]:
        new = []
        for plan in plans.values():
            enc = plan.encoding
            table = enc.table.qualified_name
            for subject, schema_id, text in (
                (plan.route.key_subject, enc.key_schema_id, enc.key_schema_json),
                (plan.route.value_subject, enc.value_schema_id, enc.value_schema_json),
            ):
                if schema_id is None or (subject, schema_id) in self._schemas_seen:
                    continue
                self._schemas_seen.add((subject, schema_id))
                new.append((subject, schema_id, text, table))
        lookup = getattr(self.registry, "lookup", None)
        # the history already looked up the versions this batch registered
        known = {(r.subject, r.schema_id): r.version for r in self.history.pending if r.version is not None}

        def version(subject: str, schema_id: int, text: str | None) -> int | None:
            if (subject, schema_id) in known:
                return known[subject, schema_id]
            if lookup is None or text is None:
                return None
            with contextlib.suppress(Exception):  # the version is for display only
                return lookup(subject, text).version
            return None

        # one lookup per new schema the history does not know (a first batch of many tables has many): a few at a time
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(new)))) as pool:
            versions = list(pool.map(lambda n: version(n[0], n[1], n[2]), new))
        return [SchemaVersion(subject=subject, schema_id=schema_id, version=v, table=table)
                for (subject, schema_id, _, table), v in zip(new, versions, strict=True)]

    def _spark_partitions(self, spark: SparkSession) -> int:
        if self.options.output_partitions:
            return self.options.output_partitions
        return max(1, int(conf_value(spark, "spark.sql.shuffle.partitions", "2")))

    def _process(self, batch_df: DataFrame, batch_id: int) -> None:
        started = time.time()
        spark = batch_df.sparkSession
        self.history.batch = batch_id
        if not self._owners_claimed:  # topics and subjects of earlier runs of the checkpoint: theirs alone
            self.owners.claim_all(self.router, batch_id)
            self._owners_claimed = True
        tally = None if self._counts_first() else self._tally(spark)
        output = StageOutput(tally, batch_id if tally is not None and self.sink.staged else None,
                             spread_verdicts=tally is not None and self._exactly_once())
        self._single_input = False  # set from the prepared batch
        self._fused = None
        self._begin_side(batch_id)
        self._batch_topics = {}
        phases = {"plan": time.time()}  # each phase's start, then its seconds (the metrics' batch phases)
        prepared = self.batches.prepare(spark, batch_df, batch_id, output)
        phases["write"] = time.time()
        phases["plan"] = phases["write"] - phases["plan"]
        if prepared is None:
            self._end_side(batch_id)
            if self.metrics is not None:
                self.metrics.batch_empty()
                self._backlog_to_metrics(batch_id)  # its messages (DDLs, filtered tables) are behind the job too
            return
        failpoint("job.after-side-read")
        self.batch_inputs = prepared.inputs
        self._unless_abandoned(batch_id)
        self.history.complete_later()  # the history's lookups while the batch is written
        self._single_input = prepared.single_input
        # storage files and changelog messages alike: parsed and encoded in one executor pass
        encoded, plans, inputs, missing = prepared.encoded, prepared.plans, prepared.inputs, list(prepared.missing)
        cleanup: list[DataFrame] = []
        warnings = [*prepared.warnings, *self.manager.take_warnings()]
        try:
            errors, notes = _check_parsed(list(prepared.early_errors))
            report = BatchReport(batch_id=batch_id, inputs=inputs, errors=len(errors), warnings=warnings + notes,
                                 filtered=dict(prepared.filtered), missing_files=[m["file"] for m in missing])
            if plans:
                def check(failed: list[dict[str, Any]], delivered: int) -> None:
                    """The batch's verdict, before it is published or committed."""
                    failed, notes = _check_parsed(failed)
                    report.warnings.extend(notes)
                    failed = self._with_raw(spark, failed)
                    errors.extend(failed)
                    report.errors += len(failed)
                    _check_budget(self.options, errors, delivered)

                if tally is None:  # counted (and checked) before anything is written: the batch is cached
                    encoded = encoded.persist()
                    cleanup.append(encoded)
                    failed = self._count(encoded, plans, report)
                    check(failed, report.rows)
                    self.sink.write(self._for_sink(_records(encoded), spark), batch_id,
                                    **self._write_plan(plans, spark, self._single_input))
                else:  # one Spark job: encoded, counted on the way, written; checked before it is published
                    def verdict() -> None:
                        check(self._counted(tally.value, plans, report), report.rows)

                    if self._fused is not None:  # exactly once: the encode stage wrote the records itself
                        self.sink.write_fused(encoded, batch_id, check=verdict, tables=self._fused["tables"])
                    else:
                        self.sink.write(self._for_sink(self._sink_records(encoded, plans), spark), batch_id,
                                        check=verdict, **self._write_plan(plans, spark, self._single_input))
                phases["commit"] = time.time()
                phases["write"] = phases["commit"] - phases["write"]
                report.resolved_ts = dict(self.sink.resolved)
                report.new_schemas = self._new_schemas(plans)
                majors = self.manager.take_majors()
                report.new_majors = [m.to_json() for m in majors]
                self.history.note_majors(majors)  # breaking changes registered as new majors, with their rules
                self.history.flush(batch_id)
                self.plans.update(plans)
                self.owners.save((plan.route for plan in plans.values()), batch_id)  # the output is written
            if not plans:
                _check_budget(self.options, errors, 0)
            failpoint("job.after-sink-write")
            if errors or missing:
                report.dead_letter = str(self._dead_letter(batch_id, errors + missing))
                self.bad_input.extend(errors)
            else:
                self._no_dead_letter(batch_id)
            failpoint("job.after-dead-letters")
            self._unless_abandoned(batch_id)
            self._end_side(batch_id)
            failpoint("job.after-side-write")
            if prepared.late_report is not None:
                prepared.late_report(report)
            report.seconds = round(time.time() - started, 3)
            self.totals.add(report)
            topic_tables = {plan.route.topic: plan.encoding.table.qualified_name for plan in plans.values()}
            self._save_progress(batch_id, report, topic_tables, len(errors) + len(missing))
            if self.metrics is not None:
                if "commit" in phases:
                    phases["commit"] = time.time() - phases["commit"]
                else:  # nothing to write: the batch's time after its plan is its commit
                    phases["commit"], phases["write"] = time.time() - phases["write"], 0.0
                self._slices_to_metrics(batch_id)
                self.metrics.batch(report, topics=self._batch_topics, dead_letters=errors + missing, phases=phases,
                                   tables=topic_tables)
                self._backlog_to_metrics(batch_id)
            self.progress.batch(report, self.totals)
        finally:
            for df in cleanup:
                with contextlib.suppress(Exception):
                    df.unpersist()

    def _backlog_to_metrics(self, batch_id: int) -> None:
        """The backlog's reference points after a committed batch: its input's end offsets, a storage source's held
        files."""
        assert self.metrics is not None
        held = getattr(self.batches, "_held_files", None)
        if held is not None:
            self.metrics.held(len(held))
        self._offsets_to_metrics(batch_id)

    def committed_input_to_metrics(self) -> None:
        """Before the run's first batch: the backlog counted from the checkpoint's last committed batch (a restarted
        run), not from the input's start; a storage tree with nothing new runs no batch that would correct it."""
        if self.metrics is not None:
            with contextlib.suppress(Exception):  # informative only: a new or unreadable checkpoint counts from 0
                last = checkpoint_files.last_committed_batch(self.state)
                if last is not None:
                    self._offsets_to_metrics(last)

    def _offsets_to_metrics(self, batch_id: int) -> None:
        """The input's end offsets of batch ``batch_id`` (line 3 of Spark's ``spark/offsets/<batch id>``, written
        before the batch ran): a Kafka source's per partition, a storage tree's file numbers per data directory."""
        assert self.metrics is not None
        source = self.options.source
        if source.is_kafka or source.is_storage:
            with contextlib.suppress(Exception):  # informative only: a batch is never failed by its metrics
                lines = [x for x in self.state.read_text(f"spark/offsets/{batch_id}").splitlines() if x.strip()]
                offsets = json.loads(lines[2])
                if source.is_kafka:
                    self.metrics.committed_offsets(offsets)
                else:
                    self.metrics.committed_storage_offset(offsets)

    def _slices_to_metrics(self, batch_id: int) -> None:
        """Exactly once: the batch's transactional slices by outcome (committed, committed-before: a rerun found
        them committed, refused: aborted by the batch's verdict), as the driver collected them."""
        slices = self.sink.transactions.last_slices if self.sink.transactions is not None else None
        if self.metrics is not None and slices is not None and slices[0] == batch_id:
            self.metrics.slices(slices[1])

    def _save_progress(self, batch_id: int, report: BatchReport, topic_tables: Mapping[str, str],
                       dead_lettered: int) -> None:
        """``state/progress/<batch id>.json``, current once the batch commits: what the run delivered so far per
        table (rows, the newest commit ts), when, the resolved ts of exactly once and the dead-lettered rows; what
        ``status`` reads without Spark (:mod:`avro_registry_sink.ops.status`)."""
        before = self.side.load(PROGRESS_STATE, batch_id) or {}
        tables: dict[str, dict[str, int]] = {name: dict(entry) for name, entry in before.get("tables", {}).items()}
        for topic, (n, _tombstones, newest, *_) in self._batch_topics.items():
            entry = tables.setdefault(topic_tables.get(topic, topic), {"rows": 0, "newest_commit_ts": 0})
            entry["rows"] += n
            entry["newest_commit_ts"] = max(entry["newest_commit_ts"], newest)
        self.side.save(PROGRESS_STATE, batch_id, {
            "batch": batch_id, "time": round(time.time(), 3), "seconds": report.seconds, "tables": tables,
            "rows": int(before.get("rows", 0)) + report.rows,
            "dead_lettered": int(before.get("dead_lettered", 0)) + dead_lettered,
            "resolved_ts": dict(report.resolved_ts) or before.get("resolved_ts", {}),
        })

    def _tally(self, spark: SparkSession) -> Any:
        """The run's accumulator of :class:`~avro_registry_sink.spark.stages.tally.TallyParam`, emptied for a new batch.

        One for the whole run: PySpark keeps every accumulator it made for the life of the session, so one
        per batch would grow without end in a long-running stream. Batches run one at a time, and a
        batch's Spark job has ended (every task's additions merged) when its write returns."""
        if self._tally_accumulator is None:
            self._tally_accumulator = spark.sparkContext.accumulator(empty_tally(), TallyParam())
        else:
            self._tally_accumulator.value = empty_tally()
        return self._tally_accumulator

    def _counts_first(self) -> bool:
        """Whether a batch is counted before it is written (cached, two Spark jobs) rather than on the way.

        Only a sink that cannot take a write back (Kafka) under a bad-row budget needs it: the budget
        promises that nothing of a batch over it is written. The file sink publishes a batch only after
        its verdict, so it never needs it."""
        return counts_first(self.options, staged=self.sink.staged)

    def _exactly_once(self) -> bool:
        return self.sink.exactly_once

    def _write_plan(self, plans: Mapping[PlanKey, TablePlan], spark: SparkSession,
                    single_input: bool) -> dict[str, Any]:
        """What an exactly-once sink needs besides the records: each topic's table, and an upper bound of the
        Spark partitions of the write (its writer ids; see :meth:`_for_sink`)."""
        if not self._exactly_once():
            return {}
        tables = {plan.route.topic: plan.encoding.table.qualified_name for plan in plans.values()}
        slices = len(set(tables)) if single_input else self._spark_partitions(spark)
        return {"tables": tables, "slices": max(1, slices)}

    def _fuse_write(self, output: Any, plans: Mapping[PlanKey, TablePlan], spark: SparkSession,
                    single_input: bool) -> Any:
        """The storage stage's ``output``, for an exactly-once sink when each topic's rows come from one data
        file (read whole by one task, in order): with the slice writer after the encoder in the same Python
        worker (:func:`~avro_registry_sink.kafka.delivery.fused_writer`), so the records never go back through the
        JVM to be sorted. Not with a bad-row budget (the batch is counted before it is written) or a file sink."""
        if not (self._exactly_once() and single_input and output is not None and output.tally is not None
                and output.lines_of_batch is None and self.current_batch is not None):
            return output
        import dataclasses

        plan = self._write_plan(plans, spark, single_input)
        spec = self.sink.fused_spec(self.current_batch, slices=plan["slices"])
        if spec is None:  # slices written by the JVM writer: the records go back through Spark
            return output
        self._fused = plan
        return dataclasses.replace(output, then=(fused_writer(spec), RESULT_DDL))

    def _sink_records(self, encoded: DataFrame, plans: Mapping[PlanKey, TablePlan]) -> DataFrame:
        """:func:`_records`, and for an exactly-once sink the batch's misconfiguration verdict on the way: the
        rows the stage refused as a misconfiguration stay, with their ``error``, once for every Kafka partition of
        their topic (the stage made the copies: ``StageOutput.spread_verdicts``), so they reach every slice that
        writes a partition of their topic, which then aborts instead of committing (Kafka takes no write back,
        and the rerun with the corrected settings must find those partitions uncommitted)."""
        if not self._exactly_once() or "error" not in encoded.columns:
            return _records(encoded)
        from pyspark.sql import functions as F

        misconfigured = F.get_json_object("error", "$.reason") == RefusalReason.MISCONFIGURATION.value
        return encoded.filter(F.col("error").isNull() | misconfigured)

    def _for_sink(self, records: DataFrame, spark: SparkSession) -> DataFrame:
        """The records as the sink takes them. Kafka: each Kafka partition's rows gathered in one Spark
        partition and sorted into input order (one writer per Kafka partition keeps its order): a storage
        batch by ``order_line`` alone (file rank and line, see ``sources.LINE_BITS``), others by
        :data:`RECORD_ORDER`; when each
        topic of a storage batch has one data file (the usual micro-batch of a running changefeed), its rows
        are in one task already and need no shuffle. The file sink orders each topic's rows itself, without
        a shuffle (see :class:`~avro_registry_sink.spark.sinks.sinks.FileSink`)."""
        if self.sink.staged:
            return records
        # one long, which Spark radix-sorts, instead of five columns whose first ties on every row
        order = ("order_line",) if self.options.source.is_storage else RECORD_ORDER
        sort = columns(spark.sparkContext, order)
        if self._single_input:  # every topic's rows come from one data file, read whole by one task: in place
            return records.sortWithinPartitions(*sort)
        return records.repartition(self._spark_partitions(spark), *columns(spark.sparkContext, ("topic", "partition"))
                                   ).sortWithinPartitions(*sort)

    def _count(self, encoded: DataFrame, plans: Mapping[PlanKey, TablePlan],
               report: BatchReport) -> list[dict[str, Any]]:
        """Count the records per topic into ``report`` and return the rows the stage set aside (their
        ``error``): one Spark job over the (cached) batch."""
        from pyspark.sql import functions as F

        good = F.col("error").isNull() if "error" in encoded.columns else F.lit(True)
        rows = encoded.groupBy("topic").agg(
            F.count(F.when(good, 1)).alias("n"),
            F.count(F.when(good & F.col("value").isNull(), 1)).alias("tombstones"),
            F.max(F.when(good, F.col("commit_ts"))).alias("max_ts"),
            F.sum(F.when(good, F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))))
            .alias("bytes"),
            # errors are few: they travel to the driver with the counts (collect_list skips the nulls)
            (F.collect_list("error") if "error" in encoded.columns else F.array().cast("array<string>")).alias("errors"),
        ).collect()
        return self._counted({"topics": {r["topic"]: [int(r["n"]), int(r["tombstones"] or 0), int(r["max_ts"] or 0),
                                                    int(r["bytes"] or 0)] for r in rows},
                              "errors": [error for r in rows for error in r["errors"]]}, plans, report)

    def _counted(self, tally: Mapping[str, Any], plans: Mapping[PlanKey, TablePlan],
                 report: BatchReport) -> list[dict[str, Any]]:
        """Put a :data:`~avro_registry_sink.spark.stages.tally.Tally` into ``report``; the rows the stage set aside."""
        tables = {plan.route.topic: plan.encoding.table.qualified_name for plan in plans.values()}
        for topic, (n, tombstones, max_ts, *size) in sorted(tally["topics"].items()):
            if not n:
                continue
            self._batch_topics[topic] = [n, tombstones, max_ts, *size]
            report.rows += n
            report.tombstones += tombstones
            report.per_topic[topic] = n
            report.tombstones_per_topic[topic] = tombstones
            table = tables.get(topic, topic)
            report.per_table[table] = report.per_table.get(table, 0) + n
            report.max_commit_ts = max(report.max_commit_ts, max_ts)
        return sorted((json.loads(error) for error in tally["errors"]), key=_input_position)

    def _no_dead_letter(self, batch_id: int) -> None:
        """A batch without bad input has no dead-letter file, even when an earlier attempt of it left one."""
        relpath = f"dead-letter/batch-{batch_id:010d}.jsonl"
        if self._side_loaded_from_store:  # only a batch run after a restart can meet an earlier attempt's file
            self.state.delete(relpath)

    def _dead_letter(self, batch_id: int, errors: list[dict[str, Any]]) -> Path | str:
        relpath = f"dead-letter/batch-{batch_id:010d}.jsonl"
        self.state.write_text(relpath, "".join(json.dumps({"batch": batch_id, **error}, ensure_ascii=False) + "\n"
                                               for error in errors))
        where = self.options.checkpoint_uri.child(relpath)
        path: Path | str = Path(where.path) if where.is_local else str(where)
        if path not in self.dead_letters:
            self.dead_letters.append(path)
        return path

    def _with_raw(self, spark: SparkSession, failed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Dead-letter records for rows the encode stage set aside, with the raw bytes of their input row.

        The stage sees parsed rows, not input bytes; the few rows it refuses get theirs here, from the batch
        source (a storage tree: their data file's record at that line; a changelog's stage sets its own)."""
        if all("raw_base64" in f for f in failed):
            return failed
        sources = sorted({str(f.get("source")) for f in failed if "raw_base64" not in f})
        fmt = self.options.source.kind
        raw = self.batches.raw(spark, sources)
        out = []
        for record in failed:
            if "raw_base64" in record:  # already a complete record (the parse side set it aside)
                out.append(record)
                continue
            source = str(record.get("source"))
            where = location_of(source)
            file = where.get("file") or ""
            kind = format_for_file(file).name if self.options.source.is_storage else fmt
            fields = {k: v for k, v in record.items() if k not in ("source", "reason", "message")}
            fields.update(where)
            out.append(dead_letter_record(fmt=kind, source=source, reason=str(record.get("reason")),
                                          message=str(record.get("message")), raw=raw.get(source), **fields))
        return out

    # -- side state: per batch, current once the batch commits (see side_state) ----------------------

    def _begin_side(self, batch_id: int) -> None:
        """The side state as the committed batches before ``batch_id`` left it: kept in memory from the
        previous batch of this process, else read from the checkpoint (a rerun of an uncommitted batch sees
        exactly what its first attempt saw)."""
        self._side_loaded_from_store = self._side_batch != batch_id - 1
        self.batches.begin_side(batch_id, from_store=self._side_loaded_from_store)
        self._side_batch = None  # changed by this batch until _end_side

    def _end_side(self, batch_id: int) -> None:
        """Write what this batch changed of the side state, as batch ``batch_id``'s."""
        self.batches.end_side(batch_id)
        self._side_batch = batch_id

    # -- held data files (no usable schema file yet) ---------------------------------------------------
# --------------------------------------------------------------------------------------------------
# Running


def check_checkpoint(options: JobOptions) -> bool:
    """Whether the checkpoint (a directory or a storage URI) can be used for this run, without writing anything;
    ``True`` when it already belongs to this source. A checkpoint belongs to one source: a :class:`ConfigError`
    refuses another source's checkpoint, a file in its place or an unreadable marker (before Spark starts)."""
    uri = options.checkpoint_uri
    if uri.is_local and Path(uri.path).exists() and not Path(uri.path).is_dir():
        raise ConfigError(f"Checkpoint {str(uri)!r} is a file, not a directory; give --checkpoint a directory.",
                          option="checkpoint", value=str(uri))
    state = StoreFS(uri, option="checkpoint")
    if not state.exists("job.json"):
        return False
    source = options.source.describe()
    try:
        recorded = json.loads(state.read_text("job.json")).get("source")
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigError(f"Checkpoint {str(uri)!r} has an unreadable job.json ({exc}); use another "
                          "--checkpoint directory (or delete this one to start over).",
                          option="checkpoint", value=str(uri)) from None
    if recorded != source:
        raise ConfigError(
            f"Checkpoint {str(uri)!r} belongs to source {recorded!r}, not {source!r}; use another "
            "--checkpoint directory (or delete this one to start over).",
            option="checkpoint", value=str(uri),
        )
    return True


def _check_checkpoint(options: JobOptions) -> None:
    """A checkpoint belongs to one source; refuse to mix them up, and mark a new one."""
    if check_checkpoint(options):
        return
    state = StoreFS(options.checkpoint_uri, option="checkpoint")
    state.make_dirs()
    state.write_text("job.json", json.dumps({"source": options.source.describe(), "created": time.time()}))


@contextlib.contextmanager
def _stop_signals(stop: _Stop) -> Iterator[None]:
    """SIGINT and SIGTERM call ``stop`` (the run's loop then stops the query at a batch's end, see
    :func:`_settle_stop`) instead of PySpark's SIGINT handler, which cancels jobs from inside a running py4j call
    and prints tracebacks, and SIGTERM's default, which ends the process at once with no summary."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a signal the process was told to ignore (a background job of a shell script: SIGINT) stays ignored
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)
                if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _settle_stop(spark: SparkSession, query: Any, processor: _BatchProcessor, sink: Sink,
                 progress: ProgressReporter, stop: _Stop, stop_timeout: float) -> bool:
    """One look at a stop asked for by a signal; ``True`` once the query is stopped. A running batch is waited for
    until ``stop_timeout`` seconds after the first signal (or a second signal), then abandoned: its Spark jobs
    cancelled, the query stopped, exactly once's open transactions aborted. Between batches the query is stopped as
    soon as Spark is not committing a batch or planning the next (a batch it starts refuses to run)."""
    elapsed = time.monotonic() - stop.at
    if not stop.reported:
        stop.reported = True
        stop.batch = processor.current_batch if processor.in_batch else None
        again = "a second signal abandons it at once"
        message = (f"stopping: batch {stop.batch} is running; it is committed if it finishes within "
                   f"{stop_timeout:g} s, else abandoned (not committed, processed again by the next run); {again}."
                   if stop.batch is not None else "stopping: no batch is running; no new batch starts.")
        with contextlib.suppress(Exception):  # a reporter must not hold up the stop
            getattr(progress, "stopping", lambda info: None)(
                {"signal": stop.signal, "batch": stop.batch, "stop_timeout": stop_timeout, "message": message})
    if processor.in_batch:
        stop.inputs = processor.batch_inputs
        if not stop.again and elapsed < stop_timeout:
            return False
        stop.batch, stop.abandoned = processor.current_batch, True
        with contextlib.suppress(Exception):
            spark.sparkContext.cancelAllJobs()
        _stop_query(query)
        transactions = sink.transactions
        if transactions is not None:  # what the batch's slices left open: aborted now, not at the next run's start
            with contextlib.suppress(Exception):
                transactions.abort_open()
        return True
    if not stop.again and elapsed < stop_timeout:
        with contextlib.suppress(Exception):
            if query.status.get("isTriggerActive"):
                return False  # committing the batch that ended, or planning the next: a moment
    _stop_query(query)
    return True


def _stop_query(query: Any, wait: float = 20.0) -> None:
    """``query.stop()``, waited for at most ``wait`` seconds (it waits for the query's thread, which a batch stuck on
    the driver could hold); the stop goes on in the background after that."""
    done = threading.Event()

    def stop() -> None:
        with contextlib.suppress(Exception):
            query.stop()
        done.set()

    threading.Thread(target=stop, name="avro-sink-stop", daemon=True).start()
    done.wait(wait)


def _stop_report(stop: _Stop, stop_timeout: float, totals: JobTotals) -> dict[str, Any]:
    """``JobTotals.stop``: how a stop by a signal ended, with its sentence."""
    outcome = "abandoned" if stop.abandoned else "finished" if stop.batch is not None else "between-batches"
    report: dict[str, Any] = {
        "signal": stop.signal, "exit_status": STOP_EXIT_STATUS.get(stop.signal or "", 1), "outcome": outcome,
        "batch": stop.batch, "batch_inputs": stop.inputs, "stop_timeout": stop_timeout,
        "seconds": round(time.monotonic() - stop.at, 1),
        "why": "second signal" if stop.abandoned and stop.again else "timeout" if stop.abandoned else None,
        "committed_batches": totals.batches, "rows_committed": totals.rows,
    }
    report["message"] = stop_sentence(report, totals)
    return report


@contextlib.contextmanager
def _registry_for(options: JobOptions, registry: Any) -> Iterator[Any]:
    if registry is not None:
        yield registry
        return
    # the registry's connect, imported here: this module's connect is Kafka's (kafka_client)
    from avro_registry_sink.registry.connect import connect

    with connect(options.sink.registry) as client:
        yield client


def _sink_for(spark: SparkSession, options: JobOptions) -> Sink:
    """The sink of ``options.sink``; a file sink without a path writes beside a local checkpoint."""
    checkpoint = options.checkpoint_uri
    sink = build_sink(options.sink, spark, producer=options.kafka_producer,
                      default_dir=Path(checkpoint.parent().child("output").path) if checkpoint.is_local else None,
                      checkpoint=StoreFS(checkpoint, option="checkpoint"))
    transactions = sink.transactions
    if transactions is not None:  # how a record's order_file names its input (see delivery._partition_input)
        spec = options.source
        transactions.input_chars = 20 if spec.is_storage else None if spec.is_kafka else 0
    return sink


#: The side state ``status`` reads: what the committed batches delivered (see ``_BatchProcessor._save_progress``).
PROGRESS_STATE = "progress"
#: A failed run's error, in the checkpoint (``status`` reports it until a later batch commits).
LAST_ERROR_FILE = "last-error.json"


def _save_last_error(processor: _BatchProcessor, error: BaseException, options: JobOptions) -> None:
    """Keep a failed run's error in the checkpoint (secrets masked) for ``status``; never hides the failure."""
    batch = processor.failed_batch if processor.failed_batch is not None else processor.current_batch
    text = redact_text(" ".join(str(error).split()), secret_values(options.sink, options.source.kafka))[:2000]
    with contextlib.suppress(Exception):
        processor.state.write_text(LAST_ERROR_FILE, json.dumps(
            {"time": round(time.time(), 3), "batch": batch, "error_class": type(error).__name__, "message": text}))


def _batch_processor(options: JobOptions, registry: Any, router: TopicRouter, sink: Sink,
                     progress: ProgressReporter, metrics: JobMetrics | None = None) -> _BatchProcessor:
    """The ``foreachBatch`` function of the job and of a replay, with its schema manager (column selectors
    and ``[filter] rules`` of ``options.sink`` applied)."""
    manager = SchemaManager(registry, router, options.sink.encoding,
                            unavailable_budget=options.sink.registry.unavailable_budget,
                            selection=TableSelection.from_config(options.sink),
                            auto_register=options.sink.registry.auto_register,
                            on_incompatible=options.sink.on_incompatible)
    processor = _BatchProcessor(options, manager, sink, progress, registry, router, metrics)
    manager.ddl_history = processor.ddl_history  # renames of a breaking change, for its migration rules
    return processor


def check_kafka(options: JobOptions, *, source: bool = True, sink: bool = True) -> int | None:
    """Connect to the Kafka clusters of the source and the sink (whichever are Kafka): wrong credentials, an
    untrusted CA or a listener of the wrong kind raise ``KafkaConnectionError`` within seconds. The CLI calls
    it before Spark starts; :func:`run_job` before the stream starts. Returns how many partitions the source's
    topics have (``None``: not a Kafka source, or a topic the cluster does not list yet)."""
    partitions: int | None = None
    if source and options.source.is_kafka:
        _admin, metadata = connect(",".join(options.source.brokers), options.source.kafka)
        listed = [metadata.topics.get(topic) for topic in options.source.topics]
        if listed and all(t is not None and t.error is None for t in listed):
            partitions = sum(len(t.partitions) for t in listed if t is not None)
    if sink and options.sink.scheme == SinkKind.KAFKA:
        connect(",".join(options.sink.brokers), options.sink.kafka)
    return partitions


def counts_first(options: JobOptions, *, staged: bool) -> bool:
    """Whether a batch is counted before it is written (see ``_BatchProcessor._counts_first``): a bad-row
    budget, and a sink that cannot take a write back (``staged``: the file sink can)."""
    budget = options.max_bad_rows is not None or options.max_bad_ratio is not None
    return budget and not staged


def trigger_limits(spark: SparkSession, options: JobOptions) -> dict[str, int]:
    """How much input a micro-batch takes: the options' limits, else a budget derived from the JVM heap
    (:func:`~avro_registry_sink.spark.runtime.session.trigger_budget` of ``spark.driver.memory``, or of
    ``spark.executor.memory`` on a cluster), so a backlog of any size is processed in batches that fit."""
    if options.source.is_kafka and options.max_offsets_per_trigger:
        return {"max_offsets_per_trigger": options.max_offsets_per_trigger}
    if not options.source.is_kafka and (options.max_files_per_trigger or options.max_bytes_per_trigger):
        return {k: v for k, v in (("max_files_per_trigger", options.max_files_per_trigger),
                                  ("max_bytes_per_trigger", options.max_bytes_per_trigger)) if v}
    local = master_of(spark).startswith("local")
    heap = memory_bytes(conf_value(spark, "spark.driver.memory" if local else "spark.executor.memory", "1g"))
    if options.source.is_kafka:
        streamed = not counts_first(options, staged=SINK_KINDS[options.sink.scheme].staged)
        return {"max_offsets_per_trigger": max(1, trigger_budget(heap, streamed=streamed) // ASSUMED_MESSAGE_BYTES)}
    return {"max_bytes_per_trigger": trigger_budget(heap)}


def _stream(spark: SparkSession, options: JobOptions) -> DataFrame:
    spec = options.source
    spec.check()
    limits = trigger_limits(spark, options)
    if spec.is_storage:
        location = spec.location or parse_storage_uri(str(spec.path), option="source")
        return storage_tree_stream(spark, location, max_files_per_trigger=limits.get("max_files_per_trigger"),
                                   max_bytes_per_trigger=limits.get("max_bytes_per_trigger"))
    if spec.is_kafka:
        if not has_spark_kafka(spark) and not ensure_spark_kafka(spark):
            raise ConfigError(
                "Reading a Kafka topic needs Spark's Kafka connector on the session, and it could not be added "
                f"({kafka_package()} from {ivy_dir()} or Maven Central): start the session with "
                "spark.jars.packages set to it (job_session(kafka=True) does).",
                option="source",
            )
        return changelog_stream(spark, spec, source_partitions=check_kafka(options, sink=False), **limits)
    return changelog_stream(spark, spec, **limits)


def _resource_settings(spark: SparkSession, options: JobOptions) -> dict[str, str]:
    """The settings a resource failure names, read while the JVM is alive."""
    limits = trigger_limits(spark, options)
    batch = ", ".join(f"{k.replace('_', '-')}={f'{v >> 20}m' if 'bytes' in k else v}" for k, v in limits.items())
    local = master_of(spark).startswith("local")
    return {"heap": conf_value(spark, "spark.driver.memory" if local else "spark.executor.memory", "1g"), "batch": batch}


def _jvm_exit_code(spark: SparkSession) -> int | None:
    """The Spark JVM's exit status if it has died (a local session's gateway process), else ``None``."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    if proc is None:
        return None
    with contextlib.suppress(Exception):
        proc.wait(timeout=2)  # a JVM that is going down takes a moment
    return proc.poll()


def _jvm_may_have_died(error: BaseException) -> bool:
    """Whether ``error`` may come from the Spark JVM's death (then its exit status is worth the wait for it).

    A Java exception that py4j brought back (``Py4JJavaError``) was sent by a JVM alive to send it, unless it is
    an ``OutOfMemoryError``, after which the JVM exits (``-XX:+ExitOnOutOfMemoryError``); a broken connection to
    the gateway, or another py4j error, may be the JVM gone.
    """
    if "OutOfMemoryError" in str(error) or isinstance(error, (ConnectionError, OSError)):
        return True
    return type(error).__module__.startswith("py4j") and type(error).__name__ != "Py4JJavaError"


def _resource_error(spark: SparkSession, error: BaseException, settings: Mapping[str, str], batch: int | None,
                    options: JobOptions) -> SparkResourceError | None:
    code = _jvm_exit_code(spark) if _jvm_may_have_died(error) else None
    cause = resource_failure(error, code, settings)
    if cause is None:
        return None
    where = f"Batch {batch}" if batch is not None else "The query"
    return SparkResourceError(
        f"{cause} {where} was not committed; a rerun with checkpoint {str(options.checkpoint)!r} resumes from it.",
        batch=batch)


def _prepare_run(spark: SparkSession, options: JobOptions, sink: Sink | None) -> Sink:
    """Spark set up for the run (Spark's Kafka package where its producer may serve, the stores' Hadoop settings,
    how input files are spread and listed) and the sink, checked."""
    if sink is None and options.sink.scheme == SinkKind.KAFKA and options.kafka_producer in ("auto", "spark"):
        # Spark's Kafka sink (or exactly once's JVM slice writer) when possible; "auto" falls back to confluent-kafka
        ensure_spark_kafka(spark)
    stores = [u for u in (options.source.location, options.checkpoint_uri, _sink_location(options.sink))
              if u is not None]
    apply_hadoop_conf(spark, hadoop_settings(stores))
    spread_file_partitions(spark)
    if options.source.location is None or options.source.location.is_local:
        list_on_driver(spark)
    sink = sink or _sink_for(spark, options)
    sink.check()  # Kafka: wrong credentials / CA fail here, in seconds, before the stream starts
    return sink


def _stream_writer(stream: DataFrame, processor: _BatchProcessor, options: JobOptions, checkpoint: StorageURI) -> Any:
    """The query's writer: each batch to ``processor``, Spark's own checkpoint in the checkpoint's ``spark``
    folder, the query's name and its trigger."""
    writer = stream.writeStream.foreachBatch(processor).option(
        "checkpointLocation", checkpoint.hadoop_uri("spark") if not checkpoint.is_local
        else checkpoint.child("spark").path
    )
    if options.query_name:
        writer = writer.queryName(options.query_name)
    return writer.trigger(availableNow=True) if options.available_now else writer.trigger(
        processingTime=parse_trigger_interval(options.trigger_interval))


def _start_info(options: JobOptions, sink: Sink, checkpoint: StorageURI) -> dict[str, Any]:
    """What the progress reporter is told at the start."""
    info = {"source": options.source.describe(), "sink": sink.description,
            "checkpoint": str(checkpoint), "available_now": options.available_now}
    if sink.exactly_once:  # what resolved_ts() and a verify command need
        info.update(delivery=DeliveryMode.EXACTLY_ONCE.value, control_topic=options.sink.control_topic,
                    query=sink.query)
    return info


def _start_metrics(metrics: JobMetrics, options: JobOptions, processor: _BatchProcessor) -> None:
    """Start the job's metrics: the trigger interval, how the input's backlog is measured, the input committed
    before this run."""
    trigger_seconds = (0.0 if options.available_now else
                       interval_seconds(parse_trigger_interval(options.trigger_interval)))
    metrics.start(trigger_seconds)
    if options.source.is_kafka:  # the backlog: the source's end offsets, asked when Prometheus scrapes

        conf = client_conf(",".join(options.source.brokers), options.source.kafka, "consumer")
        conf.pop("logger", None)
        metrics.end_offsets = KafkaEndOffsets(options.source.topics, conf)
    elif options.source.is_storage:  # the backlog: the tree's data files that no committed batch took

        layout = StorageLayout(options.source.location
                               or parse_storage_uri(str(options.source.path), option="source"))
        metrics.storage_backlog = StorageBacklog(lambda: list_tree(layout), pending_files,
                                                 refresh=storage_refresh_seconds(trigger_seconds))
    processor.committed_input_to_metrics()


def _await_query(spark: SparkSession, writer: Any, processor: _BatchProcessor, sink: Sink, progress: ProgressReporter,
                 stop: _Stop, stop_timeout: float, options: JobOptions, checkpoint: StorageURI, timeout: float | None,
                 until: Callable[[JobTotals], bool] | None) -> tuple[BaseException | None, bool]:
    """Start the query and wait until it ends: the input drained (``available_now``), a stop (the running batch
    settled by :func:`_settle_stop`), ``timeout`` or ``until``; the sink is closed after it. Returns the query's
    failure (the batch's own error first; none for a batch a stop refused or abandoned) and whether the run was
    stopped on purpose (a signal, timeout, until: an interrupted batch is no failure)."""
    error: BaseException | None = None
    stopped = False
    query = None
    try:
        with _stop_signals(stop):
            with local_checkpoint_logs(spark, checkpoint.is_local) as open_logs:
                query = writer.start()  # Spark reads the checkpoint's metadata here, its offsets and commits next
                open_logs(query)
            deadline = None if timeout is None or options.available_now else time.time() + timeout
            while query.isActive:
                query.awaitTermination(1)  # raises the query's failure
                if stop.requested:
                    if _settle_stop(spark, query, processor, sink, progress, stop, stop_timeout):
                        break
                elif not options.available_now and (
                        (deadline is not None and time.time() >= deadline)
                        or (until is not None and until(processor.totals))):
                    stopped = True
                    query.stop()
                    break
            if not query.isActive and query.exception() is not None:
                query.awaitTermination()  # a query that failed before the loop first looked: raise its failure
    except KeyboardInterrupt:  # not on the main thread: no handler of ours
        stopped = True
        if query is not None:
            query.stop()
    except Exception as exc:  # the query failed: prefer the batch's own error
        error = processor.failure or exc
        if stop.requested and (stop.abandoned or isinstance(error, StopRequested)
                               or "StopRequested" in str(exc)):
            error = None  # the batch the stop refused or abandoned: not committed, as the stop says
    finally:
        sink.close()
    return error, stopped


def _run_error(spark: SparkSession, processor: _BatchProcessor, error: BaseException | None, stopped: bool,
               stop: _Stop, stop_timeout: float, settings: Mapping[str, str], options: JobOptions,
               checkpoint: StorageURI) -> BaseException | None:
    """The run's failure once the query ended (a stop's report kept in the totals): a batch's failure the query
    did not raise, unless the run was stopped; an error of Spark's told as a damaged checkpoint or a resource
    limit where it is one."""
    if stop.requested:
        stopped = True
        if error is None:
            processor.totals.stop = _stop_report(stop, stop_timeout, processor.totals)
    if error is None and processor.failure is not None and not stopped:
        error = processor.failure
    if error is not None and not isinstance(error, AvroSinkError):
        failed = processor.failed_batch if processor.failed_batch is not None else processor.current_batch
        error = (checkpoint_files.checkpoint_failure(error, checkpoint)
                 or _resource_error(spark, error, settings, failed, options) or error)
    return error


def _raise_run_error(processor: _BatchProcessor, error: BaseException, options: JobOptions,
                     checkpoint: StorageURI) -> NoReturn:
    """Raise the run's failure: the product's own error as it is, any other as :class:`JobFailed` naming the
    batch (secrets redacted)."""
    if isinstance(error, AvroSinkError):
        raise error
    batch = f"batch {processor.failed_batch}" if processor.failed_batch is not None else "the query"
    cause = redact_text(' '.join(str(error).split()), secret_values(options.sink, options.source.kafka))
    raise JobFailed(
        f"The streaming job failed in {batch}: {cause[:2000]} Nothing of that batch "
        f"was committed; a rerun with checkpoint {str(checkpoint)!r} resumes from it.",
        batch=processor.failed_batch,
    ) from error


def run_job(
    spark: SparkSession,
    options: JobOptions,
    *,
    registry: Any = None,
    sink: Sink | None = None,
    router: TopicRouter | None = None,
    progress: ProgressReporter | None = None,
    timeout: float | None = None,
    until: Callable[[JobTotals], bool] | None = None,
    metrics: JobMetrics | None = None,
    stop_timeout: float | None = None,
) -> JobResult:
    """Run the streaming job until the input is drained (``available_now``) or until interrupted.

    ``registry`` is a registry client (default: :func:`~avro_registry_sink.registry.connect.connect`
    on the sink config's registry, embedded when it has no URL); ``sink`` defaults to
    :func:`build_sink`; ``timeout`` stops a continuous run after that many seconds, ``until`` as soon as
    it returns true for the totals (checked every second); ``metrics`` (:class:`~avro_registry_sink.ops.metrics.JobMetrics`)
    is fed by every batch and by the registry client's requests.

    SIGINT or SIGTERM (on the main thread) stops the run: no batch starts after it, the running batch finishes if
    it can within ``stop_timeout`` seconds (default: the sink config's ``stop-timeout``, 30) and is abandoned otherwise, or at a second signal (its Spark jobs
    cancelled, exactly once's open transactions aborted, nothing of it committed); the result's ``stop`` says which
    (see :func:`~avro_registry_sink.ops.progress.stop_sentence`). Raises
    :class:`JobFailed` (or the batch's own error, e.g. ``SchemaEvolutionError``) when a batch fails;
    everything before that batch is committed. A damaged, missing or unreadable checkpoint file raises
    :class:`~avro_registry_sink.errors.CheckpointError` naming it (before the query starts when it can be seen,
    else from Spark's error), an unusable embedded registry file
    :class:`~avro_registry_sink.errors.RegistryFileError`.
    """
    checkpoint_files.check_checkpoint_files(options.checkpoint_uri)
    _check_checkpoint(options)
    guard_loggers("py4j.clientserver", "py4j.java_gateway")  # their debug records carry the Kafka settings
    progress = progress or NullProgress()
    router = router or build_router(options.sink, options.topic_rule)
    checkpoint = options.checkpoint_uri
    sink = _prepare_run(spark, options, sink)
    stream = _stream(spark, options)
    settings = _resource_settings(spark, options)
    with _registry_for(options, registry) as client:
        require_data_contracts(options.sink, client)  # --on-incompatible new-major: before any batch runs
        processor = _batch_processor(options, client, router, sink, progress, metrics)
        if metrics is not None and hasattr(client, "observer"):
            client.observer = metrics.registry_request
        writer = _stream_writer(stream, processor, options, checkpoint)
        progress.start(_start_info(options, sink, checkpoint))
        if metrics is not None:
            _start_metrics(metrics, options, processor)
        stop = processor.stop = _Stop()
        stop_timeout = options.sink.stop_timeout if stop_timeout is None else stop_timeout
        error, stopped = _await_query(spark, writer, processor, sink, progress, stop, stop_timeout, options, checkpoint,
                                      timeout, until)
        error = _run_error(spark, processor, error, stopped, stop, stop_timeout, settings, options, checkpoint)
        with contextlib.suppress(Exception):  # a reporter must not hide the failure
            progress.finish(processor.totals, error)
        if metrics is not None:
            metrics.finish(error)
        if error is not None:
            _save_last_error(processor, error, options)
            _raise_run_error(processor, error, options, checkpoint)
        shown: Path | str = options.checkpoint if checkpoint.is_local else str(checkpoint)  # no credentials
        return JobResult(totals=processor.totals, checkpoint=shown, bad_input=processor.bad_input,
                         dead_letters=processor.dead_letters, plans=processor.plans,
                         sink=sink.description, stop=processor.totals.stop)
