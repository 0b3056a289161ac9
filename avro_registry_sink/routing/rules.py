"""Topic rules, subjects and partition dispatch (pure functions and a small stateful router).

Topic rules follow TiCDC's dispatchers: the first rule whose matcher accepts ``schema.table`` names the
topic expression; ``{schema}`` and ``{table}`` are substituted with TiCDC's character rules. Avro needs
one table per topic (TopicNameStrategy allows one schema per subject), so:

* an expression with ``{schema}`` before ``{table}`` is valid (TiCDC's ``ValidateForAvro``);
* a fixed topic name is accepted only while it routes exactly one table: a second table routed to it is
  a :class:`RoutingError` naming both (TiCDC accepts this and lets the registry fail later);
* two tables whose substituted names collide (``a_b.c`` and ``a.b_c`` under ``{schema}_{table}``, or
  ``shop.订单`` and ``shop.商品``: every character outside ``[A-Za-z0-9._-]`` becomes ``_``) are refused the
  same way, and so are two tables whose topics differ but whose subjects do not (``subject-naming=ticdc``);
* tables routed by earlier batches or runs of the same checkpoint are :meth:`TopicRouter.claim`-ed before
  the first batch, so a table that appears later cannot take their topics or subjects either.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from avro_registry_sink.errors import RoutingError
from avro_registry_sink.model import DEFAULT_TOPIC_RULE
from avro_registry_sink.routing.table_filter import TableFilter
from avro_registry_sink.settings.config import DispatchRule, PartitionStrategy, SinkConfig, SubjectNaming

_TOPIC_CHARS = re.compile(r"[^A-Za-z0-9._\-]")
_AVRO_RULE = re.compile(r"^[A-Za-z0-9._\-]*\{schema\}[A-Za-z0-9._\-]*\{table\}[A-Za-z0-9._\-]*$")
_FIXED_TOPIC = re.compile(r"^[A-Za-z0-9._\-]+$")
MAX_TOPIC_LENGTH = 249


def substitute(expression: str, schema: str, table: str) -> str:
    """Fill a topic expression as TiCDC's ``Substitute`` does.

    >>> substitute("cdc_{schema}_{table}", "shop", "order items")
    'cdc_shop_order_items'
    """
    topic = expression.replace("{schema}", _TOPIC_CHARS.sub("_", schema)).replace(
        "{table}", _TOPIC_CHARS.sub("_", table)
    )
    topic = topic[:MAX_TOPIC_LENGTH]
    if topic == ".":
        return "_"
    if topic == "..":
        return "__"
    return topic


def validate_topic_expression(expression: str) -> bool:
    """Check a topic expression; returns True when it has both placeholders, False for a fixed name.

    Raises :class:`RoutingError` for anything else, quoting TiCDC's own rule.
    """
    if _AVRO_RULE.match(expression):
        return True
    if _FIXED_TOPIC.match(expression) and len(expression) <= MAX_TOPIC_LENGTH:
        return False
    raise RoutingError(
        f"Invalid topic rule {expression!r}: for Avro a topic rule must contain {{schema}} and then {{table}} "
        "(e.g. '{schema}_{table}', one topic per table), with only the characters [A-Za-z0-9._-] around "
        "them, or be one fixed topic name that routes exactly one table.",
        rule=expression,
    )


def subject_for(topic: str, part: str, naming: SubjectNaming = SubjectNaming.TOPIC) -> str:
    """The subject of a topic's key or value under TopicNameStrategy (or TiCDC's ``.``->``_`` variant).

    >>> subject_for("shop.orders", "value"), subject_for("shop.orders", "key", SubjectNaming.TICDC)
    ('shop.orders-value', 'shop_orders-key')
    """
    if part not in ("key", "value"):
        raise ValueError(f"part must be 'key' or 'value', not {part!r}")
    if naming is SubjectNaming.TICDC:
        topic = topic.replace(".", "_")
    return f"{topic}-{part}"


@dataclass(frozen=True)
class Route:
    """Where one table's records go."""

    schema: str
    table: str
    topic: str
    key_subject: str
    value_subject: str
    partition: PartitionStrategy = PartitionStrategy.DEFAULT
    partition_columns: tuple[str, ...] = ()
    rule: str = ""  # the topic expression that named the topic

    @property
    def subjects(self) -> tuple[str, str]:
        return (self.key_subject, self.value_subject)


@dataclass(frozen=True)
class _Owner:
    """The table a topic or subject belongs to; ``earlier``: known from an earlier batch or run of the checkpoint."""

    schema: str
    table: str
    topic: str
    earlier: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.schema, self.table)


_QUOTE_IN_MATCHER = re.compile(r"[^\w$]")


def table_matcher(schema: str, table: str) -> str:
    """A dispatcher ``matcher`` entry that matches exactly ``schema.table`` (a name with a character the
    table-filter syntax treats specially is back-quoted).

    >>> table_matcher("shop", "订单"), table_matcher("a.b", "t*")
    ('shop.订单', '`a.b`.`t*`')
    """
    def part(name: str) -> str:
        return f"`{name.replace('`', '``')}`" if not name or _QUOTE_IN_MATCHER.search(name) else name

    return f"{part(schema)}.{part(table)}"


def collision_advice(schema: str, table: str, expression: str = "") -> str:
    """What resolves a collision: the settings that give ``schema.table`` (the newcomer) a topic of its own
    (``expression``: the topic rule that routed it)."""
    advice = (
        f"Give {schema}.{table} a topic of its own with a dispatcher rule in the changefeed TOML (--config), listed "
        f"before any other rule that matches it: [[sink.dispatchers]] matcher = ['{table_matcher(schema, table)}'] "
        "topic = '<a topic of its own>'"
    )
    if "{" not in expression:
        return advice + ("; or route the tables with a topic rule such as '{schema}_{table}' (a sink URI without a "
                         "topic, kafka://host:9092/?protocol=avro, gives every table its own). TiCDC accepts one "
                         "topic for all tables and then registers the second table's schema as a new version of "
                         "the first table's subject, or has it refused by the registry's compatibility check.")
    return advice + (
        f", and after it, unless dispatcher rules route the other tables already, one with matcher = ['*.*'] "
        f"topic = '{expression}' (a --topic-rule comes before every dispatcher rule: leave it out); or use a "
        "topic rule that keeps the two names apart."
    )


class TopicRouter:
    """Routes tables to topics and subjects, enforcing one table per topic.

    >>> router = TopicRouter(topic_rule="{schema}_{table}")
    >>> router.route("shop", "orders").value_subject
    'shop_orders-value'
    """

    def __init__(
        self,
        dispatchers: Iterable[DispatchRule] = (),
        *,
        default_topic: str | None = None,
        topic_rule: str | None = None,
        subject_naming: SubjectNaming = SubjectNaming.TOPIC,
        case_sensitive: bool = False,
    ) -> None:
        rules = list(dispatchers)
        if topic_rule:
            rules.insert(0, DispatchRule(matcher=("*.*",), topic=topic_rule))
        for rule in rules:
            if rule.topic:
                validate_topic_expression(rule.topic)
        if default_topic:
            validate_topic_expression(default_topic)
        self._rules = rules
        # TiCDC's table-filter syntax: last matching pattern of a rule decides; case-insensitive by default
        self._matchers = [TableFilter.parse(r.matcher, case_sensitive=case_sensitive, option="dispatchers.matcher")
                          for r in rules]
        self._default_topic = default_topic
        self._naming = subject_naming
        self._routes: dict[tuple[str, str], Route] = {}
        # topic.lower() / subject.lower() -> owner: compared ignoring case, as TiDB compares table names
        self._owners: dict[str, _Owner] = {}
        self._subject_owners: dict[str, _Owner] = {}
        self._lock = threading.Lock()

    def claim(self, schema: str, table: str, topic: str, subjects: Iterable[str] = ()) -> None:
        """Record that ``schema.table`` went to ``topic`` (and registered ``subjects``) in an earlier batch or
        run: no other table may be routed there. Call before routing; a topic or subject claimed already
        keeps its first owner."""
        with self._lock:
            owner = _Owner(schema, table, topic, earlier=True)
            self._owners.setdefault(topic.lower(), owner)
            for subject in subjects:
                self._subject_owners.setdefault(subject.lower(), owner)

    def claimed_earlier(self, route: Route) -> bool:
        """Whether ``route``'s topic and subjects were :meth:`claim`-ed for its own table (an earlier run)."""
        key = (route.schema, route.table)
        owners = [self._owners.get(route.topic.lower())] + [self._subject_owners.get(s.lower()) for s in route.subjects]
        return all(o is not None and o.earlier and o.key == key for o in owners)

    def route(self, schema: str, table: str) -> Route:
        """The route of ``schema.table``; raises :class:`RoutingError` when the topic is taken."""
        key = (schema, table)
        cached = self._routes.get(key)
        if cached is not None:
            return cached
        with self._lock:
            return self._route_locked(schema, table)

    def _route_locked(self, schema: str, table: str) -> Route:
        key = (schema, table)
        if key in self._routes:
            return self._routes[key]
        rule = next((r for r, m in zip(self._rules, self._matchers, strict=False) if m.matches(schema, table)), None)
        expression = rule.topic if rule is not None and rule.topic else self._default_topic
        if not expression:
            raise RoutingError(
                f"No topic for table {schema}.{table}: no dispatcher rule matches it and the sink has no "
                "default topic; add a topic rule such as '{schema}_{table}'.",
                table=f"{schema}.{table}",
            )
        topic = substitute(expression, schema, table)
        key_subject, value_subject = subject_for(topic, "key", self._naming), subject_for(topic, "value", self._naming)
        owner = self._owners.get(topic.lower())
        if owner is not None and owner.key != key:
            raise self._collision(owner, schema, table, expression, f"topic {topic!r}", topic=topic)
        for subject in (key_subject, value_subject):
            owner = self._subject_owners.get(subject.lower())
            if owner is not None and owner.key != key:
                raise self._collision(
                    owner, schema, table, expression, f"subject {subject!r}",
                    f"topics {owner.topic!r} and {topic!r} under subject-naming {self._naming.value!r}; ",
                    topic=topic, subject=subject)
        route = Route(
            schema=schema,
            table=table,
            topic=topic,
            key_subject=key_subject,
            value_subject=value_subject,
            partition=rule.partition if rule is not None else PartitionStrategy.DEFAULT,
            partition_columns=rule.columns if rule is not None else (),
            rule=expression,
        )
        owner = _Owner(schema, table, topic)
        self._owners.setdefault(topic.lower(), owner)
        for subject in route.subjects:
            self._subject_owners.setdefault(subject.lower(), owner)
        self._routes[key] = route
        return route

    @staticmethod
    def _collision(owner: _Owner, schema: str, table: str, expression: str, shared: str, detail: str = "",
                   **context: Any) -> RoutingError:
        first = f"{owner.schema}.{owner.table}" + (" (routed there by an earlier batch or run of this checkpoint)"
                                                   if owner.earlier else "")
        why = (f"rule {expression!r}, which turns every character of a name outside [A-Za-z0-9._-] into '_'"
               if "{" in expression else f"rule {expression!r}")
        return RoutingError(
            f"Tables {first} and {schema}.{table} would both go to {shared} ({detail}{why}); Avro with "
            "TopicNameStrategy allows one table per topic (one schema per subject). "
            + collision_advice(schema, table, expression),
            table=f"{schema}.{table}",
            other_table=f"{owner.schema}.{owner.table}",
            rule=expression,
            **context,
        )


# --------------------------------------------------------------------------------------------------
# Partition dispatch (seed 003): deterministic across processes (CRC-32, not Python's hash()).


def build_router(config: SinkConfig, topic_rule: str | None) -> TopicRouter:
    """The router of a run: ``topic_rule`` first, else the config's dispatchers and default topic.

    The default topic (the sink URI's, else :data:`DEFAULT_TOPIC_RULE`) is TiCDC's default rule: it names the
    topic of a table no dispatcher rule matches and of one matched by a rule without ``topic`` (a
    partition-only rule: its ``partition`` applies, the topic comes from the default)."""
    return TopicRouter(config.dispatchers, default_topic=config.default_topic or DEFAULT_TOPIC_RULE,
                       topic_rule=topic_rule, subject_naming=config.subject_naming,
                       case_sensitive=config.case_sensitive)


def _crc(parts: Iterable[Any]) -> int:
    crc = 0
    for part in parts:
        data = part if isinstance(part, bytes) else ("\x00" if part is None else str(part)).encode()
        crc = zlib.crc32(data + b"\x1f", crc)
    return crc


def partition_for(
    route: Route,
    partitions: int,
    *,
    key_values: Sequence[Any] = (),
    commit_ts: int = 0,
    column_values: Sequence[Any] = (),
) -> int:
    """Pick a partition for one row.

    * ``default`` / ``index-value``: hash of schema, table and handle-key values: every change of one row
      lands in one partition, so per-row order is kept;
    * ``table``: hash of schema and table: per-table order;
    * ``ts``: commit ts modulo partitions: no order guarantee beyond a transaction;
    * ``columns``: hash of the configured columns' values.
    """
    if partitions <= 1:
        return 0
    strategy = route.partition
    if strategy is PartitionStrategy.TABLE:
        return _crc((route.schema, route.table)) % partitions
    if strategy is PartitionStrategy.TS:
        return commit_ts % partitions
    if strategy is PartitionStrategy.COLUMNS:
        return _crc((route.schema, route.table, *column_values)) % partitions
    return _crc((route.schema, route.table, *key_values)) % partitions
