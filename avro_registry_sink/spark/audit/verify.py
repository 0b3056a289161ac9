"""``verify``: prove what a run delivered, by reconciling its sink with its source, in Spark.

::

    source (the run's --source, settings, checkpoint)          sink (the run's --sink-uri)
      committed input only: Spark's offset log                   file sink: published batch files
      (storage tree: file numbers per data directory;            (staged, unfinished batches left out;
       Kafka: offsets per partition), minus held files            batches above the committed one counted
               |                                                   apart: a rerun replaces them)
      parsed and encoded by the job's own executor stages         Kafka: read_committed, every partition
      (encode_storage_files / encode_changelog)                    |
               |                                                  |
      expected records (topic, key, commit ts, bytes)          delivered records (topic, key, commit ts, bytes)
      minus rows the run dead-lettered (dead-letter/)             out-of-order keys: commit ts going back
               \\                                                  /  within a (topic, partition, key)
                grouped by (topic, key body, commit ts), k-th with k-th in input / delivery order
                                         |
          per group: missing, duplicated, unexpected, wrong schema id, value differs, wrong partition
                                         |
          driver: per-table counts; for groups with a discrepancy only, the delivered bytes are decoded
          through the registry by the schema ids they carry (unknown id, bytes that do not decode) and a
          bounded sample of discrepancies is shown with decoded keys and values

Everything per record happens on the executors; the driver gets the per-table summary and a sample. A
record byte-identical to what the product's encoder makes of its source row, under the schema id the
registry gives that schema, decodes by construction: only the others are decoded one by one.

Expected records come from the very stages the job runs (the same parsing, the same columnar encoder,
the same partition dispatch), with schema ids looked up in the registry (verify registers nothing). Keys
are compared without their 5-byte frame (so a wrong key schema id is a wrong id, not a missing row),
values by a digest of their Avro body, schema ids apart.

:func:`resolved_ts_per_table` reads an exactly-once run's resolved ts per table from its control topic;
:func:`completeness` tells per table whether everything up to it was delivered (the ``resolved ts`` and
``complete`` columns).

>>> # report = verify_run(spark, options)        # options: the run's JobOptions
>>> # report.ok, report.to_json()["tables"]
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from avro_registry_sink.errors import AvroSinkError, ConfigError, SchemaNotFound, SubjectNotFound
from avro_registry_sink.kafka.client import client_conf, connect
from avro_registry_sink.kafka.delivery import STATE_FILE, query_of, resolved_ts
from avro_registry_sink.kafka.options import spark_kafka_options
from avro_registry_sink.manager import SchemaManager
from avro_registry_sink.model import REPLAY_BATCH_BASE, RefusalReason, refusal_reason
from avro_registry_sink.routing.rules import build_router
from avro_registry_sink.routing.selection import TableSelection
from avro_registry_sink.settings.config import DeliveryMode, SinkKind
from avro_registry_sink.side_state import SideState
from avro_registry_sink.spark.driver.batch_storage import csv_explicit
from avro_registry_sink.spark.driver.job import _registry_for, _sink_location, check_checkpoint, ensure_spark_kafka
from avro_registry_sink.spark.runtime.session import apply_hadoop_conf, conf_value
from avro_registry_sink.spark.sinks.sinks import STAGING_DIR
from avro_registry_sink.spark.sources.changelog_stage import encode_changelog
from avro_registry_sink.spark.sources.sources import encode_storage_files, input_ranks, resolve_storage_files
from avro_registry_sink.spark.sources.storage_source import batch_files, initial_offset, list_tree
from avro_registry_sink.spark.stages.plan import stage_plans_for
from avro_registry_sink.spark.stages.tally import StageOutput, TallyParam, empty_tally
from avro_registry_sink.storage_fs import StorageURI, StoreFS, hadoop_settings, parse_storage_uri
from avro_registry_sink.tabledef.catalog import TableCatalog

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

    from avro_registry_sink.spark.driver.job_options import JobOptions

__all__ = [
    "COUNTS",
    "DISCREPANCIES",
    "NOT_REGISTERED",
    "VerifyReport",
    "committed_offsets",
    "completeness",
    "resolved_ts_per_table",
    "verify_run",
]

#: Per-table counts of a report, in the order they are shown.
COUNTS = ("expected", "delivered", "dead_lettered", "missing", "duplicated", "unexpected", "out_of_order",
          "unknown_schema_id", "undecodable", "wrong_schema_id", "value_mismatch", "header_mismatch", "wrong_partition",
          "misfiled")
#: The counts that must be zero for a run to reconcile.
DISCREPANCIES = COUNTS[3:]
#: Other per-table figures: input the run has not delivered yet, by design.
PENDING = ("held_files", "unread", "missing_files")
#: Keys delivered out of order whose source rows are in that order too (input order, commit ts going back): the
#: sink kept the source's order. Context for ``out_of_order``, not a count of its own.
SOURCE_ORDER = "out_of_order_in_source"

#: The schema id expected records carry when the registry does not hold their schema (ids start at 1).
NOT_REGISTERED = 0

_LINE_MASK = (1 << 40) - 1  # sources.LINE_BITS
_BATCH_FILE = re.compile(r"batch-(?P<batch>\d+)-part-(?P<part>\d+)\.jsonl")
_DEFAULT_SAMPLE = 20


class VerifyError(AvroSinkError):
    """Verify cannot compare: the options do not describe the run (another checkpoint, settings the data
    contradicts)."""


# --------------------------------------------------------------------------------------------------
# The report


@dataclass
class VerifyReport:
    """What :func:`verify_run` found: per table counts, a sample of discrepancies, notes."""

    source: str
    sink: str
    checkpoint: str
    committed_batch: int | None
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: The run's delivery mode, as its checkpoint records it (:func:`run_delivery`), and where that came from.
    delivery: str | None = None
    delivery_from: str | None = None

    def table(self, name: str) -> dict[str, Any]:
        if name not in self.tables:
            self.tables[name] = {**{k: 0 for k in COUNTS}, **{k: 0 for k in PENDING}, SOURCE_ORDER: 0,
                                 "topic": None}
        return self.tables[name]

    @property
    def totals(self) -> dict[str, int]:
        return {k: sum(int(t.get(k) or 0) for t in self.tables.values()) for k in (*COUNTS, *PENDING, SOURCE_ORDER)}

    @property
    def ok(self) -> bool:
        """Everything reconciles: no discrepancy of any kind in any table."""
        totals = self.totals
        return all(totals[k] == 0 for k in DISCREPANCIES)

    def to_json(self) -> dict[str, Any]:
        return {"status": "ok" if self.ok else "discrepancies", "source": self.source, "sink": self.sink,
                "checkpoint": self.checkpoint, "committed_batch": self.committed_batch,
                "delivery": self.delivery, "delivery_from": self.delivery_from, "totals": self.totals, "tables": {k: self.tables[k] for k in sorted(self.tables)},
                "samples": self.samples, "notes": self.notes, "seconds": round(self.seconds, 3)}


# --------------------------------------------------------------------------------------------------
# Completeness from the exactly-once control topic (hook)


def run_delivery(options: JobOptions) -> tuple[str, str]:
    """The delivery mode the run of ``options`` used, and where that comes from: its checkpoint, not the options
    verify is given (``--delivery`` need not be repeated). A Kafka run that delivered exactly once keeps its query
    id in the checkpoint's ``delivery.json``; a run without one delivered at least once. The file sink publishes
    each batch once, whatever the mode."""
    if options.sink.scheme != SinkKind.KAFKA:
        return DeliveryMode.EXACTLY_ONCE.value, "the file sink publishes each batch once"
    if query_of(options.checkpoint_uri) is not None:
        return DeliveryMode.EXACTLY_ONCE.value, f"the checkpoint's {STATE_FILE}"
    given = " (not the exactly-once verify was given)" if options.sink.delivery == DeliveryMode.EXACTLY_ONCE else ""
    return DeliveryMode.AT_LEAST_ONCE.value, f"the checkpoint has no {STATE_FILE}{given}"


def resolved_ts_per_table(options: JobOptions) -> Mapping[str, int] | None:
    """The per-table resolved commit ts the run's delivery has committed (``schema.table`` -> ts), or ``None``
    when the run did not deliver exactly once to Kafka (nothing records one) or has not started yet.

    Read from the exactly-once control topic (:func:`avro_registry_sink.kafka.delivery.resolved_ts`, read committed),
    under the query id that the checkpoint's ``delivery.json`` keeps: whether the run delivered exactly once is
    the checkpoint's to say, whatever ``options.sink.delivery`` is."""
    sink = options.sink
    if sink.scheme != SinkKind.KAFKA:
        return None
    query = query_of(options.checkpoint_uri)
    if query is None:
        return None
    return resolved_ts(sink.brokers, sink.control_topic, query, kafka=sink.kafka)


def completeness(report: VerifyReport, resolved_ts: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """Per table: whether every expected row with a commit ts at or below its resolved ts was delivered.

    ``resolved_ts`` comes from :func:`resolved_ts_per_table`. A table is complete up to its resolved ts when
    no row it misses has a commit ts at or below it (``first_missing_ts``, the smallest commit ts among
    its missing rows, is in each table's counts)."""
    out: dict[str, dict[str, Any]] = {}
    for name, counts in report.tables.items():
        ts = resolved_ts.get(name)
        if ts is None:
            continue
        first = counts.get("first_missing_ts")
        out[name] = {"resolved_ts": int(ts), "complete": first is None or int(first) > int(ts),
                     "first_missing_ts": first, "max_delivered_ts": counts.get("max_delivered_ts")}
    return out


# --------------------------------------------------------------------------------------------------
# The checkpoint: what the run has committed


@dataclass(frozen=True)
class Committed:
    """The newest batch Spark committed and its source's end offset (``None``: nothing committed)."""

    batch: int | None
    offset: Any = None
    start: Any = None  # Kafka: the offsets the query started from (``sources/0/0``), when recorded


def _numbered(store: StoreFS, directory: str) -> list[int]:
    out = []
    for relpath in store.list_files(directory):
        name = relpath.rpartition("/")[2]
        if name.isdigit():
            out.append(int(name))
    return sorted(out)


def _log_json(text: str, line: int) -> Any:
    lines = [x for x in text.splitlines() if x.strip()]
    if len(lines) <= line or lines[line].strip() == "-":
        return None
    return json.loads(lines[line])


def committed_offsets(store: StoreFS) -> Committed:
    """The newest committed micro-batch of a checkpoint (``store``: its root) and its end offset.

    Spark writes ``spark/offsets/<batch>`` (``v1``, the batch's metadata, then one offset per source) before
    a batch runs and ``spark/commits/<batch>`` once it committed; the input up to the newest committed
    batch's offset is what the run has delivered or set aside."""
    commits = _numbered(store, "spark/commits")
    if not commits:
        return Committed(batch=None)
    batch = commits[-1]
    offset = _log_json(store.read_text(f"spark/offsets/{batch}"), 2)
    start = None
    if store.exists("spark/sources/0/0"):
        try:
            start = _log_json(store.read_text("spark/sources/0/0"), 1)
        except ValueError:
            start = None
    return Committed(batch=batch, offset=offset, start=start)


# --------------------------------------------------------------------------------------------------
# Registry: ids looked up, never registered


class _LookupOnly:
    """The registry as the schema manager sees it during verify: ``register`` only looks the schema up
    (its id when the subject holds it, else :data:`NOT_REGISTERED`)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.not_registered: list[str] = []

    def register(self, subject: str, schema: str) -> int:
        try:
            return int(self._client.lookup(subject, schema).id)
        except (SubjectNotFound, SchemaNotFound):
            self.not_registered.append(subject)
            return NOT_REGISTERED

    def get_latest(self, subject: str) -> Any:
        return self._client.get_latest(subject)

    def lookup(self, subject: str, schema: str) -> Any:
        return self._client.lookup(subject, schema)


# --------------------------------------------------------------------------------------------------
# Dead letters


@dataclass
class DeadLetters:
    """The run's pending dead-letter records (not delivered by a replay) of committed batches."""

    records: list[dict[str, Any]]

    @property
    def sources(self) -> set[str]:
        return {str(r.get("source")) for r in self.records if r.get("source")}

    @property
    def whole_files(self) -> set[str]:
        """Files set aside whole (vanished, unreadable): no line."""
        return {str(r["file"]) for r in self.records if r.get("file") and not r.get("line")}

    def positions(self) -> list[tuple[str, int]]:
        return [(str(r["file"]), int(r["line"])) for r in self.records if r.get("file") and r.get("line")]


def read_dead_letters(store: StoreFS, committed_batch: int | None) -> DeadLetters:
    """``dead-letter/batch-*.jsonl`` and ``replay-*.jsonl`` of ``store`` (a checkpoint), minus what replays
    delivered (``replayed/``), newest record per id; records of batches above ``committed_batch`` (written
    by a batch that did not commit: its rerun writes them again) are left out."""
    files = store.list_files("dead-letter")
    delivered: set[str] = set()
    for relpath in files:
        if relpath.startswith("dead-letter/replayed/") and relpath.endswith(".json"):
            delivered.update(json.loads(store.read_text(relpath)).get("delivered", ()))
    latest: dict[str, dict[str, Any]] = {}
    letters = sorted(p for p in files if re.fullmatch(r"dead-letter/batch-\d+\.jsonl", p)) + sorted(
        p for p in files if re.fullmatch(r"dead-letter/replay-\d+\.jsonl", p))
    for relpath in letters:
        for line in store.read_text(relpath).splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            batch = record.get("batch")
            if relpath.startswith("dead-letter/batch-") and batch is not None and (
                    committed_batch is None or int(batch) > committed_batch):
                continue
            ident = record.get("id") or f"{relpath}:{len(latest)}"
            if ident not in delivered:
                latest[ident] = record
    return DeadLetters(records=list(latest.values()))


def _table_of_letter(record: Mapping[str, Any]) -> str:
    if record.get("schema") and record.get("table"):
        return f"{record['schema']}.{record['table']}"
    file = str(record.get("file") or "")
    parts = file.split("/")
    if len(parts) >= 4:  # a storage data file: <schema>/<table>/...
        return f"{parts[0]}.{parts[1]}"
    return "?"


# --------------------------------------------------------------------------------------------------
# Records: both sides in one shape


def _body(column: str) -> Column:
    from pyspark.sql import functions as F

    return F.expr(f"substr({column}, 6)")


def _framed(column: str) -> Column:
    from pyspark.sql import functions as F

    c = F.col(column)
    return c.isNotNull() & (F.length(c) >= 5) & (F.hex(F.substring(c, 1, 1)) == F.lit("00"))


def _schema_id(column: str) -> Column:
    from pyspark.sql import functions as F

    return F.conv(F.hex(F.substring(F.col(column), 2, 4)), 16, 10).cast("long")


def _shape(df: DataFrame) -> DataFrame:
    """``topic, partition, key, value, ts, pos, ...`` -> the compared columns: ``kbody`` (the key without its
    frame; an unframed key as it is), ``ksid``/``vsid`` (schema ids; ``-1`` unframed, ``vsid`` null for a
    tombstone), ``vdig`` (a digest of the value's Avro body, null for a tombstone), ``hdrs`` (every header the
    record carries, in its order, as :func:`_headers_text` reads it back)."""
    from pyspark.sql import functions as F

    key_ok, value_ok = _framed("key"), _framed("value")
    return df.select(
        "*",
        F.when(key_ok, _body("key")).otherwise(F.coalesce(F.col("key"), F.lit(bytearray()))).alias("kbody"),
        F.when(key_ok, _schema_id("key")).otherwise(F.lit(-1)).alias("ksid"),
        F.when(F.col("value").isNull(), F.lit(None)).when(value_ok, _schema_id("value")).otherwise(F.lit(-1))
        .alias("vsid"),
        F.when(F.col("value").isNull(), F.lit(None)).when(value_ok, F.xxhash64(_body("value")))
        .otherwise(F.xxhash64(F.col("value"), F.lit("unframed"))).alias("vdig"),
        (F.expr(f"concat_ws('{_HEADER_SEP}', transform(headers, h -> concat(h.key, '=', coalesce(hex(h.value), '-'))))")
         if "headers" in df.columns else F.lit(None).cast("string")).alias("hdrs"),
    )


#: Separates the headers in the compared ``hdrs`` text (a header key holds no control character).
_HEADER_SEP = "\\u0001"


def _headers_text(hdrs: str | None) -> list[tuple[str, str | None]]:
    """``hdrs`` (see :func:`_shape`) -> ``[(key, value as text or None), ...]``, in the record's order."""
    out: list[tuple[str, str | None]] = []
    for part in (hdrs or "").split("\x01"):
        if not part:
            continue
        key, _, value = part.rpartition("=")
        out.append((key, None if value == "-" else bytes.fromhex(value).decode("utf-8", "backslashreplace")))
    return out


def header_differences(expected: str | None, delivered: str | None) -> list[dict[str, Any]]:
    """The headers whose values differ between an expected and a delivered record, one entry per header name
    (``header``, ``expected``, ``found``; a header one side lacks is ``None`` there). A header a record carries
    twice is compared occurrence by occurrence."""
    def by_name(hdrs: str | None) -> dict[str, list[str | None]]:
        out: dict[str, list[str | None]] = {}
        for key, value in _headers_text(hdrs):
            out.setdefault(key, []).append(value)
        return out

    want, got = by_name(expected), by_name(delivered)
    names = [*want, *(k for k in got if k not in want)]
    diffs = []
    for name in names:
        a, b = want.get(name, []), got.get(name, [])
        if a != b:
            diffs.append({"header": name, "expected": a[0] if len(a) == 1 else (a or None),
                          "found": b[0] if len(b) == 1 else (b or None)})
    return diffs


def _position(x: Column, y: Column, z: Column) -> Column:
    """A record's place on its side, one shape for both: expected, the input's order (table version or commit ts,
    file or partition, line or offset); delivered, the sink's (file sink: batch, part, line; Kafka: partition,
    -, offset)."""
    from pyspark.sql import functions as F

    return F.struct(x.cast("long").alias("x"), F.coalesce(y.cast("string"), F.lit("")).alias("y"),
                    z.cast("long").alias("z")).alias("pos")


# --------------------------------------------------------------------------------------------------
# Expected: the committed source through the job's own stages


@dataclass
class Expected:
    """The expected side: records (``topic, partition, key, value, ts, pos``) of committed input, what the
    driver learnt on the way, and how to show a record's source location."""

    records: DataFrame | None
    topics: dict[str, str]  # topic -> schema.table
    plans: dict[Any, Any]
    tally: Any = None
    held: dict[str, int] = field(default_factory=dict)  # table -> held files
    unread: dict[str, int] = field(default_factory=dict)  # table -> files / messages beyond the committed offsets
    notes: list[str] = field(default_factory=list)
    location_of: Any = None  # pos (Row) -> "file:line" / "topic/partition@offset"
    restricted: Any = None  # (locations) -> Expected records of those input locations only
    error_matches: Any = None  # (error dict, DeadLetters) -> whether the run set that row aside
    dead_lettered: Any = None  # (DeadLetters) -> a Column: the expected rows the run set aside


def _plans_for(options: JobOptions, registry: Any, tables: Iterable[Any]) -> tuple[dict[Any, Any], list[str]]:
    lookup = _LookupOnly(registry)
    manager = SchemaManager(lookup, build_router(options.sink, options.topic_rule), options.sink.encoding,
                            unavailable_budget=options.sink.registry.unavailable_budget,
                            selection=TableSelection.from_config(options.sink))
    plans = manager.prepare_batch(tables)
    return plans, sorted(set(lookup.not_registered))


def _table_key(relpath: str) -> str:
    parts = relpath.split("/")
    return f"{parts[0]}.{parts[1]}" if len(parts) >= 2 else relpath


def expected_storage(spark: SparkSession, options: JobOptions, registry: Any, committed: Committed,
                     partitions: Any, side: SideState) -> Expected:
    """The rows of the storage tree's committed data files, encoded by the job's one-pass stage."""
    # the storage tree's reader only for a storage tree's run
    from avro_registry_sink.sources.storage import StorageLayout

    spec = options.source
    location = spec.location or parse_storage_uri(str(spec.path), option="source")
    layout = StorageLayout(location)
    listing = list_tree(layout)
    out = Expected(records=None, topics={}, plans={})
    every = {f.relpath for files in listing.dirs.values() for f in files.values()}
    taken: list[tuple[str, bool]] = []
    if committed.offset is not None:
        taken = batch_files(initial_offset(), committed.offset, listing)
    in_range = {relpath for relpath, _ in taken}
    for relpath in sorted(every - in_range):
        out.unread[_table_key(relpath)] = out.unread.get(_table_key(relpath), 0) + 1
    held = dict(((side.latest("held") or {}).get("held")) or {})
    for relpath in held:
        out.held[_table_key(relpath)] = out.held.get(_table_key(relpath), 0) + 1
    vanished = sorted(r for r, missing in taken if (missing or r not in every) and r not in held
                      and layout.data_file(r) is not None)
    if vanished:
        out.notes.append(f"{len(vanished)} committed data file(s) are gone from the source now ("
                         + ", ".join(vanished[:3]) + (" ..." if len(vanished) > 3 else "")
                         + "): their rows cannot be expected; records delivered from them count as unexpected.")
    paths = [location.hadoop_uri(r) for r, _ in taken
             if r in every and r not in held and layout.data_file(r) is not None]
    hints = {(t.schema_name, t.table): t for t in options.tables}
    resolved = resolve_storage_files(layout, paths, hints, {})
    selection = TableSelection.from_config(options.sink)
    if not selection.is_everything:
        import dataclasses

        resolved = dataclasses.replace(
            resolved, files=[f for f in resolved.files if selection.admits(f[1][0], f[1][1])],
            tables={k: t for k, t in resolved.tables.items() if selection.admits(k[0], k[1])})
    if resolved.held:
        out.notes.append(f"{len(resolved.held)} committed data file(s) have no usable schema file now; "
                         "their rows cannot be expected.")
    plans, missing_schemas = _plans_for(options, registry, resolved.tables.values())
    if missing_schemas:
        out.notes.append("not in the registry (nothing of these was delivered with them): "
                         + ", ".join(missing_schemas[:6]) + (" ..." if len(missing_schemas) > 6 else ""))
    out.plans = plans
    out.topics = {plan.route.topic: plan.encoding.table.qualified_name for plan in plans.values()}
    if not resolved.files:
        return out
    counts = partitions({plan.route.topic for plan in plans.values()})
    stage_plans = stage_plans_for(plans, counts, options.sink.max_message_bytes)
    explicit = frozenset(csv_explicit(options.csv_options))
    ranks = input_ranks(resolved.files)
    relpath_of = {rank: relpath for relpath, rank in ranks.items()}
    out.tally = spark.sparkContext.accumulator(empty_tally(), TallyParam())

    def records(files: Any, output: Any) -> DataFrame:
        from pyspark.sql import functions as F

        wanted = sorted({relpath for relpath, _, _ in files.files})
        files_df = spark.read.format("binaryFile").load([location.spark_path(r) for r in wanted]).select(
            "path", "content")
        encoded = encode_storage_files(files_df, location, files, stage_plans, options.csv_options, explicit, output)
        local = input_ranks(files.files)
        # positions in the whole committed range, whichever files this DataFrame covers
        shift = {local[r]: ranks[r] for r in local}
        rank = F.shiftright("order_line", 40)
        if any(a != b for a, b in shift.items()):
            mapping = F.create_map(*[F.lit(x) for pair in shift.items() for x in pair])
            rank = F.element_at(mapping, rank.cast("int")).cast("long")
        line = F.col("order_line").bitwiseAND(F.lit(_LINE_MASK))
        position = F.shiftleft(rank, 40).bitwiseOR(line)
        return encoded.filter("error IS NULL").select(
            "topic", "partition", "key", "value", "headers", F.col("commit_ts").alias("ts"),
            _position(F.col("order_version"), F.lit(""), position),  # the position orders the files itself
            position.alias("at"))

    out.records = records(resolved, StageOutput(out.tally))

    def location_of(pos: Any) -> str:
        at = int(pos["z"])
        return f"{relpath_of.get(at >> 40, '?')}:{at & _LINE_MASK}"

    def restricted(locations: Iterable[str]) -> DataFrame | None:
        import dataclasses

        files = {loc.rpartition(":")[0] for loc in locations}
        subset = dataclasses.replace(resolved, files=[f for f in resolved.files if f[0] in files])
        return records(subset, None) if subset.files else None

    def dead_lettered(letters: DeadLetters) -> Any:
        """The expected rows the run set aside (by position), as a filter of ``records``."""
        from pyspark.sql import functions as F

        at = [(ranks[f] << 40) | line for f, line in letters.positions() if f in ranks]
        whole = [ranks[f] for f in letters.whole_files if f in ranks]
        cond = F.lit(False)
        if at:
            cond = cond | F.col("at").isin(at)
        if whole:
            cond = cond | F.shiftright("at", 40).isin(whole)
        return cond

    def error_matches(error: Mapping[str, Any], letters: DeadLetters) -> bool:
        source = str(error.get("source") or "")
        file = str(error.get("file") or source.rpartition(":")[0] or source)
        return source in letters.sources or file in letters.whole_files

    out.location_of = location_of
    out.restricted = restricted
    out.error_matches = error_matches
    out.dead_lettered = dead_lettered
    return out


def expected_changelog(spark: SparkSession, options: JobOptions, registry: Any, committed: Committed,
                       partitions: Any, side: SideState) -> Expected:
    """The committed messages of a changelog source (Kafka offsets, or the files Spark's file source logged),
    read and encoded by the job's own changelog stage
    (:func:`~avro_registry_sink.spark.sources.changelog_stage.encode_changelog`) with the table versions the run kept."""
    from pyspark.sql import functions as F

    spec = options.source
    out = Expected(records=None, topics={}, plans={})
    catalog = TableCatalog.from_data(side.latest("tables"), seed=options.tables)
    selection = TableSelection.from_config(options.sink)
    keys = sorted(k for k in catalog.known() if selection.admits(*k))
    history = catalog.history(keys)
    tables = [t for versions in history.values() for _, t in versions]
    plans, missing_schemas = _plans_for(options, registry, tables)
    out.plans = plans
    out.topics = {plan.route.topic: plan.encoding.table.qualified_name for plan in plans.values()}
    if committed.offset is None:
        return out
    raw = _committed_changelog(spark, options, committed, out)
    if raw is None:
        return out
    counts = partitions({plan.route.topic for plan in plans.values()})
    stage_plans = stage_plans_for(plans, counts, options.sink.max_message_bytes)
    out.tally = spark.sparkContext.accumulator(empty_tally(), TallyParam())
    excluded = frozenset(k for k in catalog.known() if not selection.admits(*k))
    location = None if spec.is_kafka else spec.location or parse_storage_uri(spec.path or ".")

    def records(raw_df: DataFrame, output: Any) -> DataFrame:
        """The job's changelog stage over ``raw_df`` (the stream's rows), refused rows left to the tally; the
        filter also leaves out tables the run never described (it left their DDLs out too)."""
        encoded = encode_changelog(raw_df, spec, history, stage_plans, excluded, output,
                                   table_filter=selection.table_filter)
        return encoded.filter("error IS NULL").select(
            "topic", "partition", "key", "value", "headers", F.col("commit_ts").alias("ts"),
            _position(F.col("order_version"), F.col("order_file"), F.col("order_line")), _source_of(spec).alias("at"))

    out.records = records(raw, StageOutput(out.tally))

    def location_of(pos: Any) -> str:
        if spec.is_kafka:
            topic, _, partition = str(pos["y"]).rpartition("/")
            return f"{topic}/{int(partition)}@{int(pos['z'])}"
        return f"{pos['y']}:{int(pos['z'])}"

    def restricted(locations: Iterable[str]) -> DataFrame | None:
        wanted = sorted(set(locations))
        if not wanted:
            return None
        if spec.is_kafka:
            subset = raw.filter(F.format_string("%s/%d@%d", "topic", "partition", "offset").isin(wanted))
        else:  # the files that hold them (a file's messages are read together, as the job reads them)
            names = {loc.rpartition(":")[0] for loc in wanted}
            paths = [r["path"] for r in raw.select("path").distinct().collect()
                     if _file_name(location, r["path"]) in names]
            if not paths:
                return None
            subset = raw.filter(F.col("path").isin(paths))
        found = records(subset, None)
        return found.filter(F.col("at").isin(wanted))

    def dead_lettered(letters: DeadLetters) -> Any:
        sources = sorted(letters.sources)
        return F.col("at").isin(sources) if sources else F.lit(False)

    def error_matches(error: Mapping[str, Any], letters: DeadLetters) -> bool:
        source = str(error.get("source") or "")
        return source in letters.sources or source.rpartition(":")[0] in letters.whole_files

    out.location_of = location_of
    out.restricted = restricted
    out.error_matches = error_matches
    out.dead_lettered = dead_lettered
    if missing_schemas:
        out.notes.append("not in the registry: " + ", ".join(missing_schemas[:6])
                         + (" ..." if len(missing_schemas) > 6 else ""))
    return out


def _source_of(spec: Any) -> Column:
    """A changelog record's source location (``topic/partition@offset``, ``file:line``: the text the job's dead
    letters carry) from its order columns (``topic/<partition, 10 digits>`` or the file, and offset or line)."""
    from pyspark.sql import functions as F

    if spec.is_kafka:
        return F.concat(F.regexp_extract("order_file", r"^(.*)/[0-9]+$", 1), F.lit("/"),
                        F.regexp_extract("order_file", r"/([0-9]+)$", 1).cast("int").cast("string"), F.lit("@"),
                        F.col("order_line").cast("string"))
    return F.concat(F.col("order_file"), F.lit(":"), F.col("order_line").cast("string"))


def _file_name(location: Any, uri: str) -> str:
    """A changelog file's name in its records' locations, as the job's stage names it (relative to the source)."""
    try:
        return str(location.relative(uri))
    except ConfigError:
        return uri


def _committed_changelog(spark: SparkSession, options: JobOptions, committed: Committed, out: Expected) -> Any:
    """The raw batch rows of the committed changelog input (the stream's shape: Kafka records, or files)."""
    spec = options.source
    if spec.is_kafka:
        ensure_spark_kafka(spark)
        end = {t: {str(p): int(o) for p, o in parts.items()} for t, parts in dict(committed.offset).items()}
        start = committed.start if isinstance(committed.start, dict) else None
        reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", ",".join(spec.brokers))
                  .option("subscribe", ",".join(sorted(end)))
                  .option("startingOffsets", json.dumps(start) if start else "earliest")
                  .option("endingOffsets", json.dumps(end))
                  .option("failOnDataLoss", "false")
                  .options(**spark_kafka_options(spec.kafka, "consumer")))
        for name, value in spec.options.items():
            if name.startswith("kafka."):
                reader = reader.option(name, value)
        _count_unread_kafka(options, end, out)
        return reader.load().select("value", "topic", "partition", "offset")
    files = _committed_stream_files(options, committed)
    location = spec.location or parse_storage_uri(str(spec.path), option="source")
    taken = set()
    for path in files:
        with contextlib.suppress(ConfigError):
            taken.add(location.relative(path))
    waiting = [p for p in location.filesystem().list_files() if p not in taken
               and not p.rpartition("/")[2].startswith((".", "_"))]
    if waiting:
        out.unread["(source files)"] = len(waiting)
    if not files:
        return None
    return spark.read.format("binaryFile").load(files).select("path", "content")


def _count_unread_kafka(options: JobOptions, end: Mapping[str, Mapping[str, int]], out: Expected) -> None:
    """Messages beyond the committed offsets (the run has not read them yet), per source topic."""
    from confluent_kafka import TopicPartition

    spec = options.source
    try:
        from confluent_kafka import Consumer

        conf = client_conf(",".join(spec.brokers), spec.kafka, "consumer")
        conf.pop("logger", None)
        consumer = Consumer({**conf, "group.id": "avro-registry-sink-verify", "enable.auto.commit": False})
        try:
            for topic, parts in end.items():
                unread = 0
                for partition, offset in parts.items():
                    _, high = consumer.get_watermark_offsets(TopicPartition(topic, int(partition)), timeout=10)
                    unread += max(0, int(high) - int(offset))
                out.unread[f"topic {topic}"] = unread
        finally:
            consumer.close()
    except Exception as exc:  # noqa: BLE001 - the count is informative only
        out.notes.append(f"unread messages not counted: {type(exc).__name__}: {exc}")


def _committed_stream_files(options: JobOptions, committed: Committed) -> list[str]:
    """The files Spark's file source took up to the committed batch (``spark/sources/0/``: one JSON line per
    file with its ``batchId``; compacted every few batches into ``<n>.compact``)."""
    store = StoreFS(options.checkpoint_uri, option="checkpoint")
    assert committed.batch is not None
    log_batch = int(dict(committed.offset or {}).get("logOffset", committed.batch))
    paths: list[str] = []
    for relpath in store.list_files("spark/sources/0"):
        name = relpath.rpartition("/")[2]
        if not re.fullmatch(r"\d+(\.compact)?", name):
            continue
        for line in store.read_text(relpath).splitlines()[1:]:
            if line.strip():
                entry = json.loads(line)
                if int(entry.get("batchId", 0)) <= log_batch:
                    paths.append(str(entry["path"]))
    return sorted(set(paths))


# --------------------------------------------------------------------------------------------------
# Delivered: the sink, read by Spark


@dataclass
class Delivered:
    records: DataFrame | None  # topic, partition, key, value, ts, pos, misfiled
    location_of: Any = None  # (topic, partition, pos) -> text
    notes: list[str] = field(default_factory=list)
    raw: Any = None  # () -> records again (for the second look at groups with a discrepancy)


#: One line of the file sink, as :mod:`~avro_registry_sink.spark.stages.file_lines` writes it.
_LINE_SCHEMA = ("topic STRING, partition INT, key STRING, value STRING, "
                "headers ARRAY<STRUCT<key: STRING, value: STRING>>, commit_ts BIGINT, batch BIGINT")


def delivered_file_sink(spark: SparkSession, location: StorageURI, committed_batch: int | None) -> Delivered:
    """The published records of a file sink (staged batches left out, as :func:`read_file_sink` does), with
    each record's place: (batch, part, line) of its topic's files.

    Batches above the newest committed one were published by a run that stopped before Spark committed
    them (their rerun replaces them): they are counted in a note, not compared."""
    from pyspark.sql import functions as F

    store = location.filesystem()
    out = Delivered(records=None)
    staged = sorted({int(m.group(1)) for relpath in store.list_files(STAGING_DIR)
                     if (m := re.match(rf"{STAGING_DIR}/batch-(\d+)/", relpath))})
    if staged:
        out.notes.append(f"{len(staged)} batch(es) of the file sink are staged, not published (being written, or "
                         f"their writer stopped): {', '.join(map(str, staged[:5]))}; their records are not visible.")
    files: list[str] = []
    later: dict[int, int] = {}
    for relpath in store.list_files():
        topic, _, name = relpath.rpartition("/")
        m = _BATCH_FILE.fullmatch(name)
        if not m or not topic or "/" in topic or topic == STAGING_DIR:
            continue
        batch = int(m.group("batch"))
        if batch in staged:
            continue
        if batch < REPLAY_BATCH_BASE and (committed_batch is None or batch > committed_batch):
            later[batch] = later.get(batch, 0) + 1
            continue
        files.append(relpath)
    if later:
        out.notes.append(f"{sum(later.values())} file(s) of batch(es) {', '.join(map(str, sorted(later)[:5]))} were "
                         "published but not committed (the run stopped before Spark's commit): the rerun of "
                         "those batches replaces them; not compared.")
    if not files:
        return out

    def read() -> DataFrame:
        # whole files (one row each), so that a line's number is its place: text()'s own wholetext argument
        # (False by default) would override an .option("wholetext") and give every line number 1
        text = spark.read.text([location.spark_path(f) for f in files], wholetext=True)
        name = F.element_at(F.split(F.input_file_name(), "/"), -1)
        topic_dir = F.element_at(F.split(F.input_file_name(), "/"), -2)
        lines = text.select(
            F.regexp_extract(name, r"batch-(\d+)-part-", 1).cast("long").alias("fbatch"),
            F.regexp_extract(name, r"-part-(\d+)\.jsonl", 1).cast("int").alias("fpart"),
            topic_dir.alias("ftopic"),
            F.posexplode(F.split("value", "\n")).alias("line", "text"))
        parsed = lines.filter(F.length("text") > 0).select(
            "fbatch", "fpart", "ftopic", "line", F.from_json("text", _LINE_SCHEMA).alias("r"))
        return parsed.select(
            F.coalesce(F.col("r.topic"), F.col("ftopic")).alias("topic"),
            F.coalesce(F.col("r.partition"), F.lit(-1)).alias("partition"),
            F.unhex("r.key").alias("key"), F.unhex("r.value").alias("value"),
            F.expr("transform(r.headers, h -> named_struct('key', h.key, 'value', unhex(h.value)))").alias("headers"),
            F.coalesce(F.col("r.commit_ts"), F.lit(-1)).alias("ts"),
            _position(F.col("fbatch"), F.lit(""), F.shiftleft(F.col("fpart").cast("long"), 32) + F.col("line") + 1),
            ((F.col("r.batch") != F.col("fbatch")) | (F.col("r.topic") != F.col("ftopic"))
             | F.col("r.topic").isNull()).alias("misfiled"))

    out.records = read()
    out.raw = read

    def location_of(topic: str, partition: int, pos: Any) -> str:
        return f"{topic}/batch-{int(pos['x']):010d}-part-{int(pos['z']) >> 32:05d}.jsonl:{int(pos['z']) & 0xFFFFFFFF}"

    out.location_of = location_of
    return out


def delivered_kafka(spark: SparkSession, options: JobOptions, topics: Iterable[str],
                    read_topics: Mapping[str, str]) -> Delivered:
    """Every record of the sink's topics, read with ``isolation.level=read_committed`` (what a consumer of
    committed transactions sees); ``read_topics`` reads a topic from another one (a copy, a mirror)."""
    from pyspark.sql import functions as F

    sink = options.sink
    out = Delivered(records=None)
    existing = _kafka_partitions(options, [read_topics.get(t, t) for t in topics])
    physical = sorted(t for t in {read_topics.get(t, t) for t in topics} if t in existing)
    if not physical:
        return out
    if not ensure_spark_kafka(spark):
        raise ConfigError("Reading the Kafka sink needs Spark's Kafka connector, and it could not be added.",
                          option="sink-uri")
    back = {read_topics.get(t, t): t for t in topics}
    mapping = F.create_map(*[F.lit(x) for pair in back.items() for x in pair])

    def read() -> DataFrame:
        df = (spark.read.format("kafka").option("kafka.bootstrap.servers", ",".join(sink.brokers))
              .option("subscribe", ",".join(physical)).option("startingOffsets", "earliest")
              .option("endingOffsets", "latest").option("kafka.isolation.level", "read_committed")
              .option("includeHeaders", "true").options(**spark_kafka_options(sink.kafka, "consumer")).load())
        ts = F.expr("cast(decode(filter(headers, h -> h.key = 'commit_ts')[0].value, 'UTF-8') as bigint)")
        return df.select(
            F.coalesce(F.element_at(mapping, F.col("topic")), F.col("topic")).alias("topic"),
            "partition", "key", "value", "headers", F.coalesce(ts, F.lit(-1)).alias("ts"),
            _position(F.col("partition"), F.lit(""), F.col("offset")),
            F.lit(False).alias("misfiled"))

    out.records = read()
    out.raw = read

    def location_of(topic: str, partition: int, pos: Any) -> str:
        return f"{read_topics.get(topic, topic)}/{int(pos['x'])}@{int(pos['z'])}"

    out.location_of = location_of
    return out


def _kafka_partitions(options: JobOptions, topics: Iterable[str]) -> dict[str, int]:
    """Partition counts of the sink's topics that exist."""
    sink = options.sink
    _, metadata = connect(",".join(sink.brokers), sink.kafka)
    out = {}
    for topic in topics:
        meta = metadata.topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            out[topic] = len(meta.partitions)
    return out


# --------------------------------------------------------------------------------------------------
# Reconciliation


# the key body first: the sort's prefix then tells rows apart (a topic name is the same on most rows)
_GROUP = ("kbody", "topic", "ts")
_KEY = ("kbody", "topic")
#: Per (topic, key, commit ts) group: the counts a pair of expected and delivered records can show.
_GROUP_COUNTS = ("missing", "duplicated", "unexpected", "misfiled", "wrong_schema_id", "value_mismatch",
                 "header_mismatch", "wrong_partition")
_SUMMED = ("expected", "delivered", *_GROUP_COUNTS, "out_of_order", SOURCE_ORDER)
#: Settings of the reconciliation's Spark plan (see :func:`_compared`), restored afterwards.
_PLAN_CONF = {"spark.sql.execution.replaceHashWithSortAgg": "true"}


def _sides(expected: DataFrame | None, delivered: DataFrame | None, spark: SparkSession) -> DataFrame:
    """Both sides' records in one DataFrame (``side`` 0: expected, 1: delivered), in the compared shape."""
    from pyspark.sql import functions as F

    columns = ["topic", "kbody", "ts", "side", "pos", "partition", "ksid", "vsid", "vdig", "hdrs", "misfiled"]
    parts = []
    for side, df in ((0, expected), (1, delivered)):
        if df is None:
            continue
        shaped = _shape(df)
        misfiled = F.col("misfiled") if "misfiled" in df.columns else F.lit(False)
        parts.append(shaped.select("topic", "kbody", F.col("ts").cast("long").alias("ts"), F.lit(side).alias("side"),
                                   "pos", F.col("partition").cast("int").alias("partition"), "ksid", "vsid", "vdig",
                                   "hdrs", misfiled.alias("misfiled")))
    if not parts:
        return spark.createDataFrame([], "topic string, kbody binary, ts bigint, side int, pos struct<x: bigint, "
                                         "y: string, z: bigint>, partition int, ksid bigint, vsid bigint, "
                                         "vdig bigint, hdrs string, misfiled boolean").select(*columns)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _compared(expected: DataFrame | None, delivered: DataFrame | None, spark: SparkSession) -> DataFrame:
    """One row per (topic, key body) of either side with its counts and, when something is wrong with it, its
    groups (see the module docs).

    One shuffle: both sides' records, hash-partitioned by (topic, key body) and sorted by (topic, key body,
    commit ts, side, position) once; then, with no further exchange or sort, aggregated per (topic, key
    body, commit ts) (the k-th expected record with the k-th delivered one: the lists come out in position
    order) and per (topic, key body) (the delivered records in partition order: a commit ts below one
    delivered before it in its partition is out of order)."""
    from pyspark.sql import functions as F

    n = max(int(conf_value(spark, "spark.sql.shuffle.partitions", "4")), 2 * spark.sparkContext.defaultParallelism)
    both = _sides(expected, delivered, spark).repartition(n, *_KEY).sortWithinPartitions(*_GROUP, "side", "pos")
    item = F.struct("pos", F.col("partition").alias("part"), "ksid", "vsid", "vdig", "hdrs")
    groups = both.groupBy(*_GROUP).agg(
        F.sum(1 - F.col("side")).alias("ne"), F.sum("side").alias("nd"),
        F.collect_list(F.when(F.col("side") == 0, item)).alias("erecs"),
        F.collect_list(F.when(F.col("side") == 1, item)).alias("drecs"),
        F.sum(F.when(F.col("side") == 1, F.col("misfiled").cast("int")).otherwise(0)).alias("misfiled"))
    ne, nd = F.col("ne"), F.col("nd")
    m = F.least(ne, nd)
    pairs = F.expr(
        "zip_with(slice(erecs, 1, least(ne, nd)), slice(drecs, 1, least(ne, nd)), (x, y) -> named_struct("
        "'sid', x.ksid <> y.ksid OR (x.vsid IS NOT NULL AND y.vsid IS NOT NULL AND x.vsid <> y.vsid), "
        "'val', NOT (x.vdig <=> y.vdig), 'hdr', NOT (x.hdrs <=> y.hdrs), 'part', x.part <> y.part))")
    counted = groups.select(
        *_GROUP, ne.alias("expected"), nd.alias("delivered"), m.alias("matched"), (ne - m).alias("missing"),
        F.when(ne > 0, nd - m).otherwise(0).alias("duplicated"), F.when(ne == 0, nd).otherwise(0).alias("unexpected"),
        "misfiled", pairs.alias("pairs"), "erecs", "drecs")
    counted = counted.select(
        "*", F.size(F.filter("pairs", lambda p: p["sid"])).alias("wrong_schema_id"),
        F.size(F.filter("pairs", lambda p: p["val"])).alias("value_mismatch"),
        F.size(F.filter("pairs", lambda p: p["hdr"])).alias("header_mismatch"),
        F.size(F.filter("pairs", lambda p: p["part"])).alias("wrong_partition"))
    bad = F.lit(False)
    for name in _GROUP_COUNTS:
        bad = bad | (F.col(name) > 0)
    detail = F.struct("ts", "expected", "delivered", "matched", *_GROUP_COUNTS, "erecs", "drecs")
    keys = counted.groupBy(*_KEY).agg(
        *[F.sum(name).alias(name) for name in ("expected", "delivered", *_GROUP_COUNTS)],
        F.min(F.when(F.col("missing") > 0, F.col("ts"))).alias("first_missing_ts"),
        F.max(F.when(F.col("delivered") > 0, F.col("ts"))).alias("max_delivered_ts"),
        F.collect_list(F.when(bad, detail)).alias("bad_groups"),
        F.flatten(F.collect_list(F.expr(
            "transform(drecs, r -> named_struct('part', r.part, 'pos', r.pos, 'ts', ts, 'ksid', r.ksid))"))).alias("dseq"),
        F.flatten(F.collect_list(F.expr("transform(erecs, r -> named_struct('pos', r.pos, 'ts', ts))"))).alias("eseq"))
    out_of_order = F.expr(
        "aggregate(array_sort(dseq), named_struct('p', -2, 'm', cast(-1 as bigint), 'n', 0), (acc, r) -> "
        "named_struct('p', r.part, 'm', if(r.part = acc.p, greatest(acc.m, r.ts), r.ts), "
        "'n', acc.n + if(r.part = acc.p AND r.ts < acc.m, 1, 0))).n")
    # the source's own order: the key's expected rows in input order, a commit ts below one read before it
    source_order = F.expr(
        "aggregate(array_sort(eseq), named_struct('m', cast(-1 as bigint), 'n', 0), (acc, r) -> "
        "named_struct('m', greatest(acc.m, r.ts), 'n', acc.n + if(r.ts < acc.m, 1, 0))).n")
    keys = keys.withColumn("out_of_order", out_of_order).withColumn(
        SOURCE_ORDER, F.when(F.col("out_of_order") > 0, F.least(F.col("out_of_order"), source_order)).otherwise(0))
    keys = keys.withColumn("bad", (F.size("bad_groups") > 0) | (F.col("out_of_order") > 0))
    # a key's record sequences only where the second look shows them: a sound key is its counts alone (the
    # frame is kept for that look, see verify_run)
    return keys.withColumn("dseq", F.when(F.col("bad"), F.col("dseq"))).drop("eseq")


def _summary(compared: DataFrame) -> list[Any]:
    from pyspark.sql import functions as F

    return compared.groupBy("topic").agg(
        *[F.sum(n).alias(n) for n in _SUMMED],
        F.sum(F.col("bad").cast("int")).alias("bad_keys"),
        F.min("first_missing_ts").alias("first_missing_ts"),
        F.max("max_delivered_ts").alias("max_delivered_ts"),
    ).collect()


def _with_plan_conf(spark: SparkSession) -> dict[str, str | None]:
    previous = {}
    for key, value in _PLAN_CONF.items():
        previous[key] = spark.conf.get(key, None)
        spark.conf.set(key, value)
    return previous


def _restore_conf(spark: SparkSession, previous: Mapping[str, str | None]) -> None:
    for key, value in previous.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


# -- the second look: groups with a discrepancy ----------------------------------------------------


def _decode_records(schemas: Mapping[int, str | None], shown: set[tuple[str, bytes]]) -> Any:
    """``mapInArrow`` function: each delivered record of a group with a discrepancy, decoded through the
    registry by the schema ids it carries: ``state`` is ``ok``, ``unknown`` (an id the registry does not know)
    or ``undecodable`` (unframed, bytes that do not decode, or bytes left over); ``decoded`` (JSON) for the
    records of the keys in ``shown`` (the sample)."""
    texts = dict(schemas)
    wanted = set(shown)

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import io

        import fastavro
        import pyarrow as pa

        parsed: dict[int, Any] = {}

        def decode(data: bytes | None) -> tuple[str, Any]:
            if data is None:
                return "ok", None
            if len(data) < 5 or data[0] != 0:
                return "undecodable", None
            sid = int.from_bytes(data[1:5], "big")
            text = texts.get(sid)
            if text is None:
                return "unknown", None
            if sid not in parsed:
                parsed[sid] = fastavro.parse_schema(json.loads(text))
            stream = io.BytesIO(data[5:])
            try:
                record = fastavro.schemaless_reader(stream, parsed[sid], parsed[sid])
            except Exception:  # noqa: BLE001 - any failure to read is the finding
                return "undecodable", None
            if stream.tell() != len(data) - 5:
                return "undecodable", None
            return "ok", record

        for batch in batches:
            topics, kbodies, stamps, keys, values = (batch.column(n).to_pylist()
                                                     for n in ("topic", "kbody", "ts", "key", "value"))
            states: list[str] = []
            decoded: list[str | None] = []
            for topic, kbody, _ts, key, value in zip(topics, kbodies, stamps, keys, values, strict=True):
                kstate, kdec = decode(key)
                vstate, vdec = decode(value)
                states.append("unknown" if "unknown" in (kstate, vstate) else (
                    "undecodable" if "undecodable" in (kstate, vstate) else "ok"))
                if (topic, kbody) in wanted:
                    decoded.append(json.dumps({"key": _plain(kdec), "value": _plain(vdec), "key_state": kstate,
                                               "value_state": vstate}, ensure_ascii=False, default=str)[:8000])
                else:
                    decoded.append(None)
            keep = [batch.column(n) for n in ("topic", "kbody", "ts", "pos")]
            yield pa.RecordBatch.from_arrays([*keep, pa.array(states, pa.string()), pa.array(decoded, pa.string())],
                                             names=["topic", "kbody", "ts", "pos", "state", "decoded"])

    return run


# --------------------------------------------------------------------------------------------------
# The whole verification


def verify_run(spark: SparkSession, options: JobOptions, *, registry: Any = None,
               read_topics: Mapping[str, str] | None = None, sample: int = _DEFAULT_SAMPLE,
               decode_all: bool = False) -> VerifyReport:
    """Reconcile what the run of ``options`` (its source, settings and checkpoint) delivered to its sink with
    its source (see the module docs). ``registry``: a registry client (default: the sink config's);
    ``read_topics``: read a Kafka topic from another (``{topic: copy}``); ``decode_all``: decode every
    delivered record with fastavro, not only those that differ from what their source rows encode to."""
    import time

    from pyspark import StorageLevel

    started = time.time()
    if not check_checkpoint(options):
        raise ConfigError(f"No job ran with checkpoint {str(options.checkpoint)!r}: give the --checkpoint (or the same "
                          "--source, --sink-uri and --state-dir) of the run to verify.",
                          option="checkpoint", value=str(options.checkpoint))
    read_topics = dict(read_topics or {})
    checkpoint = options.checkpoint_uri
    store = StoreFS(checkpoint, option="checkpoint")
    stores = [u for u in (options.source.location, checkpoint, _sink_location(options.sink)) if u is not None]
    apply_hadoop_conf(spark, hadoop_settings(stores))
    committed = committed_offsets(store)
    side = SideState(store)
    sink = options.sink
    file_location = None
    if sink.scheme != SinkKind.KAFKA:
        path = sink.path or (checkpoint.parent().child("output").path if checkpoint.is_local else None)
        if not path:
            raise ConfigError("The file sink to verify needs its directory: --sink-uri file:///dir.", option="sink-uri")
        file_location = parse_storage_uri(str(path), option="sink-uri")
    report = VerifyReport(source=options.source.describe(),
                          sink=str(file_location) if file_location is not None else f"kafka://{','.join(sink.brokers)}",
                          checkpoint=str(checkpoint), committed_batch=committed.batch)
    report.delivery, report.delivery_from = run_delivery(options)

    def partitions(topics: set[str]) -> dict[str, int]:
        if sink.scheme != SinkKind.KAFKA:
            return {t: sink.partition_num for t in topics}
        real = _kafka_partitions(options, [read_topics.get(t, t) for t in topics])
        return {t: real.get(read_topics.get(t, t), sink.partition_num) for t in topics}

    with _registry_for(options, registry) as client:
        build = expected_storage if options.source.is_storage else expected_changelog
        expected = build(spark, options, client, committed, partitions, side)
        letters = read_dead_letters(store, committed.batch)
        owners = ((side.latest("owners") or {}).get("topics")) or {}
        topic_tables = {**{t: ".".join(e["table"]) for t, e in owners.items()}, **expected.topics}
        if file_location is not None:
            delivered = delivered_file_sink(spark, file_location, committed.batch)
        else:
            delivered = delivered_kafka(spark, options, sorted(topic_tables), read_topics)
        report.notes += expected.notes + delivered.notes
        records = expected.records
        if records is not None and letters.records:
            records = records.filter(~expected.dead_lettered(letters))
        previous = _with_plan_conf(spark)
        compared = None
        try:
            # kept for the second look: the comparison (both sides read, the source encoded, one shuffle) runs once
            compared = _compared(records, delivered.records, spark).persist(StorageLevel.MEMORY_AND_DISK)
            if expected.tally is not None:
                expected.tally.value = {"topics": {}, "errors": []}
            summary = _summary(compared)
            errors = [json.loads(e) for e in (expected.tally.value["errors"] if expected.tally is not None else [])]
            _fill(report, summary, topic_tables, expected, letters, errors)
            if decode_all and delivered.raw is not None:
                for topic, states in _decode_all(delivered, client).items():
                    counts = report.table(topic_tables.get(topic, f"topic {topic}"))
                    counts["unknown_schema_id"] += states.get("unknown", 0)
                    counts["undecodable"] += states.get("undecodable", 0)
                    counts["decoded"] = sum(states.values())
            if any(int(r["bad_keys"] or 0) for r in summary):
                _second_look(spark, report, compared, delivered, expected, client, topic_tables, sample,
                             count_states=not decode_all)
        finally:
            if compared is not None:
                compared.unpersist()
            _restore_conf(spark, previous)
    resolved = resolved_ts_per_table(options)
    if resolved is not None:
        for name, state in completeness(report, resolved).items():
            report.tables[name]["completeness"] = state
    report.seconds = time.time() - started
    return report


def _fill(report: VerifyReport, summary: list[Any], topic_tables: Mapping[str, str], expected: Expected,
          letters: DeadLetters, errors: list[dict[str, Any]]) -> None:
    for row in summary:
        name = topic_tables.get(row["topic"], f"topic {row['topic']}")
        counts = report.table(name)
        counts["topic"] = row["topic"]
        for key in _SUMMED:
            counts[key] += int(row[key] or 0)
        for key in ("first_missing_ts", "max_delivered_ts"):
            if row[key] is not None:
                counts[key] = int(row[key])
    for name, n in expected.held.items():
        report.table(name)["held_files"] += n
    for name, n in expected.unread.items():
        report.table(name)["unread"] += n
    for record in letters.records:
        counts = report.table(_table_of_letter(record))
        if refusal_reason(record) is RefusalReason.MISSING_FILE:
            counts["missing_files"] += 1
        else:
            counts["dead_lettered"] += 1
    wrong = [e for e in errors if refusal_reason(e) is RefusalReason.MISCONFIGURATION]
    if wrong:
        raise VerifyError(f"The source does not read with these settings: {wrong[0].get('message')} Give verify the "
                          "run's own options (--csv, --tables, --config).")
    lost = [e for e in errors if refusal_reason(e) is not RefusalReason.NOTE and not expected.error_matches(e, letters)]
    for error in lost:  # bad input the run neither delivered nor set aside
        name = f"{error['schema']}.{error['table']}" if error.get("schema") and error.get("table") else "?"
        report.table(name)["missing"] += 1
        if len(report.samples) < _DEFAULT_SAMPLE:
            report.samples.append({"kind": "missing", "table": name, "source": error.get("source"),
                                   "detail": "bad input the run neither delivered nor dead-lettered: "
                                             + str(error.get("message"))[:300]})


def _registry_schemas(client: Any, ids: Iterable[int]) -> dict[int, str | None]:
    """The schema text of each id (``None``: the registry does not know it)."""
    schemas: dict[int, str | None] = {}
    for sid in ids:
        try:
            schemas[sid] = client.get_schema(sid).schema
        except SchemaNotFound:
            schemas[sid] = None
    return schemas


def _decode_all(delivered: Delivered, client: Any) -> dict[str, dict[str, int]]:
    """``--decode-all``: every delivered record decoded through the registry (fastavro on the executors); per
    topic the records that are ``ok``, ``unknown`` or ``undecodable``."""
    from pyspark.sql import functions as F

    shaped = _shape(delivered.raw()).select("topic", "kbody", "ts", "pos", "key", "value", "ksid", "vsid")
    ids = shaped.select(F.explode(F.array("ksid", "vsid")).alias("sid")).where("sid IS NOT NULL AND sid >= 0").distinct()
    schemas = _registry_schemas(client, sorted(int(r["sid"]) for r in ids.collect()))
    decoded = shaped.drop("ksid", "vsid").mapInArrow(
        _decode_records(schemas, set()),
        "topic string, kbody binary, ts bigint, pos " + _pos_type(shaped) + ", state string, decoded string")
    out: dict[str, dict[str, int]] = {}
    for row in decoded.groupBy("topic", "state").count().collect():
        out.setdefault(row["topic"], {})[row["state"]] = int(row["count"])
    return out


def _second_look(spark: SparkSession, report: VerifyReport, compared: DataFrame, delivered: Delivered,
                 expected: Expected, client: Any, topic_tables: Mapping[str, str], sample: int, *,
                 count_states: bool = True) -> None:
    """Keys with a discrepancy: decode their delivered records through the registry (unknown ids, bytes that
    do not decode; counted unless ``count_states`` is false: every record was decoded already) and take a
    bounded sample, with decoded keys and values. ``compared`` is the persisted comparison the summary read:
    the keys with a discrepancy are taken from it (and kept while they are looked at), not compared again."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    bad = compared.filter("bad").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        n_bad = bad.count()
        rows = bad.limit(sample).collect()
        looks: dict[Any, Any] = {}
        if delivered.raw is not None:
            keys = bad.select(*_KEY)
            keys = F.broadcast(keys) if n_bad <= 200_000 else keys
            looked = _shape(delivered.raw()).join(keys, on=list(_KEY), how="inner").select(
                "topic", "kbody", "ts", "pos", "key", "value", "ksid", "vsid").persist(StorageLevel.MEMORY_AND_DISK)
            try:
                ids = looked.select(F.explode(F.array("ksid", "vsid")).alias("sid")).where(
                    "sid IS NOT NULL AND sid >= 0").distinct()
                schemas = _registry_schemas(client, sorted(int(r["sid"]) for r in ids.collect()))
                shown = {(r["topic"], bytes(r["kbody"])) for r in rows}
                decoded = looked.drop("ksid", "vsid").mapInArrow(
                    _decode_records(schemas, shown),
                    "topic string, kbody binary, ts bigint, pos " + _pos_type(looked) + ", state string, decoded string")
                per_topic: dict[str, dict[str, int]] = {}
                for row in decoded.groupBy("topic", "state").agg(
                        F.count(F.lit(1)).alias("n"),
                        F.collect_list(F.when(F.col("decoded").isNotNull(),
                                              F.struct("kbody", "ts", "pos", "decoded"))).alias("shown")).collect():
                    per_topic.setdefault(row["topic"], {})[row["state"]] = int(row["n"])
                    for r in row["shown"]:
                        looks[(row["topic"], bytes(r["kbody"]), int(r["ts"]), _pos_key(r["pos"]))] = (
                            row["state"], json.loads(r["decoded"]))
            finally:
                looked.unpersist()
            unknown_ids = [sid for sid, text in schemas.items() if text is None]
            if unknown_ids:  # a wrong id the registry does not know is an unknown id, not a wrong one
                listed = ", ".join(str(i) for i in unknown_ids)
                pairs = bad.select("topic", F.explode("bad_groups").alias("g")).select("topic", F.explode(F.expr(
                    "zip_with(slice(g.erecs, 1, g.matched), slice(g.drecs, 1, g.matched), "
                    "(x, y) -> named_struct('x', x, 'y', y))")).alias("z"))
                wrong = pairs.where(F.expr(
                    f"(z.x.ksid <> z.y.ksid AND z.y.ksid IN ({listed})) OR (z.x.vsid IS NOT NULL AND "
                    f"z.y.vsid IS NOT NULL AND z.x.vsid <> z.y.vsid AND z.y.vsid IN ({listed}))"))
                for row in wrong.groupBy("topic").count().collect():
                    per_topic.setdefault(row["topic"], {})["wrong_unknown"] = int(row["count"])
            for topic, states in per_topic.items():
                counts = report.table(topic_tables.get(topic, f"topic {topic}"))
                if count_states:
                    counts["unknown_schema_id"] += states.get("unknown", 0)
                    counts["undecodable"] += states.get("undecodable", 0)
                counts["wrong_schema_id"] -= states.get("wrong_unknown", 0)
        _samples(report, rows, delivered, expected, client, topic_tables, looks, sample)
    finally:
        bad.unpersist()


def _offset(location: str | None) -> int | None:
    """The record's offset in its Kafka partition (``topic/partition@offset``); ``None`` for a file sink's line."""
    return int(location.rpartition("@")[2]) if location and "@" in location else None


def _pos_key(pos: Any) -> str:
    return json.dumps(pos.asDict() if hasattr(pos, "asDict") else dict(pos), sort_keys=True)


def _pos_type(df: DataFrame) -> str:
    return dict((f.name, f.dataType.simpleString()) for f in df.schema.fields)["pos"]


def _decode_one(client: Any, data: bytes | None, cache: dict[int, Any]) -> Any:
    import io

    import fastavro

    if data is None or len(data) < 5 or data[0] != 0:
        return None
    sid = int.from_bytes(data[1:5], "big")
    try:
        if sid not in cache:
            cache[sid] = fastavro.parse_schema(json.loads(client.get_schema(sid).schema))
        return fastavro.schemaless_reader(io.BytesIO(data[5:]), cache[sid], cache[sid])
    except Exception:  # noqa: BLE001 - shown as not decodable
        return None


def _plain(v: Any) -> Any:
    import base64
    import decimal

    if isinstance(v, bytes):
        return "base64:" + base64.b64encode(v).decode()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v if isinstance(v, (int, float, str, bool, type(None))) else str(v)


def _samples(report: VerifyReport, rows: list[Any], delivered: Delivered, expected: Expected, client: Any,
             topic_tables: Mapping[str, str], looks: Mapping[Any, Any], sample: int) -> None:
    """Discrepancies as the user reads them: kind, table, key (decoded), commit ts, where the row came
    from and where its record is, schema ids; a differing value decoded on both sides."""
    cache: dict[int, Any] = {}
    value_rows: list[tuple[dict[str, Any], str]] = []
    for row in rows:
        if len(report.samples) >= sample:
            break
        topic, kbody = row["topic"], bytes(row["kbody"])
        groups = list(row["bad_groups"] or [])
        sids = [r["ksid"] for g in groups for r in [*(g["erecs"] or []), *(g["drecs"] or [])]]
        sids += [r["ksid"] for r in row["dseq"] or []]
        ksid = next((int(k) for k in sids if k is not None and k > 0), None)
        key = _decode_one(client, b"\x00" + int(ksid).to_bytes(4, "big") + kbody, cache) if ksid else None
        shown_key = _plain(key) if key is not None else "hex:" + kbody.hex()
        table = topic_tables.get(topic, f"topic {topic}")

        def at_sink(r: Any, topic: str = topic) -> str | None:
            return delivered.location_of(topic, r["part"], r["pos"]) if delivered.location_of else None

        for group in groups:
            ts = int(group["ts"])
            base = {"table": table, "topic": topic, "key": shown_key, "commit_ts": ts}
            erecs, drecs = group["erecs"] or [], group["drecs"] or []

            def at_source(r: Any) -> str | None:
                return expected.location_of(r["pos"]) if expected.location_of else None

            def look(r: Any, ts: int = ts, topic: str = topic, kbody: bytes = kbody) -> dict[str, Any]:
                state = looks.get((topic, kbody, ts, _pos_key(r["pos"])))
                if state is None:
                    return {}
                return {"decoded": state[0], "delivered_value": state[1].get("value")}

            m = int(group["matched"])
            for i in range(m):
                x, y = erecs[i], drecs[i]
                kinds = []
                if x["ksid"] != y["ksid"] or (x["vsid"] is not None and y["vsid"] is not None
                                              and x["vsid"] != y["vsid"]):
                    kinds.append("wrong_schema_id")
                if x["vdig"] != y["vdig"]:
                    kinds.append("value_mismatch")
                if x["part"] != y["part"]:
                    kinds.append("wrong_partition")
                for diff in header_differences(x["hdrs"], y["hdrs"]):
                    report.samples.append({"kind": "header_mismatch", **base, "source": at_source(x),
                                           "sink": at_sink(y), "offset": _offset(at_sink(y)), **diff})
                for kind in kinds:
                    entry = {"kind": kind, **base, "source": at_source(x), "sink": at_sink(y),
                             "expected": {"partition": x["part"], "key_schema_id": x["ksid"],
                                          "value_schema_id": x["vsid"]},
                             "delivered": {"partition": y["part"], "key_schema_id": y["ksid"],
                                           "value_schema_id": y["vsid"]}, **look(y)}
                    report.samples.append(entry)
                    if kind == "value_mismatch" and at_source(x):
                        value_rows.append((entry, str(at_source(x))))
            for x in erecs[m:]:
                report.samples.append({"kind": "missing", **base, "source": at_source(x), "partition": x["part"]})
            for y in drecs[m:]:
                kind = "duplicated" if erecs else "unexpected"
                report.samples.append({"kind": kind, **base, "sink": at_sink(y), "partition": y["part"],
                                       "schema_ids": [y["ksid"], y["vsid"]], **look(y)})
            if int(group["misfiled"] or 0):
                report.samples.append({"kind": "misfiled", **base, "sink": [at_sink(y) for y in drecs]})
        if int(row["out_of_order"] or 0):
            order = sorted(row["dseq"] or [], key=lambda r: (r["part"], tuple(r["pos"])))
            report.samples.append({"kind": "out_of_order", "table": table, "topic": topic, "key": shown_key,
                                   "delivered": [{"sink": at_sink(r), "commit_ts": int(r["ts"])} for r in order],
                                   "detail": "in its partition, a record of this key comes after one with a later "
                                             "commit ts" + ("; the source has this key's rows in that order too"
                                                            if int(row[SOURCE_ORDER] or 0) else
                                                            "; the source has them in commit-ts order")})
    del report.samples[sample:]
    if value_rows and expected.restricted is not None:
        _expected_values(value_rows, expected, client, cache)


def _expected_values(value_rows: list[tuple[dict[str, Any], str]], expected: Expected, client: Any,
                     cache: dict[int, Any]) -> None:
    """The expected values of differing samples, from their source rows only (re-encoded), decoded."""
    from pyspark.sql import functions as F

    records = expected.restricted([loc for _, loc in value_rows])
    if records is None:
        return
    wanted = {loc for _, loc in value_rows}
    rows = records.select("pos", "value").collect()
    values = {}
    for r in rows:
        loc = expected.location_of(r["pos"])
        if loc in wanted:
            values[loc] = r["value"]
    del F
    for entry, loc in value_rows:
        value = values.get(loc)
        if value is None:
            continue
        decoded = _decode_one(client, bytes(value), cache)
        entry["expected_value"] = _plain(decoded)
        got = entry.get("delivered_value")
        if isinstance(got, dict) and isinstance(entry["expected_value"], dict):
            entry["differs"] = sorted(k for k in set(got) | set(entry["expected_value"])
                                      if got.get(k) != entry["expected_value"].get(k))


# --------------------------------------------------------------------------------------------------
# The command's options and output


def parse_read_topics(pairs: Iterable[str]) -> dict[str, str]:
    """``--read-topic TOPIC=OTHER`` values -> ``{topic: other}``.

    >>> parse_read_topics(["shop_orders=shop_orders_copy"])
    {'shop_orders': 'shop_orders_copy'}
    """
    out: dict[str, str] = {}
    for pair in pairs:
        topic, sep, other = pair.partition("=")
        if not sep or not topic.strip() or not other.strip():
            raise ConfigError(f"Invalid value {pair!r} for option '--read-topic': expected TOPIC=OTHER, e.g. "
                              "shop_orders=shop_orders_mirror.", option="read-topic", value=pair)
        out[topic.strip()] = other.strip()
    return out


#: How each count reads in the terminal report (singular, plural).
_SAID = {"missing": ("missing", "missing"), "duplicated": ("duplicated", "duplicated"),
         "unexpected": ("unexpected", "unexpected"), "out_of_order": ("out of order", "out of order"),
         "unknown_schema_id": ("with an unknown schema id", "with an unknown schema id"),
         "undecodable": ("undecodable", "undecodable"),
         "wrong_schema_id": ("with a wrong schema id", "with a wrong schema id"),
         "value_mismatch": ("value differs", "values differ"),
         "header_mismatch": ("header differs", "headers differ"),
         "wrong_partition": ("in the wrong partition", "in the wrong partition"),
         "misfiled": ("misfiled", "misfiled")}


def _n(count: int, what: str) -> str:
    return f"{count:,} {what}"


def _problems(counts: Mapping[str, Any]) -> list[str]:
    """A table's discrepancies as phrases, the largest first; an out-of-order count says whether the source had
    that order."""
    found = [(int(counts.get(k) or 0), k) for k in DISCREPANCIES if int(counts.get(k) or 0)]
    out = []
    for count, key in sorted(found, key=lambda x: -x[0]):
        phrase = _n(count, _SAID[key][count != 1])
        if key == "out_of_order":
            same = int(counts.get(SOURCE_ORDER) or 0)
            phrase += (" (the source has them in that order too)" if same == count else
                       f" ({same:,} of them in that order in the source too)" if same else
                       " (the source has them in commit-ts order)")
        out.append(phrase)
    completeness = counts.get("completeness")
    if completeness and not completeness["complete"]:
        out.append(f"incomplete up to resolved ts {completeness['resolved_ts']} (first missing commit ts "
                   f"{completeness['first_missing_ts']})")
    return out


def _figures(counts: Mapping[str, Any]) -> str:
    parts = [_n(int(counts.get("expected") or 0), "expected"), _n(int(counts.get("delivered") or 0), "delivered")]
    for key, label in (("dead_lettered", "dead-lettered"), ("held_files", "held files"), ("unread", "unread"),
                       ("missing_files", "missing files")):
        if int(counts.get(key) or 0):
            parts.append(_n(int(counts[key]), label))
    completeness = counts.get("completeness")
    if completeness and completeness["complete"]:
        parts.append(f"complete up to resolved ts {completeness['resolved_ts']}")
    return ", ".join(parts)


def report_lines(report: VerifyReport) -> list[tuple[str, str]]:
    """The terminal report as ``(style, text)`` lines, what is wrong first: the verdict, then one block per table
    with a discrepancy (its whole name, its problems, its figures), then the tables that reconcile, the run
    verified, a sample of the discrepancies and the notes. Lines are wrapped by :func:`print_report`."""
    bad = sorted((name for name, c in report.tables.items() if _problems(c)),
                 key=lambda name: -sum(int(report.tables[name].get(k) or 0) for k in DISCREPANCIES))
    good = sorted(name for name in report.tables if name not in bad)
    totals = report.totals
    lines: list[tuple[str, str]] = []
    if report.ok and not bad:
        lines.append(("bold green", f"OK: {len(good)} table(s) reconcile, {_n(totals['expected'], 'rows expected')}, "
                                    f"{_n(totals['delivered'], 'delivered')} ({report.seconds:.1f} s)."))
    else:
        kinds = [_n(totals[k], _SAID[k][totals[k] != 1]) for k in sorted(DISCREPANCIES, key=lambda k: -totals[k])
                 if totals[k]]
        lines.append(("bold red", f"DISCREPANCIES in {len(bad)} of {len(report.tables)} table(s): "
                                  f"{', '.join(kinds) or 'incomplete'} ({report.seconds:.1f} s)."))
    for name in bad:
        counts = report.tables[name]
        topic = f" (topic {counts['topic']})" if counts.get("topic") and not name.startswith("topic ") else ""
        lines += [("", ""), ("bold", f"{name}{topic}"), ("red", "  " + "; ".join(_problems(counts))),
                  ("", "  " + _figures(counts))]
    if good:
        lines += [("", ""), ("green", f"Reconciled ({len(good)}):")]
        lines += [("", f"  {name}: {_figures(report.tables[name])}") for name in good]
    delivery = f"{report.delivery} ({report.delivery_from})" if report.delivery else "-"
    lines += [("", ""), ("", f"sink: {report.sink}"), ("", f"source: {report.source}"),
              ("", f"checkpoint: {report.checkpoint} (committed batch {report.committed_batch})"),
              ("", f"delivery: {delivery}")]
    if report.samples:
        lines += [("", ""), ("bold", f"Sample of the discrepancies ({len(report.samples)}):")]
        lines += [("", "  " + json.dumps(entry, default=str, ensure_ascii=False)) for entry in report.samples]
    if report.notes:
        lines += [("", "")] + [("", f"note: {note}") for note in report.notes]
    return lines


def print_report(report: VerifyReport, console: Any) -> None:
    """The report on a terminal (rich ``console``), readable at 80 columns: :func:`report_lines`, each line
    wrapped to the console's width with its indent kept (no table whose columns cut names)."""
    import textwrap

    width = max(int(getattr(console, "width", 80) or 80), 40)
    for style, text in report_lines(report):
        indent = " " * (len(text) - len(text.lstrip(" ")) + 2) if text.strip() else ""
        wrapped = textwrap.fill(text, width=width, subsequent_indent=indent, break_on_hyphens=False,
                                break_long_words=True) if text else ""
        console.print(wrapped, style=style or None, markup=False, highlight=False, soft_wrap=True)
