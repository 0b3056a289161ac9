"""The job's batches of a changelog stream (canal-json or debezium-json messages, from Kafka or files).

:class:`ChangelogBatches` is the job's batch source of a changelog (see :mod:`avro_registry_sink.spark.driver.batch`).
Each batch is summarized (tables, column sets, commit-ts ranges, DDLs) so that the driver brings its table
catalog up to date and plans the table versions first, then parsed and encoded in one executor pass; once a
run has planned its tables, a batch is read strictly, once, and read again with its summary only when it holds
news for the driver (a DDL, a new table, version or column set). The catalog of table versions is its side
state, saved per batch with the checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from avro_registry_sink.errors import SourceError
from avro_registry_sink.formats import format_named
from avro_registry_sink.formats.canal_json import DdlEvent
from avro_registry_sink.model import ENCODED_DDL, PlanKey
from avro_registry_sink.spark.driver.batch import PreparedBatch
from avro_registry_sink.spark.sources.changelog_stage import CountsParam, encode_changelog, summarize_changelog
from avro_registry_sink.spark.sources.sources import infer_table, source_error_json
from avro_registry_sink.spark.stages.plan import stage_plans_for
from avro_registry_sink.table import TableDef
from avro_registry_sink.tabledef.catalog import TableCatalog

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from avro_registry_sink.history.journal import TableSources
    from avro_registry_sink.manager import SchemaManager, TablePlan
    from avro_registry_sink.ops.progress import BatchReport
    from avro_registry_sink.side_state import SideState
    from avro_registry_sink.spark.driver.job_options import JobOptions

__all__ = ["ChangelogBatches"]

#: Side state of the checkpoint, per batch (:mod:`~avro_registry_sink.side_state`): the changelog's
#: table versions.
_TABLES = "tables"


class ChangelogBatches:
    """A changelog's batches, prepared on the driver for the job's one encode path.

    ``sources`` is told of each DDL (the history journal's record of where a table version came from),
    ``topics`` gives the partition count of each planned topic (creating new topics; the job's)."""

    def __init__(self, options: JobOptions, manager: SchemaManager, side: SideState, sources: TableSources,
                 topics: Callable[[Mapping[PlanKey, TablePlan]], dict[str, int]]) -> None:
        self.options = options
        self.manager = manager
        self.side = side
        self.sources = sources
        self._topics = topics
        self.hints = {(t.schema_name, t.table): t for t in options.tables}
        self.catalog = TableCatalog(seed=options.tables)
        self._catalog_changed = False
        self._changelog_plans: dict[PlanKey, TablePlan] = {}  # every version a summarized batch of this run planned
        self._strict_batch: int | None = None  # the batch read without a summary (see prepare)
        self._summary: tuple[int, Any] | None = None  # the summary of a batch read again with it
        self._counts: Any = None  # the run's accumulator of what strict passes saw
        self._last_inputs: int | None = None  # messages of the last changelog batch

    def ddl_history(self, schema: str, table: str) -> list[tuple[int, str]]:
        """``[(table version, DDL text)]`` of a table: the DDL messages the catalog applied."""
        return self.catalog.ddl_history(schema, table)

    def read_again(self, batch_df: DataFrame, batch_id: int) -> bool:
        """Whether a failed attempt of batch ``batch_id`` is to be read again, with its summary: it was read
        strictly and holds what the driver must see first (a DDL, a new table or version, new columns)."""
        return self._strict_batch == batch_id and self._summary_has_news(batch_df, batch_id)

    def raw(self, spark: SparkSession, sources: list[str]) -> dict[str, bytes]:
        """Nothing: the changelog stage gives each message it refuses its raw bytes itself."""
        return {}

    # -- side state: per batch, current once the batch commits (see side_state) ----------------------

    def begin_side(self, batch_id: int, *, from_store: bool) -> None:
        """Start batch ``batch_id``: the catalog read from the checkpoint when ``from_store``, else kept."""
        if from_store:
            self.catalog = TableCatalog.from_data(self.side.load(_TABLES, batch_id), seed=self.options.tables)
        self._catalog_changed = False

    def end_side(self, batch_id: int) -> None:
        """Write the catalog, if this batch changed it, as batch ``batch_id``'s."""
        if self._catalog_changed and self.catalog is not None:
            self.side.save(_TABLES, batch_id, self.catalog.to_data())

    # -- a batch ---------------------------------------------------------------------------------------

    def prepare(self, spark: SparkSession, batch_df: DataFrame, batch_id: int, output: Any = None
                ) -> PreparedBatch | None:
        """The batch's messages summarized (tables, column sets, commit-ts ranges, DDLs: one light executor
        pass), the catalog brought up to date and the schemas registered on the driver, then parsed and encoded
        in one executor pass (``spark.sources.changelog_stage``); nothing is cached."""
        assert self.catalog is not None
        spec = self.options.source
        fmt = spec.kind
        if (self._summary is None or self._summary[0] != batch_id) and (
                self._changelog_plans or self._plan_from_sample(batch_df)):
            return self._strict_changelog(spark, batch_df, batch_id, output)
        if self._summary is not None and self._summary[0] == batch_id:
            summary = self._summary[1]
        else:
            summary = summarize_changelog(batch_df, spec)
        self._summary = None
        inputs = summary.inputs
        self._last_inputs = inputs
        if inputs == 0:
            return None
        selection = self.manager.selection
        stats = list(summary.groups)
        ddl_rows = list(summary.ddls)
        filtered: dict[str, int] = {}
        excluded = {(r["schema"], r["table"]) for r in stats + ddl_rows if r["schema"] is not None
                    and r["table"] is not None and not selection.admits(r["schema"], r["table"])}
        if excluded:  # [filter] rules: these tables' messages are counted and left out, DDLs included
            for r in stats + ddl_rows:
                if (r["schema"], r["table"]) in excluded:
                    name = f"{r['schema']}.{r['table']}"
                    filtered[name] = filtered.get(name, 0) + int(r["n"])
            stats = [r for r in stats if (r["schema"], r["table"]) not in excluded]
            ddl_rows = [r for r in ddl_rows if (r["schema"], r["table"]) not in excluded]
        early: list[dict[str, Any]] = []
        changed = False
        for row in ddl_rows:  # in commit order: each starts a new version
            try:
                got = format_named(fmt).events(row["message"], source=row["source"])
                for event in got:
                    if isinstance(event, DdlEvent):
                        self.sources.note_ddl(event)
                        changed |= self.catalog.apply(event)
            except SourceError as exc:
                early.append(json.loads(source_error_json(exc, fmt=fmt, raw=row["message"])))
        for row in sorted(stats, key=lambda r: (r["schema"], r["table"], r["low"] or 0)):
            key = (row["schema"], row["table"])
            if key not in self.catalog.known():
                inferred = infer_table(fmt, row["first"], row["first_source"])
                if inferred is not None:
                    changed |= self.catalog.add(inferred.model_copy(update={"version": 0}))
            elif row["shape"] and key not in self.hints:
                # No DDL told us the table changed, but its messages did (canal-json's mysqlType): a new
                # version from the first message of the new shape, instead of dead-lettering valid rows.
                current = self.catalog.latest(*key)
                if current is not None and row["shape"] != ",".join(sorted(c.name.lower() for c in current.columns)):
                    inferred = infer_table(fmt, row["first"], row["first_source"], previous=current)
                    if inferred is not None and row["low"] is not None:
                        changed |= self.catalog.add(inferred.model_copy(update={"version": int(row["low"])}))
        if changed:
            self._catalog_changed = True
        tables: dict[tuple[str, str, int], TableDef] = {}
        for row in stats:
            for table in self.catalog.versions_between(row["schema"], row["table"], row["low"], row["high"]):
                tables[(table.schema_name, table.table, table.version)] = table
        plans = self.manager.prepare_batch(tables[k] for k in sorted(tables))
        self._changelog_plans.update(plans)
        batch_df, single_input = self._one_task_if_small(batch_df, inputs)
        history = self.catalog.history((row["schema"], row["table"]) for row in stats)
        stage_plans = stage_plans_for(plans, self._topics(plans), self.options.sink.max_message_bytes) if plans else {}
        if not plans:  # nothing to write: what the messages hold are dead letters only
            encoded = encode_changelog(batch_df, spec, history, stage_plans, frozenset(excluded))
            early += [json.loads(r[0]) for r in encoded.filter("error IS NOT NULL").select("error").collect()]
            encoded = spark.createDataFrame([], ENCODED_DDL)
        else:
            encoded = encode_changelog(batch_df, spec, history, stage_plans, frozenset(excluded), output)
        return PreparedBatch(encoded=encoded, plans=plans, early_errors=tuple(early), inputs=inputs,
                             single_input=single_input, filtered=filtered)

    def _strict_changelog(self, spark: SparkSession, batch_df: DataFrame, batch_id: int | None,
                          output: Any) -> PreparedBatch:
        """A batch read without a summary: with the table versions and plans of earlier batches, in one Spark job.

        Running continuously, almost every batch holds only tables and versions already planned; reading it
        once saves a pass over the messages and a Spark job. Should a message need the driver first (a DDL, a
        new table, version or column set), the executor stops the job before any record is handed on and
        the job reads the batch again with its summary (see :meth:`read_again`)."""
        assert self.catalog is not None
        spec = self.options.source
        self._strict_batch = batch_id
        known = self.catalog.known()
        history = self.catalog.history(known)
        plans = dict(self._changelog_plans)
        shapes = {}
        if format_named(spec.kind).carries_types:
            for key in known:
                latest = self.catalog.latest(*key)
                if key not in self.hints and latest is not None:
                    shapes[key] = ",".join(sorted(c.name.lower() for c in latest.columns))
        if self._counts is None:
            self._counts = spark.sparkContext.accumulator({"n": 0, "filtered": {}}, CountsParam())
        else:
            self._counts.value = {"n": 0, "filtered": {}}
        counts = self._counts
        batch_df, single_input = self._one_task_if_small(batch_df, self._last_inputs)
        stage_plans = stage_plans_for(plans, self._topics(plans), self.options.sink.max_message_bytes)
        encoded = encode_changelog(batch_df, spec, history, stage_plans, frozenset(), output, strict=True,
                                   shapes=shapes, table_filter=self.manager.selection.table_filter, counts=counts)

        def late(report: BatchReport) -> None:
            value = counts.value
            report.inputs = self._last_inputs = int(value["n"])
            for name, n in value["filtered"].items():
                report.filtered[name] = report.filtered.get(name, 0) + int(n)

        return PreparedBatch(encoded=encoded, plans=plans, single_input=single_input, late_report=late)

    #: A changelog batch of fewer messages is read, encoded and written by one task, without a shuffle: the
    #: shuffle (and the second Spark stage) costs more than the parallelism saves.
    SMALL_BATCH = 50_000

    def _one_task_if_small(self, batch_df: DataFrame, inputs: int | None) -> tuple[DataFrame, bool]:
        """The batch as one Spark partition when it is small (``inputs``: its message count, or the last batch's),
        which then needs no shuffle to put each Kafka partition's records in order (the job's ``_for_sink``);
        and whether it is."""
        if inputs is None or inputs >= self.SMALL_BATCH or self.options.output_partitions:
            return batch_df, False
        return batch_df.coalesce(1), True

    def _plan_from_sample(self, batch_df: DataFrame) -> bool:
        """The first batch of a run, when ``--tables`` (or the checkpoint) knows its tables: plan the tables the
        start of the batch names (a sample: ``summarize_changelog(sample=True)``), so that the batch is read once,
        strictly. ``False`` (nothing planned) when the sample holds a DDL, a table the catalog does not know
        (described by its first message, which only a full summary finds) or a column set other than the
        table's; then the batch is summarized in full."""
        assert self.catalog is not None
        if not self.catalog.known():
            return False
        sample = summarize_changelog(batch_df, self.options.source, sample=True)
        if sample.ddls or not sample.groups:
            return False
        selection = self.manager.selection
        canal = format_named(self.options.source.kind).carries_types
        tables: dict[tuple[str, str, int], TableDef] = {}
        for row in sample.groups:
            key = (row["schema"], row["table"])
            if not selection.admits(*key):
                continue
            latest = self.catalog.latest(*key)
            if latest is None:
                return False
            if canal and row["shape"] and key not in self.hints and \
                    row["shape"] != ",".join(sorted(c.name.lower() for c in latest.columns)):
                return False
            for table in self.catalog.versions_between(key[0], key[1], row["low"], row["high"]):
                tables[(table.schema_name, table.table, table.version)] = table
        if not tables:
            return False
        self._changelog_plans.update(self.manager.prepare_batch(tables[k] for k in sorted(tables)))
        return True

    def _summary_has_news(self, batch_df: DataFrame, batch_id: int) -> bool:
        """Whether a batch whose strict pass failed holds what the driver must see first (then it is read again
        with the summary computed here); ``False`` means the failure has another cause."""
        try:
            summary = summarize_changelog(batch_df, self.options.source)
        except Exception:  # noqa: BLE001 - the original failure is the one to report
            return False
        self._summary = (batch_id, summary)
        assert self.catalog is not None
        selection = self.manager.selection
        canal = format_named(self.options.source.kind).carries_types
        for row in summary.ddls:
            if row["schema"] is None or row["table"] is None or selection.admits(row["schema"], row["table"]):
                return True
        for row in summary.groups:
            key = (row["schema"], row["table"])
            if not selection.admits(*key):
                continue
            latest = self.catalog.latest(*key)
            if latest is None:
                return True
            if canal and row["shape"] and key not in self.hints and \
                    row["shape"] != ",".join(sorted(c.name.lower() for c in latest.columns)):
                return True
            for table in self.catalog.versions_between(key[0], key[1], row["low"], row["high"]):
                if (table.schema_name, table.table, table.version) not in self._changelog_plans:
                    return True
        self._summary = None
        return False
