"""Spark readers around the pure-Python sources: streams of input, and the per-batch parse stage.

A source is named by a URI (:func:`parse_source`):

* ``storage:///path`` or a plain directory: a TiCDC storage-sink directory (CSV or canal-json data files);
* ``canal-json+kafka://host:9092[,host2]/topic[,topic2]`` / ``debezium-json+kafka://...``: changelog topics;
* ``canal-json+file:///dir`` / ``debezium-json+file:///dir``: changelog files, one message per line
  (a file that holds a single pretty-printed message, or a JSON array of messages, works too).

Streams (picked up by Spark structured streaming, offsets in the query's checkpoint):

* storage: :mod:`~avro_registry_sink.spark.sources.storage_source`, whose offsets are TiCDC's file numbers per
  data directory (never file times); the stream hands over the paths, the files themselves are read
  (``binaryFile``) by the encode stage;
* Kafka: Spark's Kafka source (``spark-sql-kafka-0-10``), from the earliest offsets by default;
* changelog files: Spark's file source in ``binaryFile`` format over the directory, with no file too old.

Per micro-batch the job's executor stages read the stream's rows: :func:`encode_storage_files` (a storage
tree) and :mod:`~avro_registry_sink.spark.sources.changelog_stage` (changelogs; its one-by-one path reads a
message with :func:`peek_message` and :func:`parse_message`), whose closures hold only plain data (table
definitions, options, the root path). Every row they hand on is either a record
(:data:`~avro_registry_sink.model.ENCODED_DDL`) or a bad line/message (``error``: JSON with the location and the reason), plus the
order columns that keep per-key order in the output:
``order_version`` (storage: the version directory), ``order_file`` (storage: partition/date/file number;
Kafka: topic/partition; files: the file), ``order_line`` (line or offset; a storage record encoded by
:func:`encode_storage_files` carries its file's rank in the batch above its line, see :data:`LINE_BITS`).

Changelog table definitions live on the driver in a :class:`TableCatalog`: DDL events are applied
with :func:`~avro_registry_sink.tabledef.ddl.apply_ddl` and start a new version at the DDL's commit
ts; each DML uses the newest version at or before its commit ts. The catalog is saved in the checkpoint
directory so that a restarted job knows the versions the topic's earlier DDLs created.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from avro_registry_sink.changes import ChangeEvent, split_key_change
from avro_registry_sink.errors import ConfigError, EncodingError, SourceError
from avro_registry_sink.failpoints import failpoint
from avro_registry_sink.formats import FORMATS, format_for_extension, format_named
from avro_registry_sink.formats.canal_json import parse_canal_line
from avro_registry_sink.formats.changelog_arrow import TableVersions, canal_rows
from avro_registry_sink.formats.csv import (
    DEFAULT_CSV_OPTIONS,
    CsvSettingsError,
    decode_text,
    read_columns,
    resolve_layout,
)
from avro_registry_sink.formats.json_text import refuse_lone_surrogates
from avro_registry_sink.kafka.options import DEFAULT_KAFKA, KAFKA_KEYS, KafkaOptions, kafka_options, spark_kafka_options
from avro_registry_sink.model import CHANGE_SCHEMA, ENCODED_DDL, KAFKA_SCHEMA, RefusalReason, dead_letter_json
from avro_registry_sink.redact import redact_url
from avro_registry_sink.settings.config import SinkConfig, SinkKind
from avro_registry_sink.sources.storage import StorageLayout, read_data_file
from avro_registry_sink.spark.stages.plan import topic_partitions
from avro_registry_sink.spark.stages.stage import encode_change_batch, encode_typed, stage_for
from avro_registry_sink.spark.stages.tally import StageOutput
from avro_registry_sink.storage_fs import STORE_OF_SCHEME, StorageURI, parse_storage_uri
from avro_registry_sink.table import TableDef
from avro_registry_sink.tabledef.catalog import complete_table, pick_version

# The input formats' modules (formats/, sources.storage) are imported by the functions that read them, so that a
# process loads only its input's formats (0.3-0.5 s for all of them here).

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from avro_registry_sink.formats.csv import CsvOptions
    from avro_registry_sink.sources.storage import DataFile, StorageLayout

__all__ = [
    "PARSED_DDL",
    "SourceSpec",
    "StorageFiles",
    "changelog_stream",
    "encode_storage_files",
    "file_messages",
    "infer_table",
    "location_of",
    "parse_message",
    "parse_source",
    "peek_message",
    "resolve_storage_files",
    "source_error_json",
]

#: The parse stage's output: change columns, order columns and ``error`` (JSON) for bad input.
PARSED_DDL = (
    "schema STRING, table STRING, table_version BIGINT, op STRING, commit_ts BIGINT, before STRING, "
    "after STRING, source STRING, order_version BIGINT, order_file STRING, order_line BIGINT, error STRING"
)


# --------------------------------------------------------------------------------------------------
# Source URIs


#: Options of file sources read by this module (besides the store's own parameters).
_FILE_SOURCE_OPTIONS = frozenset({"pathGlobFilter"})


@dataclass(frozen=True)
class SourceSpec:
    """A parsed ``--source``: ``kind`` is ``storage``, ``canal-json`` or ``debezium-json``.

    For file sources ``location`` is where the files are (:class:`~avro_registry_sink.storage_fs.StorageURI`:
    a local directory, S3, GCS, Azure or HDFS) and ``path`` what Spark reads (a local path or a Hadoop URI).
    """

    kind: str
    transport: str  # "file" or "kafka"
    path: str | None = None
    brokers: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    kafka: KafkaOptions = DEFAULT_KAFKA  # TLS/SASL of a Kafka source: the URI's query with TiCDC's names
    location: StorageURI | None = None

    @property
    def is_storage(self) -> bool:
        return self.kind == "storage"

    @property
    def is_kafka(self) -> bool:
        return self.transport == "kafka"

    def check(self) -> None:
        """Raise :class:`ConfigError` when a directory source does not exist or its store refuses us
        (before any Spark work)."""
        if self.is_kafka:
            return
        if self.location is not None and not self.location.is_local:
            self.location.filesystem().probe()
            return
        if not self.path or not Path(self.path).is_dir():
            raise ConfigError(f"Source directory {self.path!r} does not exist.", option="source", value=self.path)

    def describe(self) -> str:
        """The source as text, credentials left out (recorded in the checkpoint's ``job.json``)."""
        if self.is_kafka:
            return f"{self.kind}+kafka://{','.join(self.brokers)}/{','.join(self.topics)}"
        where = self.path if self.location is None or self.location.is_local else str(self.location)
        if self.kind == "storage":
            return f"storage://{where}" if where and where.startswith("/") else str(where)
        return f"{self.kind}+file://{where}" if where and where.startswith("/") else f"{self.kind}+{where}"


def _file_source(kind: str, text: str) -> SourceSpec:
    location = parse_storage_uri(text, option="source", allowed=_FILE_SOURCE_OPTIONS)
    path = location.path if location.is_local else location.hadoop_uri()
    return SourceSpec(kind=kind, transport="file", path=path, options=dict(location.extra), location=location)


def parse_source(text: str, sink: SinkConfig | None = None) -> SourceSpec:
    """Parse a ``--source`` value (see the module docs).

    A Kafka source's TLS/SASL settings are its query's TiCDC parameters; when ``sink`` (a ``SinkConfig``)
    writes to the same brokers, its Kafka settings (sink URI and ``[sink.kafka-config]``: a changefeed's
    own cluster) are the base the query adds to.

    >>> parse_source("canal-json+kafka://127.0.0.1:9092/cdc").topics
    ('cdc',)
    >>> parse_source("/data/ticdc").kind
    'storage'
    >>> parse_source("s3://bucket/cdc?endpoint=http://127.0.0.1:9000").path
    's3a://bucket/cdc'
    >>> parse_source("canal-json+s3://bucket/canal").describe()
    'canal-json+s3://bucket/canal'
    """
    if "://" not in text:
        return _file_source("storage", text)
    split = urlsplit(text)
    scheme = split.scheme.lower()
    if scheme in ("storage", "local"):  # this project's (and TiCDC's local) spelling of a directory
        path = unquote(split.netloc + split.path)
        if not path:
            raise ConfigError(f"Invalid source {redact_url(text)!r}: no directory.", option="source", value=redact_url(text))
        query = f"?{split.query}" if split.query else ""
        return _file_source("storage", f"file://{path}{query}")
    if scheme in STORE_OF_SCHEME:
        return _file_source("storage", text)

    kind, _, transport = scheme.partition("+")
    if kind not in FORMATS or not FORMATS[kind].is_changelog or (transport != "kafka" and transport not in STORE_OF_SCHEME):
        raise ConfigError(
            f"Invalid source {redact_url(text)!r}: expected a TiCDC storage-sink directory (a path, storage:///dir, file:///dir, "
            "s3://bucket/prefix?endpoint=..., gcs://, azure://, s3a://, gs://, abfss://, hdfs://), "
            "canal-json+kafka://host:port/topic, canal-json+file:///dir (or +s3://, ...), "
            "debezium-json+kafka://host:port/topic or debezium-json+file:///dir.",
            option="source", value=redact_url(text),
        )
    if transport == "kafka":
        params = dict(parse_qsl(split.query, keep_blank_values=True))
        brokers = tuple(b for b in split.netloc.rpartition("@")[2].split(",") if b)
        topics = tuple(t for t in unquote(split.path.lstrip("/")).split(",") if t)
        if not brokers or not topics:
            raise ConfigError(f"Invalid source {redact_url(text)!r}: name the brokers and at least one topic.",
                              option="source", value=redact_url(text))
        return SourceSpec(kind=kind, transport="kafka", brokers=brokers, topics=topics,
                          options={k: v for k, v in params.items() if k not in KAFKA_KEYS},
                          kafka=kafka_options(params, _same_cluster_kafka(brokers, sink)))
    rest = text.split("+", 1)[1]
    if transport == "file" and not (unquote(split.netloc + split.path)):
        raise ConfigError(f"Invalid source {redact_url(text)!r}: no directory.", option="source", value=redact_url(text))
    if transport == "file" and split.netloc:  # file://relative/dir as the old parser took it
        rest = "file://" + str(Path(unquote(split.netloc + split.path)).resolve()) + (f"?{split.query}" if split.query else "")
    return _file_source(kind, rest)


def _same_cluster_kafka(brokers: tuple[str, ...], sink: SinkConfig | None) -> KafkaOptions:
    if sink is not None and sink.scheme == SinkKind.KAFKA and set(sink.brokers) == set(brokers):
        return sink.kafka
    return DEFAULT_KAFKA


# --------------------------------------------------------------------------------------------------
# Small helpers


def location_of(source: str) -> dict[str, Any]:
    """``relpath:line`` -> file and line; ``topic/partition@offset`` -> topic, partition and offset."""
    head, at, tail = source.rpartition("@")
    if at and tail.isdigit() and "/" in head:
        topic, _, partition = head.rpartition("/")
        if partition.isdigit():
            return {"topic": topic, "partition": int(partition), "offset": int(tail)}
    head, colon, tail = source.rpartition(":")
    if colon and tail.isdigit():
        return {"file": head, "line": int(tail)}
    return {"file": source or None}


def _error_json(location: str, reason: str, message: str, *, fmt: str | None = None, raw: bytes | str | None = None,
                table: str | None = None, **extra: Any) -> str:
    """A dead-letter record (:func:`~avro_registry_sink.model.dead_letter_record`) as JSON; ``table`` may be
    ``schema.table``."""
    fields: dict[str, Any] = {**location_of(location), **{k: v for k, v in extra.items() if v is not None}}
    if table and "schema" not in fields and "." in table:
        fields["schema"], fields["table"] = table.split(".", 1)
    elif table:
        fields["table"] = table
    return dead_letter_json(fmt=fmt, source=location, reason=reason, message=message, raw=raw, **fields)


def source_error_json(err: SourceError, *, fmt: str | None = None, **extra: Any) -> str:
    """The dead-letter record (JSON) of a :class:`SourceError`, its location, reason and raw bytes."""
    ctx = err.context
    location = str(ctx.get("source") or "")
    line = ctx.get("line")
    if line and not location.endswith(f":{line}"):
        location = f"{location}:{line}"
    table = extra.pop("table", None) or ctx.get("table")
    raw = ctx.get("raw") if ctx.get("raw") is not None else extra.pop("raw", None)
    extra.pop("raw", None)
    return _error_json(location, str(ctx.get("reason") or err.message), err.message, fmt=fmt, raw=raw,
                       table=table if isinstance(table, str) else None, column=ctx.get("column"), **extra)


def _line_of(source: str) -> int:
    head, _, tail = source.rpartition(":")
    return int(tail) if head and tail.isdigit() else 0


def _arrow_schema(ddl: str) -> Any:
    import pyarrow as pa

    types = {"STRING": pa.string(), "BIGINT": pa.int64(), "INT": pa.int32(), "BINARY": pa.binary()}
    fields = []
    for part in ddl.split(","):
        name, kind = part.split()
        fields.append(pa.field(name, types[kind]))
    return pa.schema(fields)


def _batches(rows: Iterable[tuple[Any, ...]], ddl: str, size: int = 4096) -> Iterator[Any]:
    import pyarrow as pa

    schema = _arrow_schema(ddl)
    names = schema.names
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield pa.RecordBatch.from_arrays([pa.array(col, type=schema.field(i).type) for i, col in
                                              enumerate(zip(*chunk, strict=False))], names=names)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_arrays([pa.array(col, type=schema.field(i).type) for i, col in
                                          enumerate(zip(*chunk, strict=False))], names=names)


def _event_row(event: ChangeEvent, version: int, order: tuple[int, str, int]) -> tuple[Any, ...]:
    row = event.to_row()
    # the plan of a row is looked up by (schema, table, table_version): the definition's version
    return (*row[:2], version, *row[3:], *order, None)


def _error_row(error_json: str, order: tuple[int, str, int], schema: str | None = None,
               table: str | None = None, source: str = "") -> tuple[Any, ...]:
    return (schema, table, None, None, None, None, None, source, *order, error_json)


# --------------------------------------------------------------------------------------------------
# Storage sink


#: Spark's ``maxFileAge`` for changelog file sources: about 10,000 years.
NO_FILE_AGE = "3650000d"


def _file_stream_reader(spark: SparkSession, max_files_per_trigger: int | None, max_bytes_per_trigger: int | None):
    """A streaming reader of whole new files (Spark's ``binaryFile``), at most that many files, else bytes, a
    micro-batch."""
    # Spark skips files more than maxFileAge (7 days by default) older than the newest it has seen, which
    # lost restored or synced files with old times: no file is too old here.
    reader = spark.readStream.format("binaryFile").schema(
        "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
    ).option("maxFileAge", NO_FILE_AGE)
    if max_files_per_trigger:
        return reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
    if max_bytes_per_trigger:
        return reader.option("maxBytesPerTrigger", int(max_bytes_per_trigger))
    return reader


def _data_file(layout: StorageLayout, relpath: str) -> DataFile | None:
    return layout.data_file(relpath)


def _resolved_data_file(layout: StorageLayout, relpath: str) -> DataFile:
    """The data file at ``relpath``, a path :func:`resolve_storage_files` took as one on the driver."""
    data_file = _data_file(layout, relpath)
    if data_file is None:
        raise RuntimeError(f"{relpath}: resolved as a storage-sink data file on the driver, but its path is not one's.")
    return data_file


@dataclass
class StorageFiles:
    """A batch's data files, resolved on the driver."""

    files: list[tuple[str, tuple[str, str, int], tuple[int, str, int]]]  # relpath, table key, order head
    tables: dict[tuple[str, str, int], TableDef]
    errors: list[str]  # error JSON for files that cannot be read at all
    numbers: dict[str, int] = field(default_factory=dict)  # newest file number per data directory
    held: dict[str, str] = field(default_factory=dict)  # relpath -> why it waits (no usable schema file yet)
    broken: dict[str, str] = field(default_factory=dict)  # schema file relpath -> why it cannot be used


def _broken_schema_for(data_file: DataFile, tables: Mapping[tuple[str, str, int], TableDef],
                       broken: Mapping[tuple[str, str, int], SourceError]) -> SourceError | None:
    """The error of the schema file a data file would be read with, if that file cannot be used: the one of
    its own version, or when it has none, the newest one at or before it (never an older good one instead)."""
    exact = broken.get((data_file.schema, data_file.table, data_file.version))
    if exact is not None or (data_file.schema, data_file.table, data_file.version) in tables:
        return exact
    table = (data_file.schema, data_file.table)
    bad = [v for (s, t, v) in broken if (s, t) == table and v <= data_file.version]
    if not bad:
        return None
    good = [v for (s, t, v) in tables if (s, t) == table and v <= data_file.version]
    newest = max(bad)
    return broken[(*table, newest)] if not good or newest > max(good) else None


def resolve_storage_files(
    layout: StorageLayout,
    paths: Iterable[str],
    hints: Mapping[tuple[str, str], TableDef] | None = None,
    completed: dict[tuple[str, str, int], tuple[TableDef, TableDef | None, TableDef]] | None = None,
) -> StorageFiles:
    """Locate a batch's files in the storage tree and pick each one's table definition (driver side).

    A data file whose table version has no schema file yet, or whose schema file cannot be read, is
    *held* (``held``: relpath -> reason) rather than read or dropped: the job retries it with later
    batches. A broken schema file stops only its own table version (``broken``); other tables go on.

    ``completed`` (owned by the caller, kept across batches) remembers each version's definition after
    :func:`complete_table` (unique keys from ``hints``; the ENUM/SET members of each version are the layout's),
    so every batch hands the schema manager the very same object and it recognises a known table version by
    identity instead of comparing definitions field by field. It cannot hide a
    schema file rewritten in place: the layout reads such a file again and either returns the very
    definition it read before or refuses the file (its version's data files are then held).
    """
    completed = {} if completed is None else completed
    hints = hints or {}
    tables_all, broken_keys = layout.table_versions_and_errors(hints)  # each version with its own ENUM/SET members
    files = []
    tables: dict[tuple[str, str, int], TableDef] = {}
    errors: list[str] = []
    numbers: dict[str, int] = {}
    held: dict[str, str] = {}
    broken = {str(exc.context.get("source") or ""): exc.message for exc in broken_keys.values()}
    for uri in sorted(set(paths)):
        try:
            relpath = layout.location.relative(uri)
        except ConfigError:
            errors.append(_error_json(uri, "outside the source", f"{uri}: not under {layout.location}."))
            continue
        data_file = _data_file(layout, relpath)
        if data_file is None:
            errors.append(_error_json(relpath, "not a data file", f"{relpath}: not a storage-sink data file path."))
            continue
        bad_schema = _broken_schema_for(data_file, tables_all, broken_keys)
        if bad_schema is not None:
            held[relpath] = f"its table version's schema file cannot be used: {bad_schema.message}"
            continue
        try:
            table = layout.table_for(data_file, tables_all)
        except SourceError as exc:
            held[relpath] = exc.message
            continue
        key = (table.schema_name, table.table, table.version)
        hint = hints.get((table.schema_name, table.table))
        known = completed.get(key)
        if known is None or known[0] is not table or known[1] is not hint:
            known = completed[key] = (table, hint, complete_table(table, hint))
        table = known[2]
        tables[key] = table
        order = (data_file.version, f"{data_file.partition or 0:020d}/{data_file.date or ''}/{data_file.number:020d}", 0)
        files.append((relpath, key, order))
        directory = relpath.rpartition("/")[0]
        numbers[directory] = max(numbers.get(directory, 0), data_file.number)
    return StorageFiles(files=files, tables=tables, errors=errors, numbers=numbers, held=held, broken=broken)




def _storage_file_rows(relpath: str, content: bytes, table: TableDef, order: tuple[int, str, int],
                       data_file: DataFile, options: CsvOptions | None, explicit: frozenset[str],
                       fast: Any = None) -> Iterator[tuple[Any, ...]]:
    """One data file -> :data:`PARSED_DDL` rows (the reference path, record by record).

    ``fast`` (optional) gets the file's resolved CSV settings first and returns true when it took the
    whole file itself (the vectorized path); then only the note rows come from here."""

    file_format = format_for_extension(data_file.format)
    file_options = options
    try:
        if file_format.has_layout:
            file_options, note = resolve_layout(decode_text(content), table, options or DEFAULT_CSV_OPTIONS,
                                                explicit=explicit, source=relpath)
            if note:
                yield _error_row(_error_json(relpath, RefusalReason.NOTE, f"{relpath}: {note}", fmt="csv"),
                                 (order[0], order[1], 0), table.schema_name, table.table, relpath)
            if fast is not None and fast(file_options):
                return
        failpoint("storage.record-by-record")  # a probe: tests count the files read here
        events, errors = read_data_file(data_file, table, file_options, data=content)
    except CsvSettingsError as exc:
        yield _error_row(source_error_json(exc, fmt="csv"), (order[0], order[1], 0), table.schema_name, table.table,
                         relpath)
        return
    except Exception as exc:  # noqa: BLE001 - one unreadable file must not stop the others
        events, errors = [], [SourceError(f"{relpath}: cannot be read: {type(exc).__name__}: {exc}", source=relpath,
                                          line=0, reason=f"{type(exc).__name__}: {exc}", raw=content)]
    fmt = file_format.name
    for event in events:
        for part in split_key_change(event, table):
            yield _event_row(part, table.version, (order[0], order[1], _line_of(event.source)))
    for err in errors:
        line = int(err.context.get("line") or 0)
        yield _error_row(source_error_json(err, fmt=fmt, schema=table.schema_name, table=table.table,
                                           table_version=table.version),
                         (order[0], order[1], line), table.schema_name, table.table, relpath)


def encode_storage_files(
    files_df: DataFrame,
    root: str | StorageURI,
    files: StorageFiles,
    plans: Mapping[tuple[str, str, int], Any],
    csv_options: CsvOptions | None,
    explicit: frozenset[str] = frozenset(),
    output: Any = None,
) -> DataFrame:
    """Executor stage, one pass: data files -> encoded Kafka records (:data:`ENCODED_DDL`).

    Each file is parsed and encoded where it is read. A CSV file Arrow can read as TiCDC wrote it goes
    text -> typed Arrow columns (:func:`~avro_registry_sink.formats.csv.read_columns`) -> the columnar
    encoder, with no Python object per row; any other file, or one with a record the vectorized path
    declines or a value the encoder refuses, goes through the reference parser and
    :func:`~avro_registry_sink.spark.stages.stage.encode_change_batch`, which reports each bad row on its own.
    ``plans`` are the :class:`~avro_registry_sink.spark.stages.stage.StagePlan` of every table version; ``output``
    a :class:`~avro_registry_sink.spark.stages.tally.StageOutput` (counted, or the file sink's lines).
    """
    by_relpath = {relpath: (key, order) for relpath, key, order in files.files}
    ranks = input_ranks(files.files)
    tables = dict(files.tables)
    plans = dict(plans)
    location = root if isinstance(root, StorageURI) else parse_storage_uri(str(root))

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa


        layout = StorageLayout(location)
        out_schema = _arrow_schema_of_encoded()

        def finish(records: pa.RecordBatch, order: tuple[int, str, int], lines: Any, errors: Any,
                   rank: int) -> pa.RecordBatch:
            n = records.num_rows
            position = np.asarray(lines, np.int64) + np.int64(rank << LINE_BITS)
            return pa.RecordBatch.from_arrays(
                [*records.select(KAFKA_SCHEMA.names).columns, pa.array(np.full(n, order[0], np.int64)),
                 pa.array([order[1]] * n, pa.string()), pa.array(position, pa.int64()), errors],
                schema=out_schema)

        for batch in batches:
            for uri, content in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                try:
                    relpath = location.relative(uri)
                except ConfigError:
                    continue
                if relpath not in by_relpath:
                    continue
                key, order = by_relpath[relpath]
                rank = ranks[relpath]
                table, plan = tables[key], plans[key]
                taken: list[pa.RecordBatch] = []

                def fast(options: Any, table: TableDef = table, plan: Any = plan, order: Any = order,
                         taken: list[pa.RecordBatch] = taken, rank: int = rank, content: bytes = content,
                         relpath: str = relpath) -> bool:
                    columns = read_columns(content, table, options) if options is not None else None
                    if columns is None:
                        return False
                    values = columns.values
                    omitted = {name.lower() for name in getattr(plan.encoding, "omitted", ())}
                    if omitted:  # left out by a column selector
                        values = values.select([n for n in values.schema.names if n.lower() not in omitted])
                    if columns.exact_lines:
                        # A row the encoder refuses is set aside alone, named by the line its record starts on
                        # (an UPDATE written as two rows: its first, as the reference path names it); the rest
                        # of the file stays here.
                        records = encode_typed(values, columns.op_codes, columns.commit_ts, plan,
                                               _LineSources(relpath, columns.lines))
                        taken.append(finish(records, order, columns.lines, records.column("error"), rank))
                        return True
                    # A quoted value spans lines: the vectorized reader knows each record's position, not its
                    # line, so a row the encoder refuses sends the file to the reference path, which names it.
                    try:
                        records, oversize = stage_for(plan).encode_checked(values, columns.op_codes,
                                                                           columns.commit_ts)
                    except EncodingError:
                        return False
                    if oversize:
                        return False
                    taken.append(finish(records, order, columns.lines, pa.nulls(records.num_rows, pa.string()), rank))
                    return True

                data_file = _resolved_data_file(layout, relpath)
                if format_for_extension(data_file.format).is_changelog:
                    yield from _canal_file(relpath, content, table, plan, order, rank, finish, plans)
                    continue
                rows = list(_storage_file_rows(relpath, content, table, order, data_file, csv_options, explicit, fast))
                yield from taken
                changes = [r for r in rows if r[-1] is None]
                if changes:
                    change_batch = pa.RecordBatch.from_pylist(
                        [dict(zip(CHANGE_SCHEMA.names, r[:8], strict=True)) for r in changes], schema=CHANGE_SCHEMA)
                    records = encode_change_batch(change_batch, plans, isolate=True)
                    yield finish(records, order, [r[10] for r in changes], records.column("error"), rank)
                errors = [r for r in rows if r[-1] is not None]
                if errors:
                    n = len(errors)
                    empty = pa.RecordBatch.from_arrays(
                        [pa.nulls(n, f.type) for f in KAFKA_SCHEMA], schema=KAFKA_SCHEMA)
                    yield finish(empty, order, [r[10] for r in errors], pa.array([r[-1] for r in errors], pa.string()),
                                 rank)

    return files_df.mapInArrow(*(output or StageOutput()).wrap(run, ENCODED_DDL, topic_partitions(plans)))


class _LineSources:
    """``relpath:line`` of each row (made when asked for: only refused rows need theirs)."""

    def __init__(self, relpath: str, lines: Any) -> None:
        self.relpath, self.lines = relpath, lines

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, i: int) -> str:
        return f"{self.relpath}:{int(self.lines[i])}"


def _file_lines(content: bytes) -> tuple[Any, Any]:
    """A data file's lines (``text.split("\\n")``, trailing ``\\r`` stripped) as a binary array, with their
    numbers; empty lines left out."""
    import numpy as np
    import pyarrow as pa

    data = np.frombuffer(content, np.uint8)
    breaks = np.flatnonzero(data == 10)
    starts = np.concatenate([[0], breaks + 1]).astype(np.int64)
    ends = np.concatenate([breaks, [data.size]]).astype(np.int64)
    while True:  # rstrip("\\r")
        cr = (ends > starts) & (data[np.maximum(ends - 1, 0)] == 13) if data.size else np.zeros(ends.size, bool)
        if not cr.any():
            break
        ends = ends - cr
    numbers = np.arange(1, starts.size + 1, dtype=np.int64)
    keep = ends > starts
    starts, ends, numbers = starts[keep], ends[keep], numbers[keep]
    lengths = ends - starts
    offsets = np.zeros(starts.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if starts.size:
        index = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
        body = data[index]
    else:
        body = np.zeros(0, np.uint8)
    lines = pa.LargeBinaryArray.from_buffers(pa.large_binary(), starts.size, [None, pa.py_buffer(offsets),
                                                                               pa.py_buffer(body)])
    return lines, numbers


def _canal_file(relpath: str, content: bytes, table: TableDef, plan: Any, order: tuple[int, str, int], rank: int,
                finish: Any, plans: Mapping[tuple[str, str, int], Any]) -> Iterator[Any]:
    """A storage-sink canal-json data file in one pass: its lines parsed by Arrow's JSON reader into typed columns
    and encoded (:mod:`~avro_registry_sink.formats.changelog_arrow`); a line the vectorized reader does not take
    is read on its own by :func:`~avro_registry_sink.formats.canal_json.parse_canal_line` (a bad line is set
    aside alone, the rest of the file stays on the vectorized path)."""
    import numpy as np
    import pyarrow as pa


    lines, numbers = _file_lines(content)
    key = (table.schema_name, table.table, table.version)
    found = canal_rows(lines, TableVersions(history={key[:2]: [(table.version, table)]}, planned=frozenset({key}),
                                            dml_only=True))
    for rows in found.tables:
        line_of = numbers[rows.message]
        records = encode_typed(rows.columns, rows.op_codes, rows.commit_ts, plan, _LineSources(relpath, line_of))
        yield finish(records, order, line_of, records.column("error"), rank)
    if not found.slow.size:
        return
    events: list[ChangeEvent] = []
    errors: list[SourceError] = []
    for i in found.slow.tolist():
        raw = lines[i].as_py()
        parse_canal_line(raw.decode("utf-8", "surrogateescape"), int(numbers[i]), table, source=relpath,
                         table_version=table.version, events=events, errors=errors)
    changes = [_event_row(part, table.version, (order[0], order[1], _line_of(event.source)))
               for event in events for part in split_key_change(event, table)]
    if changes:
        change_batch = pa.RecordBatch.from_pylist([dict(zip(CHANGE_SCHEMA.names, r[:8], strict=True)) for r in changes],
                                                  schema=CHANGE_SCHEMA)
        records = encode_change_batch(change_batch, plans, isolate=True)
        yield finish(records, order, [r[10] for r in changes], records.column("error"), rank)
    if errors:
        n = len(errors)
        empty = pa.RecordBatch.from_arrays([pa.nulls(n, f.type) for f in KAFKA_SCHEMA], schema=KAFKA_SCHEMA)
        texts = [source_error_json(err, fmt="canal-json", schema=table.schema_name, table=table.table,
                                   table_version=table.version) for err in errors]
        yield finish(empty, order, np.array([int(err.context.get("line") or 0) for err in errors], np.int64),
                     pa.array(texts, pa.string()), rank)


#: Bits of a storage record's ``order_line`` that hold its line; the bits above hold its data file's rank in the
#: batch's input order (:func:`input_ranks`), so that ``order_line`` alone orders a batch's records as
#: ``order_version, order_file, order_line`` do (a sort on one long, instead of on three columns).
LINE_BITS = 40


def input_ranks(files: Iterable[tuple[str, Any, tuple[int, str, int]]]) -> dict[str, int]:
    """Each data file's place in a batch's input order: by table version, then partition/date/file number
    (then path, between tables). Ranks stay below ``2**23``, so ``rank << LINE_BITS | line`` is a positive long.

    >>> input_ranks([("b/2/x", None, (2, "0/1", 0)), ("a/1/y", None, (1, "0/9", 0)), ("a/2/z", None, (2, "0/0", 0))])
    {'a/1/y': 0, 'a/2/z': 1, 'b/2/x': 2}
    """
    ordered = sorted(files, key=lambda f: (f[2][0], f[2][1], f[0]))
    if len(ordered) >= 1 << (63 - LINE_BITS):
        raise ValueError(f"{len(ordered)} data files in one batch: at most {(1 << (63 - LINE_BITS)) - 1}")
    return {relpath: rank for rank, (relpath, _, _) in enumerate(ordered)}


def _arrow_schema_of_encoded() -> Any:
    import pyarrow as pa

    return KAFKA_SCHEMA.append(pa.field("order_version", pa.int64())).append(
        pa.field("order_file", pa.string())).append(pa.field("order_line", pa.int64())).append(
        pa.field("error", pa.string()))


# --------------------------------------------------------------------------------------------------
# Changelogs: canal-json / debezium-json


def min_partitions(source_partitions: int | None, cores: int) -> int | None:
    """Spark's Kafka ``minPartitions`` for a source of ``source_partitions`` partitions on ``cores`` cores: the
    least number of tasks that splits equal partitions into equal pieces and keeps every core busy to the end
    (Spark gives a range ``round(minPartitions / partitions)`` pieces): 1 partition on 2 cores -> 2 tasks, one
    wave; 3 -> 6 tasks, three full waves, where 3 tasks would leave a core idle for a third of the batch.
    ``None`` (one task per partition) where partitions already fill the cores evenly, or where that number
    would be more than four waves (small batches would pay a task's fixed cost for little balance);
    twice the cores when the partitions are unknown."""
    if source_partitions is None or source_partitions < 1:
        return 2 * cores
    tasks = math.lcm(source_partitions, cores)
    if tasks == source_partitions or tasks > 4 * cores:
        return None
    return tasks


def changelog_stream(
    spark: SparkSession,
    spec: SourceSpec,
    *,
    max_offsets_per_trigger: int | None = None,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
    source_partitions: int | None = None,
) -> DataFrame:
    """The raw stream of a changelog source (Kafka records, or the files of a directory); a micro-batch takes
    at most ``max_offsets_per_trigger`` Kafka records, or ``max_files_per_trigger`` files or
    ``max_bytes_per_trigger`` bytes of files; ``source_partitions`` (the Kafka topics' partitions, when known)
    sets how a batch is split into tasks (:func:`min_partitions`)."""
    if spec.is_kafka:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", ",".join(spec.brokers))
            .option("subscribe", ",".join(spec.topics))
            .option("startingOffsets", spec.options.get("startingOffsets", "earliest"))
            .option("failOnDataLoss", spec.options.get("failOnDataLoss", "true"))
            .options(**spark_kafka_options(spec.kafka, "consumer"))
        )
        if max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", int(max_offsets_per_trigger))
        tasks = spec.options.get("minPartitions") or min_partitions(
            source_partitions, max(1, spark.sparkContext.defaultParallelism))
        if tasks:
            reader = reader.option("minPartitions", str(tasks))
        for name, value in spec.options.items():
            if name.startswith("kafka."):
                reader = reader.option(name, value)
        return reader.load().select("value", "topic", "partition", "offset")
    reader = _file_stream_reader(spark, max_files_per_trigger, max_bytes_per_trigger)
    pattern = spec.options.get("pathGlobFilter")
    if pattern:
        reader = reader.option("pathGlobFilter", pattern)
    return reader.load(spec.path).select("path", "content")


def _split_messages(text: str) -> list[tuple[int, str]]:
    """(line, message) pairs of a changelog file: JSON Lines, or one JSON document / array."""
    lines = [(i, line.rstrip("\r")) for i, line in enumerate(text.split("\n"), start=1) if line.strip()]
    if not lines:
        return []
    try:
        json.loads(lines[0][1])
        return lines
    except ValueError:
        pass
    try:
        whole = json.loads(text)
    except ValueError:
        return lines  # JSON Lines with a bad first line: reported per line
    if isinstance(whole, list):
        return [(lines[0][0], json.dumps(item, ensure_ascii=False)) for item in whole]
    return [(lines[0][0], text)]


def file_messages(batches: Iterable[Any], location: Any, fmt: str) -> Iterator[tuple[str | None, str, str, int,
                                                                                 str | None]]:
    """The messages of changelog files (Arrow batches of ``path``, ``content``): ``(message, source, file, line,
    error)`` each, ``file`` relative to ``location`` (a storage location). A message that is not UTF-8 is
    ``None`` with an ``invalid UTF-8`` error of its own (its raw bytes kept); the file's other messages are read."""
    for batch in batches:
        for uri, content in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            try:
                name = location.relative(uri)
            except ConfigError:
                name = uri
            text = bytes(content).decode("utf-8", "surrogateescape")
            for line, message in _split_messages(text):
                source = f"{name}:{line}"
                if any("\udc80" <= ch <= "\udcff" for ch in message):
                    yield (None, source, name, line, _error_json(
                        source, "invalid UTF-8", f"{source}: invalid UTF-8 bytes in the message.", fmt=fmt,
                        raw=message.encode("utf-8", "surrogateescape")))
                    continue
                yield (message, source, name, line, None)


#: Keys of a saved Kafka message (``kcat -J``, Kafka UI / Conduktor exports): ``{"key": ..., "value": ...}``.
_DUMP_KEYS = frozenset({"key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                        "timestamp_type", "headers", "tstype", "ts", "broker"})


def _unwrap_dump(msg: Mapping[str, Any], fmt: str, source: str) -> tuple[Any, str | None]:
    """A saved Kafka message -> (its value decoded, the value's JSON text); anything else unchanged.

    The value may be the JSON itself, JSON text, or base64 of JSON text. A dump whose value is none of
    these raises a :attr:`~avro_registry_sink.model.RefusalReason.MISCONFIGURATION` error: the whole file is in a form this reader cannot
    take, which retrying row by row would not fix."""
    if "value" not in msg or not set(msg) <= _DUMP_KEYS:
        return msg, None
    value = msg["value"]
    if value is None or isinstance(value, Mapping):
        return value, json.dumps(value, ensure_ascii=False) if value is not None else None
    if isinstance(value, str):
        try:
            return json.loads(value), value
        except ValueError:
            pass
        import base64
        import binascii

        try:
            text = base64.b64decode(value, validate=True).decode("utf-8")
            return json.loads(text), text
        except (binascii.Error, ValueError):
            pass
    shown = repr(value)[:60]
    raise SourceError(
        f"{source}: this looks like a saved Kafka message ({{\"key\": ..., \"value\": ...}} per line), but its value "
        f"{shown} is neither a {fmt} JSON object, JSON text, nor base64 of JSON text. Expected one {fmt} message "
        "per line, or Kafka dumps whose value is one of those (e.g. kcat -J, or -e -o beginning -f '%s\\n').",
        reason=RefusalReason.MISCONFIGURATION,
    )


def peek_message(message: str | None, source: str, fmt: str) -> tuple[str, str | None, str | None, int | None, str | None,
                                                                 str | None, str | None]:
    """What one changelog message is, the per-message way: ``(kind, schema, table, commit_ts, message, error,
    shape)`` with kind ``dml``/``ddl``/``watermark``/``skip``/``error`` (``message``: the JSON text, a saved
    Kafka message unwrapped; ``error``: dead-letter JSON; ``shape``: canal-json DMLs, the columns the message's
    ``mysqlType`` lists, so that the driver sees a table change shape even when the changelog holds no DDL)."""

    input_format = format_named(fmt)
    if message is None or not message.strip():
        if input_format.has_tombstones:
            return "skip", None, None, None, message, None, None
        return "error", None, None, None, message, _error_json(source, "empty message",
                                                                  f"{source}: empty canal-json message."), None
    try:
        msg = json.loads(message)
        refuse_lone_surrogates(message, msg, source)
        if isinstance(msg, Mapping):
            msg, text = _unwrap_dump(msg, fmt, source)
            message = text if text is not None else message
        if msg is None and input_format.has_tombstones:  # Debezium's tombstone after a delete
            return "skip", None, None, None, message, None, None
        if not isinstance(msg, Mapping):
            raise SourceError("expected a JSON object.", reason="not an object")
        kind, schema, table, commit_ts = input_format.peek(msg)
        shape = input_format.shape(msg) if kind == "dml" else None
        return kind, schema, table, commit_ts, message, None, shape
    except Exception as exc:  # noqa: BLE001 - reported as bad input, never fails the batch
        if isinstance(exc, SourceError):
            reason, text = exc.context.get("reason"), exc.message
        elif isinstance(exc, json.JSONDecodeError):
            reason = text = f"not valid JSON ({exc})"
        else:
            reason = text = f"{type(exc).__name__}: {exc}"
        text = text if text.startswith(source) else f"{source}: {text}"
        return "error", None, None, None, message, _error_json(source, str(reason), text, fmt=fmt, raw=message), None


def parse_message(message: str, source: str, fmt: str, schema: str, table_name: str, commit_ts: int,
                  order: tuple[Any, str, int], history: Mapping[tuple[str, str], list[tuple[int, TableDef]]]
                  ) -> Iterator[tuple[Any, ...]]:
    """One DML message (as :func:`peek_message` saw it) -> :data:`PARSED_DDL` rows, the per-message way: its
    change rows (an UPDATE of the key split in two), or one error row."""

    versions = history.get((schema, table_name))
    if not versions:
        yield _error_row(_error_json(
            source, "unknown table",
            f"{source}: no definition of {schema}.{table_name}: its messages carry no usable type "
            "information; give its CREATE TABLE with --tables, or start from the topic's DDL.",
            fmt=fmt, raw=message, schema=schema, table=table_name, commit_ts=commit_ts),
            order, schema, table_name, source)
        return
    table = pick_version(versions, commit_ts)
    try:
        got = format_named(fmt).events(message, table=table, tables={(schema, table_name): table},
                                       table_version=table.version, source=source)
    except SourceError as exc:
        yield _error_row(source_error_json(exc, fmt=fmt, raw=message, schema=schema, table=table_name,
                                           table_version=table.version, commit_ts=commit_ts),
                         order, schema, table_name, source)
        return
    except Exception as exc:  # noqa: BLE001 - a message the reader chokes on is bad input too
        reason = f"{type(exc).__name__}: {exc}"
        yield _error_row(_error_json(source, reason, f"{source}: cannot be read: {reason}", fmt=fmt,
                                     raw=message, schema=schema, table=table_name,
                                     table_version=table.version, commit_ts=commit_ts),
                         order, schema, table_name, source)
        return
    for event in got:
        if isinstance(event, ChangeEvent):
            for part in split_key_change(event, table):
                yield _event_row(part, table.version, order)


def infer_table(fmt: str, message: str, source: str, previous: TableDef | None = None) -> TableDef | None:
    """A best-effort definition from one DML message (formats that carry types: canal-json's
    ``mysqlType``/``pkNames``); ``previous`` (the version known so far) keeps what the message cannot say
    for unchanged columns."""

    return format_named(fmt).derive_table(message, source, previous=previous)
