"""Spark readers around the pure-Python sources: streams of input, and the per-batch parse stage.

A source is named by a URI (:func:`parse_source`):

* ``storage:///path`` or a plain directory: a TiCDC storage-sink directory (CSV or canal-json data files);
* ``canal-json+kafka://host:9092[,host2]/topic[,topic2]`` / ``debezium-json+kafka://...``: changelog topics;
* ``canal-json+file:///dir`` / ``debezium-json+file:///dir``: changelog files, one message per line
  (a file that holds a single pretty-printed message, or a JSON array of messages, works too).

Streams (picked up by Spark structured streaming, offsets in the query's checkpoint):

* storage: Spark's file source in ``binaryFile`` format over globs that cover the optional partition and
  date levels (``<schema>/<table>/<version>/[<partition>/][<date>/]CDC*.{csv,json}``, one stream per
  depth, unioned); only the paths are read by the stream, the files themselves by the parse stage;
* Kafka: Spark's Kafka source (``spark-sql-kafka-0-10``), from the earliest offsets by default;
* changelog files: Spark's file source in ``binaryFile`` format over the directory.

Per micro-batch the job turns the stream's rows into :data:`PARSED_DDL` rows on the executors with
:func:`parse_storage_files` / :func:`parse_changelog`, whose closures hold only plain data (table
definitions, options, the root path). Every row is either a change event (the
:data:`~avro_registry_sink.changes.CHANGE_DDL` columns) or a bad line/message (``error``: JSON with the
location and the reason), plus the order columns that keep per-key order in the output:
``order_version`` (storage: the version directory), ``order_file`` (storage: partition/date/file number;
Kafka: topic/partition; files: the file), ``order_line`` (line or offset).

Changelog table definitions live on the driver in a :class:`TableCatalog`: DDL events are applied
with :func:`~avro_registry_sink.tabledef.ddl.apply_ddl` and start a new version at the DDL's commit
ts; each DML uses the newest version at or before its commit ts. The catalog is saved in the checkpoint
directory so that a restarted job knows the versions the topic's earlier DDLs created.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

from avro_registry_sink.changes import ChangeEvent, split_key_change
from avro_registry_sink.errors import AvroSinkError, ConfigError, SourceError
from avro_registry_sink.table import TableDef

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from avro_registry_sink.sources.csv_format import CsvOptions
    from avro_registry_sink.sources.storage import DataFile, StorageLayout

__all__ = [
    "MESSAGES_DDL",
    "ORDER_COLUMNS",
    "PARSED_DDL",
    "PEEKED_DDL",
    "SourceSpec",
    "StorageFiles",
    "TableCatalog",
    "changelog_messages",
    "changelog_stream",
    "complete_table",
    "infer_table",
    "parse_changelog",
    "parse_source",
    "parse_storage_files",
    "peek_changelog",
    "pick_version",
    "resolve_storage_files",
    "storage_stream",
]

#: The parse stage's output: change columns, order columns and ``error`` (JSON) for bad input.
PARSED_DDL = (
    "schema STRING, table STRING, table_version BIGINT, op STRING, commit_ts BIGINT, before STRING, "
    "after STRING, source STRING, order_version BIGINT, order_file STRING, order_line BIGINT, error STRING"
)
ORDER_COLUMNS = ("order_version", "order_file", "order_line")

#: Raw changelog messages of a batch (Kafka records or lines of files).
MESSAGES_DDL = "message STRING, source STRING, order_file STRING, order_line BIGINT"

#: The peek stage: what each message is, before any table definition is needed.
PEEKED_DDL = (
    "message STRING, source STRING, order_file STRING, order_line BIGINT, kind STRING, schema STRING, "
    "table STRING, commit_ts BIGINT, error STRING"
)

_FORMATS = ("canal-json", "debezium-json")
_STORAGE_DEPTHS = (3, 4, 5)  # <schema>/<table>/<version>/ [+ partition] [+ date]


# --------------------------------------------------------------------------------------------------
# Source URIs


@dataclass(frozen=True)
class SourceSpec:
    """A parsed ``--source``: ``kind`` is ``storage``, ``canal-json`` or ``debezium-json``."""

    kind: str
    transport: str  # "file" or "kafka"
    path: str | None = None
    brokers: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_storage(self) -> bool:
        return self.kind == "storage"

    @property
    def is_kafka(self) -> bool:
        return self.transport == "kafka"

    def check(self) -> None:
        """Raise :class:`ConfigError` when a directory source does not exist (before any Spark work)."""
        if not self.is_kafka and (not self.path or not Path(self.path).is_dir()):
            raise ConfigError(f"Source directory {self.path!r} does not exist.", option="source", value=self.path)

    def describe(self) -> str:
        if self.is_kafka:
            return f"{self.kind}+kafka://{','.join(self.brokers)}/{','.join(self.topics)}"
        return f"{self.kind}://{self.path}" if self.kind == "storage" else f"{self.kind}+file://{self.path}"


def parse_source(text: str) -> SourceSpec:
    """Parse a ``--source`` value (see the module docs).

    >>> parse_source("canal-json+kafka://127.0.0.1:9092/cdc").topics
    ('cdc',)
    >>> parse_source("/data/ticdc").kind
    'storage'
    """
    if "://" not in text:
        return SourceSpec(kind="storage", transport="file", path=str(Path(text).resolve()))
    split = urlsplit(text)
    scheme = split.scheme.lower()
    query = dict(parse_qsl(split.query, keep_blank_values=True))
    if scheme in ("storage", "file", "local"):
        path = unquote(split.netloc + split.path) if scheme != "file" else unquote(split.path)
        if not path:
            raise ConfigError(f"Invalid source {text!r}: no directory.", option="source", value=text)
        return SourceSpec(kind="storage", transport="file", path=str(Path(path).resolve()), options=query)
    kind, _, transport = scheme.partition("+")
    if kind not in _FORMATS or transport not in ("kafka", "file"):
        raise ConfigError(
            f"Invalid source {text!r}: expected storage:///dir (or a plain directory), canal-json+kafka://host:port/topic, "
            "canal-json+file:///dir, debezium-json+kafka://host:port/topic or debezium-json+file:///dir.",
            option="source", value=text,
        )
    if transport == "kafka":
        brokers = tuple(b for b in split.netloc.split(",") if b)
        topics = tuple(t for t in unquote(split.path.lstrip("/")).split(",") if t)
        if not brokers or not topics:
            raise ConfigError(f"Invalid source {text!r}: name the brokers and at least one topic.", option="source",
                              value=text)
        return SourceSpec(kind=kind, transport="kafka", brokers=brokers, topics=topics, options=query)
    path = unquote(split.netloc + split.path)
    if not path:
        raise ConfigError(f"Invalid source {text!r}: no directory.", option="source", value=text)
    return SourceSpec(kind=kind, transport="file", path=str(Path(path).resolve()), options=query)


# --------------------------------------------------------------------------------------------------
# Small helpers


def _path_of(uri: str) -> str:
    """A local path from Spark's ``file:/...`` URI."""
    if uri.startswith("file:"):
        return unquote(urlsplit(uri).path)
    return uri


def _error_json(location: str, reason: str, message: str, **extra: Any) -> str:
    return json.dumps({"source": location, "reason": reason, "message": message,
                       **{k: v for k, v in extra.items() if v is not None}}, ensure_ascii=False, default=str)


def _source_error_json(err: SourceError) -> str:
    ctx = err.context
    location = str(ctx.get("source") or "")
    line = ctx.get("line")
    if line and not location.endswith(f":{line}"):
        location = f"{location}:{line}"
    return _error_json(location, str(ctx.get("reason") or err.message), err.message,
                       table=ctx.get("table"), column=ctx.get("column"))


def _line_of(source: str) -> int:
    head, _, tail = source.rpartition(":")
    return int(tail) if head and tail.isdigit() else 0


def _arrow_schema(ddl: str) -> Any:
    import pyarrow as pa

    types = {"STRING": pa.string(), "BIGINT": pa.int64(), "INT": pa.int32()}
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
                                              enumerate(zip(*chunk))], names=names)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_arrays([pa.array(col, type=schema.field(i).type) for i, col in
                                          enumerate(zip(*chunk))], names=names)


def _event_row(event: ChangeEvent, version: int, order: tuple[int, str, int]) -> tuple[Any, ...]:
    row = event.to_row()
    # the plan of a row is looked up by (schema, table, table_version): the definition's version
    return (*row[:2], version, *row[3:], *order, None)


def _error_row(error_json: str, order: tuple[int, str, int], schema: str | None = None,
               table: str | None = None, source: str = "") -> tuple[Any, ...]:
    return (schema, table, None, None, None, None, None, source, *order, error_json)


# --------------------------------------------------------------------------------------------------
# Table definitions


def complete_table(table: TableDef, hint: TableDef | None) -> TableDef:
    """Fill in what a storage-sink schema file cannot say from a definition given by the user.

    Schema files record neither ENUM/SET members nor unique keys (``shared/reference`` §2): members are
    taken from the hint's column of the same name, and a table with no primary key takes the hint's
    unique keys that only name its columns. Everything else stays as the schema file says.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType
    >>> base = TableDef(schema_name="s", table="t", columns=(ColumnDef(name="e", type=MySQLType.ENUM, nullable=False),))
    >>> hint = base.model_copy(update={"columns": (ColumnDef(name="e", type=MySQLType.ENUM, elements=("a", "b")),),
    ...                                "unique_keys": (("e",),)})
    >>> t = complete_table(base, hint); t.columns[0].elements, t.unique_keys, t.columns[0].nullable
    (('a', 'b'), (('e',),), False)
    """
    if hint is None:
        return table
    by_name = {c.name.lower(): c for c in hint.columns}
    columns = []
    changed = False
    for col in table.columns:
        other = by_name.get(col.name.lower())
        if other is not None and not col.elements and other.elements and col.type == other.type:
            col = col.model_copy(update={"elements": other.elements})
            changed = True
        columns.append(col)
    update: dict[str, Any] = {}
    if changed:
        update["columns"] = tuple(columns)
    if not table.primary_key and not table.unique_keys:
        names = {c.name.lower() for c in table.columns}
        if hint.primary_key and all(k.lower() in names for k in hint.primary_key):
            update["primary_key"] = hint.primary_key
        keys = tuple(uk for uk in hint.unique_keys if all(k.lower() in names for k in uk))
        if keys:
            update["unique_keys"] = keys
    return table.model_copy(update=update) if update else table


def _table_to_json(table: TableDef) -> dict[str, Any]:
    data = table.model_dump(mode="json")
    for col, raw in zip(table.columns, data["columns"]):
        if isinstance(col.default, bytes):
            raw["default"] = {"hex": col.default.hex()}
    return data


def _table_from_json(data: Mapping[str, Any]) -> TableDef:
    data = dict(data)
    cols = []
    for raw in data.get("columns", []):
        raw = dict(raw)
        if isinstance(raw.get("default"), dict) and "hex" in raw["default"]:
            raw["default"] = bytes.fromhex(raw["default"]["hex"])
        cols.append(raw)
    data["columns"] = cols
    return TableDef.model_validate(data)


class TableCatalog:
    """Versions of every changelog table, on the driver: ``(schema, table) -> [(version, TableDef)]``.

    Seeded with the user's definitions (``--tables``, version 0 unless they say otherwise), grown by DDL
    events (each one a new version at its commit ts; a DDL at or below the newest version is already
    applied and skipped, so a replayed batch changes nothing) and by definitions inferred from the first
    message of a table nothing else describes. ``path`` makes it durable (JSON, replaced atomically).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, seed: Iterable[TableDef] = ()) -> None:
        self.path = Path(path) if path is not None else None
        self._versions: dict[tuple[str, str], list[tuple[int, TableDef]]] = {}
        self._dropped: dict[tuple[str, str], int] = {}
        self.notes: list[str] = []
        if self.path is not None and self.path.exists():
            self._load()
        for table in seed:
            key = (table.schema_name, table.table)
            if key not in self._versions:
                self._versions[key] = [(table.version, table)]

    # -- persistence -----------------------------------------------------------------------------

    def _load(self) -> None:
        assert self.path is not None
        data = json.loads(self.path.read_text(encoding="utf-8"))
        for entry in data.get("tables", []):
            table = _table_from_json(entry)
            self._versions.setdefault((table.schema_name, table.table), []).append((table.version, table))
        for entry in data.get("dropped", []):
            self._dropped[(entry["schema"], entry["table"])] = int(entry["commit_ts"])
        for versions in self._versions.values():
            versions.sort(key=lambda item: item[0])

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "tables": [_table_to_json(t) for key in sorted(self._versions) for _, t in self._versions[key]],
            "dropped": [{"schema": s, "table": t, "commit_ts": ts} for (s, t), ts in sorted(self._dropped.items())],
        }
        temp = self.path.with_name(self.path.name + ".tmp")
        temp.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
        os.replace(temp, self.path)

    # -- lookups -----------------------------------------------------------------------------------

    def known(self) -> set[tuple[str, str]]:
        return set(self._versions)

    def latest(self, schema: str, table: str) -> TableDef | None:
        versions = self._versions.get((schema, table))
        return versions[-1][1] if versions else None

    def history(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[tuple[int, TableDef]]]:
        """Plain data for the executors: the versions of the given tables."""
        return {key: list(self._versions[key]) for key in keys if key in self._versions}

    def versions_between(self, schema: str, table: str, low: int, high: int) -> list[TableDef]:
        """The definitions DMLs with commit ts in ``[low, high]`` use."""
        versions = self._versions.get((schema, table), [])
        out = []
        for i, (version, definition) in enumerate(versions):
            nxt = versions[i + 1][0] if i + 1 < len(versions) else None
            if (nxt is None or nxt > low) and (version <= high or i == 0):
                out.append(definition)
        return out

    # -- changes -----------------------------------------------------------------------------------

    def add(self, table: TableDef) -> bool:
        """Add a version; ``False`` when it is not newer than what is known."""
        key = (table.schema_name, table.table)
        versions = self._versions.setdefault(key, [])
        if versions and table.version <= versions[-1][0]:
            return False
        if versions and versions[-1][1].model_copy(update={"version": table.version}) == table:
            return False  # same definition (TRUNCATE, index changes): keep the current version
        versions.append((table.version, table))
        return True

    def apply(self, ddl: Any) -> bool:
        """Apply one :class:`~avro_registry_sink.sources.canal.DdlEvent`; returns whether anything changed."""
        if not ddl.table:
            return False  # database-level DDL
        key = (ddl.schema, ddl.table)
        current = self.latest(*key)
        if current is not None and ddl.commit_ts <= current.version:
            return False  # already applied (a replayed batch)
        if ddl.tables:  # debezium tableChanges: the table as it is after the DDL
            changed = False
            for table in ddl.tables:
                changed |= self.add(table.model_copy(update={"version": ddl.commit_ts}))
            return changed
        query = " ".join(ddl.query.split())
        head = query.upper()
        from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl

        try:
            if head.startswith("CREATE TABLE"):
                created = [t for t in parse_ddl(ddl.query, default_schema=ddl.schema)
                           if t.table.lower() == ddl.table.lower()]
                if not created:
                    raise SourceError(f"{ddl.source}: CREATE TABLE does not define {ddl.schema}.{ddl.table}.",
                                      source=ddl.source, reason="no table in DDL")
                self._dropped.pop(key, None)
                return self.add(created[0].model_copy(update={"schema_name": ddl.schema, "table": ddl.table,
                                                              "version": ddl.commit_ts}))
            if current is None:
                self.notes.append(
                    f"{ddl.source}: DDL for {ddl.schema}.{ddl.table} before any definition of it is known; the "
                    "table will be described by its messages (or give it with --tables)."
                )
                return False
            updated = apply_ddl(current, ddl.query)
        except AvroSinkError as exc:
            if isinstance(exc, SourceError):
                raise
            raise SourceError(f"{ddl.source}: cannot apply DDL to {ddl.schema}.{ddl.table}: {exc.message}",
                              source=ddl.source, reason=exc.message) from exc
        if updated is None:  # DROP TABLE / DROP DATABASE
            self._dropped[key] = ddl.commit_ts
            return True
        if (updated.schema_name, updated.table) != key:  # RENAME: the old name is gone
            self._dropped[key] = ddl.commit_ts
        return self.add(updated.model_copy(update={"version": ddl.commit_ts}))


def pick_version(history: list[tuple[int, TableDef]], commit_ts: int) -> TableDef:
    """The definition a DML at ``commit_ts`` was written with: the newest version at or before it."""
    chosen = history[0][1]
    for version, definition in history:
        if version <= commit_ts:
            chosen = definition
        else:
            break
    return chosen


# --------------------------------------------------------------------------------------------------
# Storage sink


def storage_stream(spark: SparkSession, root: str, *, max_files_per_trigger: int | None = None) -> DataFrame:
    """New data files under a storage-sink ``root``: a streaming DataFrame of ``path`` (file URIs)."""
    root = str(Path(root).resolve())
    streams = []
    for depth in _STORAGE_DEPTHS:
        glob = root.rstrip("/") + "/" + "/".join(["*"] * depth) + "/CDC*.{csv,json}"
        reader = spark.readStream.format("binaryFile").schema(
            "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
        )
        if max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
        streams.append(reader.load(glob).select("path"))
    out = streams[0]
    for other in streams[1:]:
        out = out.unionByName(other)
    return out


def _data_file(layout: StorageLayout, relpath: str) -> DataFile | None:
    public = getattr(layout, "data_file", None)
    if callable(public):
        return public(relpath)
    return layout._parse_data_path(relpath, tuple(relpath.split("/")))  # noqa: SLF001 - see report


@dataclass
class StorageFiles:
    """A batch's data files, resolved on the driver."""

    files: list[tuple[str, tuple[str, str, int], tuple[int, str, int]]]  # relpath, table key, order head
    tables: dict[tuple[str, str, int], TableDef]
    errors: list[str]  # error JSON for files that cannot be read at all
    numbers: dict[str, int] = field(default_factory=dict)  # newest file number per data directory


def resolve_storage_files(
    layout: StorageLayout,
    paths: Iterable[str],
    hints: Mapping[tuple[str, str], TableDef] | None = None,
    completed: dict[tuple[str, str, int], tuple[TableDef, TableDef | None, TableDef]] | None = None,
) -> StorageFiles:
    """Locate a batch's files in the storage tree and pick each one's table definition (driver side).

    ``completed`` (owned by the caller, kept across batches) remembers each version's definition after
    :func:`complete_table`, so every batch hands the schema manager the very same object and it recognises
    a known table version by identity instead of comparing definitions field by field.
    """
    completed = {} if completed is None else completed
    root = str(layout.root.resolve())
    tables_all = layout.table_versions()
    hints = hints or {}
    files = []
    tables: dict[tuple[str, str, int], TableDef] = {}
    errors: list[str] = []
    numbers: dict[str, int] = {}
    for uri in sorted(set(paths)):
        relpath = os.path.relpath(_path_of(uri), root).replace(os.sep, "/")
        data_file = _data_file(layout, relpath)
        if data_file is None:
            errors.append(_error_json(relpath, "not a data file", f"{relpath}: not a storage-sink data file path."))
            continue
        try:
            table = layout.table_for(data_file, tables_all)
        except SourceError as exc:
            errors.append(_source_error_json(exc))
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
    return StorageFiles(files=files, tables=tables, errors=errors, numbers=numbers)


def parse_storage_files(
    files_df: DataFrame,
    root: str,
    files: StorageFiles,
    csv_options: CsvOptions | None,
) -> DataFrame:
    """Executor stage: ``files_df`` (column ``relpath``) -> :data:`PARSED_DDL` rows."""
    by_relpath = {relpath: (key, order) for relpath, key, order in files.files}
    tables = dict(files.tables)
    root = str(root)
    options = csv_options

    def parse(batches: Iterator[Any]) -> Iterator[Any]:
        from avro_registry_sink.sources.storage import StorageLayout, read_data_file

        layout = StorageLayout(root)

        def rows() -> Iterator[tuple[Any, ...]]:
            for batch in batches:
                for relpath in batch.column(0).to_pylist():
                    key, order = by_relpath[relpath]
                    table = tables[key]
                    data_file = _data_file(layout, relpath)
                    try:
                        events, errors = read_data_file(data_file, table, options)
                    except Exception as exc:  # noqa: BLE001 - one unreadable file must not stop the others
                        events, errors = [], [SourceError(f"{relpath}: cannot be read: {type(exc).__name__}: {exc}",
                                                          source=relpath, line=0, reason=f"{type(exc).__name__}: {exc}")]
                    for event in events:
                        for part in split_key_change(event, table):
                            yield _event_row(part, table.version, (order[0], order[1], _line_of(event.source)))
                    for err in errors:
                        line = int(err.context.get("line") or 0)
                        yield _error_row(_source_error_json(err), (order[0], order[1], line),
                                         table.schema_name, table.table, relpath)

        yield from _batches(rows(), PARSED_DDL)

    return files_df.mapInArrow(parse, PARSED_DDL)


# --------------------------------------------------------------------------------------------------
# Changelogs: canal-json / debezium-json


def changelog_stream(
    spark: SparkSession,
    spec: SourceSpec,
    *,
    max_offsets_per_trigger: int | None = None,
    max_files_per_trigger: int | None = None,
) -> DataFrame:
    """The raw stream of a changelog source (Kafka records, or the files of a directory)."""
    if spec.is_kafka:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", ",".join(spec.brokers))
            .option("subscribe", ",".join(spec.topics))
            .option("startingOffsets", spec.options.get("startingOffsets", "earliest"))
            .option("failOnDataLoss", spec.options.get("failOnDataLoss", "true"))
        )
        if max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", int(max_offsets_per_trigger))
        for name, value in spec.options.items():
            if name.startswith("kafka."):
                reader = reader.option(name, value)
        return reader.load().select("value", "topic", "partition", "offset")
    reader = spark.readStream.format("binaryFile").schema(
        "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
    )
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
    pattern = spec.options.get("pathGlobFilter")
    if pattern:
        reader = reader.option("pathGlobFilter", pattern)
    return reader.load(spec.path).select("path")


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


def changelog_messages(batch_df: DataFrame, spec: SourceSpec) -> DataFrame:
    """A batch of the raw stream as :data:`MESSAGES_DDL` rows (executor side for files)."""
    from pyspark.sql import functions as F

    if spec.is_kafka:
        return batch_df.select(
            F.col("value").cast("string").alias("message"),
            F.format_string("%s/%d@%d", "topic", "partition", "offset").alias("source"),
            F.format_string("%s/%010d", "topic", "partition").alias("order_file"),
            F.col("offset").alias("order_line"),
        )
    root = str(Path(spec.path or ".").resolve())

    def split(batches: Iterator[Any]) -> Iterator[Any]:
        def rows() -> Iterator[tuple[Any, ...]]:
            for batch in batches:
                for uri in batch.column(0).to_pylist():
                    path = _path_of(uri)
                    name = os.path.relpath(path, root).replace(os.sep, "/")
                    try:
                        with open(path, "rb") as fh:
                            text = fh.read().decode("utf-8")
                    except (OSError, UnicodeDecodeError):
                        yield (None, f"{name}:0", name, 0)  # reported by the peek as an empty message
                        continue
                    for line, message in _split_messages(text):
                        yield (message, f"{name}:{line}", name, line)

        yield from _batches(rows(), MESSAGES_DDL)

    return batch_df.select("path").mapInArrow(split, MESSAGES_DDL)


def _peek_canal(msg: Mapping[str, Any]) -> tuple[str, str | None, str | None, int | None]:
    from avro_registry_sink.sources.canal import commit_ts_from_ms

    kind = msg.get("type")
    if kind == "TIDB_WATERMARK":
        return "watermark", None, None, None
    database, table = msg.get("database"), msg.get("table")
    tidb = msg.get("_tidb")
    commit_ts: int | None = None
    if isinstance(tidb, Mapping) and tidb.get("commitTs") is not None:
        commit_ts = int(tidb["commitTs"])
    elif msg.get("es") is not None:
        commit_ts = commit_ts_from_ms(int(msg["es"]))
    if msg.get("isDdl"):
        return "ddl", database, table, commit_ts
    if not isinstance(database, str) or not isinstance(table, str):
        raise SourceError("canal-json message without string 'database' and 'table'.", reason="no database/table")
    if commit_ts is None:
        raise SourceError("canal-json message has neither _tidb.commitTs nor es, so no commit time.",
                          reason="no commit ts")
    return "dml", database, table, commit_ts


def _peek_debezium(msg: Mapping[str, Any]) -> tuple[str, str | None, str | None, int | None]:
    from avro_registry_sink.sources.canal import commit_ts_from_ms

    payload: Any = msg
    if "payload" in msg and ("schema" in msg or "op" not in msg):
        payload = msg["payload"]
    if payload is None:
        return "skip", None, None, None
    if not isinstance(payload, Mapping):
        raise SourceError("debezium payload is not a JSON object.", reason="payload not an object")
    src = payload.get("source") if isinstance(payload.get("source"), Mapping) else {}
    commit_ts: int | None = None
    if src.get("commit_ts") is not None:
        commit_ts = int(src["commit_ts"])
    elif src.get("ts_ms") or payload.get("ts_ms"):
        commit_ts = commit_ts_from_ms(int(src.get("ts_ms") or payload.get("ts_ms")))
    op = payload.get("op")
    if op == "m":
        return "watermark", None, None, commit_ts
    if op is None or op == "t":
        return "ddl", src.get("db"), src.get("table"), commit_ts
    db, table = src.get("db"), src.get("table")
    if not isinstance(db, str) or not isinstance(table, str) or not table:
        raise SourceError("debezium message without source.db and source.table.", reason="no db/table")
    if commit_ts is None:
        raise SourceError("debezium message has no source.commit_ts, source.ts_ms or ts_ms.", reason="no commit ts")
    return "dml", db, table, commit_ts


def peek_changelog(messages: DataFrame, fmt: str) -> DataFrame:
    """Executor stage 1: classify every message (``dml``/``ddl``/``watermark``/``skip``/``error``).

    The message text is kept for every row (stage 2 parses the DMLs); only DDLs, per-table commit-ts
    ranges and one message per table reach the driver.
    """
    peek = _peek_canal if fmt == "canal-json" else _peek_debezium

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        def rows() -> Iterator[tuple[Any, ...]]:
            for batch in batches:
                cols = [batch.column(i).to_pylist() for i in range(4)]
                for message, source, order_file, order_line in zip(*cols):
                    if message is None or not message.strip():
                        kind = "skip" if fmt == "debezium-json" else "error"
                        err = None if kind == "skip" else _error_json(source, "empty message",
                                                                      f"{source}: empty canal-json message.")
                        yield (message, source, order_file, order_line, kind, None, None, None, err)
                        continue
                    try:
                        msg = json.loads(message)
                        if msg is None and fmt == "debezium-json":  # Debezium's tombstone after a delete
                            yield (message, source, order_file, order_line, "skip", None, None, None, None)
                            continue
                        if not isinstance(msg, Mapping):
                            raise SourceError("expected a JSON object.", reason="not an object")
                        kind, schema, table, commit_ts = peek(msg)
                        yield (message, source, order_file, order_line, kind, schema, table, commit_ts, None)
                    except Exception as exc:  # noqa: BLE001 - reported as bad input, never fails the batch
                        if isinstance(exc, SourceError):
                            reason, text = exc.context.get("reason"), exc.message
                        elif isinstance(exc, json.JSONDecodeError):
                            reason = text = f"not valid JSON ({exc})"
                        else:
                            reason = text = f"{type(exc).__name__}: {exc}"
                        yield (message, source, order_file, order_line, "error", None, None, None,
                               _error_json(source, str(reason), f"{source}: {text}"))

        yield from _batches(rows(), PEEKED_DDL)

    return messages.mapInArrow(run, PEEKED_DDL)


def parse_changelog(
    peeked: DataFrame, fmt: str, history: Mapping[tuple[str, str], list[tuple[int, TableDef]]]
) -> DataFrame:
    """Executor stage 2: the DML messages of known tables -> :data:`PARSED_DDL` rows.

    ``history`` holds each table's versions; a message is read with the newest version at or before
    its commit ts and its events carry that version.
    """
    history = {key: list(versions) for key, versions in history.items()}

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        from avro_registry_sink.sources.canal import events_from_canal
        from avro_registry_sink.sources.debezium import events_from_debezium

        def rows() -> Iterator[tuple[Any, ...]]:
            for batch in batches:
                data = batch.to_pydict()
                for i in range(batch.num_rows):
                    message, source = data["message"][i], data["source"][i]
                    schema, table_name, commit_ts = data["schema"][i], data["table"][i], data["commit_ts"][i]
                    # commit order first: the same row may sit in several input partitions (ts dispatch)
                    order = (commit_ts, data["order_file"][i], data["order_line"][i])
                    versions = history.get((schema, table_name))
                    if not versions:
                        yield _error_row(_error_json(
                            source, "unknown table",
                            f"{source}: no definition of {schema}.{table_name}: its messages carry no usable type "
                            "information; give its CREATE TABLE with --tables, or start from the topic's DDL.",
                            table=f"{schema}.{table_name}"), order, schema, table_name, source)
                        continue
                    table = pick_version(versions, commit_ts)
                    try:
                        if fmt == "canal-json":
                            got = events_from_canal(message, table=table, table_version=table.version, source=source)
                        else:
                            got = events_from_debezium(message, tables={(schema, table_name): table},
                                                       table_version=table.version, source=source)
                    except SourceError as exc:
                        yield _error_row(_source_error_json(exc), order, schema, table_name, source)
                        continue
                    except Exception as exc:  # noqa: BLE001 - a message the reader chokes on is bad input too
                        reason = f"{type(exc).__name__}: {exc}"
                        yield _error_row(_error_json(source, reason, f"{source}: cannot be read: {reason}",
                                                     table=f"{schema}.{table_name}"), order, schema, table_name,
                                         source)
                        continue
                    for event in got:
                        if isinstance(event, ChangeEvent):
                            for part in split_key_change(event, table):
                                yield _event_row(part, table.version, order)

        yield from _batches(rows(), PARSED_DDL)

    return peeked.filter("kind = 'dml'").mapInArrow(run, PARSED_DDL)


def infer_table(fmt: str, message: str, source: str) -> TableDef | None:
    """A best-effort definition from one DML message (canal-json's ``mysqlType``/``pkNames``)."""
    if fmt != "canal-json":
        return None
    from avro_registry_sink.sources.canal import load_message

    try:
        from avro_registry_sink.tabledef.canal import table_from_canal
    except ImportError:
        return None
    try:
        return table_from_canal(load_message(message, source))
    except Exception:  # noqa: BLE001 - reported as "unknown table" by the parse stage
        return None

