"""Schema manager: per DML batch, make sure every table's key and value schemas are registered.

For each table version in a batch it looks up a cached plan (a dict lookup, and an identity check on
the table definition, when nothing changed); on a miss it derives the schemas, compares their
fingerprint with the last one registered for the subject, and registers a new version only when it
differs. Registry calls happen here, on the driver, once per new schema, never per row.

Before a topic new to the run gets its first schema, the latest schema of its value subject is looked up
once: a subject that holds another table's record (registered by another run or changefeed) stops the
batch with a :class:`~avro_registry_sink.errors.RoutingError` naming both tables, instead of making this
table's schema a new version of the other's. Tables of a batch are all routed, and all checked, before
anything is registered.

An incompatible change stops the batch with :class:`SchemaEvolutionError` (names the table, subject,
the registry's latest version and schema id, the table version that produced the new schema, and
the registry's reasons). An unreachable registry is retried within ``unavailable_budget`` seconds,
then the batch fails. Either way the caller emits nothing of that batch.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol, TypeVar

from avro_registry_sink.config import DEFAULT_ENCODING, EncodingOptions
from avro_registry_sink.encoder import EncodingPlan
from avro_registry_sink.errors import (
    IncompatibleSchema,
    RegistryError,
    RegistryUnavailable,
    RoutingError,
    SubjectNotFound,
    VersionNotFound,
)
from avro_registry_sink.registry.explain import explain_incompatibility
from avro_registry_sink.routing import Route, TopicRouter, collision_advice
from avro_registry_sink.schema.builder import TableSchemas, derive_schemas
from avro_registry_sink.schema.naming import sanitize_name
from avro_registry_sink.selection import EVERYTHING, TableSelection
from avro_registry_sink.table import TableDef


class SchemaEvolutionError(IncompatibleSchema):
    """A table's new schema was refused by the registry's compatibility check."""


class _Registry(Protocol):
    def register(self, subject: str, schema: str) -> int: ...


PlanKey = tuple[str, str, int]
T = TypeVar("T")


def registered_table(schema_json: str) -> tuple[str, str] | None:
    """The ``(schema, table)`` a registered key or value schema names, as its record's namespace
    (``<changefeed>.<schema>``) and name carry them (both sanitised, see :mod:`.schema.naming`); ``None``
    for a schema that is not a record.

    >>> registered_table('{"type":"record","name":"orders","namespace":"default.shop","fields":[]}')
    ('shop', 'orders')
    """
    try:
        schema = json.loads(schema_json)
    except ValueError:
        return None
    if not isinstance(schema, dict) or schema.get("type") != "record" or not isinstance(schema.get("name"), str):
        return None
    name = schema["name"]
    namespace = schema.get("namespace") if isinstance(schema.get("namespace"), str) else ""
    if "." in name:  # a full name
        namespace, _, name = name.rpartition(".")
    return namespace.partition(".")[2], name


@dataclass(frozen=True)
class TablePlan:
    """Everything needed to encode and route one table version: plain data, picklable."""

    encoding: EncodingPlan
    route: Route
    fingerprint: str

    @property
    def key(self) -> PlanKey:
        t = self.encoding.table
        return (t.schema_name, t.table, t.version)


@dataclass
class ManagerStats:
    """Counters for tests, logs and the benchmark."""

    batches: int = 0
    cache_hits: int = 0
    derivations: int = 0
    registrations: int = 0
    registry_calls: int = 0


class SchemaManager:
    """Derives, fingerprints and registers schemas per batch.

    >>> # manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"))
    >>> # plans = manager.prepare_batch(tables)      # {(schema, table, version): TablePlan}
    """

    def __init__(
        self,
        registry: _Registry,
        router: TopicRouter,
        options: EncodingOptions = DEFAULT_ENCODING,
        *,
        unavailable_budget: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        selection: TableSelection = EVERYTHING,
    ) -> None:
        self._registry = registry
        self._selection = selection
        self._router = router
        self._options = options
        self._budget = unavailable_budget
        self._sleep = sleep
        self._clock = clock
        self._plans: dict[PlanKey, tuple[TableDef, TablePlan]] = {}
        self._subject_ids: dict[tuple[str, str], int] = {}  # (subject, schema text fingerprint) -> id
        self._checked_topics: set[str] = set()  # topics whose registry owner was checked (see _check_registered)
        self._warnings: list[str] = []
        self._lock = threading.Lock()
        self.stats = ManagerStats()

    def take_warnings(self) -> list[str]:
        """Warnings since the last call (for the batch report)."""
        with self._lock:
            warnings, self._warnings = self._warnings, []
        return warnings

    @property
    def options(self) -> EncodingOptions:
        return self._options

    @property
    def selection(self) -> TableSelection:
        """The table filter and column selectors applied to every table definition."""
        return self._selection

    def plan(self, table: TableDef) -> TablePlan:
        """The plan of one table version, registering its schemas if they are new."""
        key = (table.schema_name, table.table, table.version)
        cached = self._plans.get(key)
        if cached is not None and (cached[0] is table or cached[0] == table):
            self.stats.cache_hits += 1
            return cached[1]
        with self._lock:
            return self._plan_locked(key, table)

    def _plan_locked(self, key: PlanKey, table: TableDef) -> TablePlan:
        cached = self._plans.get(key)
        if cached is not None and (cached[0] is table or cached[0] == table):
            return cached[1]
        self.stats.derivations += 1
        route = self._router.route(table.schema_name, table.table)
        self._check_registered(route)
        selected = self._selection.apply(table, route.partition_columns)  # column selectors, before any schema
        schemas = derive_schemas(selected, self._options)
        key_id = self._ensure(route.key_subject, schemas.key_json, schemas, route) if schemas.key_json else None
        value_id = self._ensure(route.value_subject, schemas.value_json, schemas, route)
        plan = TablePlan(
            encoding=EncodingPlan.from_schemas(schemas, key_id, value_id, self._selection.dropped(table, selected)),
            route=route,
            fingerprint=schemas.fingerprint,
        )
        self._plans[key] = (table, plan)
        return plan

    def prepare_batch(self, tables: Iterable[TableDef]) -> dict[PlanKey, TablePlan]:
        """Plans for every table version of a batch; raises before anything is emitted on failure.

        Every table is routed, and every topic new to the run checked against the registry, before any
        schema is registered: a collision leaves the registry as it was."""
        self.stats.batches += 1
        tables = list(tables)
        routes = [self._router.route(t.schema_name, t.table) for t in tables]
        with self._lock:
            for route in routes:
                self._check_registered(route)
        plans: dict[PlanKey, TablePlan] = {}
        for table in tables:
            plan = self.plan(table)
            plans[plan.key] = plan
        return plans

    # -- the registry's owner of a topic ----------------------------------------------------------

    def _check_registered(self, route: Route) -> None:
        """Once per topic new to the run (and not recorded for this very table by the checkpoint, see
        :meth:`TopicRouter.claim`): one lookup of the value subject's latest schema, which must name this
        table (or be absent). Raises :class:`RoutingError` when it names another table."""
        if route.topic in self._checked_topics:
            return
        if self._router.claimed_earlier(route) or getattr(self._registry, "get_latest", None) is None:
            self._checked_topics.add(route.topic)
            return
        subject = route.value_subject
        name = f"{route.schema}.{route.table}"

        def latest() -> object | None:
            try:
                return getattr(self._registry, "get_latest")(subject)
            except (SubjectNotFound, VersionNotFound):
                return None

        current = self._with_retry(subject, name, "looking up the latest schema of", latest)
        if current is not None:
            self._compare_registered(route, current)
        self._checked_topics.add(route.topic)

    def _compare_registered(self, route: Route, current: object) -> None:
        subject = route.value_subject
        name = f"{route.schema}.{route.table}"
        text = str(getattr(current, "schema", ""))
        kind = str(getattr(current, "schema_type", None) or "AVRO").upper()
        where = f"version {getattr(current, 'version', '?')}, schema id {getattr(current, 'id', '?')}"
        owner = registered_table(text) if kind == "AVRO" else None
        ours = (sanitize_name(route.schema), sanitize_name(route.table))
        if owner is not None and (owner[0].lower(), owner[1].lower()) == (ours[0].lower(), ours[1].lower()):
            if ours != (route.schema, route.table):  # a lossy name: another table's may sanitise the same
                self._warnings.append(
                    f"Subject {subject!r} already holds a schema ({where}) whose Avro record is named "
                    f"{ours[0]}.{ours[1]}, as {name}'s is after sanitising (every character outside [A-Za-z0-9_] "
                    f"becomes '_'); another table whose name sanitises the same would carry that name too, so "
                    f"whether {name} registered it cannot be told. If another table did, give {name} a topic of "
                    "its own (a [[sink.dispatchers]] rule with topic = '...').")
            return
        if owner is not None:
            other = f"{owner[0]}.{owner[1]}"
            holds = (f"Tables {other} and {name} would both go to topic {route.topic!r}: its subject {subject!r} in "
                     f"the schema registry already holds the schema of table {other} ({where}; as its Avro record "
                     "names it, every character outside [A-Za-z0-9_] of a name turned into '_')")
        else:
            other = None
            holds = (f"Table {name} would go to topic {route.topic!r}, but its subject {subject!r} in the schema "
                     f"registry already holds a schema that is not a table's record ({where}, {kind}: {text[:80]!r})")
        raise RoutingError(
            f"{holds}, registered by another run or changefeed. Registering {name}'s schema there would make it a "
            "new version of that subject and mix two tables in one topic; nothing of this batch was written. "
            + collision_advice(route.schema, route.table, route.rule)
            + f" If subject {subject!r} is stale, delete it (and its key subject) from the registry instead.",
            table=name,
            other_table=other,
            topic=route.topic,
            subject=subject,
            registered_version=getattr(current, "version", None),
            schema_id=getattr(current, "id", None),
        )

    # -- registration --------------------------------------------------------------------------

    def _ensure(self, subject: str, schema_json: str, schemas: TableSchemas, route: Route) -> int:
        import hashlib

        text_key = (subject, hashlib.sha256(schema_json.encode()).hexdigest())
        known = self._subject_ids.get(text_key)
        if known is not None:
            return known
        schema_id = self._register_with_retry(subject, schema_json, schemas)
        self._subject_ids[text_key] = schema_id
        self.stats.registrations += 1
        return schema_id

    def _register_with_retry(self, subject: str, schema_json: str, schemas: TableSchemas) -> int:
        try:
            return self._with_retry(subject, schemas.table.qualified_name, "registering",
                                    lambda: self._registry.register(subject, schema_json))
        except IncompatibleSchema as exc:
            raise self._evolution_error(subject, schema_json, schemas, exc) from exc

    def _with_retry(self, subject: str, table: str, action: str, call: Callable[[], T]) -> T:
        """``call()``, retried while the registry is unavailable, within ``unavailable_budget`` seconds."""
        deadline = self._clock() + self._budget
        attempt = 0
        while True:
            try:
                self.stats.registry_calls += 1
                return call()
            except RegistryUnavailable as exc:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    raise RegistryUnavailable(
                        f"Schema registry unreachable while {action} subject {subject!r} for table "
                        f"{table}; gave up after {self._budget:g}s "
                        f"({attempt + 1} attempts): {exc.message.rstrip('.')}. Nothing of this batch was emitted; "
                        "a restart resumes from the last committed batch.",
                        subject=subject,
                        status_code=exc.context.get("status_code"),
                        error_code=exc.context.get("error_code"),
                        table=table,
                    ) from exc
                delay = min(remaining, random.uniform(0, min(0.5 * 2**attempt, 10.0)))
                attempt += 1
                self._sleep(max(delay, 0.0))

    def _evolution_error(self, subject: str, schema_json: str, schemas: TableSchemas,
                         exc: RegistryError) -> SchemaEvolutionError:
        latest = ""
        try:
            get_latest = getattr(self._registry, "get_latest")
            self.stats.registry_calls += 1
            current = get_latest(subject)
            latest = f" (registry's latest: version {current.version}, schema id {current.id})"
        except (AttributeError, RegistryError):
            pass
        table = schemas.table
        reasons = exc.context.get("reasons") or exc.message
        if not exc.context.get("reasons"):  # a registry that does not say why (Apicurio): ask Avro's checker
            local = explain_incompatibility(self._registry, subject, schema_json)
            if local:
                reasons = f"{reasons} Apache Avro's checker: " + "; ".join(local)
        return SchemaEvolutionError(
            f"Table {table.qualified_name}: the schema derived from table version {table.version} is "
            f"incompatible with subject {subject!r}{latest} under the registry's compatibility level; "
            f"nothing of this batch was emitted. Registry said: {reasons}",
            subject=subject,
            status_code=exc.context.get("status_code"),
            error_code=exc.context.get("error_code"),
            table=table.qualified_name,
            table_version=table.version,
            reasons=reasons,
        )
