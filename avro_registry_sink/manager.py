"""Schema manager: per DML batch, make sure every table's key and value schemas are registered.

For each table version in a batch it looks up a cached plan (a dict lookup, and an identity check on
the table definition, when nothing changed); on a miss it derives the schemas, compares their
fingerprint with the last one registered for the subject, and registers a new version only when it
differs. Registry calls happen here, on the driver, once per new schema, never per row.

An incompatible change stops the batch with :class:`SchemaEvolutionError` (names the table, subject,
the registry's latest version and schema id, the table version that produced the new schema, and
the registry's reasons). An unreachable registry is retried within ``unavailable_budget`` seconds,
then the batch fails. Either way the caller emits nothing of that batch.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol

from avro_registry_sink.config import DEFAULT_ENCODING, EncodingOptions
from avro_registry_sink.encoder import EncodingPlan
from avro_registry_sink.errors import IncompatibleSchema, RegistryError, RegistryUnavailable
from avro_registry_sink.registry.explain import explain_incompatibility
from avro_registry_sink.routing import Route, TopicRouter
from avro_registry_sink.schema.builder import TableSchemas, derive_schemas
from avro_registry_sink.selection import EVERYTHING, TableSelection
from avro_registry_sink.table import TableDef


class SchemaEvolutionError(IncompatibleSchema):
    """A table's new schema was refused by the registry's compatibility check."""


class _Registry(Protocol):
    def register(self, subject: str, schema: str) -> int: ...


PlanKey = tuple[str, str, int]


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
        self._lock = threading.Lock()
        self.stats = ManagerStats()

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
        """Plans for every table version of a batch; raises before anything is emitted on failure."""
        self.stats.batches += 1
        plans: dict[PlanKey, TablePlan] = {}
        for table in tables:
            plan = self.plan(table)
            plans[plan.key] = plan
        return plans

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
        deadline = self._clock() + self._budget
        attempt = 0
        while True:
            try:
                self.stats.registry_calls += 1
                return self._registry.register(subject, schema_json)
            except IncompatibleSchema as exc:
                raise self._evolution_error(subject, schema_json, schemas, exc) from exc
            except RegistryUnavailable as exc:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    raise RegistryUnavailable(
                        f"Schema registry unreachable while registering subject {subject!r} for table "
                        f"{schemas.table.qualified_name}; gave up after {self._budget:g}s "
                        f"({attempt + 1} attempts): {exc.message}. Nothing of this batch was emitted; "
                        "a restart resumes from the last committed batch.",
                        subject=subject,
                        status_code=exc.context.get("status_code"),
                        error_code=exc.context.get("error_code"),
                        table=schemas.table.qualified_name,
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
