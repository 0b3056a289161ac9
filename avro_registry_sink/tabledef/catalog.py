"""Versions of table definitions over time, and completing a schema file's definition from a user's.

* :class:`TableCatalog`: changelog tables on the driver, ``(schema, table) -> [(version, TableDef)]``,
  grown by DDL events and saved as JSON in the job's checkpoint directory.
* :func:`pick_version`: the definition a DML at a commit ts was written with.
* :func:`complete_versions`: the ENUM/SET members of every version of a storage-sink table, which its
  schema files do not record: from each version's own DDL (``Query``), replayed from ``--tables``.
* :func:`complete_table`: the unique keys a storage-sink schema file cannot say, from the user's ``--tables``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from avro_registry_sink.errors import AvroSinkError, SourceError
from avro_registry_sink.storage_fs import StorageURI, parse_storage_uri
from avro_registry_sink.table import MySQLType, TableDef
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl

__all__ = ["MembersNote", "TableCatalog", "complete_table", "complete_versions", "pick_version"]


def complete_table(table: TableDef, hint: TableDef | None) -> TableDef:
    """Fill in the unique keys a storage-sink schema file cannot say from a definition given by the user.

    Schema files record no unique keys (``shared/reference`` §2): a table with no primary key takes the
    hint's primary key or unique keys when they only name its columns. Everything else stays as the schema
    file says; ENUM/SET members differ from version to version and come from :func:`complete_versions`.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType
    >>> base = TableDef(schema_name="s", table="t", columns=(ColumnDef(name="e", type=MySQLType.INT, nullable=False),))
    >>> hint = base.model_copy(update={"unique_keys": (("e",),)})
    >>> t = complete_table(base, hint); t.unique_keys, t.columns[0].nullable
    ((('e',),), False)
    """
    if hint is None:
        return table
    update: dict[str, Any] = {}
    if not table.primary_key and not table.unique_keys:
        names = {c.name.lower() for c in table.columns}
        if hint.primary_key and all(k.lower() in names for k in hint.primary_key):
            update["primary_key"] = hint.primary_key
        keys = tuple(uk for uk in hint.unique_keys if all(k.lower() in names for k in uk))
        if keys:
            update["unique_keys"] = keys
    return table.model_copy(update=update) if update else table


_MEMBER_TYPES = (MySQLType.ENUM, MySQLType.SET)
_DEFINES_MEMBERS = re.compile(r"\b(ENUM|SET)\s*\(", re.IGNORECASE)


def _with_unique_keys(table: TableDef, query: str, current: TableDef | None) -> TableDef:
    """A table of debezium ``tableChanges`` with the unique keys it does not list: those of the DDL text (a CREATE
    TABLE), else of the table's known definition (``--tables``, an earlier version) whose columns remain. Without
    them a table keyed by a UNIQUE KEY (no primary key) would have no Kafka key."""
    if table.primary_key or table.unique_keys:
        return table
    keys: tuple[tuple[str, ...], ...] = ()
    if " ".join(query.split()).upper().startswith("CREATE TABLE"):

        try:
            keys = next((t.unique_keys for t in parse_ddl(query, default_schema=table.schema_name)
                         if t.table.lower() == table.table.lower()), ())
        except AvroSinkError:
            keys = ()
    if not keys and current is not None:
        keys = current.unique_keys
    names = {c.name.lower() for c in table.columns}
    kept = tuple(k for k in keys if all(c.lower() in names for c in k))
    return table.model_copy(update={"unique_keys": kept}) if kept else table


class MembersNote(NamedTuple):
    """What :func:`complete_versions` could not know or had to assume, for one table (a warning to report)."""

    schema: str
    table: str
    message: str


def _shown(elements: Sequence[str]) -> str:
    return "(" + ",".join("'" + e.replace("'", "''") + "'" for e in elements) + ")"


def _without_members(table: TableDef) -> TableDef:
    columns = tuple(c.model_copy(update={"elements": ()}) if c.elements else c for c in table.columns)
    return table.model_copy(update={"columns": columns})


def _members_source(table: TableDef, query: str, state: TableDef | None, hint: TableDef | None,
                    first: bool) -> tuple[TableDef | None, str, str | None]:
    """(the definition the members of ``table``'s version come from, where that is, a note or ``None``)."""

    text = " ".join(query.split())
    head = text.upper()
    if head.startswith(("CREATE TABLE", "CREATE TEMPORARY TABLE")):
        try:
            created = [t for t in parse_ddl(query, default_schema=table.schema_name)
                       if t.table.lower() == table.table.lower()]
        except AvroSinkError as exc:
            return None, f"its CREATE TABLE cannot be read: {exc.message}", None
        if created:
            return created[0], "its CREATE TABLE", None
        return None, "its CREATE TABLE does not define the table", None
    if not text:
        if hint is None:
            return None, "its schema file records no DDL and --tables does not give the table", None
        return hint, "--tables (its schema file records no DDL)", None
    if state is not None:
        base, origin = state, "the version before it with its DDL"
    elif first and hint is not None:
        base, origin = hint, "--tables with its DDL"
    else:
        base, origin = _without_members(table), "its DDL"  # only what the DDL itself defines
    try:
        after = apply_ddl(base, query)
    except AvroSinkError as exc:
        if base is state and not _DEFINES_MEMBERS.search(query):
            # a DDL that spells no ENUM(...)/SET(...) changes no members: the columns keep the version before's
            return state, "the version before it (its DDL defines no ENUM/SET)", None
        if base is hint:
            return hint, "--tables", (
                f"{table.qualified_name} version {table.version}: its DDL does not apply to --tables' definition "
                f"({exc.message}); ENUM/SET members taken from --tables as they are.")
        return None, f"its DDL cannot be applied: {exc.message}", None
    if after is None:
        return None, "its DDL drops the table", None
    return after, origin, None


def _defined_members(state: TableDef, query: str) -> set[str]:
    """The columns an ALTER TABLE gives ENUM/SET members itself (lower-case names)."""

    if not query.strip() or query.lstrip().upper().startswith("CREATE"):
        return set()
    try:
        after = apply_ddl(_without_members(state), query)
    except AvroSinkError:
        return set()
    return {c.name.lower() for c in after.columns if c.elements} if after is not None else set()


def complete_versions(versions: Sequence[tuple[TableDef | None, str]], hint: TableDef | None,
                      renamed_from: TableDef | None = None) -> tuple[list[TableDef | None], list[MembersNote]]:
    """Every version of one storage-sink table with the ENUM/SET members of its own definition.

    ``versions`` are the table's versions oldest first: the definition read from each schema file (``None``
    for one that cannot be read: the chain of DDLs breaks there) and the file's ``Query``. Schema files do
    not record members (``shared/reference`` §2), so each version takes them from, in this order:

    * its ``Query`` when it is a CREATE TABLE;
    * else the version before it with its ``Query`` (an ALTER TABLE) applied: MODIFY/CHANGE/ADD with
      ``ENUM(...)``/``SET(...)`` give the new members, other columns keep theirs;
    * the first version with an ALTER TABLE: ``hint`` (``--tables``, the table as it was before the tree's
      DDLs) with it applied;
    * a version whose schema file records no DDL (a table that existed before the changefeed): ``hint``.

    ``renamed_from`` is the table the first version's DDL renames to this one (``RENAME TABLE a TO b``), as
    completed at its last version: that DDL is applied to it (and not to ``hint``).

    Everything else stays as the schema file says. Where the members of a column cannot be known for a
    version (no ``hint``, a DDL that cannot be read, a chain broken by an unreadable schema file) the
    column keeps no members (its schema's ``allowed`` list is empty) and a :class:`MembersNote` names the
    table, the column, the versions and why, as it does when ``hint`` is taken for a version and a later DDL
    gives the column the very members ``hint`` has (``hint`` may then describe the table after that DDL).

    >>> from avro_registry_sink.tabledef.ddl import parse_ddl
    >>> v1 = parse_ddl("CREATE TABLE s.t (e ENUM('a','b','c'))")[0]
    >>> file1 = v1.model_copy(update={"version": 1, "columns": (v1.columns[0].model_copy(update={"elements": ()}),)})
    >>> done, notes = complete_versions([(file1, "CREATE TABLE s.t (e ENUM('a','b','c'))"),
    ...     (file1.model_copy(update={"version": 2}), "ALTER TABLE s.t MODIFY e ENUM('b','a')")], None)
    >>> [t.columns[0].elements for t in done], notes
    ([('a', 'b', 'c'), ('b', 'a')], [])
    """
    out: list[TableDef | None] = []
    unknown: dict[str, list[tuple[int, str]]] = {}  # column -> (version, why)
    notes: list[MembersNote] = []
    from_hint: dict[str, list[int]] = {}  # column -> versions whose members are the hint's
    redefined: dict[str, list[tuple[int, tuple[str, ...]]]] = {}  # column -> (version, members) its DDL gave
    state: TableDef | None = renamed_from
    first = True
    qualified = ""
    for table, query in versions:
        if table is None:
            state, first = None, False
            out.append(None)
            continue
        qualified = table.qualified_name
        source, origin, note = _members_source(table, query, state, hint, first)
        if note:
            notes.append(MembersNote(table.schema_name, table.table, note))
        defined = _defined_members(state, query) if from_hint and state is not None else set()
        previous = {c.name.lower(): c for c in state.columns} if state is not None else {}
        by_name = {c.name.lower(): c for c in source.columns} if source is not None else {}
        columns = []
        changed = False
        for col in table.columns:
            if col.type not in _MEMBER_TYPES:
                columns.append(col)
                continue
            other = by_name.get(col.name.lower())
            if other is not None and other.type is col.type and other.elements:
                if col.elements != other.elements:
                    col = col.model_copy(update={"elements": other.elements})
                    changed = True
                if source is hint:
                    from_hint.setdefault(col.name, []).append(table.version)
                    before = previous.get(col.name.lower())
                    if before is not None and before.elements and before.elements != col.elements:
                        notes.append(MembersNote(table.schema_name, table.table, (
                            f"{qualified} version {table.version}: its schema file records no DDL, so column "
                            f"{col.name!r} takes the members --tables gives, {_shown(col.elements)}, where the "
                            f"version before it had {_shown(before.elements)}; the DDL between them is not in the "
                            "tree.")))
                elif col.name.lower() in defined:
                    redefined.setdefault(col.name, []).append((table.version, col.elements))
            else:
                if source is None:
                    why = origin
                elif other is not None and other.type is not col.type:
                    why = f"{origin} gives it as {other.type.value}"
                elif source is not hint and col.name.lower() in previous:
                    why = "not known at the version before it, and its DDL does not give them"
                else:
                    why = f"{origin} gives no members for it"
                unknown.setdefault(col.name, []).append((table.version, why))
                if col.elements:
                    col = col.model_copy(update={"elements": ()})
                    changed = True
            columns.append(col)
        done = table.model_copy(update={"columns": tuple(columns)}) if changed else table
        out.append(done)
        state, first = done, False
    if qualified:
        notes += _members_notes(qualified, unknown, from_hint, redefined, hint)
    return out, notes


def _members_notes(qualified: str, unknown: dict[str, list[tuple[int, str]]], from_hint: dict[str, list[int]],
                   redefined: dict[str, list[tuple[int, tuple[str, ...]]]], hint: TableDef | None) -> list[MembersNote]:
    """What :func:`complete_versions` found of a table's columns (``schema.table``): the columns whose members
    are not known at some versions (``unknown``: per column, the versions and why), and those that take
    ``hint``'s members (``from_hint``: per column, those versions) where a later DDL gives the same members
    (``redefined``: per column, the versions and the members their DDL gave)."""
    notes: list[MembersNote] = []
    schema, name = qualified.split(".", 1)
    for column, where in unknown.items():
        shown = ", ".join(str(v) for v, _ in where)
        notes.append(MembersNote(schema, name, (
            f"{qualified}: the ENUM/SET members of column {column!r} are not known at table version(s) {shown} "
            f"(at {where[0][0]}: {where[0][1]}): its schema there has an empty 'allowed' list, and values sent as an "
            "index or bitmask (canal-json) are refused. Give the table's CREATE TABLE as it was before the tree's "
            "first DDL with --tables.")))
    for column, numbers in from_hint.items():
        assert hint is not None
        given = next((c.elements for c in hint.columns if c.name.lower() == column.lower()), ())
        later = [v for v, members in redefined.get(column, []) if members == given and v > min(numbers)]
        if later:
            notes.append(MembersNote(schema, name, (
                f"{qualified}: column {column!r} takes the members --tables gives, {_shown(given)}, at table "
                f"version(s) {', '.join(map(str, numbers))}, and the DDL of version {later[0]} gives it the same "
                "members: if --tables describes the table after that DDL, the members before it are wrong. "
                "--tables must give the table as it was before the tree's first DDL.")))
    return notes


def _table_to_json(table: TableDef) -> dict[str, Any]:
    data = table.model_dump(mode="json")
    for col, raw in zip(table.columns, data["columns"], strict=True):
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
    message of a table nothing else describes. ``path`` (a local path or a storage URI, e.g. under an
    ``s3://`` checkpoint) makes it durable (JSON, replaced atomically as far as the store allows).
    """

    def __init__(self, path: str | os.PathLike[str] | StorageURI | None = None, seed: Iterable[TableDef] = ()) -> None:
        self.path = path if isinstance(path, StorageURI) or path is None else parse_storage_uri(
            str(path), option="checkpoint")
        self._store = self.path.parent().filesystem() if self.path is not None else None
        self._versions: dict[tuple[str, str], list[tuple[int, TableDef]]] = {}
        self._dropped: dict[tuple[str, str], int] = {}
        self._ddl: dict[tuple[str, str], list[tuple[int, str]]] = {}  # the DDL texts applied, by commit ts
        self.notes: list[str] = []
        if self._store is not None and self._store.exists(self.path.name):  # type: ignore[union-attr]
            self._load()
        self._seed(seed)

    # -- persistence -----------------------------------------------------------------------------

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None, seed: Iterable[TableDef] = ()) -> TableCatalog:
        """A catalog from :meth:`to_data`'s output (``None``: an empty one), then ``seed`` for unknown tables."""
        catalog = cls()
        if data:
            catalog._load_data(data)
        catalog._seed(seed)
        return catalog

    def to_data(self) -> dict[str, Any]:
        """The catalog as plain JSON data (what :meth:`save` writes)."""
        return {
            "tables": [_table_to_json(t) for key in sorted(self._versions) for _, t in self._versions[key]],
            "dropped": [{"schema": s, "table": t, "commit_ts": ts} for (s, t), ts in sorted(self._dropped.items())],
            "ddl": [{"schema": s, "table": t, "commit_ts": ts, "query": q}
                    for (s, t) in sorted(self._ddl) for ts, q in self._ddl[(s, t)]],
        }

    def _seed(self, seed: Iterable[TableDef]) -> None:
        for table in seed:
            key = (table.schema_name, table.table)
            if key not in self._versions:
                self._versions[key] = [(table.version, table)]

    def _load(self) -> None:
        assert self.path is not None and self._store is not None
        self._load_data(json.loads(self._store.read_text(self.path.name)))

    def _load_data(self, data: Mapping[str, Any]) -> None:
        for entry in data.get("tables", []):
            table = _table_from_json(entry)
            self._versions.setdefault((table.schema_name, table.table), []).append((table.version, table))
        for entry in data.get("dropped", []):
            self._dropped[(entry["schema"], entry["table"])] = int(entry["commit_ts"])
        for entry in data.get("ddl", []):  # absent from checkpoints of earlier releases
            self._ddl.setdefault((entry["schema"], entry["table"]), []).append((int(entry["commit_ts"]), entry["query"]))
        for versions in self._versions.values():
            versions.sort(key=lambda item: item[0])

    def save(self) -> None:
        if self.path is None or self._store is None:
            return
        data = self.to_data()
        self._store.write_text(self.path.name, json.dumps(data, indent=1, ensure_ascii=False))

    # -- lookups -----------------------------------------------------------------------------------

    def known(self) -> set[tuple[str, str]]:
        return set(self._versions)

    def latest(self, schema: str, table: str) -> TableDef | None:
        versions = self._versions.get((schema, table))
        return versions[-1][1] if versions else None

    def history(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[tuple[int, TableDef]]]:
        """Plain data for the executors: the versions of the given tables."""
        return {key: list(self._versions[key]) for key in keys if key in self._versions}

    def ddl_history(self, schema: str, table: str) -> list[tuple[int, str]]:
        """The DDL texts applied to a table, with their commit ts (its versions), oldest first: what a breaking
        change's migration rules read renames and re-added columns from."""
        return list(self._ddl.get((schema, table), []))

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
        """Apply one :class:`~avro_registry_sink.formats.canal_json.DdlEvent`; returns whether anything changed."""
        if not ddl.table:
            return False  # database-level DDL
        key = (ddl.schema, ddl.table)
        current = self.latest(*key)
        if current is not None and ddl.commit_ts <= current.version:
            return False  # already applied (a replayed batch)
        if ddl.query and (ddl.commit_ts, ddl.query) not in self._ddl.get(key, []):
            self._ddl.setdefault(key, []).append((ddl.commit_ts, ddl.query))
        if ddl.tables:  # debezium tableChanges: the table as it is after the DDL
            changed = False
            for table in ddl.tables:
                table = _with_unique_keys(table, ddl.query, current)
                changed |= self.add(table.model_copy(update={"version": ddl.commit_ts}))
            return changed
        query = " ".join(ddl.query.split())
        head = query.upper()

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
