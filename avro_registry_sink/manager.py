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

With ``on_incompatible="new-major"`` (``--on-incompatible new-major``) an incompatible change does not stop
anything: every schema is registered with data-contract metadata (``major_version``, and the table version that
produced it), and a schema that would break consumers pinned to the current major becomes the next major version
of the same subject, with JSONata UPGRADE/DOWNGRADE migration rules generated from the change
(:func:`~avro_registry_sink.schema.migration.plan_migration`, renames and re-added columns read from the DDL
between the two table versions through ``ddl_history``). That is decided here, before registering, whatever the
subject's level: a schema is a minor version only when every live version of the current major reads its records
and it reads theirs (Apache Avro's checker) and Avro schema resolution gives MySQL's values (no renamed, converted
or re-added column); a schema the registry refuses all the same becomes a major too. A minor version of a major
from 2 on carries its own UPGRADE/DOWNGRADE rules (``upgrade_within_<major>``), which Confluent's clients run on
the way between a record's version and the pinned one. The subject's ``compatibilityGroup`` is set to
``major_version`` the first time (the option is the user's consent); no subject is ever set to NONE. A schema
that is already a live version of the subject (of any major) is found by its text and reused, never registered
again. Each new major is reported by :meth:`SchemaManager.take_majors`.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from avro_registry_sink.encoding.plan import EncodingPlan
from avro_registry_sink.errors import (
    ConfigError,
    IncompatibleSchema,
    RegistryError,
    RegistryUnavailable,
    RoutingError,
    SchemaNotFound,
    SubjectNotFound,
    VersionNotFound,
)
from avro_registry_sink.model import PlanKey
from avro_registry_sink.registry.embedded.canonical import canonical_schema
from avro_registry_sink.registry.embedded.compatibility import differences
from avro_registry_sink.registry.explain import explain_incompatibility
from avro_registry_sink.routing.rules import Route, TopicRouter, collision_advice
from avro_registry_sink.routing.selection import EVERYTHING, TableSelection
from avro_registry_sink.schema.builder import TableSchemas, derive_schemas
from avro_registry_sink.schema.migration import plan_migration, rule_set_for
from avro_registry_sink.schema.naming import sanitize_name
from avro_registry_sink.settings.config import DEFAULT_ENCODING, EncodingOptions, OnIncompatible
from avro_registry_sink.table import TableDef
from avro_registry_sink.tabledef.ddl import column_lineage


class SchemaEvolutionError(IncompatibleSchema):
    """A table's new schema was refused by the registry's compatibility check."""


class SchemaNotRegistered(RegistryError):
    """``auto-register=false``: a schema the batch needs is not registered (Confluent's
    ``auto.register.schemas=false``); register it from CI (``avro-registry-sink register --ddl FILE``)."""


class _Registry(Protocol):
    def register(self, subject: str, schema: str) -> int: ...


#: The metadata property that numbers a subject's major versions (Confluent's documented convention).
MAJOR_VERSION = "major_version"
#: The metadata property holding the table version (TiCDC's) whose schema a registered version is.
TABLE_VERSION = "avro_registry_sink.table_version"


@dataclass(frozen=True)
class NewMajor:
    """A schema registered as a new major version instead of stopping the job (``--on-incompatible new-major``)."""

    table: str
    table_version: int
    subject: str
    schema_id: int
    old_major: int
    new_major: int
    reasons: str  # why a new major: Avro's checker against the current major, converted values, or a refusal
    changes: tuple[str, ...]
    rules: tuple[str, ...]  # names of the migration rules registered
    cannot_follow: tuple[str, ...]  # which consumers cannot read which records

    def to_json(self) -> dict[str, object]:
        return {"table": self.table, "table_version": self.table_version, "subject": self.subject,
                "schema_id": self.schema_id, "old_major": self.old_major, "new_major": self.new_major,
                "reasons": self.reasons, "changes": list(self.changes), "rules": list(self.rules),
                "cannot_follow": list(self.cannot_follow)}

    def describe(self) -> str:
        text = (f"{self.table} (table version {self.table_version}): subject {self.subject!r} is now at major "
                f"version {self.new_major} (schema id {self.schema_id}); changes: {'; '.join(self.changes)}; "
                f"migration rules: {', '.join(self.rules) or 'none'}")
        if self.cannot_follow:
            text += "; " + "; ".join(self.cannot_follow)
        return text


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
    namespace = str(schema["namespace"]) if isinstance(schema.get("namespace"), str) else ""
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
        auto_register: bool = True,
        on_incompatible: OnIncompatible | str = OnIncompatible.STOP,
        ddl_history: Callable[[str, str], list[tuple[int, str]]] | None = None,
    ) -> None:
        self._registry = registry
        #: False: only look up the ids of schemas registered already (Confluent's ``auto.register.schemas``)
        self.auto_register = auto_register
        #: called after each registration ``(subject, schema text, id, TableSchemas)`` and each refusal
        #: ``(subject, schema text, TableSchemas, error)`` (the history journal, :mod:`.history.journal`)
        self.on_register: Callable[[str, str, int, TableSchemas], None] | None = None
        self.on_refused: Callable[[str, str, TableSchemas, RegistryError], None] | None = None
        #: called with a subject before a schema is registered under it (the journal completes its record first)
        self.on_registering: Callable[[str], None] | None = None
        #: Told the topics of a batch once every route is checked, before any schema registers (the job
        #: creates new topics meanwhile).
        self.on_routed: Callable[[list[str]], None] | None = None
        self._policy = OnIncompatible(on_incompatible)
        #: ``(schema, table) -> [(table version, DDL text)]``: where the renames of a breaking change are read.
        self.ddl_history = ddl_history
        self._versions: dict[str, list[object]] = {}  # subject -> its live versions (new-major policy)
        self._majors: list[NewMajor] = []
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
        self._latest_seen: dict[str, Any] = {}  # value subject -> its latest version as _check_registered saw it
        self._rule_configs_checked: set[str] = set()  # subjects whose config rule sets were checked (new-major)
        self._lock = threading.Lock()
        self.stats = ManagerStats()

    @property
    def on_incompatible(self) -> OnIncompatible:
        return self._policy

    def take_majors(self) -> list[NewMajor]:
        """New major versions registered since the last call (for the batch report and the run's summary)."""
        with self._lock:
            majors, self._majors = self._majors, []
        return majors

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
        self.check_rule_configs([route])
        selected = self._selection.apply(table, route.partition_columns)  # column selectors, before any schema
        schemas = derive_schemas(selected, self._options)
        key_id = (self._ensure(route.key_subject, schemas.key_json, schemas, route, is_key=True)
                  if schemas.key_json else None)
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
        # a table's versions oldest first (registered in the order they were made); tables in the order given
        tables = list(tables)
        first: dict[tuple[str, str], int] = {}
        for i, t in enumerate(tables):
            first.setdefault((t.schema_name, t.table), i)
        tables.sort(key=lambda t: (first[(t.schema_name, t.table)], t.version))
        routes = [self._router.route(t.schema_name, t.table) for t in tables]
        with self._lock:
            for route in routes:
                self._check_registered(route)
            self.check_rule_configs(routes)
        if self.on_routed is not None:
            self.on_routed(list(dict.fromkeys(route.topic for route in routes)))
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
        self._latest_seen[subject] = current  # read again by _unfollowed_values, not looked up twice
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

    # -- rule sets beside the product's (--on-incompatible new-major) ----------------------------------

    def check_rule_configs(self, routes: Iterable[Route]) -> None:
        """``--on-incompatible new-major``, once per subject of ``routes`` before anything registers under it: the
        rule sets its config gives every new version (``defaultRuleSet``, ``overrideRuleSet``, of the subject's own
        config or the global one) are reported as a warning (:meth:`take_warnings`) naming the subject and the
        rules, and a JSONata expression among them that does not parse raises
        :class:`~avro_registry_sink.errors.ConfigError`: the registry would merge it into the majors this policy
        registers, and pinned consumers would fail on it. Nothing is asked under ``stop``."""
        if self._policy is not OnIncompatible.NEW_MAJOR or not self.auto_register:
            return
        get_config = getattr(self._registry, "get_full_config", None)
        if get_config is None:
            return
        for route in routes:
            for subject in route.subjects:
                if subject in self._rule_configs_checked:
                    continue
                table = f"{route.schema}.{route.table}"

                def read(subject: str = subject) -> Any:
                    try:
                        return get_config(subject, default_to_global=True)
                    except RegistryUnavailable:
                        raise
                    except RegistryError:  # a registry without subject configs: nothing merged
                        return None

                config = self._with_retry(subject, table, "reading the config of", read)
                self._warnings.extend(config_rule_warnings(subject, table, config))
                self._rule_configs_checked.add(subject)

    def _read_back_rules(self, major: NewMajor) -> None:
        """After ``major`` registered: its version as the registry answers it must carry every migration rule
        registered with it, else :class:`RulesNotKept` fails the batch (a registry that drops the rule sets of
        versions would leave consumers pinned to the old major reading records of the new one unmigrated)."""
        if not major.rules:
            return
        subject = major.subject
        registry: Any = self._registry

        def read() -> Any:
            found = None
            for number in sorted(registry.get_versions(subject), reverse=True):
                version = registry.get_version(subject, number)
                if int(version.id) != major.schema_id:
                    continue
                if (getattr(version, "properties", None) or {}).get(MAJOR_VERSION) == str(major.new_major):
                    return version
                found = found or version
            return found

        version = self._with_retry(subject, major.table, "reading back the new major version of", read)
        kept = {r.get("name") for r in ((getattr(version, "rule_set", None) or {}).get("migrationRules") or [])
                if isinstance(r, dict)}
        missing = [name for name in major.rules if name not in kept]
        if version is not None and not missing:
            return
        where = (f"version {version.version} (schema id {major.schema_id})" if version is not None else
                 f"no version with schema id {major.schema_id}")
        answered = ("no version with that schema id" if version is None else
                    f"the rules {', '.join(sorted(map(str, kept)))}" if kept else "no migration rules")
        raise RulesNotKept(
            f"Table {major.table} (table version {major.table_version}): subject {subject!r} {where} was registered "
            f"as major version {major.new_major} with the migration rules {', '.join(major.rules)}, but the schema "
            f"registry answered {answered} when it was read back: missing {', '.join(missing)}. Consumers pinned to "
            f"major {major.old_major} would read the records of major {major.new_major} without them. Nothing of "
            "this batch was written. Use a registry that keeps the rule sets of versions (the embedded one, "
            "Confluent Enterprise or Confluent Cloud; Confluent Community drops them), or --on-incompatible stop.",
            subject=subject, table=major.table, table_version=major.table_version, schema_id=major.schema_id,
            version=getattr(version, "version", None), missing_rules=missing)

    # -- registration --------------------------------------------------------------------------

    def _ensure(self, subject: str, schema_json: str, schemas: TableSchemas, route: Route, *,
                is_key: bool = False) -> int:
        import hashlib

        text_key = (subject, hashlib.sha256(schema_json.encode()).hexdigest())
        known = self._subject_ids.get(text_key)
        if known is not None:
            return known
        if not self.auto_register:
            schema_id = self._look_up_registered(subject, schema_json, schemas)
            self._subject_ids[text_key] = schema_id
            return schema_id
        if self.on_registering is not None:
            self.on_registering(subject)
        if self._policy is OnIncompatible.NEW_MAJOR:
            made = len(self._majors)
            schema_id = self._ensure_evolving(subject, schema_json, schemas, is_key)
            for major in self._majors[made:]:
                self._read_back_rules(major)
        else:
            unfollowed = "" if is_key else self._unfollowed_values(subject, schema_json, schemas)
            schema_id = self._register_with_retry(subject, schema_json, schemas)
            if unfollowed:
                self._warnings.append(unfollowed)
        self._subject_ids[text_key] = schema_id
        self.stats.registrations += 1
        if self.on_register is not None:
            self.on_register(subject, schema_json, schema_id, schemas)
        return schema_id

    def _unfollowed_values(self, subject: str, schema_json: str, schemas: TableSchemas) -> str:
        """Under ``stop``: why readers of the value schema ``schema_json`` will not get MySQL's values for the
        records of the subject's latest version ('' when they will). The registry's level may accept a change whose Avro
        resolution gives other values than MySQL holds after the DDL (a rename read as a drop and an add, a
        DECIMAL's bytes read as VARCHAR text, a DATE's days read as TIME): the run says so, naming the columns,
        rather than let those readers get them silently."""

        get_latest = getattr(self._registry, "get_latest", None)
        if get_latest is None:
            return ""
        table = schemas.table

        def latest() -> Any:
            try:
                return get_latest(subject)
            except (SubjectNotFound, VersionNotFound):
                return None

        if subject in self._latest_seen:
            current = self._latest_seen.pop(subject)
        else:
            current = self._with_retry(subject, table.qualified_name, "looking up the latest schema of", latest)
        text = str(getattr(current, "schema", "") or "")
        if current is None or _canonical(text) in (None, _canonical(schema_json)):
            return ""
        try:
            plan = plan_migration(text, schema_json, column_lineage(self._ddl_between(table, current)))
        except (ValueError, TypeError, KeyError):  # not a flat record of this product's: the registry decides
            return ""
        if not plan.conversions:
            return ""
        return (f"table {table.qualified_name}: subject {subject!r} takes table version {table.version} as a new "
                f"version of its current major, but Avro schema resolution gives its readers other values than MySQL "
                f"holds for the older records' {', '.join(plan.conversions)} ({'; '.join(plan.changes)}); "
                "--on-incompatible new-major registers it as a new major version with migration rules that give "
                "MySQL's values or refuse by name")

    def _register_with_retry(self, subject: str, schema_json: str, schemas: TableSchemas) -> int:
        try:
            return self._with_retry(subject, schemas.table.qualified_name, "registering",
                                    lambda: self._registry.register(subject, schema_json))
        except IncompatibleSchema as exc:
            error = self._evolution_error(subject, schema_json, schemas, exc)
            if self.on_refused is not None:
                self.on_refused(subject, schema_json, schemas, error)
            raise error from exc

    def _look_up_registered(self, subject: str, schema_json: str, schemas: TableSchemas) -> int:
        """``auto-register=false``: the id of the version of ``subject`` that holds ``schema_json``, or
        :class:`SchemaNotRegistered` naming the subject, the table version and the schema needed."""

        table = schemas.table
        try:
            found = self._with_retry(subject, table.qualified_name, "looking up a schema of",
                                     lambda: getattr(self._registry, "lookup")(subject, schema_json))
        except (SchemaNotFound, SubjectNotFound) as exc:
            where = "has no such version" if isinstance(exc, SchemaNotFound) else "does not exist"
            raise SchemaNotRegistered(
                f"Table {table.qualified_name}: auto-register is false and subject {subject!r} {where} in the "
                f"schema registry: the schema derived from table version {table.version} is not registered. "
                f"Nothing of this batch was written. Register it first (avro-registry-sink register --ddl FILE "
                f"--registry URL, from the DDL that made this table version), then rerun. Schema needed: "
                f"{schema_json}",
                subject=subject, table=table.qualified_name, table_version=table.version, schema=schema_json,
            ) from exc
        return int(found.id)

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
                         exc: RegistryError, *, new_major: int | None = None) -> SchemaEvolutionError:
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
        where = ("under the registry's compatibility level" if new_major is None else
                 f"even as its major version {new_major} (the registry compared it with versions of other majors: "
                 "does it honour the subject's compatibilityGroup?)")
        advice = ("" if new_major is not None or self._policy is OnIncompatible.NEW_MAJOR else
                  " To go on with it as the subject's next major version, with migration rules for consumers "
                  "pinned to a major, run with --on-incompatible new-major (a registry with data contracts).")
        return SchemaEvolutionError(
            f"Table {table.qualified_name}: the schema derived from table version {table.version} is "
            f"incompatible with subject {subject!r}{latest} {where}; "
            f"nothing of this batch was emitted. Registry said: {reasons}{advice}",
            subject=subject,
            status_code=exc.context.get("status_code"),
            error_code=exc.context.get("error_code"),
            table=table.qualified_name,
            table_version=table.version,
            reasons=reasons,
        )

    # -- --on-incompatible new-major ------------------------------------------------------------------

    def _live_versions(self, subject: str, table: str) -> list[Any]:
        """The subject's live versions (metadata included), read once per run and after each registration."""
        cached = self._versions.get(subject)
        if cached is not None:
            return cached

        def read() -> list[Any]:
            try:
                numbers = self._registry.get_versions(subject)  # type: ignore[attr-defined]
            except (SubjectNotFound, VersionNotFound):
                return []
            return [self._registry.get_version(subject, n) for n in numbers]  # type: ignore[attr-defined]

        versions = self._with_retry(subject, table, "reading the versions of", read)
        self._versions[subject] = versions
        return versions

    def _ensure_evolving(self, subject: str, schema_json: str, schemas: TableSchemas, is_key: bool) -> int:
        """The id of ``schema_json`` in ``subject`` under the new-major policy (see the module doc)."""

        table = schemas.table
        name = table.qualified_name
        versions = self._live_versions(subject, name)
        wanted = _canonical(schema_json)
        for version in reversed(versions):
            if _canonical(getattr(version, "schema", "")) == wanted:
                return int(getattr(version, "id"))
        latest = versions[-1] if versions else None
        properties = _plain_properties(latest)
        major = _major_of(latest)
        properties.update({MAJOR_VERSION: str(major), TABLE_VERSION: str(table.version)})
        if latest is None:
            schema_id = self._register_contract(subject, name, schema_json, {"properties": properties}, {})
            self._versions.pop(subject, None)
            return schema_id
        plan = plan_migration(latest.schema, schema_json, column_lineage(self._ddl_between(table, latest)),
                              is_key=is_key)
        breaks = _breaks_pinned(versions, major, schema_json, plan)
        if breaks:
            schema_id = self._new_major(subject, schema_json, schemas, latest, breaks, plan)
        else:
            # A minor version of a major >= 2 carries its own rules: Confluent's clients run the rules of every
            # version between a record's and the reader's that has any, and do not resolve their output against
            # the reader schema, so a step without this version's rules would leave records in the shape before it.
            rule_set = rule_set_for(plan, major, major) if major >= 2 else {}
            try:
                schema_id = self._register_contract(subject, name, schema_json, {"properties": properties}, rule_set)
            except IncompatibleSchema as exc:  # a stricter level than mutual reading within the major
                schema_id = self._new_major(subject, schema_json, schemas, latest,
                                            str(exc.context.get("reasons") or exc.message), plan)
        self._versions.pop(subject, None)
        return schema_id

    def _register_contract(self, subject: str, table: str, schema_json: str, metadata: dict[str, Any],
                           rule_set: dict[str, Any]) -> int:
        register = getattr(self._registry, "register")
        return int(self._with_retry(subject, table, "registering",
                                    lambda: register(subject, schema_json, metadata=metadata, rule_set=rule_set)))

    def _new_major(self, subject: str, schema_json: str, schemas: TableSchemas, latest: Any, reasons: str,
                   plan: Any) -> int:
        table = schemas.table
        name = table.qualified_name
        old_major = _major_of(latest)
        properties = _plain_properties(latest)
        if MAJOR_VERSION not in properties:  # versions of an earlier run without majors: the latest becomes major 1
            self._register_contract(subject, name, latest.schema, {"properties": {**properties, MAJOR_VERSION: "1"}},
                                    {})
        self._use_major_groups(subject, name)
        new_major = old_major + 1
        rule_set = rule_set_for(plan, old_major, new_major)
        properties.update({MAJOR_VERSION: str(new_major), TABLE_VERSION: str(table.version)})
        try:
            schema_id = self._register_contract(subject, name, schema_json, {"properties": properties}, rule_set)
        except IncompatibleSchema as exc:
            raise self._evolution_error(subject, schema_json, schemas, exc, new_major=new_major) from exc
        lines = plan.describe(old_major, new_major)
        self._majors.append(NewMajor(
            table=name, table_version=table.version, subject=subject, schema_id=schema_id, old_major=old_major,
            new_major=new_major, reasons=reasons,
            changes=plan.changes, rules=tuple(r["name"] for r in rule_set["migrationRules"]),
            cannot_follow=tuple(line for line in lines if line.startswith(("consumers ", "confluent-kafka-python")))))
        return schema_id

    def _use_major_groups(self, subject: str, table: str) -> None:
        """The subject's ``compatibilityGroup`` is ``major_version`` (set now if it is unset); another group is
        refused: this policy would not know how to number it."""
        config = self._with_retry(subject, table, "reading the config of",
                                  lambda: getattr(self._registry, "get_full_config")(subject, default_to_global=True))
        group = getattr(config, "compatibility_group", None)
        if group == MAJOR_VERSION:
            return
        if group:
            raise SchemaEvolutionError(
                f"Table {table}: subject {subject!r} divides its versions by the metadata property {group!r} "
                f"(compatibilityGroup), not by {MAJOR_VERSION!r}; --on-incompatible new-major numbers major versions "
                f"with {MAJOR_VERSION!r}, so it leaves this subject alone. Nothing of this batch was emitted.",
                subject=subject, table=table)
        self._with_retry(subject, table, "setting the compatibilityGroup of",
                         lambda: getattr(self._registry, "update_config")(subject, {"compatibilityGroup": MAJOR_VERSION}))

    def _ddl_between(self, table: TableDef, latest: Any) -> list[str]:
        """The DDL texts from the table version of ``latest`` (exclusive) to ``table``'s (inclusive); only the new
        version's own DDL when the registered version does not say its table version."""
        if self.ddl_history is None:
            return []
        try:
            history = self.ddl_history(table.schema_name, table.table)
        except Exception:  # the lineage is a refinement: without it fields are matched by name
            return []
        since = getattr(latest, "properties", {}).get(TABLE_VERSION)
        low = int(since) if since is not None and str(since).isdigit() else table.version - 1
        return [query for version, query in sorted(history, key=lambda item: item[0])
                if low < version <= table.version]


def new_major_reasons(registry: Any, subject: str, schema_json: str, statements: list[str] | None = None, *,
                      table: str | None = None, is_key: bool = False) -> str:
    """Why ``--on-incompatible new-major`` registers ``schema_json`` as the next major version of ``subject`` although
    the subject's level may accept it ('' when it would be a minor version, or is already registered, or the subject
    is new): what :meth:`SchemaManager.plan` decides before registering, for ``check --ddl``. ``statements``: the DDL
    since the latest version (renames and re-added columns), of ``table`` when given."""

    try:
        numbers = registry.get_versions(subject)
    except (SubjectNotFound, VersionNotFound):
        return ""
    versions = [registry.get_version(subject, n) for n in numbers]
    if not versions or any(_canonical(v.schema) == _canonical(schema_json) for v in versions):
        return ""
    latest = versions[-1]
    plan = plan_migration(latest.schema, schema_json, column_lineage(statements or [], table=table), is_key=is_key)
    return _breaks_pinned(versions, _major_of(latest), schema_json, plan)


def _breaks_pinned(versions: list[Any], major: int, schema_json: str, plan: Any) -> str:
    """Why ``schema_json`` cannot be a minor version of ``major`` ('' when it can): consumers pinned to the major
    read the records of its versions by Avro schema resolution (no rules run between versions without any), so
    every live version of the major must read the new schema's records and the new schema theirs (Apache Avro's
    checker), and resolution must give MySQL's values (no renamed, converted or re-added column:
    ``plan.conversions``)."""
    import avro.errors
    import avro.schema


    reasons: list[str] = []
    if plan.conversions:
        reasons.append(f"the values of {', '.join(plan.conversions)} change otherwise than Avro schema resolution "
                       "changes them (renamed, converted or dropped and added again): only migration rules give "
                       "MySQL's values")
    try:
        new = avro.schema.parse(schema_json)
        for version in versions:
            if _major_of(version) != major:
                continue
            old = avro.schema.parse(version.schema)
            where = f"version {getattr(version, 'version', '?')} (major {major})"
            readers = differences(old, new, ("reader", "writer"))
            if readers:
                reasons.append(f"Apache Avro's checker: consumers pinned to {where} cannot read its records: "
                               + "; ".join(readers))
            writers = differences(new, old, ("reader", "writer"))
            if writers:
                reasons.append(f"Apache Avro's checker: it cannot read the records of {where}: " + "; ".join(writers))
    except (avro.errors.AvroException, ValueError, TypeError, AttributeError):
        pass  # not an Avro record the checker reads: the registry's level decides
    return " | ".join(dict.fromkeys(reasons))


def _canonical(text: str) -> str | None:
    try:
        return canonical_schema(text)
    except ValueError:
        return None


def _plain_properties(version: Any) -> dict[str, str]:
    """A registered version's metadata properties, without Confluent's own ``confluent:version``."""
    properties = dict(getattr(version, "properties", None) or {}) if version is not None else {}
    properties.pop("confluent:version", None)
    return properties


def _major_of(version: Any) -> int:
    text = (getattr(version, "properties", None) or {}).get(MAJOR_VERSION) if version is not None else None
    try:
        return max(1, int(str(text)))
    except ValueError:
        return 1


def require_data_contracts(config: Any, registry: Any) -> None:
    """With ``--on-incompatible new-major`` (``config.on_incompatible``), refuse a registry that keeps no data
    contracts, before any batch runs: a :class:`~avro_registry_sink.errors.ConfigError` saying what it answered.
    Nothing is asked under ``stop``."""

    if OnIncompatible(getattr(config, "on_incompatible", OnIncompatible.STOP)) is not OnIncompatible.NEW_MAJOR:
        return
    probe = getattr(registry, "data_contracts_unsupported", None)
    reason = "it is not a registry client that speaks data contracts" if probe is None else probe()
    if reason:
        raise ConfigError(
            f"--on-incompatible new-major registers a breaking change as a new major version with migration rules "
            f"(Confluent data contracts: schema metadata, rule sets, compatibilityGroup), but the schema registry "
            f"does not keep them: {reason}. Use a registry with data contracts (the embedded one, Confluent "
            f"Enterprise or Confluent Cloud), or --on-incompatible stop.",
            option="on-incompatible", value="new-major")


class RulesNotKept(RegistryError):
    """A new major version read back from the registry without the migration rules it was registered with."""


def config_rule_warnings(subject: str, table: str, config: Any) -> list[str]:
    """The warnings for the ``defaultRuleSet``/``overrideRuleSet`` of ``config`` (a subject's effective
    :class:`~avro_registry_sink.registry.models.ServerConfig`, or ``None``): one per rule set, naming the subject
    and its rules. A JSONata expression that does not parse raises :class:`~avro_registry_sink.errors.ConfigError`
    naming the subject, the rule and the parser's message.

    >>> config_rule_warnings("s_t-value", "s.t", None)
    []
    """

    try:
        import jsonata  # confluent-kafka's own JSONata executor parses with it
    except ImportError:  # the [rules] extra is not installed
        jsonata = None
    warnings = []
    for field, attr, effect in (
        ("defaultRuleSet", "default_rule_set", "under the rules a version is registered with"),
        ("overrideRuleSet", "override_rule_set", "over the rules a version is registered with (a rule of the "
         "same name replaces the generated one)"),
    ):
        rule_set = getattr(config, attr, None) or {}
        rules = [r for kind in ("migrationRules", "domainRules", "encodingRules")
                 for r in rule_set.get(kind) or [] if isinstance(r, dict)]
        if not rules:
            continue
        for rule in rules:
            if str(rule.get("type", "")).upper() != "JSONATA" or jsonata is None:
                continue
            try:
                jsonata.Jsonata(str(rule.get("expr") or ""))
            except Exception as exc:  # noqa: BLE001 - jsonata raises its JException and Python errors alike
                raise ConfigError(
                    f"Table {table}: the {field} of subject {subject!r} (its own config or the global one) holds "
                    f"rule {rule.get('name')!r} whose JSONata expression does not parse ({exc}): "
                    f"{str(rule.get('expr'))[:200]!r}. The registry would merge it into every version "
                    f"--on-incompatible new-major registers under {subject!r}, and consumers would fail on it; "
                    f"nothing was registered. Fix or remove it (PUT /config/{subject} with \"{field}\": null), "
                    "or run with --on-incompatible stop.",
                    subject=subject, table=table, option=field, rule=rule.get("name")) from None
        described = ", ".join(f"{r.get('name')} ({r.get('type')} {r.get('kind', 'TRANSFORM')} "
                              f"{r.get('mode', 'WRITEREAD')})" for r in rules)
        unchecked = ("" if jsonata is not None else " (their JSONata expressions were not checked: the jsonata module "
                     "is not installed; pip install 'avro-registry-sink[rules]')")
        warnings.append(
            f"Subject {subject!r} (table {table}): its config (its own or the global one) has a {field} with the "
            f"rules {described}{unchecked}; the registry merges them into every version registered under it, "
            f"{effect}, so the new majors of --on-incompatible new-major carry them beside their generated "
            "migration rules and pinned consumers run them. Remove them if they are not meant for this subject "
            f"(PUT /config/{subject} with \"{field}\": null).")
    return warnings
