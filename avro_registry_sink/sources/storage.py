"""A TiCDC storage-sink directory (cloud storage / NFS sink) read as table versions and change events.

The layout (tiflow ``pkg/sink/cloudstorage``; ``shared/reference/ticdc-inputs.md`` §1-§2)::

    <root>/metadata                                                {"checkpoint-ts":N}
    <root>/<schema>/meta/schema_<ddlCommitTs>_<crc>.json           database DDL (CREATE DATABASE)
    <root>/<schema>/<table>/meta/schema_<tableVersion>_<crc>.json   table definition per version
    <root>/<schema>/<table>/<tableVersion>/[<partition>/][<date>/]CDC<num>.<csv|json>
    <root>/<schema>/<table>/<tableVersion>/[<partition>/][<date>/]meta/CDC.index

* Schema files are recognised by ``meta/schema_<digits>_<10 digits>.json``; the version in the name
  must equal the file's ``TableVersion`` and the checksum in the name the checksum of its content
  (:func:`~avro_registry_sink.tabledef.storage.check_schema_file_name`, as TiCDC's own consumer checks).
  A mismatch, like unreadable JSON, raises :class:`SourceError`: without a trustworthy definition no
  data of that version can be read. A file rewritten in place is read again (its listed size or
  modification time changed) and checked again; if its table definition differs from the one this
  layout read before although the checksum still matches (the checksum does not cover the column
  order), it is refused too.
* Data files are ``CDC`` + 6 to 20 digits + ``.csv`` or ``.json`` (canal-json). Numbers restart at 1
  in every date directory. A single directory between the version and the file is a date when it
  looks like ``YYYY-MM-DD`` or ``YYYY-MM``, else a partition id; pass ``date_separator="year"`` for
  ``YYYY`` date directories (TiCDC's consumer is told the separator too).
* :meth:`StorageLayout.data_files` orders files as TiCDC's storage consumer does: table version,
  partition, date, schema, table, file number. Like that consumer it skips data files whose table
  version has no schema file yet (the schema file is written first; it appears on a later scan) and
  it does not need ``CDC.index``.
* A schema file with a ``Query`` is a DDL: it starts a new table version, and every event read from a
  data file carries its directory's version (:attr:`ChangeEvent.table_version`).
* Schema files do not record ENUM/SET members: each table version takes those of its own definition
  (:func:`~avro_registry_sink.tabledef.catalog.complete_versions`: its CREATE TABLE, else the version
  before it or ``--tables`` with its DDL applied); what cannot be known is said in :meth:`StorageLayout.take_notes`.

Events' ``source`` is ``"<path relative to root>:<line>"``. The commit ts of CSV rows needs
``include-commit-ts=true``; without it events have ``commit_ts=0`` (see
:mod:`~avro_registry_sink.formats.csv`). canal-json lines carry ``_tidb.commitTs`` with
``enable-tidb-extension=true``; without it the commit ts is unknown and ``es << 18`` is used
(millisecond precision, logical part 0; ``extra["commit_ts_exact"] = False``).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avro_registry_sink.errors import SourceError
from avro_registry_sink.storage_fs import StorageURI, parse_storage_uri

if TYPE_CHECKING:  # pragma: no cover
    from avro_registry_sink.changes import ChangeEvent
    from avro_registry_sink.formats.canal_json import DdlEvent
    from avro_registry_sink.formats.csv import CsvOptions
    from avro_registry_sink.table import TableDef
    from avro_registry_sink.tabledef.catalog import MembersNote

# Imported inside functions, for start-up: the storage tree's DDL files are parsed only where a tree
# carries them; the formats, the table model and the catalog only where data or schema files are read. Listing
# a tree needs none of them: Spark's planning process of the storage source (a new Python process for each
# query, which the first batch waits for) imports this module and nothing heavier (0.05 s against 0.7 s).

__all__ = [
    "DataFile",
    "DateSeparator",
    "SchemaFile",
    "StorageLayout",
    "data_file_name",
    "read_data_file",
]

_SCHEMA_NAME = re.compile(r"schema_(?P<version>\d+)_(?P<crc>\d{10})\.json")  # tabledef.storage.SCHEMA_FILE_NAME
_DATA_NAME = re.compile(r"CDC(?P<number>\d{6,20})\.(?P<ext>csv|json)")
_FULL_DATE = re.compile(r"\d{4}-\d{2}(?:-\d{2})?")
_YEAR = re.compile(r"\d{4}")
_DIGITS = re.compile(r"\d+")


class DateSeparator(str, Enum):
    """TiCDC's ``date-separator``: how data files are grouped by flush date."""

    NONE = "none"
    YEAR = "year"
    MONTH = "month"
    DAY = "day"


def data_file_name(number: int, extension: str = "csv", width: int = 20) -> str:
    """TiCDC's data file name (``file-index-digit`` defaults to 20; values outside 6..20 become 20).

    >>> data_file_name(2)
    'CDC00000000000000000002.csv'
    """
    if not 6 <= width <= 20:
        width = 20
    return f"CDC{number:0{width}d}.{extension}"


@dataclass(frozen=True)
class DataFile:
    """One data file of a table version, located in the storage tree."""

    path: Path | str  # a local path, or the file's Hadoop URI on an object store (read through Spark)
    schema: str
    table: str
    version: int
    partition: int | None
    date: str | None
    number: int
    format: str  # "csv" or "json" (canal-json)
    relpath: str = ""  # posix path relative to the root: the file's identity for ``since``

    @property
    def sort_key(self) -> tuple[int, int, str, str, str, int]:
        """TiCDC's storage-consumer order: version, partition, date, schema, table, number."""
        return (self.version, self.partition or 0, self.date or "", self.schema, self.table, self.number)


@dataclass(frozen=True)
class SchemaFile:
    """A table (or database, ``table == ""``) schema file and the DDL fields read from it."""

    path: Path | str
    relpath: str
    schema: str
    table: str
    version: int
    checksum: str
    query: str
    ddl_type: int


class StorageLayout:
    """Discover and read a TiCDC storage-sink directory, on any store :mod:`~avro_registry_sink.storage_fs` reaches.

    ``root`` is a local path or a storage URI (``s3://bucket/prefix?endpoint=...``, ``gcs://``, ...): the
    tree is listed and its ``metadata``, index and schema files read through
    :class:`~avro_registry_sink.storage_fs.StoreFS`; data files are read by Spark on the executors.

    >>> # layout = StorageLayout("/data/ticdc")
    >>> # tables = layout.table_versions()
    >>> # for f in layout.data_files():
    >>> #     events, errors = layout.read_data_file(f, tables[(f.schema, f.table, f.version)], CsvOptions())
    """

    def __init__(self, root: Path | str | StorageURI, *, date_separator: DateSeparator | str | None = None) -> None:
        self.location = root if isinstance(root, StorageURI) else parse_storage_uri(str(root))
        self.store = self.location.filesystem()
        #: a local directory as a Path; elsewhere the tree's Hadoop URI
        self.root: Path | str = Path(self.location.path) if self.location.is_local else self.location.hadoop_uri()
        self.date_separator = DateSeparator(date_separator) if date_separator is not None else None
        #: relpath -> (listing stamp, what was read): a file is read again when its stamp changes
        self._schema_cache: dict[str, tuple[tuple[int | None, int | None], tuple[SchemaFile, TableDef | None]]] = {}
        #: set by refresh(): the walks use it until the next refresh
        self._listing: list[tuple[str, tuple[int | None, int | None]]] | None = None
        #: (schema, table) -> (the versions and hint they were completed from, the completed versions)
        self._members: dict[tuple[str, str], tuple[tuple[Any, ...], list[TableDef | None]]] = {}
        self._notes: list[MembersNote] = []
        self._noted: set[str] = set()

    def __repr__(self) -> str:
        return f"StorageLayout({str(self.location)!r})"

    # ---------------------------------------------------------------------------------------------
    # walking

    def refresh(self) -> frozenset[str]:
        """List the tree once and use that listing until the next refresh (a streaming job lists once per
        batch); returns every file's relative path."""
        self._listing = self.store.list_files_stamped()
        return frozenset(relpath for relpath, _ in self._listing)

    def listing(self) -> list[tuple[str, tuple[int | None, int | None]]]:
        """The listing of the last :meth:`refresh` (a new one without it): each file's relative path and its
        (size, modification time)."""
        return self._listing if self._listing is not None else self.store.list_files_stamped()

    def _walk(self) -> Iterable[tuple[str, tuple[str, ...]]]:
        """(relative posix path, its parts) of every file under the root, sorted."""
        return [(relpath, parts) for relpath, parts, _ in self._walk_stamped()]

    def _walk_stamped(self) -> list[tuple[str, tuple[str, ...], tuple[int | None, int | None]]]:
        """:meth:`_walk` with each file's listing stamp (size, modification time)."""
        listing = self._listing if self._listing is not None else self.store.list_files_stamped()
        return [(relpath, tuple(relpath.split("/")), stamp) for relpath, stamp in listing]

    def _file_path(self, relpath: str) -> Path | str:
        return self.root / relpath if isinstance(self.root, Path) else self.location.hadoop_uri(relpath)

    # ---------------------------------------------------------------------------------------------
    # schema files

    def schema_files(self) -> list[SchemaFile]:
        """Every table and database schema file, ordered by (version, schema, table)."""
        return [entry[0] for entry in self._schema_entries()]

    def _schema_entries(self) -> list[tuple[SchemaFile, TableDef | None]]:
        entries = []
        for relpath, parts, stamp in self._walk_stamped():
            m = _SCHEMA_NAME.fullmatch(parts[-1])
            if not m or len(parts) not in (3, 4) or parts[-2] != "meta":
                continue
            entries.append(self._schema_entry(relpath, parts, stamp, int(m.group("version")), m.group("crc")))
        entries.sort(key=lambda e: (e[0].version, e[0].schema, e[0].table))
        return entries

    def _schema_entry(
        self, relpath: str, parts: tuple[str, ...], stamp: tuple[int | None, int | None], version: int, crc: str
    ) -> tuple[SchemaFile, TableDef | None]:
        """A schema file as read and checked, from the cache while its listing stamp is the same.

        A file whose stamp changed (rewritten in place) is read and checked again. If it still passes, its
        definition must be the one read before: the same name with another definition would deliver one
        table version under two schemas. The cache keeps the first reading until the file is back to it.
        """
        cached = self._schema_cache.get(relpath)
        if cached is not None and cached[0] == stamp and None not in stamp:
            return cached[1]
        entry = self._load_schema_file(relpath, parts, version, crc)
        if cached is None:
            self._schema_cache[relpath] = (stamp, entry)
            return entry
        (_, before), (schema_file, table) = cached[1], entry
        if table != before:
            raise SourceError(
                f"{relpath}: refused: the file was rewritten after this run read it and now describes "
                f"{_describe_change(before, table)}, yet its name (checksum {crc}) still matches: the checksum does "
                "not cover the column order. Restore the file TiCDC wrote; or, if the change is intended, restart "
                "the run so that it reads the file anew.",
                source=relpath, reason="changed after read",
            )
        self._schema_cache[relpath] = (stamp, (schema_file, before))  # the same definition object as before
        return schema_file, before

    def _load_schema_file(
        self, relpath: str, parts: tuple[str, ...], version: int, crc: str
    ) -> tuple[SchemaFile, TableDef | None]:
        path = self._file_path(relpath)
        try:
            text = self.store.read_text(relpath)
            content = json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise SourceError(f"{relpath}: unreadable schema file ({exc}).", source=relpath, reason=str(exc)) from None
        if not isinstance(content, dict):
            raise SourceError(f"{relpath}: a schema file must hold a JSON object.", source=relpath,
                              reason="not an object")
        from avro_registry_sink.tabledef.storage import (
            check_schema_file_name,
            check_schema_file_version,
            parse_table_schema_file,
        )

        schema_name = parts[0]
        table_name = parts[1] if len(parts) == 4 else ""
        check_schema_file_version(version, content, where=relpath)
        if content.get("Schema") != schema_name or (content.get("Table") or "") != table_name:
            raise SourceError(
                f"{relpath}: the file describes {content.get('Schema')!r}.{content.get('Table')!r} but lies under "
                f"{schema_name}/{table_name or 'meta'}.",
                source=relpath, reason="location mismatch",
            )
        schema_file = SchemaFile(
            path=path, relpath=relpath, schema=schema_name, table=table_name, version=version, checksum=crc,
            query=str(content.get("Query") or ""), ddl_type=int(content.get("Type") or 0),
        )
        if not table_name:
            check_schema_file_name(relpath, content)
            return schema_file, None
        try:
            table = parse_table_schema_file(content)
        except SourceError:
            raise
        except Exception as exc:  # the parser's own errors: keep the location
            raise SourceError(f"{relpath}: invalid table schema file: {exc}", source=relpath,
                              reason=str(exc)) from exc
        check_schema_file_name(relpath, content)  # after parsing: a malformed column is reported as such
        if table.version != version:
            table = table.model_copy(update={"version": version})
        return schema_file, table

    def table_versions(self, hints: Mapping[tuple[str, str], TableDef] | None = None,
                       ) -> dict[tuple[str, str, int], TableDef]:
        """The table definition of every (schema, table, version), ordered by version, each with the ENUM/SET
        members of its own version (see the module doc; ``hints``: ``--tables`` by (schema, table)).

        Raises :class:`SourceError` for a schema file that cannot be trusted (see the module doc).
        """
        out: dict[tuple[str, str, int], TableDef] = {}
        queries: dict[tuple[str, str, int], str] = {}
        for schema_file, table in self._schema_entries():
            if table is None:
                continue
            key = (schema_file.schema, schema_file.table, schema_file.version)
            if key in out and out[key] != table:
                raise SourceError(
                    f"{schema_file.relpath}: two different schema files for {key[0]}.{key[1]} version {key[2]}.",
                    source=schema_file.relpath, reason="conflicting schema files",
                )
            out[key] = table
            queries[key] = schema_file.query
        return self._with_members(out, queries, {}, hints or {})

    def table_versions_and_errors(
        self, hints: Mapping[tuple[str, str], TableDef] | None = None,
    ) -> tuple[dict[tuple[str, str, int], TableDef], dict[tuple[str, str, int], SourceError]]:
        """:meth:`table_versions`, except that a schema file that cannot be read or trusted stops only its
        own (schema, table, version): it is returned among the errors, keyed like the definitions (and the
        DDLs of the versions after it are applied to no earlier definition: what they do not say is unknown)."""
        out: dict[tuple[str, str, int], TableDef] = {}
        queries: dict[tuple[str, str, int], str] = {}
        broken: dict[tuple[str, str, int], SourceError] = {}
        for relpath, parts, stamp in self._walk_stamped():
            m = _SCHEMA_NAME.fullmatch(parts[-1])
            if not m or len(parts) not in (3, 4) or parts[-2] != "meta":
                continue
            key = (parts[0], parts[1] if len(parts) == 4 else "", int(m.group("version")))
            try:
                schema_file, table = self._schema_entry(relpath, parts, stamp, key[2], m.group("crc"))
            except SourceError as exc:
                broken[key] = exc
                continue
            if table is None:
                continue
            if key in out and out[key] != table:
                broken[key] = SourceError(
                    f"{schema_file.relpath}: two different schema files for {key[0]}.{key[1]} version {key[2]}.",
                    source=schema_file.relpath, reason="conflicting schema files",
                )
                continue
            out[key] = table
            queries[key] = schema_file.query
        for key in broken:
            out.pop(key, None)
        ordered = dict(sorted(out.items(), key=lambda item: (item[0][2], item[0][0], item[0][1])))
        return self._with_members(ordered, queries, broken, hints or {}), broken

    def _with_members(self, tables: dict[tuple[str, str, int], TableDef], queries: Mapping[tuple[str, str, int], str],
                      broken: Mapping[tuple[str, str, int], Any], hints: Mapping[tuple[str, str], TableDef],
                      ) -> dict[tuple[str, str, int], TableDef]:
        """``tables`` with each version's ENUM/SET members (:func:`complete_versions`), in the same order.

        The completed definitions of a table are kept while its schema files and hint are the very same
        objects, so that every batch gets the same definition objects (the schema manager recognises a
        known table version by identity)."""
        chains: dict[tuple[str, str], list[tuple[int, TableDef | None]]] = {}
        for (schema, table, version), definition in tables.items():
            chains.setdefault((schema, table), []).append((version, definition))
        for (schema, table, version) in broken:
            if table:
                chains.setdefault((schema, table), []).append((version, None))
        done: dict[tuple[str, str, int], TableDef] = {}
        for chain in chains.values():
            chain.sort(key=lambda item: item[0])
        for key, chain in sorted(chains.items(), key=lambda item: item[1][0][0]):  # a renamed table after its source
            hint = hints.get(key)
            renamed_from = _renamed_from(key, chain[0][0], queries.get((*key, chain[0][0]), ""), done)
            inputs = (hint, renamed_from, *((v, t, queries.get((*key, v), "")) for v, t in chain))
            cached = self._members.get(key)
            if cached is None or len(cached[0]) != len(inputs) or not all(
                    _same(a, b) for a, b in zip(cached[0], inputs, strict=True)):
                from avro_registry_sink.tabledef.catalog import complete_versions

                completed, notes = complete_versions([(t, queries.get((*key, v), "")) for v, t in chain], hint,
                                                     renamed_from)
                cached = self._members[key] = (inputs, completed)
                for note in notes:
                    if note.message not in self._noted:
                        self._noted.add(note.message)
                        self._notes.append(note)
            for (version, _), completed_one in zip(chain, cached[1], strict=True):
                if completed_one is not None:
                    done[(*key, version)] = completed_one
        return {key: done[key] for key in tables}

    def take_notes(self) -> list[MembersNote]:
        """What the ENUM/SET members of the table versions read so far left unknown or assumed, each said once
        (taken: a second call returns only newer notes)."""
        notes, self._notes = self._notes, []
        return notes

    def ddl_events(self) -> list[DdlEvent]:
        """The DDLs recorded in schema files (``Query`` not empty), ordered by commit ts.

        The version of a table created by a DDL is the DDL's commit ts; database DDLs have ``table == ""``.
        """
        from avro_registry_sink.formats.canal_json import DdlEvent

        return [
            DdlEvent(schema=f.schema, table=f.table, query=f.query, commit_ts=f.version, source=f.relpath,
                     kind=str(f.ddl_type))
            for f in self.schema_files()
            if f.query
        ]

    def table_for(self, data_file: DataFile, tables: dict[tuple[str, str, int], TableDef] | None = None) -> TableDef:
        """The definition a data file was written with: its version's, else the newest one before it."""
        tables = self.table_versions() if tables is None else tables
        exact = tables.get((data_file.schema, data_file.table, data_file.version))
        if exact is not None:
            return exact
        older = [v for (s, t, v) in tables if (s, t) == (data_file.schema, data_file.table) and v <= data_file.version]
        if not older:
            raise SourceError(
                f"{data_file.relpath}: no schema file for {data_file.schema}.{data_file.table} at or before version "
                f"{data_file.version}.",
                source=data_file.relpath, reason="no schema file",
            )
        return tables[(data_file.schema, data_file.table, max(older))]

    # ---------------------------------------------------------------------------------------------
    # data files

    def data_file(self, relpath: str) -> DataFile | None:
        """The data file at ``relpath`` (relative to the root), ``None`` when the path is no data file's."""
        return self._parse_data_path(relpath, tuple(relpath.split("/")))

    def _parse_data_path(self, relpath: str, parts: tuple[str, ...]) -> DataFile | None:
        m = _DATA_NAME.fullmatch(parts[-1])
        if not m or not 4 <= len(parts) <= 6 or not _DIGITS.fullmatch(parts[2]):
            return None
        middle = parts[3:-1]
        partition: int | None = None
        date: str | None = None
        if len(middle) == 2:
            if not _DIGITS.fullmatch(middle[0]) or not (_FULL_DATE.fullmatch(middle[1]) or _YEAR.fullmatch(middle[1])):
                return None
            partition, date = int(middle[0]), middle[1]
        elif len(middle) == 1:
            one = middle[0]
            if _FULL_DATE.fullmatch(one) or (self.date_separator is DateSeparator.YEAR and _YEAR.fullmatch(one)):
                date = one
            elif _DIGITS.fullmatch(one):
                partition = int(one)
            else:
                return None
        return DataFile(
            path=self._file_path(relpath), schema=parts[0], table=parts[1], version=int(parts[2]), partition=partition,
            date=date, number=int(m.group("number")), format=m.group("ext"), relpath=relpath,
        )

    def data_files(self, since: set[str] | None = None, *, require_schema: bool = True) -> list[DataFile]:
        """Data files in TiCDC's storage-consumer order, leaving out the relative paths in ``since``.

        ``since`` is the set of :attr:`DataFile.relpath` already processed (a streaming job keeps it).
        With ``require_schema`` (default) files whose table version has no schema file yet are left out.
        """
        since = since or set()
        files = []
        for relpath, parts in self._walk():
            if relpath in since:
                continue
            data_file = self._parse_data_path(relpath, parts)
            if data_file is not None:
                files.append(data_file)
        if require_schema:
            versions = {(f.schema, f.table, f.version) for f in self.schema_files() if f.table}
            files = [f for f in files if (f.schema, f.table, f.version) in versions]
        files.sort(key=lambda f: f.sort_key)
        return files

    def read_index(self, data_file: DataFile) -> str | None:
        """The file name recorded in the ``meta/CDC.index`` next to ``data_file`` (``None`` if absent)."""
        index = posixpath.join(posixpath.dirname(data_file.relpath), "meta", "CDC.index")
        try:
            return self.store.read_text(index).strip() or None
        except FileNotFoundError:
            return None

    def read_data_file(
        self,
        data_file: DataFile,
        table: TableDef | None = None,
        options: CsvOptions | None = None,
    ) -> tuple[list[ChangeEvent], list[SourceError]]:
        """Events of one data file plus the errors of its bad lines (see :func:`read_data_file`).

        ``table`` defaults to :meth:`table_for`.
        """
        if table is None:
            table = self.table_for(data_file)
        return read_data_file(data_file, table, options)

    def read_all(
        self, options: CsvOptions | None = None, since: set[str] | None = None
    ) -> tuple[list[ChangeEvent], list[SourceError]]:
        """Every event of every data file, in :meth:`data_files` order, plus all errors."""
        tables = self.table_versions()
        events: list[ChangeEvent] = []
        errors: list[SourceError] = []
        for data_file in self.data_files(since):
            got, bad = read_data_file(data_file, self.table_for(data_file, tables), options)
            events.extend(got)
            errors.extend(bad)
        return events, errors

    # ---------------------------------------------------------------------------------------------
    # metadata

    def checkpoint_ts(self) -> int | None:
        """``checkpoint-ts`` from ``<root>/metadata``: every commit ts below it is written (``None``: no file)."""
        try:
            content: Any = json.loads(self.store.read_text("metadata"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise SourceError(f"metadata: unreadable ({exc}).", source="metadata", reason=str(exc)) from None
        if not isinstance(content, dict) or not isinstance(content.get("checkpoint-ts"), int):
            raise SourceError('metadata: expected {"checkpoint-ts": <integer>}.', source="metadata",
                              reason="no checkpoint-ts")
        return int(content["checkpoint-ts"])


_NAME = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z0-9_$]+)")
_RENAME = re.compile(r"\s*(RENAME\s+TABLES?\b|ALTER\s+TABLE\b.*\bRENAME\s+(TO|AS)\b)", re.IGNORECASE | re.DOTALL)


def _renamed_from(key: tuple[str, str], version: int, query: str,
                  done: Mapping[tuple[str, str, int], TableDef]) -> TableDef | None:
    """The table (as completed at its newest version before ``version``) that ``query``, the DDL of ``key``'s first
    version, renames to ``key``; ``None`` when it renames nothing or names no table the tree holds."""
    if not _RENAME.match(query):
        return None
    names = {(quoted or bare).lower() for quoted, bare in _NAME.findall(query)}
    best: TableDef | None = None
    for (schema, table, v), definition in done.items():
        if (schema, table) != key and v < version and table.lower() in names and (best is None or v > best.version):
            best = definition
    return best


def _same(a: Any, b: Any) -> bool:
    """Whether two completion inputs are the same: the same hint object, or (version, the same definition
    object, the same query)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return a[0] == b[0] and a[1] is b[1] and a[2] == b[2]
    return a is b


def _describe_change(before: TableDef | None, after: TableDef | None) -> str:
    """What differs between two readings of one table schema file, in a few words."""
    if before is None or after is None:
        return "another definition"
    names_before, names_after = [c.name for c in before.columns], [c.name for c in after.columns]
    if names_before != names_after:
        return f"the columns ({', '.join(names_after)}) instead of ({', '.join(names_before)})"
    return "another definition of its columns"


def read_data_file(
    data_file: DataFile, table: TableDef, options: CsvOptions | None = None, data: bytes | None = None
) -> tuple[list[ChangeEvent], list[SourceError]]:
    """Parse one data file written with ``table``: (events in file order, errors of bad lines).

    CSV files use ``options`` (default :class:`CsvOptions`); ``.json`` files are canal-json, one
    message per line, lines ending with the sink terminator (``\\r\\n`` by default). Every event carries
    the file's directory version. ``data`` is the file's content when the caller has it (Spark's
    ``binaryFile`` rows); otherwise the file is read. Invalid UTF-8 makes only its own record bad.
    """
    from avro_registry_sink.formats import format_for_extension
    from avro_registry_sink.formats.csv import decode_text

    source = data_file.relpath or str(data_file.path)
    if data is None:
        try:
            data = Path(data_file.path).read_bytes()
        except OSError as exc:
            return [], [SourceError(f"{source}: cannot read ({exc}).", source=source, line=0, reason=str(exc))]
    return format_for_extension(data_file.format).read_file(decode_text(data), table, options, source=source,
                                                            table_version=data_file.version)
