"""The embedded registry's state (schemas, subjects, versions, config, mode), its mutations ("ops"), and
the two backends: in memory, and SQLite (every op written through in one transaction, reloaded when
another connection changed the file).

A SQLite file that cannot be used - damaged (truncated, overwritten), not a database, unreadable, a directory, or
locked by another process for longer than the lock timeout (``AVRO_SINK_REGISTRY_LOCK_TIMEOUT``, default 10 s) -
raises :class:`~avro_registry_sink.errors.RegistryFileError` naming the file and what to do
(:func:`registry_file_error` is the one place that words it). A zero-length file is an empty registry, as
SQLite itself takes it (the state of a file created and not yet written).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from avro_registry_sink.errors import ConfigError, RegistryFileError

__all__ = ["DEFAULT_LOCK_TIMEOUT", "LOCK_TIMEOUT_ENV", "DropVersion", "MemoryBackend", "Op", "PutConfig", "PutMode",
           "PutSchema", "PutVersion", "Reference", "SqliteBackend", "State", "StoredSchema", "Version",
           "lock_timeout_seconds", "registry_file_error"]

#: Seconds the SQLite file's users wait for another process's lock before giving up.
DEFAULT_LOCK_TIMEOUT = 10.0
#: The environment variable that changes :data:`DEFAULT_LOCK_TIMEOUT` (``registry serve --lock-timeout`` wins).
LOCK_TIMEOUT_ENV = "AVRO_SINK_REGISTRY_LOCK_TIMEOUT"

# ---------------------------------------------------------------------------------------------------
# Registry state and its mutations ("ops"), shared by both backends.


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class StoredSchema:
    """A schema as stored under its id. ``metadata``/``rule_set`` are the data contract (None: absent), part of
    the identity like the text (``digest``); never mutated once stored."""

    id: int
    schema_type: str
    text: str
    references: tuple[Reference, ...]
    digest: str
    metadata: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    rule_set: dict[str, Any] | None = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class Version:
    subject: str
    version: int
    schema_id: int
    deleted: bool = False


@dataclass(frozen=True)
class PutSchema:
    schema: StoredSchema


@dataclass(frozen=True)
class PutVersion:
    version: Version


@dataclass(frozen=True)
class DropVersion:
    subject: str
    version: int


@dataclass(frozen=True)
class PutConfig:
    scope: str | None  # None: global
    config: dict[str, Any] | None  # None: delete


@dataclass(frozen=True)
class PutMode:
    scope: str | None
    mode: str | None


Op = PutSchema | PutVersion | DropVersion | PutConfig | PutMode


@dataclass
class State:
    schemas: dict[int, StoredSchema] = field(default_factory=dict)
    by_digest: dict[str, int] = field(default_factory=dict)
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    config: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    mode: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0

    def apply(self, op: Op) -> None:
        if isinstance(op, PutSchema):
            s = op.schema
            self.schemas[s.id] = s
            self.by_digest.setdefault(s.digest, s.id)
            self.max_id = max(self.max_id, s.id)
        elif isinstance(op, PutVersion):
            v = op.version
            self.subjects.setdefault(v.subject, {})[v.version] = v
        elif isinstance(op, DropVersion):
            versions = self.subjects.get(op.subject, {})
            versions.pop(op.version, None)
            if not versions:
                self.subjects.pop(op.subject, None)
        elif isinstance(op, PutConfig):
            if op.config is None:
                self.config.pop(op.scope, None)
            else:
                self.config[op.scope] = dict(op.config)
        elif isinstance(op, PutMode):
            if op.mode is None:
                self.mode.pop(op.scope, None)
            else:
                self.mode[op.scope] = op.mode

    # -- queries -----------------------------------------------------------------------------------
    def versions(self, subject: str, *, deleted: bool) -> list[Version]:
        """The subject's versions ascending; soft-deleted ones only with ``deleted``."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def is_resolvable(self, schema_id: int) -> bool:
        return any(v.schema_id == schema_id for vs in self.subjects.values() for v in vs.values())


class MemoryBackend:
    """Keeps nothing beyond the process; the state itself is the store."""

    def load(self) -> State:
        return State()

    def is_stale(self) -> bool:
        return False

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    def persist(self, ops: Sequence[Op]) -> None:
        pass

    def close(self) -> None:
        pass


_GLOBAL_SCOPE = ""  # SQLite key of the global config/mode ("" is never a valid subject)

_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS registry_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS schemas (
    id INTEGER PRIMARY KEY,
    schema_type TEXT NOT NULL,
    schema TEXT NOT NULL,
    refs TEXT NOT NULL,
    digest TEXT NOT NULL,
    metadata TEXT,
    rule_set TEXT
);
CREATE TABLE IF NOT EXISTS versions (
    subject TEXT NOT NULL,
    version INTEGER NOT NULL,
    schema_id INTEGER NOT NULL REFERENCES schemas(id),
    deleted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (subject, version)
);
CREATE TABLE IF NOT EXISTS config (scope TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mode (scope TEXT PRIMARY KEY, mode TEXT NOT NULL);
"""


def lock_timeout_seconds(value: float | str | None = None) -> float:
    """Seconds to wait for another process's lock on the SQLite file: ``value``, else the environment's
    ``AVRO_SINK_REGISTRY_LOCK_TIMEOUT``, else :data:`DEFAULT_LOCK_TIMEOUT`; :class:`ConfigError` for a bad value.

    >>> lock_timeout_seconds(2.5)
    2.5
    """
    source = "--lock-timeout"
    if value is None:
        value, source = os.environ.get(LOCK_TIMEOUT_ENV, "").strip() or DEFAULT_LOCK_TIMEOUT, LOCK_TIMEOUT_ENV
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 <= seconds <= 86400 or seconds != seconds:
        raise ConfigError(f"Invalid value {value!r} for {source}: the seconds to wait for a locked registry file, "
                          "a number from 0 to 86400 (default 10).", option=source, value=str(value))
    return seconds


def _file_head(path: str, start: bool = True) -> str:
    """What the file holds, for a message: its size (and first bytes)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return "cannot be read"
    return f"{size} bytes, starting {head!r}" if start else f"{size} bytes"


def registry_file_error(path: str, exc: BaseException, waited: float) -> RegistryFileError:
    """The one place a SQLite or OS error of the registry file ``path`` becomes a one-line
    :class:`RegistryFileError`: the file, what was found, what to do. ``waited``: the lock timeout used."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    where = f"The embedded registry's SQLite file {path!r}"
    other_file = ("restore it (with its -wal and -shm files) from a backup, or move it aside and use another file: a "
                  "rerun of the jobs with a new checkpoint registers their schemas again (with ids that may differ "
                  "from those in records already written)")
    code = getattr(exc, "sqlite_errorname", "")
    if "locked" in text or code.startswith("SQLITE_BUSY"):
        return RegistryFileError(
            f"{where} is locked by another process (waited {waited:g} s for it: {text}): stop the other process "
            "writing to it (another run, replay or `registry serve` with this file, a sqlite3 shell), or let it "
            f"wait longer with {LOCK_TIMEOUT_ENV}=SECONDS.", path=path, problem="locked")
    if os.path.isdir(path):
        return RegistryFileError(f"{where} is a directory, not a file: remove or rename the directory, or point the "
                                 "registry at a file.", path=path, problem="directory")
    if "not a database" in text or code == "SQLITE_NOTADB":
        return RegistryFileError(f"{where} is not a SQLite database ({_file_head(path)}: {text}): {other_file}.",
                                 path=path, problem="not-a-database")
    if "malformed" in text or "corrupt" in text or code.startswith("SQLITE_CORRUPT") or code == "SQLITE_IOERR_SHORT_READ":
        return RegistryFileError(f"{where} is damaged ({text}; {_file_head(path, start=False)}: truncated or overwritten): "
                                 f"{other_file}.", path=path, problem="damaged")
    if isinstance(exc, OSError):  # the file or its directory cannot be made
        return RegistryFileError(f"{where} cannot be created or opened ({text}): check the path (each directory on "
                                 "it must be a directory this user may write).", path=path, problem="unreadable")
    if "readonly" in text or "unable to open" in text or \
            code.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")):
        return RegistryFileError(f"{where} cannot be opened for reading and writing ({text}): check that it and its "
                                 "directory exist and that this user may write them.", path=path, problem="unreadable")
    return RegistryFileError(f"{where} cannot be used ({text}): {other_file}.", path=path, problem="unusable")


class SqliteBackend:
    """One SQLite file in WAL mode; each mutation is one ``BEGIN IMMEDIATE`` transaction.

    Opening checks the file (``PRAGMA quick_check``) and waits at most ``lock_timeout`` seconds (see
    :func:`lock_timeout_seconds`) for another process's lock, as every later transaction does; SQLite's errors
    come out as :class:`RegistryFileError` (:func:`registry_file_error`)."""

    def __init__(self, path: str, lock_timeout: float | None = None) -> None:
        self.path = path
        self.lock_timeout = lock_timeout_seconds(lock_timeout)
        self._conn: sqlite3.Connection | None = None
        try:
            parent = os.path.dirname(os.path.abspath(path))
            os.makedirs(parent, exist_ok=True)
            self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                         timeout=self.lock_timeout)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            with self.transaction():
                for statement in _SQLITE_SCHEMA.split(";"):  # executescript would COMMIT first
                    if statement.strip():
                        self._conn.execute(statement)
                self._conn.execute(
                    "INSERT OR IGNORE INTO registry_meta (key, value) VALUES ('format', '1')"
                )
                # files of releases before data contracts: the two columns are added (NULL: no contract)
                columns = {row[1] for row in self._conn.execute("PRAGMA table_info(schemas)")}
                for column in ("metadata", "rule_set"):
                    if column not in columns:
                        self._conn.execute(f"ALTER TABLE schemas ADD COLUMN {column} TEXT")
            problems = [row[0] for row in self._conn.execute("PRAGMA quick_check(3)")]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError("database disk image is malformed: " + "; ".join(problems))
        except (sqlite3.Error, OSError) as exc:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
            raise registry_file_error(path, exc, self.lock_timeout) from exc
        self._data_version = -1

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise registry_file_error(self.path, exc, self.lock_timeout) from exc

    def _current_version(self) -> int:
        assert self._conn is not None
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def load(self) -> State:
        state = State()
        conn = self._conn
        assert conn is not None
        with self._errors():
            for sid, stype, text, refs, digest, metadata, rule_set in conn.execute(
                "SELECT id, schema_type, schema, refs, digest, metadata, rule_set FROM schemas ORDER BY id"
            ):
                references = tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in json.loads(refs))
                state.apply(PutSchema(StoredSchema(sid, stype, text, references, digest,
                                                   None if metadata is None else json.loads(metadata),
                                                   None if rule_set is None else json.loads(rule_set))))
            for subject, version, sid, deleted in conn.execute(
                "SELECT subject, version, schema_id, deleted FROM versions ORDER BY subject, version"
            ):
                state.apply(PutVersion(Version(subject, version, sid, bool(deleted))))
            for scope, value in conn.execute("SELECT scope, value FROM config"):
                state.apply(PutConfig(None if scope == _GLOBAL_SCOPE else scope, json.loads(value)))
            for scope, mode in conn.execute("SELECT scope, mode FROM mode"):
                state.apply(PutMode(None if scope == _GLOBAL_SCOPE else scope, mode))
            self._data_version = self._current_version()
        return state

    def is_stale(self) -> bool:
        # data_version changes only when *another* connection commits, so our own writes never count.
        with self._errors():
            return self._current_version() != self._data_version

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        conn = self._conn
        assert conn is not None
        with self._errors():
            conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise registry_file_error(self.path, exc, self.lock_timeout) from exc

    def persist(self, ops: Sequence[Op]) -> None:
        with self._errors():
            self._persist(ops)

    def _persist(self, ops: Sequence[Op]) -> None:
        conn = self._conn
        assert conn is not None
        for op in ops:
            if isinstance(op, PutSchema):
                s = op.schema
                refs = json.dumps([r.to_json() for r in s.references])
                conn.execute(
                    "INSERT OR REPLACE INTO schemas (id, schema_type, schema, refs, digest, metadata, rule_set) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (s.id, s.schema_type, s.text, refs, s.digest,
                     None if s.metadata is None else json.dumps(s.metadata),
                     None if s.rule_set is None else json.dumps(s.rule_set)),
                )
            elif isinstance(op, PutVersion):
                v = op.version
                conn.execute(
                    "INSERT OR REPLACE INTO versions (subject, version, schema_id, deleted) VALUES (?, ?, ?, ?)",
                    (v.subject, v.version, v.schema_id, int(v.deleted)),
                )
            elif isinstance(op, DropVersion):
                conn.execute("DELETE FROM versions WHERE subject = ? AND version = ?", (op.subject, op.version))
            elif isinstance(op, PutConfig):
                scope = _GLOBAL_SCOPE if op.scope is None else op.scope
                if op.config is None:
                    conn.execute("DELETE FROM config WHERE scope = ?", (scope,))
                else:
                    conn.execute(
                        "INSERT OR REPLACE INTO config (scope, value) VALUES (?, ?)", (scope, json.dumps(op.config))
                    )
            elif isinstance(op, PutMode):
                scope = _GLOBAL_SCOPE if op.scope is None else op.scope
                if op.mode is None:
                    conn.execute("DELETE FROM mode WHERE scope = ?", (scope,))
                else:
                    conn.execute("INSERT OR REPLACE INTO mode (scope, mode) VALUES (?, ?)", (scope, op.mode))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


