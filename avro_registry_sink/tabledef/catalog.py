"""Versions of table definitions over time, and completing a schema file's definition from a user's.

* :class:`TableCatalog`: changelog tables on the driver, ``(schema, table) -> [(version, TableDef)]``,
  grown by DDL events and saved as JSON in the job's checkpoint directory.
* :func:`pick_version`: the definition a DML at a commit ts was written with.
* :func:`complete_table`: what a storage-sink schema file cannot say (ENUM/SET members, unique keys),
  taken from the user's ``--tables``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from avro_registry_sink.errors import AvroSinkError, SourceError
from avro_registry_sink.storage_fs import StorageURI, parse_storage_uri
from avro_registry_sink.table import TableDef

__all__ = ["TableCatalog", "complete_table", "pick_version"]


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
