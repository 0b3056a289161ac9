"""What the encode stage needs for one table version, as plain data that travels to the executors.

Both encode engines take a :class:`StagePlan`: the Arrow stage (:mod:`~avro_registry_sink.spark.stages.stage`,
the job's engine) and the JVM stage (:mod:`~avro_registry_sink.spark.stages.jvm_stage`, an engine of
:func:`~avro_registry_sink.spark.stages.stage.encode_table` only); it lives here so that neither engine imports
the other's module for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from avro_registry_sink.encoding.plan import EncodingPlan
from avro_registry_sink.model import PlanKey
from avro_registry_sink.routing.rules import Route

if TYPE_CHECKING:  # pragma: no cover
    from avro_registry_sink.manager import TablePlan

__all__ = ["StagePlan", "stage_plans_for", "topic_partitions"]


@dataclass(frozen=True)
class StagePlan:
    """What the stage needs for one table version: encoding plan, topic, partition count and route."""

    encoding: EncodingPlan
    topic: str
    partitions: int
    route: Route
    max_message_bytes: int = 0  # TiCDC's check: key + value + 36 must not exceed it; 0 = no check

    @property
    def key(self) -> PlanKey:
        """The ``(schema, table, table_version)`` this plan encodes."""
        t = self.encoding.table
        return (t.schema_name, t.table, t.version)


def stage_plans_for(plans: Mapping[PlanKey, TablePlan], partitions: Mapping[str, int],
                max_message_bytes: int = 0) -> dict[PlanKey, Any]:
    """The stage's plan of each table version the manager planned, with its topic's partition count."""
    return {
        key: StagePlan(encoding=plan.encoding, topic=plan.route.topic, partitions=partitions[plan.route.topic],
                       route=plan.route, max_message_bytes=max_message_bytes)
        for key, plan in plans.items()
    }


def topic_partitions(plans: Mapping[PlanKey, StagePlan]) -> dict[str, int]:
    """Topic -> Kafka partition count, of the topics the stage plans write."""
    return {plan.topic: plan.partitions for plan in plans.values()}
