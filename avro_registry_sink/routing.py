"""Topic rules, subjects and partition dispatch (pure functions and a small stateful router).

Topic rules follow TiCDC's dispatchers: the first rule whose matcher accepts ``schema.table`` names the
topic expression; ``{schema}`` and ``{table}`` are substituted with TiCDC's character rules. Avro needs
one table per topic (TopicNameStrategy allows one schema per subject), so:

* an expression with ``{schema}`` before ``{table}`` is valid (TiCDC's ``ValidateForAvro``);
* a fixed topic name is accepted only while it routes exactly one table: a second table routed to it is
  a :class:`RoutingError` naming both (TiCDC accepts this and lets the registry fail later);
* two tables whose substituted names collide (``a_b.c`` and ``a.b_c`` under ``{schema}_{table}``) are
  refused the same way.
"""

from __future__ import annotations

import re
import threading
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from avro_registry_sink.config import DispatchRule, PartitionStrategy, SubjectNaming
from avro_registry_sink.errors import RoutingError
from avro_registry_sink.table_filter import TableFilter

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
        self._owners: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

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
        rule = next((r for r, m in zip(self._rules, self._matchers) if m.matches(schema, table)), None)
        expression = rule.topic if rule is not None and rule.topic else self._default_topic
        if not expression:
            raise RoutingError(
                f"No topic for table {schema}.{table}: no dispatcher rule matches it and the sink has no "
                "default topic; add a topic rule such as '{schema}_{table}'.",
                table=f"{schema}.{table}",
            )
        topic = substitute(expression, schema, table)
        owner = self._owners.get(topic.lower())
        if owner is not None and owner != key:
            raise RoutingError(
                f"Tables {owner[0]}.{owner[1]} and {schema}.{table} would both go to topic {topic!r} "
                f"(rule {expression!r}); Avro with TopicNameStrategy allows one table per topic (one schema "
                "per subject). Use a rule with {schema} and {table}, or route each table to its own topic.",
                table=f"{schema}.{table}",
                topic=topic,
                rule=expression,
            )
        route = Route(
            schema=schema,
            table=table,
            topic=topic,
            key_subject=subject_for(topic, "key", self._naming),
            value_subject=subject_for(topic, "value", self._naming),
            partition=rule.partition if rule is not None else PartitionStrategy.DEFAULT,
            partition_columns=rule.columns if rule is not None else (),
        )
        self._owners[topic.lower()] = key
        self._routes[key] = route
        return route


# --------------------------------------------------------------------------------------------------
# Partition dispatch (seed 003): deterministic across processes (CRC-32, not Python's hash()).


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
