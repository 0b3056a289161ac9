"""The history of every registration the product makes, kept under a checkpoint (``<checkpoint>/history/``).

One JSON object per registration (:class:`HistoryRecord`): the table and its version (and commit ts), where the
definition came from (``source``: a storage-sink schema file, a changelog DDL, the ``--tables``/``--ddl`` file, the
first message of a table nothing described) with the DDL text when known, the subject, version, schema id,
fingerprint (SHA-256 of the schema text), the compatibility verdict and its reasons, and the fields the
breaking-DDL policy fills (``major_version``, ``rules``: left ``None`` where it does not run). Refused registrations
are recorded too (``verdict`` ``incompatible``, the registry's reasons), so the history shows what was tried.

Files: the job writes ``history/batch-<id>.jsonl`` once a batch's registrations are done (a rerun batch
rewrites its own file, so a crash never duplicates it), refusals ``history/refused-<batch>-<ms>.jsonl`` and the
``register`` command ``history/register-<ms>.jsonl``; any store a checkpoint can be on (whole-file writes). Reading
merges them in time order and keeps one record per (subject, schema id, verdict).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from avro_registry_sink.storage_fs import StoreFS

# Imported inside functions, for start-up: reading the journal stays light (about 40 ms); the catalog and
# the diff load (about 300 ms) only where a record is compared or completed.

HISTORY_DIR = "history"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fingerprint(schema: str) -> str:
    """SHA-256 of a schema's text (the text registered: Go-compact JSON, see :mod:`..schema.gojson`)."""
    return hashlib.sha256(schema.encode()).hexdigest()


@dataclass
class HistoryRecord:
    """One registration (or refusal) of one subject."""

    table: str  # schema.table
    table_version: int
    subject: str
    kind: str  # key | value
    schema: str
    schema_id: int | None = None
    version: int | None = None
    previous_version: int | None = None
    commit_ts: int | None = None
    source: str = "unknown"  # schema-file | ddl | tables | register | inferred | unknown
    source_detail: str | None = None  # the schema file's path, the DDL file's name
    ddl: str | None = None
    fingerprint: str = ""
    major_version: int | None = None
    verdict: str = "compatible"  # new subject | compatible | already registered | incompatible
    reasons: list[str] = field(default_factory=list)
    rules: list[Any] | None = None
    compatibility_level: str | None = None
    renames: dict[str, str] = field(default_factory=dict)
    table_definition: dict[str, Any] | None = None
    batch: int | None = None
    time: str = field(default_factory=_now)

    def __post_init__(self) -> None:
        if not self.fingerprint:
            self.fingerprint = fingerprint(self.schema)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HistoryRecord:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def topic(self) -> str:
        return self.subject.rsplit("-", 1)[0]


def metadata_properties(record: HistoryRecord) -> dict[str, str]:
    """What a registry with data contracts (``metadata.properties``) keeps of a registration: plain strings.

    >>> metadata_properties(HistoryRecord(table="s.t", table_version=5, subject="s_t-value", kind="value",
    ...                                   schema='"int"', commit_ts=5, source="ddl", ddl="ALTER TABLE t ADD c INT"))
    {'avro-registry-sink.table': 's.t', 'avro-registry-sink.table-version': '5', 'avro-registry-sink.source': 'ddl', \
'avro-registry-sink.commit-ts': '5', 'avro-registry-sink.ddl': 'ALTER TABLE t ADD c INT'}
    """
    out = {"avro-registry-sink.table": record.table, "avro-registry-sink.table-version": str(record.table_version),
           "avro-registry-sink.source": record.source}
    if record.commit_ts is not None:
        out["avro-registry-sink.commit-ts"] = str(record.commit_ts)
    if record.ddl:
        out["avro-registry-sink.ddl"] = record.ddl[:4000]
    if record.major_version is not None:
        out["avro-registry-sink.major-version"] = str(record.major_version)
    return out


class HistoryJournal:
    """The ``history/`` directory of a checkpoint (any store :class:`StoreFS` reaches)."""

    def __init__(self, store: StoreFS) -> None:
        self.store = store

    @classmethod
    def at(cls, checkpoint: str) -> HistoryJournal:
        """The journal of a checkpoint given as a directory or storage URI."""
        from avro_registry_sink.storage_fs import parse_storage_uri

        return cls(StoreFS(parse_storage_uri(str(checkpoint), option="checkpoint"), option="checkpoint"))

    def write(self, name: str, records: Iterable[HistoryRecord]) -> None:
        """Write (or replace) ``history/<name>.jsonl``; nothing when there are no records."""
        lines = [json.dumps(r.to_json(), ensure_ascii=False, sort_keys=True) for r in records]
        if lines:
            self.store.make_dirs(HISTORY_DIR)
            self.store.write_text(f"{HISTORY_DIR}/{name}.jsonl", "\n".join(lines) + "\n")

    def read(self) -> list[HistoryRecord]:
        """Every record, oldest first, one per (subject, schema id, verdict) (the first written)."""
        if not self.store.is_dir(HISTORY_DIR):
            return []
        records: list[HistoryRecord] = []
        for name in sorted(self.store.list_files(HISTORY_DIR)):
            if not name.endswith(".jsonl"):
                continue
            relative = name if name.startswith(HISTORY_DIR + "/") else f"{HISTORY_DIR}/{name.rsplit('/', 1)[-1]}"
            for line in self.store.read_text(relative).splitlines():
                if line.strip():
                    try:
                        records.append(HistoryRecord.from_json(json.loads(line)))
                    except (ValueError, TypeError):
                        continue  # a torn last line of a crashed write: the batch's rerun rewrote the file
        records.sort(key=lambda r: (r.time, r.table, r.table_version, r.kind))
        seen: set[tuple[str, int | None, str, str | None]] = set()
        out = []
        for r in records:
            key = (r.subject, r.schema_id, r.verdict, r.fingerprint if r.schema_id is None else None)
            if key not in seen:
                seen.add(key)
                out.append(r)
        return out


def select(records: list[HistoryRecord], *, table: str | None = None, subject: str | None = None) -> list[HistoryRecord]:
    """Records of one table (``schema.table``, case-insensitive) or one subject."""
    out = records
    if table is not None:
        out = [r for r in out if r.table.lower() == table.lower()]
    if subject is not None:
        out = [r for r in out if r.subject == subject]
    return out


# --------------------------------------------------------------------------------------------------
# Recording what the schema manager registers


def table_json(table: Any) -> dict[str, Any]:
    """A :class:`~avro_registry_sink.table.TableDef` as JSON (bytes defaults as ``{"hex": ...}``)."""
    from avro_registry_sink.tabledef.catalog import _table_to_json

    return _table_to_json(table)


class HistoryRecorder:
    """Collects the schema manager's registrations and refusals of a batch (the manager's ``on_register`` and
    ``on_refused`` hooks) and writes them to a :class:`HistoryJournal`.

    ``source_of(table)`` says where a table version came from: ``(source, detail, ddl)``. Registry lookups made
    here (the version and the compatibility level of a new registration) are for the record only: a failure leaves
    them ``None``. With ``defer`` they may wait: :meth:`complete_later` makes them in a thread of their own while
    the batch is written (two calls for a new subject, 400 for a first batch of 100 tables; with ``majors`` (runs
    under ``--on-incompatible new-major``) a third, the version holding the schema, whose metadata gives the
    major); every other method waits for it first.
    A subject's record is completed before that subject registers again (the manager's ``on_registering``), so
    the versions it reads are those its registration left.
    """

    def __init__(self, journal: HistoryJournal | None, registry: Any,
                 source_of: Callable[[Any], tuple[str, str | None, str | None]] | None = None, *,
                 defer: bool = False, majors: bool = True) -> None:
        self.journal = journal
        self.registry = registry
        self.source_of = source_of or (lambda table: ("unknown", None, None))
        self.batch: int | None = None
        self._pending: list[HistoryRecord] = []
        self._incomplete: list[HistoryRecord] = []  # registered, versions and level not read yet
        self._completing: threading.Thread | None = None
        self._defer = defer  # the owner calls registering() before each registration (see above)
        self._majors = majors  # versions may carry a major (--on-incompatible new-major): read a new subject's too

    @property
    def pending(self) -> list[HistoryRecord]:
        """The batch's records so far, complete."""
        self.complete()
        return self._pending

    def _record(self, subject: str, schema: str, schemas: Any, **extra: Any) -> HistoryRecord:
        from avro_registry_sink.history.diff import renames_in_ddl

        table = schemas.table
        source, detail, ddl = self.source_of(table)
        return HistoryRecord(
            table=table.qualified_name, table_version=table.version, subject=subject,
            kind="key" if subject.endswith("-key") else "value",
            schema=schema, commit_ts=table.version or None, source=source, source_detail=detail, ddl=ddl,
            renames=renames_in_ddl(ddl), table_definition=table_json(table), batch=self.batch, **extra)

    def registering(self, subject: str) -> None:
        """Before ``subject`` registers a schema (the manager's ``on_registering``): its waiting record read
        first, so that the versions it reads are those its own registration left."""
        self._settle()
        self._complete_all([r for r in self._incomplete if r.subject == subject])
        self._incomplete = [r for r in self._incomplete if r.subject != subject]

    def registered(self, subject: str, schema: str, schema_id: int, schemas: Any) -> None:
        self._settle()
        record = self._record(subject, schema, schemas, schema_id=schema_id)
        if self._defer:
            self._incomplete.append(record)
        else:
            self._complete(record)
        self._pending.append(record)

    def complete(self) -> None:
        """Read the versions and levels of the records registered so far (see :meth:`complete_later`)."""
        self._settle()
        incomplete, self._incomplete = self._incomplete, []
        self._complete_all(incomplete)

    def complete_later(self) -> None:
        """Start :meth:`complete` in a thread; the next call of any other method waits for it."""
        self._settle()
        if self._incomplete:
            incomplete, self._incomplete = self._incomplete, []
            self._completing = threading.Thread(target=self._complete_all, args=(incomplete,),
                                                name="avro-sink-history", daemon=True)
            self._completing.start()

    def _complete_all(self, records: list[HistoryRecord]) -> None:
        for record in records:
            self._complete(record)

    def _settle(self) -> None:
        thread, self._completing = self._completing, None
        if thread is not None:
            thread.join()

    def refused(self, subject: str, schema: str, schemas: Any, error: Any) -> None:
        self._settle()
        reasons = error.context.get("reasons") or error.message
        record = self._record(subject, schema, schemas, verdict="incompatible",
                              reasons=[reasons] if isinstance(reasons, str) else list(reasons))
        self._complete(record, refused=True)
        if self.journal is not None:
            self.journal.write(f"refused-{self.batch if self.batch is not None else 'x'}-{int(time.time() * 1000)}",
                               [record])

    def _complete(self, record: HistoryRecord, *, refused: bool = False) -> None:
        registry = self.registry
        try:
            level = registry.get_config(record.subject, default_to_global=True)
            record.compatibility_level = str(getattr(level, "value", level))
        except Exception:  # noqa: BLE001 - for the record only
            pass
        try:
            versions = sorted(registry.get_versions(record.subject))
        except Exception:  # noqa: BLE001 - a new subject, or a registry that does not say
            versions = []
        if refused:
            record.previous_version = versions[-1] if versions else None
            return
        if not self._majors and len(versions) == 1:  # a new subject: its one live version is the one just registered
            record.version = versions[0]
            record.previous_version = None
            record.verdict = "new subject" if record.version == 1 else "compatible"
            return
        found: Any = None
        try:
            found = registry.lookup(record.subject, record.schema)
        except Exception:  # noqa: BLE001 - a registry that matches the text with its metadata only: by id below
            found = None
        if found is None or (record.schema_id is not None and found.id != record.schema_id):
            found = _version_of_id(registry, record.subject, record.schema_id, versions)
        if found is None:
            return
        record.version = int(found.version)
        properties = getattr(found, "properties", None) or {}
        major = properties.get("major_version")  # manager.MAJOR_VERSION
        if major is not None and str(major).isdigit():
            record.major_version = int(str(major))
        made_by = properties.get("avro_registry_sink.table_version")  # manager.TABLE_VERSION
        earlier = [v for v in versions if v < record.version]
        record.previous_version = earlier[-1] if earlier else None
        if record.version == 1 and len(versions) <= 1:
            record.verdict = "new subject"
        elif (versions and record.version < versions[-1]) or (
                made_by is not None and str(made_by) != str(record.table_version)):  # an earlier table version's
            record.verdict = "already registered"
        else:
            record.verdict = "compatible"
            if record.compatibility_level:
                record.reasons = [f"accepted under {record.compatibility_level}"]

    def note_majors(self, majors: Iterable[Any]) -> None:
        """Mark the pending records that ``--on-incompatible new-major`` registered as a new major version
        (:class:`~avro_registry_sink.manager.NewMajor`): their major version, the registry's reasons and the
        migration rules generated."""
        for major in majors:
            for record in self.pending:  # complete: their verdict is replaced here
                if (record.subject, record.schema_id) == (major.subject, major.schema_id):
                    record.major_version = major.new_major
                    record.rules = list(major.rules)
                    record.verdict = "new major"
                    record.reasons = [major.reasons]

    def flush(self, batch_id: int | None = None, name: str | None = None) -> list[HistoryRecord]:
        """Write the pending records (``history/batch-<id>.jsonl``, or ``name``); returns them."""
        self.complete()
        records, self._pending = self._pending, []
        for record in records:
            if record.batch is None:
                record.batch = batch_id
        if self.journal is not None and records:
            self.journal.write(name or f"batch-{batch_id if batch_id is not None else self.batch}", records)
        return records


def _version_of_id(registry: Any, subject: str, schema_id: int | None, versions: list[int]) -> Any:
    """The newest live version of ``subject`` holding ``schema_id`` (a schema reused by its text, as a reverted DDL's
    is under ``--on-incompatible new-major``), ``None`` when none does or the registry does not say."""
    if schema_id is None:
        return None
    for number in reversed(versions):
        try:
            version = registry.get_version(subject, number)
        except Exception:  # noqa: BLE001 - for the record only
            return None
        if getattr(version, "id", None) == schema_id:
            return version
    return None


class TableSources:
    """Where the job's table versions came from, for the history: ``(source, detail, ddl)`` of a table version.

    Changelog DDLs are noted as the job applies them (:meth:`note_ddl`); storage-sink table versions are their
    schema files (path and ``Query``, the DDL TiCDC wrote there); ``--tables`` definitions are ``tables``.
    """

    def __init__(self, layout: Any = None, hints: Iterable[Any] = (), *, changelog: bool = False) -> None:
        self.layout = layout
        self.hints = {(t.schema_name, t.table, t.version) for t in hints}
        self.changelog = changelog
        self.ddl: dict[tuple[str, str, int], str] = {}

    def note_ddl(self, event: Any) -> None:
        if getattr(event, "table", None) and getattr(event, "query", None):
            self.ddl[(event.schema, event.table, int(event.commit_ts or 0))] = event.query

    def __call__(self, table: Any) -> tuple[str, str | None, str | None]:
        key = (table.schema_name, table.table, table.version)
        if key in self.ddl:
            return "ddl", None, self.ddl[key]
        if self.layout is not None:
            try:
                files = self.layout.schema_files()
            except Exception:  # noqa: BLE001 - for the record only
                files = []
            for f in files:
                if (f.schema, f.table, f.version) == key:
                    return "schema-file", f.relpath, f.query or None
        if key in self.hints:
            return "tables", None, None
        return ("inferred" if self.changelog else "unknown"), None, None
