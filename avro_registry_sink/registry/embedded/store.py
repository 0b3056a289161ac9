"""The embedded registry's state machine: Confluent Schema Registry semantics over a pluggable store.

``RegistryStore`` implements what a Confluent registry does for Avro (see
``shared/reference/schema-registry.md``): global schema ids from 1, per-subject versions, idempotent
re-registration, soft then permanent deletes, compatibility levels checked with Apache Avro's own
reader/writer checker (:mod:`.compatibility`), config and mode. Every public method either returns plain JSON-able data or
raises a :class:`~avro_registry_sink.errors.RegistryError` whose ``status_code``/``error_code``/message
are the ones Confluent answers with, so the HTTP layer (``app.py``) only translates.

Schema identity follows Confluent: the *canonical text* (:mod:`.canonical`) is what Java's ``Schema.toString()`` prints
(compact JSON, standard keys in Avro's fixed order, custom properties and logical-type attributes kept in
their original order, ``{"type":"string"}`` printed as ``"string"``, name+namespace printed like a full
name), hashed with MD5. A hash miss gets a second chance inside the subject: an *equivalent* live version
(same schema with custom properties in another order) is returned too.

Parsing a schema and checking its compatibility is CPU work proportional to its size, so it runs without the
store's lock: a request copies what it reads (its references, the versions it compares with) under the lock,
works on that copy, and a registration commits only if nothing was written in between (else it tries again,
and finally does everything under the lock). Reads of other subjects and ids never wait for a large schema.
Request schemas deeper than ``max_schema_depth`` JSON levels, and new schemas holding NaN or Infinity, are
refused as invalid (42201) before any recursive code sees them.

State (:mod:`.state`) lives in memory in both backends; the SQLite backend writes every mutation through in one
transaction before it is applied, and reloads when another connection changed the file::

    >>> store = RegistryStore.open(None)            # in memory; RegistryStore.open("reg.db") for SQLite
    >>> store.register("t-value", '{"type":"string"}')["id"]
    1
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import threading
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import avro.errors
import avro.name
import avro.schema

from avro_registry_sink.errors import (
    IncompatibleSchema,
    InvalidCompatibilityLevel,
    InvalidMode,
    InvalidSchema,
    InvalidSubject,
    InvalidVersion,
    OperationNotPermitted,
    RegistryError,
    SchemaNotFound,
    SubjectConfigNotFound,
    SubjectModeNotFound,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)
from avro_registry_sink.registry.embedded.canonical import (
    SchemaParseError,
    SchemaParser,
    dumps_compact,
    freeze_value,
    load_schema_json,
    normalize_schema,
    show_value,
    type_to_json,
    write_canonical,
)
from avro_registry_sink.registry.embedded.compatibility import differences
from avro_registry_sink.registry.embedded.contracts import (
    CONFIG_CONTRACT_FIELDS,
    VERSION_PROPERTY,
    contract_material,
    lookup_view,
    merge_metadata,
    merge_rule_set,
    normalize_metadata,
    normalize_rule_set,
    properties_of,
    with_version_property,
)
from avro_registry_sink.registry.embedded.state import (
    DropVersion,
    MemoryBackend,
    Op,
    PutConfig,
    PutMode,
    PutSchema,
    PutVersion,
    Reference,
    SqliteBackend,
    State,
    StoredSchema,
    Version,
)

__all__ = [
    "COMPATIBILITY_LEVELS",
    "DEFAULT_COMPATIBILITY",
    "DEFAULT_MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_DEPTH_LIMIT",
    "MODES",
    "RegistryStore",
]

T = TypeVar("T")

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_COMPATIBILITY = "BACKWARD"
# READONLY_OVERRIDE is deprecated in Confluent and behaves as READONLY here; FORWARD (global only) means
# "forward writes to the leader", and this registry is its own leader, so it behaves as READWRITE.
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT", "FORWARD")
_READ_ONLY_MODES = ("READONLY", "READONLY_OVERRIDE")
DEFAULT_MODE = "READWRITE"
CONTEXT = "."
MAX_VERSION = 2**31 - 1
_MAX_OLD_SCHEMA_CHARS = 10 * 1024  # Confluent truncates {oldSchema: ...} beyond this
_MAX_ECHOED_SCHEMA_CHARS = 10 * 1024  # an invalid schema is quoted in the error up to this length
#: JSON nesting levels a request's schema may have (a record nested in a record takes three).
DEFAULT_MAX_SCHEMA_DEPTH = 100
#: The highest configurable depth: deeper, the recursive parsers and Avro's checker could run out of stack.
MAX_SCHEMA_DEPTH_LIMIT = 300
# Optimistic attempts of a registration (work done without the lock) before it holds the lock throughout.
_OPTIMISTIC_ATTEMPTS = 3

_MSG_INVALID_LEVEL = (
    "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, "
    "forward_transitive, and full_transitive"
)
_MSG_INVALID_MODE = "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD."
_MSG_INVALID_VERSION = (
    "The specified version '{}' is not a valid version id. Allowed values are between [1, 2^31-1] "
    'and the string "latest"'
)
_RESERVED_SUBJECTS = ("__GLOBAL", "__EMPTY")


# ---------------------------------------------------------------------------------------------------
# Errors: one constructor per Confluent error, so messages and codes live in one place.


def _subject_not_found(subject: str) -> RegistryError:
    return SubjectNotFound(f"Subject '{subject}' not found.", status_code=404, error_code=40401, subject=subject)


def _version_not_found(subject: str, version: object) -> RegistryError:
    return VersionNotFound(f"Version {version} not found.", status_code=404, error_code=40402, subject=subject)


def _schema_not_found(schema_id: int | None = None) -> RegistryError:
    message = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
    return SchemaNotFound(message, status_code=404, error_code=40403, schema_id=schema_id)


def _invalid_schema(detail: str, *, subject: str | None = None) -> RegistryError:
    return InvalidSchema(detail, status_code=422, error_code=42201, subject=subject)


def _read_only(subject: str) -> RegistryError:
    return OperationNotPermitted(
        f"Subject {subject} in context {CONTEXT} is in read-only mode",
        status_code=422,
        error_code=42205,
        subject=subject,
    )


def _not_permitted(message: str, subject: str | None = None) -> RegistryError:
    return OperationNotPermitted(message, status_code=422, error_code=42205, subject=subject)


# ---------------------------------------------------------------------------------------------------
# Parsed requests


@dataclass(frozen=True)
class _Parsed:
    """A schema from a request, resolved against the registry: canonical text, identity, checker view."""

    text: str
    references: tuple[Reference, ...]
    digest: str
    checker: avro.schema.Schema

    @functools.cached_property
    def equivalence(self) -> object:
        # Only needed when the digest misses; costly for large schemas, so computed on first use.
        return (freeze_value(json.loads(self.text)), self.references)


@dataclass(frozen=True)
class _Candidate:
    """A stored version a request compares with, and the schemas its references need (copied under the lock)."""

    version: Version
    schema: StoredSchema
    deps: tuple[StoredSchema, ...]


@dataclass(frozen=True)
class _View:
    """What a registration, lookup or compatibility check reads, copied under the lock.

    ``generation`` is the store's write counter at the time: a registration planned on this view commits only
    if it is unchanged.
    """

    generation: int
    refs: tuple[Reference, ...]
    deps: tuple[StoredSchema, ...]
    normalize: bool
    level: str
    candidates: tuple[_Candidate, ...]
    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # the subject's effective config


class _JavaNames(avro.name.Names):
    """Python's name table, resolving a short reference like Java: current namespace, then none.

    Without the fallback, a type in the null namespace nested in a namespaced record (which Java writes
    as ``"namespace":""``) could not be referenced by the Python parser.
    """

    def get_name(self, name_attr: str, space_attr: str | None = None) -> Any:
        found = super().get_name(name_attr, space_attr)
        if found is None and isinstance(name_attr, str) and "." not in name_attr:
            found = self.names.get(name_attr)
        return found

    def has_name(self, name_attr: str, space_attr: str | None = None) -> bool:
        return self.get_name(name_attr, space_attr) is not None


def _make_checker_schema(data: object, names: _JavaNames) -> avro.schema.Schema:
    return avro.schema.make_avsc_object(data, names, validate_enum_symbols=False, validate_names=False)


def _digest(text: str, references: Sequence[Reference], metadata: Mapping[str, Any] | None = None,
            rule_set: Mapping[str, Any] | None = None) -> str:
    """A schema's identity: canonical text, references and data contract (metadata, rule set), like Confluent's MD5."""
    material = text if not references else text + "\n" + dumps_compact([r.to_json() for r in references])
    material += contract_material(metadata, rule_set)
    return hashlib.md5(material.encode("utf-8"), usedforsecurity=False).hexdigest()


def _contract_json(out: dict[str, Any], stored: StoredSchema) -> dict[str, Any]:
    """``out`` with the stored schema's ``metadata`` and ``ruleSet`` (deep copies), when it has them."""
    if stored.metadata is not None:
        out["metadata"] = json.loads(json.dumps(stored.metadata))
    if stored.rule_set is not None:
        out["ruleSet"] = json.loads(json.dumps(stored.rule_set))
    return out


def _in_group(candidates: Sequence[_Candidate], group: object, metadata: Mapping[str, Any] | None) -> tuple[
        _Candidate, ...]:
    """The versions a new schema is checked against under ``compatibilityGroup`` ``group``: those whose metadata
    property ``group`` equals the new schema's (absent = absent: versions without it form a group of their own)."""
    if not isinstance(group, str) or not group:
        return tuple(candidates)
    value = properties_of(metadata).get(group)
    return tuple(c for c in candidates if properties_of(c.schema.metadata).get(group) == value)


def _parse_version_id(version: object) -> int | None:
    """A version path segment → number, or None for ``latest``/-1; anything else → 42202."""
    if isinstance(version, int) and not isinstance(version, bool):
        text = str(version)
    elif isinstance(version, str):
        text = version
    else:
        text = str(version)
    if text.lower() == "latest" or text == "-1":
        return None
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not (text.isdigit() and 1 <= number <= MAX_VERSION):
        raise InvalidVersion(_MSG_INVALID_VERSION.format(text), status_code=422, error_code=42202)
    return number


def _check_subject(subject: object) -> str:
    if (
        not isinstance(subject, str)
        or not subject
        or subject in _RESERVED_SUBJECTS
        or any(unicodedata.category(c) == "Cc" for c in subject)
    ):
        raise InvalidSubject(
            f"The specified subject '{subject}' is not a valid.",
            status_code=422,
            error_code=42208,
            subject=str(subject),
        )
    return subject


def _level(value: object) -> str:
    if isinstance(value, str) and value.upper() in COMPATIBILITY_LEVELS:
        return value.upper()
    raise InvalidCompatibilityLevel(_MSG_INVALID_LEVEL, status_code=422, error_code=42203)


def _paginate(items: list[T], offset: int, limit: int) -> list[T]:
    offset = max(offset, 0)
    return items[offset:] if limit is None or limit < 0 else items[offset : offset + limit]


# ---------------------------------------------------------------------------------------------------
# The store


class RegistryStore:
    """Confluent Schema Registry state machine (Avro only, default context ``.``).

    ``incompatible_error_code`` is the ``error_code`` of an incompatible registration: 409 like CP ≤ 8.0.3
    and Karapace (the default), or 40901 like CP 8.0.4+/8.1.2+/8.2+. The HTTP status is 409 either way.
    """

    def __init__(
        self,
        backend: MemoryBackend | SqliteBackend | None = None,
        *,
        default_compatibility: str = DEFAULT_COMPATIBILITY,
        incompatible_error_code: int = 409,
        max_schema_depth: int = DEFAULT_MAX_SCHEMA_DEPTH,
    ) -> None:
        if incompatible_error_code not in (409, 40901):
            raise ValueError(f"incompatible_error_code must be 409 or 40901, not {incompatible_error_code!r}")
        if isinstance(max_schema_depth, bool) or not isinstance(max_schema_depth, int) or not (
            1 <= max_schema_depth <= MAX_SCHEMA_DEPTH_LIMIT
        ):
            raise ValueError(f"max_schema_depth must be an integer in 1..{MAX_SCHEMA_DEPTH_LIMIT}, not {max_schema_depth!r}")
        self._max_schema_depth = max_schema_depth
        self._backend = backend or MemoryBackend()
        self._default_compatibility = _level(default_compatibility)
        self._incompatible_error_code = incompatible_error_code
        self._lock = threading.RLock()
        self._state = self._backend.load()
        self._generation = 0  # bumped by every applied write and every reload
        # Keyed by (id, digest): entries stay right even if an id is ever reused for other content.
        self._checker_cache: dict[tuple[int, str], avro.schema.Schema] = {}
        self._equivalence_cache: dict[tuple[int, str], object] = {}

    @classmethod
    def open(cls, data: str | None = None, *, lock_timeout: float | None = None, **options: Any) -> RegistryStore:
        """In memory when ``data`` is None or ``":memory:"``, else the SQLite file at ``data`` (waiting at most
        ``lock_timeout`` seconds for another process's lock, see :class:`SqliteBackend`). A file that cannot be
        used raises :class:`~avro_registry_sink.errors.RegistryFileError`."""
        if data is None or data == ":memory:":
            return cls(MemoryBackend(), **options)
        backend = SqliteBackend(data, lock_timeout)
        try:
            return cls(backend, **options)
        except BaseException:
            backend.close()
            raise

    @property
    def path(self) -> str | None:
        """The SQLite file, or None in memory."""
        return getattr(self._backend, "path", None)

    def close(self) -> None:
        with self._lock:
            self._backend.close()

    def __enter__(self) -> RegistryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------------
    @property
    def max_schema_depth(self) -> int:
        """JSON nesting levels a request's schema may have."""
        return self._max_schema_depth

    def _refresh(self) -> None:
        if self._backend.is_stale():
            self._state = self._backend.load()
            self._generation += 1
            self._checker_cache.clear()
            self._equivalence_cache.clear()

    def _read(self, fn: Callable[[State], T]) -> T:
        with self._lock:
            self._refresh()
            return fn(self._state)

    def _write(self, fn: Callable[[State], tuple[list[Op], T]]) -> T:
        """Compute ops from the current state, persist them in one transaction, then apply them."""
        with self._lock:
            with self._backend.transaction():
                self._refresh()
                ops, result = fn(self._state)
                self._backend.persist(ops)
            self._apply(ops)
            return result

    def _apply(self, ops: Sequence[Op]) -> None:
        for op in ops:
            self._state.apply(op)
        if ops:
            self._generation += 1

    def _view(
        self, st: State, subject: str, references: object, normalize: bool, candidates: Sequence[Version]
    ) -> _View:
        """Copy what a request's parse and compatibility check read (call under the lock)."""
        refs = self._resolve_references(st, references, subject)
        wanted = self._normalize_wanted(st, subject, normalize)
        if wanted:
            refs = tuple(sorted(set(refs), key=lambda r: (r.name, r.subject, r.version)))
        return _View(
            generation=self._generation,
            refs=refs,
            deps=tuple(self._dependencies(st, refs)),
            normalize=wanted,
            level=self._effective_config(st, subject)["compatibilityLevel"],
            candidates=tuple(
                _Candidate(v, st.schemas[v.schema_id], tuple(self._dependencies(st, st.schemas[v.schema_id].references)))
                for v in candidates
            ),
            config=self._effective_config(st, subject),
        )

    def _optimistic_write(
        self,
        prepare: Callable[[State], _View],
        plan: Callable[[_View], T],
        commit: Callable[[State, T], tuple[list[Op], Any]],
    ) -> Any:
        """``plan`` (the CPU work) runs without the lock on a view ``prepare`` copied under it; ``commit``
        applies it if nothing was written meanwhile. After a few lost races everything runs under the lock."""
        for _ in range(_OPTIMISTIC_ATTEMPTS):
            with self._lock:
                self._refresh()
                view = prepare(self._state)
            planned = plan(view)
            with self._lock:
                with self._backend.transaction():
                    self._refresh()
                    if self._generation != view.generation:
                        continue
                    ops, result = commit(self._state, planned)
                    self._backend.persist(ops)
                self._apply(ops)
                return result
        return self._write(lambda st: commit(st, plan(prepare(st))))

    def _read_planned(self, prepare: Callable[[State], _View], plan: Callable[[_View], T]) -> T:
        """A read whose CPU work (``plan``) runs without the lock on a view copied under it."""
        with self._lock:
            self._refresh()
            view = prepare(self._state)
        return plan(view)

    def _mode(self, st: State, subject: str | None) -> str:
        if subject is not None and subject in st.mode:
            return st.mode[subject]
        return st.mode.get(None, DEFAULT_MODE)

    def _effective_config(self, st: State, subject: str | None) -> dict[str, Any]:
        merged: dict[str, Any] = {"compatibilityLevel": self._default_compatibility}
        merged.update(st.config.get(None, {}))
        if subject is not None:
            merged.update(st.config.get(subject, {}))
        return merged

    def _ensure_writable(self, st: State, subject: str | None) -> None:
        if self._mode(st, subject) in _READ_ONLY_MODES:
            raise _read_only(subject if subject is not None else "__GLOBAL")

    # -- schema parsing ----------------------------------------------------------------------------
    def _resolve_references(self, st: State, references: object, subject: str | None) -> tuple[Reference, ...]:
        if references is None:
            return ()
        if not isinstance(references, list):
            raise _invalid_schema(f"Invalid references {show_value(references)}: expected a list", subject=subject)
        out: list[Reference] = []
        for ref in references:
            if not (isinstance(ref, dict) and isinstance(ref.get("name"), str) and isinstance(ref.get("subject"), str)):
                raise _invalid_schema(f"Invalid reference {show_value(ref)}: name and subject are required", subject=subject)
            version = ref.get("version", -1)
            try:
                number = _parse_version_id(version)
            except RegistryError:
                raise _invalid_schema(f"Invalid reference {show_value(ref)}: bad version", subject=subject) from None
            candidates = st.versions(ref["subject"], deleted=number is not None)
            match = [v for v in candidates if number is None or v.version == number]
            if not match:
                raise _invalid_schema(
                    f"Invalid schema: reference {ref['name']} to subject '{ref['subject']}' version {version} "
                    "does not exist",
                    subject=subject,
                )
            out.append(Reference(ref["name"], ref["subject"], match[-1].version))
        return tuple(out)

    def _dependencies(self, st: State, references: Sequence[Reference]) -> list[StoredSchema]:
        """Referenced schemas, transitively, dependencies first (each once)."""
        ordered: list[StoredSchema] = []
        seen: set[int] = set()

        def visit(refs: Sequence[Reference], depth: int) -> None:
            if depth > 64:
                raise _invalid_schema("Invalid schema: references are nested too deeply (a cycle?)")
            for ref in refs:
                version = st.subjects.get(ref.subject, {}).get(ref.version)
                if version is None:
                    raise _invalid_schema(
                        f"Invalid schema: reference to subject '{ref.subject}' version {ref.version} does not exist"
                    )
                schema = st.schemas[version.schema_id]
                if schema.id in seen:
                    continue
                visit(schema.references, depth + 1)
                seen.add(schema.id)
                ordered.append(schema)

        visit(references, 0)
        return ordered

    def _parse(
        self,
        text: object,
        *,
        refs: tuple[Reference, ...],
        deps: Sequence[StoredSchema],
        schema_type: object = None,
        normalize: bool = False,
        validate: bool = True,
        from_request: bool = True,
        subject: str | None = None,
    ) -> _Parsed:
        """Parse ``text`` (its references already resolved to ``deps``); needs no state, so no lock.

        ``from_request``: the text came from a client, so the depth limit applies (and, with ``validate``,
        non-finite numbers are refused); stored texts passed those checks when they were registered.
        """
        kind = "AVRO" if schema_type is None else schema_type
        if not isinstance(kind, str) or kind.upper() != "AVRO":
            raise _invalid_schema(f"Invalid schema type {kind}", subject=subject)
        if text is not None and not isinstance(text, str):
            raise _invalid_schema(
                f'Invalid schema: "schema" must be a string holding the schema\'s JSON text, not {show_value(text)[:200]}',
                subject=subject,
            )
        if not text or not text.strip():
            raise _invalid_schema("Empty schema", subject=subject)
        try:
            data = load_schema_json(
                text,
                max_depth=self._max_schema_depth if from_request else None,
                finite=from_request and validate,
            )
        except SchemaParseError as exc:
            raise _invalid_schema(self._invalid_detail(text, refs, str(exc)), subject=subject) from None
        parser = SchemaParser(validate_defaults=False)
        top_level: list[str] = []
        # Names and symbols were validated the Java way (Unicode letters allowed); Python's ASCII-only
        # validation must not refuse what Java accepts.
        checker_names = _JavaNames(validate_names=False)
        try:
            for dep in deps:
                defined_before = set(parser.names)
                dep_type = parser.parse(json.loads(dep.text))
                if dep_type.is_named and dep_type.name is not None:
                    top_level.append(dep_type.name.full)
                dep_checker_json = type_to_json(dep_type, defined_before, None, checker=True)
                _make_checker_schema(dep_checker_json, checker_names)
            # The canonical text (Confluent's toString(refs)) knows only the referenced top-level types;
            # the Python parser already holds every type the references define.
            defined_by_deps = set(parser.names)
            parser.validate_defaults = validate
            parsed = parser.parse(data)
            if normalize:
                normalize_schema(parsed)
            canonical = write_canonical(parsed, top_level)
            checker_json = type_to_json(parsed, defined_by_deps, None, checker=True)
            checker = _make_checker_schema(checker_json, checker_names)
        except (SchemaParseError, avro.errors.AvroException) as exc:
            raise _invalid_schema(self._invalid_detail(text, refs, str(exc)), subject=subject) from None
        except RecursionError:  # not reachable within MAX_SCHEMA_DEPTH_LIMIT; a 422 all the same
            detail = self._invalid_detail(text, refs, "schema nested too deeply")
            raise _invalid_schema(detail, subject=subject) from None
        return _Parsed(text=canonical, references=refs, digest=_digest(canonical, refs), checker=checker)

    def _parse_request(
        self, view: _View, text: object, *, schema_type: object, validate: bool = True, subject: str
    ) -> _Parsed:
        return self._parse(
            text,
            refs=view.refs,
            deps=view.deps,
            schema_type=schema_type,
            normalize=view.normalize,
            validate=validate,
            subject=subject,
        )

    @staticmethod
    def _invalid_detail(text: str, refs: Sequence[Reference], detail: str) -> str:
        if len(text) > _MAX_ECHOED_SCHEMA_CHARS:
            text = f"<{len(text)} characters, starting> {text[:_MAX_ECHOED_SCHEMA_CHARS]}"
        return f"Invalid schema {text} with refs {[r.to_json() for r in refs]} of type AVRO, details: {detail}"

    def _stored_checker(self, candidate: _Candidate) -> avro.schema.Schema:
        stored = candidate.schema
        key = (stored.id, stored.digest)
        cached = self._checker_cache.get(key)
        if cached is None:
            cached = self._parse(
                stored.text, refs=stored.references, deps=candidate.deps, validate=False, from_request=False
            ).checker
            self._checker_cache[key] = cached
        return cached

    def _stored_equivalence(self, stored: StoredSchema) -> object:
        key = (stored.id, stored.digest)
        cached = self._equivalence_cache.get(key)
        if cached is None:
            cached = (freeze_value(json.loads(stored.text)), stored.references)
            self._equivalence_cache[key] = cached
        return cached

    def _match(self, candidates: Sequence[_Candidate], parsed: _Parsed, metadata: Mapping[str, Any] | None = None,
               rule_set: Mapping[str, Any] | None = None) -> _Candidate | None:
        """Confluent's lookup: same identity (text, references, metadata, rule set), else an equivalent version with
        the same metadata (``confluent:version`` aside) and rule set (newest first)."""
        digest = _digest(parsed.text, parsed.references, metadata, rule_set)
        for c in reversed(candidates):
            if c.schema.digest == digest:
                return c
        contract = lookup_view(metadata, rule_set)
        for c in reversed(candidates):
            if (lookup_view(c.schema.metadata, c.schema.rule_set) == contract
                    and self._stored_equivalence(c.schema) == parsed.equivalence):
                return c
        return None

    @staticmethod
    def _merged_contract(config: Mapping[str, Any], latest: _Candidate | None, metadata: dict[str, Any] | None,
                         rule_set: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Confluent's ``maybeSetMetadataRuleSet``: the request's metadata and rule set, else the latest version's
        (inherited), merged between the config's defaults and overrides."""
        specific_md = metadata if metadata is not None else (latest.schema.metadata if latest else None)
        specific_rs = rule_set if rule_set is not None else (latest.schema.rule_set if latest else None)
        md = merge_metadata(merge_metadata(config.get("defaultMetadata"), specific_md), config.get("overrideMetadata"))
        rs = merge_rule_set(merge_rule_set(config.get("defaultRuleSet"), specific_rs), config.get("overrideRuleSet"))
        return md, rs

    @staticmethod
    def _has_contract_defaults(config: Mapping[str, Any]) -> bool:
        return any(config.get(k) is not None for k in ("defaultMetadata", "overrideMetadata", "defaultRuleSet",
                                                        "overrideRuleSet"))

    def _normalize_wanted(self, st: State, subject: str, normalize: bool) -> bool:
        return normalize or bool(self._effective_config(st, subject).get("normalize", False))

    # -- compatibility -----------------------------------------------------------------------------
    def _incompatibilities(self, parsed: _Parsed, level: str, against: Sequence[_Candidate]) -> list[str]:
        """Confluent's validator: latest or all (newest → oldest, first failure wins); [] if compatible."""
        if level == "NONE" or not against:
            return []
        targets = list(reversed(against)) if level.endswith("_TRANSITIVE") else [against[-1]]
        for old in targets:
            old_checker = self._stored_checker(old)
            messages: list[str] = []
            if level.startswith(("FORWARD", "FULL")):
                messages += differences(old_checker, parsed.checker, ("old", "new"))
            if level.startswith(("BACKWARD", "FULL")):
                messages += differences(parsed.checker, old_checker, ("new", "old"))
            if messages:
                old_text = old.schema.text
                messages.append(f"{{oldSchemaVersion: {old.version.version}}}")
                if len(old_text) <= _MAX_OLD_SCHEMA_CHARS:
                    messages.append(f"{{oldSchema: '{old_text}'}}")
                else:
                    messages.append(
                        f"{{oldSchema: <truncated to {_MAX_OLD_SCHEMA_CHARS} characters> "
                        f"'{old_text[:_MAX_OLD_SCHEMA_CHARS]}'}}"
                    )
                messages.append(f"{{validateFields: 'false', compatibility: '{level}'}}")
                return messages
        return []

    # -- registration and lookup -------------------------------------------------------------------
    def register(
        self,
        subject: str,
        schema: str,
        *,
        schema_type: str | None = None,
        references: list[dict[str, Any]] | None = None,
        schema_id: int | None = None,
        version: int | None = None,
        normalize: bool = False,
        metadata: object = None,
        rule_set: object = None,
    ) -> dict[str, Any]:
        """``POST /subjects/{subject}/versions``: ``{"id", "version", "schema"[, "metadata", "ruleSet"]}`` of the
        registered version.

        ``schema_id``/``version`` are only honoured in IMPORT mode (``version`` outside it must be the next
        version number). Data contracts as Confluent: ``metadata``/``rule_set`` absent (None) inherit the latest
        version's, then the config's defaults and overrides are merged in; both are part of the schema's identity;
        a request without a schema text takes the latest version's; under a ``compatibilityGroup`` only versions
        with the same value of that metadata property are compared.
        """
        _check_subject(subject)
        schema_id = schema_id if schema_id is not None and schema_id >= 0 else None
        version = version if version is not None and version > 0 else None
        request_md = normalize_metadata(metadata)
        request_rs = normalize_rule_set(rule_set)
        Planned = tuple[_Parsed, _Candidate | None, list[str], "dict[str, Any] | None", "dict[str, Any] | None"]

        def prepare(st: State) -> _View:
            live = st.versions(subject, deleted=False)
            if (schema is None or schema == "") and live:  # no text: the latest version's, with its references
                latest = st.schemas[live[-1].schema_id]
                refs = [r.to_json() for r in latest.references] or None
                return self._view(st, subject, refs, normalize, live)
            return self._view(st, subject, references, normalize, live)

        def plan(view: _View) -> Planned:
            latest = view.candidates[-1] if view.candidates else None
            text = schema if (schema is not None and schema != "") or latest is None else latest.schema.text
            parsed = self._parse_request(view, text, schema_type=schema_type, subject=subject)
            existing = None
            if not self._has_contract_defaults(view.config):  # the request exactly as sent, before any merge
                existing = self._match(view.candidates, parsed, request_md, request_rs)
            md, rs = self._merged_contract(view.config, latest, request_md, request_rs)
            if existing is None:
                existing = self._match(view.candidates, parsed, md, rs)
            reasons: list[str] = []
            if existing is None:
                against = _in_group(view.candidates, view.config.get("compatibilityGroup"), md)
                reasons = self._incompatibilities(parsed, view.level, against)
            return parsed, existing, reasons, md, rs

        def commit(st: State, planned: Planned) -> tuple[list[Op], dict[str, Any]]:
            parsed, existing, reasons, md, rs = planned
            if existing is not None:  # idempotent: no mode check, no compatibility check, no new version
                return [], self._registered(existing)
            all_versions = st.versions(subject, deleted=True)
            mode = self._mode(st, subject)
            if mode in _READ_ONLY_MODES:
                raise _read_only(subject)
            if mode == "IMPORT":
                return self._import(st, subject, parsed, schema_id, version, md, rs)
            if schema_id is not None:
                raise _not_permitted(f"Subject {subject} in context {CONTEXT} is not in import mode", subject)
            next_version = max((v.version for v in all_versions), default=0) + 1
            if version is not None and version != next_version:
                raise _invalid_schema("Version is not one more than previous version", subject=subject)
            if reasons:
                raise IncompatibleSchema(
                    f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
                    f"details: [{', '.join(reasons)}]",
                    status_code=409,
                    error_code=self._incompatible_error_code,
                    subject=subject,
                    reasons=reasons,
                )
            if version is not None or VERSION_PROPERTY in properties_of(md):  # Confluent records the version
                md = with_version_property(md, next_version)
            ops: list[Op] = []
            digest = _digest(parsed.text, parsed.references, md, rs)
            found = st.by_digest.get(digest)
            stored = st.schemas.get(found) if found is not None else None
            if stored is None:
                stored = StoredSchema(st.max_id + 1, "AVRO", parsed.text, parsed.references, digest, md, rs)
                ops.append(PutSchema(stored))
            new_id = stored.id
            # A soft-deleted version of this subject with the same id is tombstoned (Confluent does too).
            ops += [DropVersion(subject, v.version) for v in all_versions if v.deleted and v.schema_id == new_id]
            new_version = Version(subject, next_version, new_id)
            ops.append(PutVersion(new_version))
            return ops, _contract_json({"id": new_id, "version": next_version, "schema": parsed.text}, stored)

        return self._optimistic_write(prepare, plan, commit)  # type: ignore[no-any-return]

    def _import(
        self, st: State, subject: str, parsed: _Parsed, schema_id: int | None, version: int | None,
        metadata: dict[str, Any] | None = None, rule_set: dict[str, Any] | None = None,
    ) -> tuple[list[Op], dict[str, Any]]:
        if schema_id is None or version is None:
            raise _not_permitted(
                f"Subject {subject} in context {CONTEXT} is in import mode: a registration must carry both "
                '"id" and "version"',
                subject,
            )
        ops: list[Op] = []
        digest = _digest(parsed.text, parsed.references, metadata, rule_set)
        existing = st.schemas.get(schema_id)
        if existing is not None and existing.digest != digest:
            raise _not_permitted(f"Overwrite new schema with id {schema_id} is not permitted.", subject)
        other_id = st.by_digest.get(digest)
        if other_id is not None and other_id != schema_id:
            raise RegistryError(
                "The ID of an imported schema does not match the existing ID",
                status_code=422,
                error_code=42207,
                subject=subject,
                schema_id=schema_id,
            )
        taken = st.subjects.get(subject, {}).get(version)
        if taken is not None:
            raise _not_permitted(f"Overwrite new schema with version {version} is not permitted.", subject)
        stored = existing or StoredSchema(schema_id, "AVRO", parsed.text, parsed.references, digest, metadata, rule_set)
        if existing is None:
            ops.append(PutSchema(stored))
        ops.append(PutVersion(Version(subject, version, schema_id)))
        return ops, _contract_json({"id": schema_id, "version": version, "schema": parsed.text}, stored)

    @staticmethod
    def _registered(c: _Candidate) -> dict[str, Any]:
        return _contract_json({"id": c.version.schema_id, "version": c.version.version, "schema": c.schema.text},
                              c.schema)

    @staticmethod
    def _candidate_json(c: _Candidate) -> dict[str, Any]:
        v = c.version
        out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.schema_id, "schema": c.schema.text}
        if c.schema.references:
            out["references"] = [r.to_json() for r in c.schema.references]
        return _contract_json(out, c.schema)

    def _version_json(self, st: State, v: Version) -> dict[str, Any]:
        stored = st.schemas[v.schema_id]
        out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.schema_id, "schema": stored.text}
        if stored.references:
            out["references"] = [r.to_json() for r in stored.references]
        return _contract_json(out, stored)

    def lookup(
        self,
        subject: str,
        schema: str,
        *,
        schema_type: str | None = None,
        references: list[dict[str, Any]] | None = None,
        normalize: bool = False,
        deleted: bool = False,
        metadata: object = None,
        rule_set: object = None,
    ) -> dict[str, Any]:
        """``POST /subjects/{subject}``: the version of ``subject`` holding ``schema`` with the request's metadata and
        rule set; failing that, with the latest version's (and the config's defaults/overrides) merged in, as a
        registration would store it."""
        _check_subject(subject)
        request_md = normalize_metadata(metadata)
        request_rs = normalize_rule_set(rule_set)

        def prepare(st: State) -> _View:
            candidates = st.versions(subject, deleted=deleted)
            if not candidates:
                raise _subject_not_found(subject)
            return self._view(st, subject, references, normalize, candidates)

        def plan(view: _View) -> dict[str, Any]:
            parsed = self._parse_request(view, schema, schema_type=schema_type, validate=False, subject=subject)
            found = self._match(view.candidates, parsed, request_md, request_rs)
            if found is None:
                live = [c for c in view.candidates if not c.version.deleted]
                md, rs = self._merged_contract(view.config, live[-1] if live else None, request_md, request_rs)
                found = self._match(view.candidates, parsed, md, rs)
            if found is None:
                raise _schema_not_found()
            return self._candidate_json(found)

        return self._read_planned(prepare, plan)

    # -- schemas by id -----------------------------------------------------------------------------
    def _schema_by_id(self, st: State, schema_id: int) -> StoredSchema:
        stored = st.schemas.get(schema_id)
        if stored is None or not st.is_resolvable(schema_id):
            raise _schema_not_found(schema_id)
        return stored

    def get_schema(self, schema_id: int, *, fetch_max_id: bool = False) -> dict[str, Any]:
        """``GET /schemas/ids/{id}``: ``{"schema"}`` (+ ``references``, ``maxId``); works after soft delete."""

        def read(st: State) -> dict[str, Any]:
            stored = self._schema_by_id(st, schema_id)
            out: dict[str, Any] = {"schema": stored.text}
            if stored.references:
                out["references"] = [r.to_json() for r in stored.references]
            if fetch_max_id:
                out["maxId"] = st.max_id
            return _contract_json(out, stored)

        return self._read(read)

    def subjects_for_id(self, schema_id: int, *, deleted: bool = False) -> list[str]:
        """``GET /schemas/ids/{id}/subjects``."""
        return sorted({v["subject"] for v in self.versions_for_id(schema_id, deleted=deleted)})

    def versions_for_id(self, schema_id: int, *, deleted: bool = False) -> list[dict[str, Any]]:
        """``GET /schemas/ids/{id}/versions``: ``[{"subject", "version"}]``."""

        def read(st: State) -> list[dict[str, Any]]:
            self._schema_by_id(st, schema_id)
            return [
                {"subject": v.subject, "version": v.version}
                for subject in sorted(st.subjects)
                for v in st.versions(subject, deleted=deleted)
                if v.schema_id == schema_id
            ]

        return self._read(read)

    # -- subjects and versions ---------------------------------------------------------------------
    def list_subjects(
        self,
        *,
        prefix: str | None = None,
        deleted: bool = False,
        deleted_only: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[str]:
        """``GET /subjects``: subjects with a live version; ``deleted`` adds fully soft-deleted ones."""

        def read(st: State) -> list[str]:
            out = []
            for subject in sorted(st.subjects):
                if prefix and not subject.startswith(prefix):
                    continue
                has_live = any(not v.deleted for v in st.subjects[subject].values())
                if (deleted_only and not has_live) or (not deleted_only and (has_live or deleted)):
                    out.append(subject)
            return _paginate(out, offset, limit)

        return self._read(read)

    def list_versions(
        self,
        subject: str,
        *,
        deleted: bool = False,
        deleted_only: bool = False,
        deleted_as_negative: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[int]:
        """``GET /subjects/{subject}/versions``: ascending version numbers."""

        def read(st: State) -> list[int]:
            every = st.versions(subject, deleted=True)
            if deleted_only:
                chosen = [v for v in every if v.deleted]
            else:
                chosen = [v for v in every if deleted or deleted_as_negative or not v.deleted]
            if not chosen and (not deleted_only or not every):
                raise _subject_not_found(subject)
            numbers = [-v.version if deleted_as_negative and v.deleted else v.version for v in chosen]
            return _paginate(numbers, offset, limit)

        return self._read(read)

    def _find_version(self, st: State, subject: str, version: object, *, deleted: bool) -> Version:
        number = _parse_version_id(version)
        candidates = st.versions(subject, deleted=deleted)
        if not candidates:
            raise _subject_not_found(subject)
        if number is None:
            return candidates[-1]
        for v in candidates:
            if v.version == number:
                return v
        raise _version_not_found(subject, number)

    def get_version(self, subject: str, version: object, *, deleted: bool = False) -> dict[str, Any]:
        """``GET /subjects/{subject}/versions/{version}`` (``latest``/-1 = highest live version)."""
        return self._read(lambda st: self._version_json(st, self._find_version(st, subject, version, deleted=deleted)))

    def latest_with_metadata(
        self, subject: str, properties: Sequence[tuple[str, str]], *, deleted: bool = False
    ) -> dict[str, Any]:
        """``GET /subjects/{subject}/metadata?key=k&value=v...``: the newest version whose metadata ``properties``
        hold every pair (tags are not consulted); ``deleted`` includes soft-deleted versions. 40401 for a subject
        without versions, 40403 when none matches."""

        def read(st: State) -> dict[str, Any]:
            versions = st.versions(subject, deleted=deleted)
            if not versions:
                raise _subject_not_found(subject)
            for v in reversed(versions):
                held = properties_of(st.schemas[v.schema_id].metadata)
                if all(held.get(key) == value for key, value in properties):
                    return self._version_json(st, v)
            raise _schema_not_found()

        return self._read(read)

    def referenced_by(self, subject: str, version: object) -> list[int]:
        """``GET /subjects/{subject}/versions/{version}/referencedby``: ids of schemas referencing it."""

        def read(st: State) -> list[int]:
            target = self._find_version(st, subject, version, deleted=True)
            return self._referrers(st, target)

        return self._read(read)

    @staticmethod
    def _referrers(st: State, target: Version) -> list[int]:
        ids = {
            v.schema_id
            for vs in st.subjects.values()
            for v in vs.values()
            if not v.deleted
            and any((r.subject, r.version) == (target.subject, target.version) for r in st.schemas[v.schema_id].references)
        }
        return sorted(ids)

    # -- deletes -----------------------------------------------------------------------------------
    def delete_version(self, subject: str, version: object, *, permanent: bool = False) -> int:
        """``DELETE /subjects/{subject}/versions/{version}``: soft first, then ``permanent``."""
        _check_subject(subject)
        number = _parse_version_id(version)

        def mutate(st: State) -> tuple[list[Op], int]:
            every = st.versions(subject, deleted=True)
            if not every:
                raise _subject_not_found(subject)
            live = [v for v in every if not v.deleted]
            if number is None:
                pool = every if permanent else live
                if not pool:
                    raise _version_not_found(subject, "latest")
                target = pool[-1]
            else:
                matches = [v for v in every if v.version == number]
                if not matches:
                    raise _version_not_found(subject, number)
                target = matches[0]
            self._ensure_writable(st, subject)
            if not permanent and target.deleted:
                raise VersionSoftDeleted(
                    f"Subject '{subject}' Version {target.version} was soft deleted."
                    "Set permanent=true to delete permanently",
                    status_code=404,
                    error_code=40406,
                    subject=subject,
                )
            if permanent and not target.deleted:
                raise VersionNotSoftDeleted(
                    f"Subject '{subject}' Version {target.version} was not deleted first before being "
                    "permanently deleted",
                    status_code=404,
                    error_code=40407,
                    subject=subject,
                )
            referrers = self._referrers(st, target)
            if referrers:
                raise RegistryError(
                    f"One or more references exist to the schema {{subject={subject},version={target.version}}}"
                    f" from schema ids {referrers}.",
                    status_code=422,
                    error_code=42206,
                    subject=subject,
                )
            if not permanent:
                return [PutVersion(dataclasses.replace(target, deleted=True))], target.version
            ops: list[Op] = [DropVersion(subject, target.version)]
            if len(every) == 1:  # the subject's last version: its config and mode go too
                ops += self._drop_subject_settings(st, subject)
            return ops, target.version

        return self._write(mutate)

    @staticmethod
    def _drop_subject_settings(st: State, subject: str) -> list[Op]:
        ops: list[Op] = []
        if subject in st.config:
            ops.append(PutConfig(subject, None))
        if subject in st.mode:
            ops.append(PutMode(subject, None))
        return ops

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """``DELETE /subjects/{subject}``: soft-delete every live version, or purge a soft-deleted subject."""
        _check_subject(subject)

        def mutate(st: State) -> tuple[list[Op], list[int]]:
            every = st.versions(subject, deleted=True)
            if not every:
                raise _subject_not_found(subject)
            self._ensure_writable(st, subject)
            live = [v for v in every if not v.deleted]
            if not permanent and not live:
                raise SubjectSoftDeleted(
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
                    status_code=404,
                    error_code=40404,
                    subject=subject,
                )
            if permanent and live:
                raise SubjectNotSoftDeleted(
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                    status_code=404,
                    error_code=40405,
                    subject=subject,
                )
            for v in every:
                referrers = self._referrers(st, v)
                if referrers:
                    raise RegistryError(
                        f"One or more references exist to the schema {{subject={subject},version={v.version}}}"
                        f" from schema ids {referrers}.",
                        status_code=422,
                        error_code=42206,
                        subject=subject,
                    )
            if not permanent:
                return [PutVersion(dataclasses.replace(v, deleted=True)) for v in live], [v.version for v in live]
            ops: list[Op] = [DropVersion(subject, v.version) for v in every]
            ops += self._drop_subject_settings(st, subject)
            return ops, [v.version for v in every]

        return self._write(mutate)

    # -- compatibility endpoint --------------------------------------------------------------------
    def check_compatibility(
        self,
        subject: str,
        schema: str,
        *,
        version: object = None,
        schema_type: str | None = None,
        references: list[dict[str, Any]] | None = None,
        normalize: bool = False,
        verbose: bool = False,
        metadata: object = None,
        rule_set: object = None,
    ) -> dict[str, Any]:
        """``POST /compatibility/subjects/{subject}/versions[/{version}]``: ``{"is_compatible"[, "messages"]}``.

        With ``version`` only that version is compared (the level's direction, transitivity irrelevant);
        without it, exactly what a registration would compare (within the schema's compatibility group, its
        metadata merged as a registration would).
        """
        _check_subject(subject)
        request_md = normalize_metadata(metadata)
        request_rs = normalize_rule_set(rule_set)
        number = None if version is None else _parse_version_id(version)

        def prepare(st: State) -> _View:
            live = st.versions(subject, deleted=False)
            if version is not None and number is not None and not any(v.version == number for v in live):
                raise _version_not_found(subject, number)
            return self._view(st, subject, references, normalize, live)

        def plan(view: _View) -> dict[str, Any]:
            parsed = self._parse_request(view, schema, schema_type=schema_type, subject=subject)
            level = view.level
            if version is None:
                md, _ = self._merged_contract(view.config, view.candidates[-1] if view.candidates else None,
                                              request_md, request_rs)
                against = _in_group(view.candidates, view.config.get("compatibilityGroup"), md)
            else:
                against = (
                    tuple(c for c in view.candidates if c.version.version == number)
                    if number is not None
                    else view.candidates[-1:]
                )
                level = level.removesuffix("_TRANSITIVE")
            messages = self._incompatibilities(parsed, level, against)
            out: dict[str, Any] = {"is_compatible": not messages}
            if verbose:
                out["messages"] = messages
            return out

        try:
            return self._read_planned(prepare, plan)
        except RegistryError as exc:
            if verbose and exc.error_code == 42201:  # an invalid schema or reference is an answer here
                return {"is_compatible": False, "messages": [exc.message]}
            raise

    # -- config ------------------------------------------------------------------------------------
    @staticmethod
    def _config_json(config: Mapping[str, Any]) -> dict[str, Any]:
        return {k: config[k] for k in ("compatibilityLevel", "normalize", *CONFIG_CONTRACT_FIELDS)
                if config.get(k) is not None}

    def get_config(self, subject: str | None = None, *, default_to_global: bool = False) -> dict[str, Any]:
        """``GET /config[/{subject}]``: ``{"compatibilityLevel": ...}`` (note: not ``compatibility``)."""

        def read(st: State) -> dict[str, Any]:
            if subject is None:
                return self._config_json(self._effective_config(st, None))
            if subject in st.config and not default_to_global:
                return self._config_json(st.config[subject])
            if default_to_global:
                return self._config_json(self._effective_config(st, subject))
            raise SubjectConfigNotFound(
                f"Subject '{subject}' does not have subject-level compatibility configured",
                status_code=404,
                error_code=40408,
                subject=subject,
            )

        return self._read(read)

    def set_config(
        self, subject: str | None, compatibility: object = None, *, normalize: object = None,
        contract: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``PUT /config[/{subject}]``: echoes ``{"compatibility": LEVEL}`` (+ the other fields given).

        ``contract`` holds the data-contract fields the request gave (``compatibilityGroup``, ``defaultMetadata``,
        ``overrideMetadata``, ``defaultRuleSet``, ``overrideRuleSet``); a field given as ``None`` (JSON ``null``) is
        cleared, one not given is kept, as Confluent's PUT patches the config.
        """
        if subject is not None:
            _check_subject(subject)
        contract = dict(contract or {})
        if compatibility is None and normalize is None and not contract:
            raise InvalidCompatibilityLevel(_MSG_INVALID_LEVEL, status_code=422, error_code=42203, subject=subject)
        level = None if compatibility is None else _level(compatibility)
        for key, value in contract.items():
            if key == "compatibilityGroup":
                if value is not None and not isinstance(value, str):
                    raise InvalidCompatibilityLevel("compatibilityGroup must be a metadata property name",
                                                    status_code=422, error_code=42203, subject=subject)
            elif key.endswith("Metadata"):
                contract[key] = normalize_metadata(value)
            else:
                contract[key] = normalize_rule_set(value)

        def mutate(st: State) -> tuple[list[Op], dict[str, Any]]:
            self._ensure_writable(st, subject)
            config = dict(st.config.get(subject, {}))
            echo: dict[str, Any] = {}
            if level is not None:
                config["compatibilityLevel"] = level
                echo["compatibility"] = level
            if normalize is not None:
                config["normalize"] = bool(normalize)
                echo["normalize"] = bool(normalize)
            for key, value in contract.items():
                if value is None or value == "":
                    config.pop(key, None)
                else:
                    config[key] = value
                    echo[key] = value
            return [PutConfig(subject, config)], echo

        return self._write(mutate)

    def delete_config(self, subject: str | None = None) -> dict[str, Any]:
        """``DELETE /config[/{subject}]``: the removed config; global falls back to the server default."""

        def mutate(st: State) -> tuple[list[Op], dict[str, Any]]:
            self._ensure_writable(st, subject)
            if subject is None:
                old = self._config_json(self._effective_config(st, None))
                return [PutConfig(None, None)], old
            if subject not in st.config:
                raise _subject_not_found(subject)
            return [PutConfig(subject, None)], self._config_json(st.config[subject])

        return self._write(mutate)

    # -- mode --------------------------------------------------------------------------------------
    def get_mode(self, subject: str | None = None, *, default_to_global: bool = False) -> dict[str, str]:
        """``GET /mode[/{subject}]``."""

        def read(st: State) -> dict[str, str]:
            if subject is None or subject in st.mode or default_to_global:
                return {"mode": self._mode(st, subject)}
            raise SubjectModeNotFound(
                f"Subject '{subject}' does not have subject-level mode configured",
                status_code=404,
                error_code=40409,
                subject=subject,
            )

        return self._read(read)

    def set_mode(self, subject: str | None, mode: object, *, force: bool = False) -> dict[str, str]:
        """``PUT /mode[/{subject}]``: echoes ``{"mode": MODE}``."""
        if subject is not None:
            _check_subject(subject)
        value = mode.upper() if isinstance(mode, str) else None
        if value not in MODES or (value == "FORWARD" and subject is not None):
            raise InvalidMode(_MSG_INVALID_MODE, status_code=422, error_code=42204, subject=subject)

        def mutate(st: State) -> tuple[list[Op], dict[str, str]]:
            if value == "IMPORT" and not force:
                scope = [subject] if subject is not None else list(st.subjects)
                if any(st.versions(s, deleted=False) for s in scope):
                    raise _not_permitted("Cannot import since found existing subjects", subject)
            return [PutMode(subject, value)], {"mode": value}

        return self._write(mutate)

    def delete_mode(self, subject: str) -> dict[str, str]:
        """``DELETE /mode/{subject}``: the removed mode."""

        def mutate(st: State) -> tuple[list[Op], dict[str, str]]:
            if subject not in st.mode:
                raise _subject_not_found(subject)
            return [PutMode(subject, None)], {"mode": st.mode[subject]}

        return self._write(mutate)

