"""The job's batches of a TiCDC storage tree: each batch's data files resolved, planned and encoded for the sink.

:class:`StorageBatches` is the job's batch source of a storage tree (see :mod:`avro_registry_sink.spark.driver.batch`):
the files of a batch are those between its offsets in Spark's offset log (or given, for a replay); data files
whose schema file is missing or broken are held and retried with every later batch; its side state (held
files, the newest file number per directory) is saved per batch with the checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from avro_registry_sink.errors import CheckpointError, NoHandleKey
from avro_registry_sink.formats import format_for_extension
from avro_registry_sink.formats.csv import DEFAULT_CSV_OPTIONS, decode_text, iter_records
from avro_registry_sink.model import ENCODED_DDL, PlanKey, RefusalReason, dead_letter_record
from avro_registry_sink.spark.driver.batch import PreparedBatch
from avro_registry_sink.spark.driver.job_errors import MissingInputFiles
from avro_registry_sink.spark.sources.sources import encode_storage_files, location_of, resolve_storage_files
from avro_registry_sink.spark.sources.storage_source import batch_files, initial_offset, list_tree
from avro_registry_sink.spark.stages.plan import stage_plans_for

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from avro_registry_sink.manager import SchemaManager, TablePlan
    from avro_registry_sink.side_state import SideState
    from avro_registry_sink.sources.storage import StorageLayout
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.storage_fs import StoreFS

__all__ = ["StorageBatches", "csv_explicit", "is_update_half"]

#: Side state of the checkpoint, per batch (:mod:`~avro_registry_sink.side_state`): the newest file
#: number per storage data directory (see ``_late_files``), data files waiting for their schema file (see
#: ``_hold``).
_FILE_NUMBERS = "numbers"
_HELD_FILES = "held"


def csv_explicit(options: Any) -> set[str]:
    """TiCDC's names of the CSV settings the user gave (the others may be detected from the data)."""
    if options is None:
        return set()
    fields = type(options).model_fields
    return {fields[name].alias or name for name in options.model_fields_set}


def is_update_half(record: Any, csv: Any, op: str) -> bool:
    """A CSV record that is one half of an UPDATE written with ``output-old-value`` (op ``D`` or ``I``)."""
    flag = 3 + int(csv.include_commit_ts)  # op, table, schema, [commit-ts], is-update
    fields = record.fields
    return len(fields) > flag and fields[0].text == op and fields[flag].text == "true"


class StorageBatches:
    """A storage tree's batches, prepared on the driver for the job's one encode path.

    ``topics`` gives the partition count of each planned topic (creating new topics), ``fuse`` the stage's
    output with the exactly-once writer fused in when the batch allows it (both the job's)."""

    def __init__(self, options: JobOptions, manager: SchemaManager, layout: StorageLayout, state: StoreFS,
                 side: SideState, topics: Callable[[Mapping[PlanKey, TablePlan]], dict[str, int]],
                 fuse: Callable[[Any, Mapping[PlanKey, TablePlan], SparkSession, bool], Any]) -> None:
        self.options = options
        self.manager = manager
        self.layout = layout
        self.state = state  # the checkpoint: Spark's offset log
        self.side = side
        self._topics = topics
        self._fuse = fuse
        self.hints = {(t.schema_name, t.table): t for t in options.tables}
        #: a batch's files given by the caller (a replay) instead of the stream's offsets
        self.explicit_files: list[tuple[str, str, bool]] | None = None
        self._completed: dict[tuple[str, str, int], Any] = {}  # see resolve_storage_files
        self._held_files: dict[str, str] = {}
        self._pending_held: dict[str, str] | None = None
        self._broken_reported: set[str] = set()
        self._broken_before: set[str] = set()
        self._file_numbers: dict[str, int] = {}
        self._pending_numbers: dict[str, int] = {}

    def ddl_history(self, schema: str, table: str) -> list[tuple[int, str]]:
        """``[(table version, DDL text)]`` of a table: its storage schema files' ``Query``."""
        return [(e.commit_ts, e.query) for e in self.layout.ddl_events() if (e.schema, e.table) == (schema, table)]

    def read_again(self, batch_df: DataFrame, batch_id: int) -> bool:
        """A failed storage batch is never read again within its attempt."""
        return False

    # -- side state: per batch, current once the batch commits (see side_state) ----------------------

    def begin_side(self, batch_id: int, *, from_store: bool) -> None:
        """Start batch ``batch_id``: its side state read from the checkpoint when ``from_store``, else kept."""
        if from_store:
            held = self.side.load(_HELD_FILES, batch_id) or {}
            self._held_files = dict(held.get("held", {}))
            self._broken_reported = set(held.get("broken_reported", []))
            self._file_numbers = dict(self.side.load(_FILE_NUMBERS, batch_id) or {})
        self._pending_held = None
        self._pending_numbers = {}

    def end_side(self, batch_id: int) -> None:
        """Write what this batch changed of the side state, as batch ``batch_id``'s."""
        if self._pending_held is not None:
            changed = self._pending_held != self._held_files or self._broken_reported != self._broken_before
            self._held_files = self._pending_held
            if changed:
                self.side.save(_HELD_FILES, batch_id, {"held": self._held_files,
                                                       "broken_reported": sorted(self._broken_reported)})
        if self._pending_numbers:
            numbers = dict(self._file_numbers)
            for directory, number in self._pending_numbers.items():
                numbers[directory] = max(numbers.get(directory, 0), number)
            if numbers != self._file_numbers:
                self._file_numbers = numbers
                self.side.save(_FILE_NUMBERS, batch_id, numbers)

    # -- a batch ---------------------------------------------------------------------------------------

    def prepare(self, spark: SparkSession, batch_df: DataFrame, batch_id: int, output: Any) -> PreparedBatch | None:
        """The batch's data files (new ones from the stream's offsets, held ones of earlier batches) resolved,
        planned and encoded; files that are gone come as dead-letter records (see :meth:`_missing`). The
        stream's rows (``batch_df``) are not read: the files are those of the batch's offsets."""
        assert self.layout is not None
        location = self.layout.location
        listed = self.layout.refresh()  # one listing per batch: schema files, and which files are still there
        rows = self.explicit_files if self.explicit_files is not None else self._stream_files(batch_id)
        held_before = dict(self._held_files)
        if not rows and not held_before:
            return None
        gone = sorted({relpath for relpath, _, missing in rows if missing or relpath not in listed}
                      | {relpath for relpath in held_before if relpath not in listed})
        paths = [path for relpath, path, _ in rows if relpath not in gone]
        retried = [location.hadoop_uri(relpath) for relpath in held_before if relpath not in gone]
        filtered: dict[str, int] = {}
        files = self._filter_storage(resolve_storage_files(self.layout, paths + retried, self.hints,
                                                           self._completed), filtered)
        retried_now = set(held_before) - set(files.held) - set(gone)
        warnings = [w for w in self._late_files(files) if w.split(" ", 1)[0] not in retried_now]
        warnings.extend(self._hold(files))
        selection = self.manager.selection  # what the schema files leave unknown of ENUM/SET members, said once
        warnings.extend(n.message for n in self.layout.take_notes() if selection.admits(n.schema, n.table))
        missing = self._missing(gone, warnings)
        try:
            plans = self.manager.prepare_batch(files.tables.values())
        except NoHandleKey as exc:
            table = exc.context.get("table") or ""
            if tuple(table.split(".", 1)) in self.hints:
                raise
            raise NoHandleKey(
                f"{exc.message} Storage-sink schema files record the primary key but not unique keys: if "
                f"{table} has a UNIQUE KEY over NOT NULL columns, give its CREATE TABLE with --tables.",
                table=table,
            ) from exc
        early = [json.loads(e) for e in files.errors]
        wanted = {relpath for relpath, _, _ in files.files}
        topics = [plans[key].route.topic for _, key, _ in files.files if key in plans]
        single_input = len(topics) == len(set(topics))
        if wanted:
            files_df = spark.read.format("binaryFile").load([location.spark_path(r) for r in sorted(wanted)]).select(
                "path", "content")
            explicit = frozenset(csv_explicit(self.options.csv_options))
            stage_plans = stage_plans_for(plans, self._topics(plans), self.options.sink.max_message_bytes)
            output = self._fuse(output, plans, spark, single_input)
            encoded = encode_storage_files(files_df, location, files, stage_plans, self.options.csv_options, explicit,
                                           output)
        else:
            encoded = spark.createDataFrame([], ENCODED_DDL)
        return PreparedBatch(encoded=encoded, plans=plans, early_errors=tuple(early),
                             inputs=len(paths) + len(retried_now), single_input=single_input,
                             warnings=tuple(warnings), filtered=filtered, missing=tuple(missing))

    def _stream_files(self, batch_id: int) -> list[tuple[str, str, bool]]:
        """The batch's files ``(relpath, Hadoop URI, missing)`` from its offsets in Spark's offset log.

        Spark writes a batch's end offset before the batch runs and reruns an uncommitted batch with the
        same one; the start is the end of the batch before. Reading them here, on the driver, instead of
        the stream's rows keeps Spark's Python source to the driver (its planning process), where the
        driver's Python runs it even when the executors' Python is another one (``--archives ...#env``)."""
        assert self.layout is not None
        end = self._logged_offset(batch_id)
        start = self._logged_offset(batch_id - 1) if batch_id > 0 else initial_offset()
        files = batch_files(start, end, list_tree(self.layout, self.layout.listing()))
        return [(relpath, self.layout.location.hadoop_uri(relpath), missing) for relpath, missing in files]

    def _logged_offset(self, batch_id: int) -> dict[str, Any]:
        """The storage tree's offset at the end of batch ``batch_id``, as Spark's offset log holds it."""
        name = f"spark/offsets/{batch_id}"
        try:
            lines = self.state.read_text(name).splitlines()
            return dict(json.loads(lines[2]))
        except (FileNotFoundError, IndexError, ValueError) as exc:
            where = str(self.options.checkpoint_uri.child(name))
            raise CheckpointError(
                f"Checkpoint file {where!r} does not hold the storage tree's offset of batch {batch_id} "
                f"({type(exc).__name__}: {exc}); it is damaged or was written by another job. Use the checkpoint "
                "this job wrote, or a new one.", path=where, problem="damaged") from None

    def _missing(self, gone: list[str], warnings: list[str]) -> list[dict[str, Any]]:
        """Dead-letter records for data files that vanished before they were read (deleted by TiCDC's
        ``file-cleanup-cron-spec``, a pruned bucket): their rows are unknown. Reported on their own (and in
        ``warnings``); with ``--on-missing-file fail`` the batch fails instead."""
        if not gone:
            return []
        assert self.layout is not None
        if self.options.on_missing_file == "fail":
            raise MissingInputFiles(
                f"{len(gone)} data file(s) of this batch vanished before they were read: {', '.join(gone[:5])}"
                + (" ..." if len(gone) > 5 else "") + ". Their rows are unknown. Restore the files to deliver them, "
                "or rerun with --on-missing-file report to record them as dead letters and go on.",
                files=gone, option="on-missing-file")
        out = []
        for relpath in gone:
            data_file = self.layout.data_file(relpath)
            message = (f"{relpath}: the data file vanished before it was read (deleted by TiCDC's "
                       "file-cleanup-cron-spec, or the store was pruned); its rows are unknown and were not "
                       "delivered. Restore it to deliver them.")
            out.append(dead_letter_record(
                fmt=None if data_file is None else format_for_extension(data_file.format).name,
                source=relpath, file=relpath, reason=RefusalReason.MISSING_FILE, message=message,
                schema=None if data_file is None else data_file.schema,
                table=None if data_file is None else data_file.table,
                table_version=None if data_file is None else data_file.version, rows="unknown"))
            warnings.append(message)
        return out

    def raw(self, spark: SparkSession, sources: list[str]) -> dict[str, bytes]:
        """The raw bytes of refused rows (``file:line`` sources): their data file's record at that line (both
        rows of an UPDATE written with its old value)."""
        assert self.layout is not None
        location = self.layout.location
        lines: dict[str, set[int]] = {}
        for source in sources:
            where = location_of(source)
            if where.get("file") and where.get("line"):
                lines.setdefault(where["file"], set()).add(int(where["line"]))
        if not lines:
            return {}
        contents = spark.read.format("binaryFile").load([location.spark_path(f) for f in lines]).select("path", "content")
        out: dict[str, bytes] = {}
        for row in contents.collect():
            relpath = location.relative(row["path"])
            wanted = lines.get(relpath, set())
            text = decode_text(bytes(row["content"]))
            if relpath.endswith(".csv"):
                csv = self.options.csv_options or DEFAULT_CSV_OPTIONS
                records = list(iter_records(text, csv))
                for i, record in enumerate(records):
                    if record.line in wanted:
                        end = record.end
                        following = records[i + 1] if i + 1 < len(records) else None
                        if csv.output_old_value and following is not None and is_update_half(record, csv, "D") \
                                and is_update_half(following, csv, "I"):
                            end = following.end  # an UPDATE is its old-value row and its new-value row: both replay
                        out[f"{relpath}:{record.line}"] = text[record.start:end].encode("utf-8", "surrogateescape")
            else:
                for number, line in enumerate(text.split("\n"), start=1):
                    if number in wanted:
                        out[f"{relpath}:{number}"] = line.rstrip("\r").encode("utf-8", "surrogateescape")
        return out

    def _hold(self, files: Any) -> list[str]:
        """Remember this batch's held files (saved with the batch) and say what waits and why; a broken
        schema file is reported once."""
        self._pending_held = dict(files.held)
        self._broken_before = set(self._broken_reported)
        warnings = []
        new = sorted(set(files.held) - set(self._held_files))
        for relpath in new:
            warnings.append(f"{relpath}: held, not read: {files.held[relpath]} It is retried with every later batch.")
        if files.held and not new:
            warnings.append(f"{len(files.held)} data file(s) still held, waiting for their schema files.")
        for relpath, reason in sorted(files.broken.items()):
            if relpath not in self._broken_reported:
                self._broken_reported.add(relpath)
                warnings.append(f"{reason} Only that table version waits; other tables go on.")
        return warnings

    def _filter_storage(self, files: Any, filtered: dict[str, int]) -> Any:
        """Leave out the files of tables ``[filter] rules`` exclude (counted in ``filtered``, not dead-lettered)."""
        selection = self.manager.selection
        if selection.is_everything:
            return files
        import dataclasses

        def count(schema: str, table: str) -> None:
            name = f"{schema}.{table}"
            filtered[name] = filtered.get(name, 0) + 1

        kept = [f for f in files.files if selection.admits(f[1][0], f[1][1])]
        for _, key, _ in (f for f in files.files if not selection.admits(f[1][0], f[1][1])):
            count(key[0], key[1])
        held = {}
        for relpath, reason in files.held.items():  # <schema>/<table>/...: never wait for a table left out
            schema, table = [*relpath.split("/"), "", ""][:2]
            if selection.admits(schema, table):
                held[relpath] = reason
            else:
                count(schema, table)
        tables = {key: t for key, t in files.tables.items() if selection.admits(key[0], key[1])}
        return dataclasses.replace(files, files=kept, tables=tables, held=held)

    def _late_files(self, files: Any) -> list[str]:
        """Files older (by number) than one an earlier batch took from the same directory.

        TiCDC writes a directory's files in number order; a file that shows up after a newer one (copied
        or synced out of order) is read when it appears, but its rows went out after newer ones of the same
        rows: worth a warning (the numbers are kept in the checkpoint's side state).
        """
        warnings = []
        for relpath, _, _ in files.files:
            directory, _, name = relpath.rpartition("/")
            newest = self._file_numbers.get(directory, 0)
            number = int("".join(ch for ch in name if ch.isdigit()) or 0)
            if number < newest:
                warnings.append(f"{relpath} arrived after file number {newest} of the same directory; its rows "
                                "were written after newer changes (files should appear in TiCDC's order).")
        self._pending_numbers = dict(files.numbers)
        return warnings
