"""What the job's batch sources hand its ``foreachBatch``: one micro-batch prepared for the sink.

The job has one batch source per kind of input, :class:`~avro_registry_sink.spark.driver.batch_storage.StorageBatches`
(a TiCDC storage tree) and :class:`~avro_registry_sink.spark.driver.batch_changelog.ChangelogBatches` (canal-json or
debezium-json messages). On the driver, each resolves its batch's tables, has the schema manager plan them
(registering schemas), and builds the batch's one encode pass (lazy: it runs when the sink writes); what it
hands on is a :class:`PreparedBatch`. Both offer the same methods to the job:

* ``prepare(spark, batch_df, batch_id, output) -> PreparedBatch | None`` (``None``: nothing to do);
* ``begin_side(batch_id, from_store=...)`` / ``end_side(batch_id)``: their part of the checkpoint's side state;
* ``raw(spark, sources)``: the input bytes of rows the encode stage refused, for their dead-letter records;
* ``read_again(batch_df, batch_id)``: whether a failed attempt is read once more (a changelog's strict pass);
* ``ddl_history(schema, table)``: a table's DDLs, for the migration rules of a breaking change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from avro_registry_sink.model import PlanKey

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from avro_registry_sink.manager import TablePlan
    from avro_registry_sink.ops.progress import BatchReport

__all__ = ["PreparedBatch"]


@dataclass(frozen=True)
class PreparedBatch:
    """One micro-batch, planned and encoded (lazily) for the sink, with what its report needs from the source."""

    #: The encode stage's output (:data:`~avro_registry_sink.model.ENCODED_DDL`, refused rows with an ``error``).
    encoded: DataFrame
    #: The plan of each table version the batch holds (schemas registered).
    plans: Mapping[PlanKey, TablePlan]
    #: Dead-letter records found on the driver before encoding (a malformed DDL message, an unreadable file).
    early_errors: tuple[dict[str, Any], ...] = ()
    #: Data files or messages read (a strict changelog pass counts them on the way: see ``late_report``).
    inputs: int = 0
    #: Each topic's records come from one data file or one task: in order without a shuffle.
    single_input: bool = False
    #: What the batch's report warns of (held or late files, files gone).
    warnings: tuple[str, ...] = ()
    #: Files or messages per table that ``[filter] rules`` left out.
    filtered: Mapping[str, int] = field(default_factory=dict)
    #: Dead-letter records of data files that vanished before they were read.
    missing: tuple[dict[str, Any], ...] = ()
    #: Fills in the report what is known only once the batch is written (a strict pass's counts).
    late_report: Callable[[BatchReport], None] | None = None
