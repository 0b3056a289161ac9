"""The job's options (:class:`JobOptions`), kept apart from :mod:`avro_registry_sink.spark.driver.job` (which re-exports
them) so that the job's batch sources (:mod:`~avro_registry_sink.spark.driver.batch_storage`,
:mod:`~avro_registry_sink.spark.driver.batch_changelog`) name them without importing the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.settings.config import SinkConfig, parse_trigger_interval
from avro_registry_sink.spark.sources.sources import SourceSpec
from avro_registry_sink.storage_fs import StorageURI, parse_storage_uri
from avro_registry_sink.table import TableDef

if TYPE_CHECKING:  # pragma: no cover
    from avro_registry_sink.formats.csv import CsvOptions

__all__ = ["KAFKA_PRODUCERS", "ON_MISSING_FILE", "JobOptions"]

#: ``--on-missing-file``: what a storage data file that vanished before it was read does to its batch.
ON_MISSING_FILE = ("report", "fail")



@dataclass(frozen=True)
class JobOptions:
    """Everything a run needs besides the SparkSession (plain, frozen data)."""

    source: SourceSpec
    checkpoint: Path | str  # a local directory or a storage URI (s3://bucket/prefix?endpoint=..., hdfs://, ...)
    sink: SinkConfig = SinkConfig()
    topic_rule: str | None = None
    available_now: bool = True
    trigger_interval: str = "10 seconds"
    max_files_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None  # default (no files/bytes/offsets limit given): trigger_limits
    max_offsets_per_trigger: int | None = None
    csv_options: CsvOptions | None = None
    tables: tuple[TableDef, ...] = ()  # user definitions: complete schema files, seed changelog tables
    kafka_producer: str = "auto"  # "spark" | "confluent" | "auto"
    output_partitions: int | None = None  # Spark partitions of the encode/write stage
    max_bad_rows: int | None = None  # a batch with more dead-lettered rows fails (None: no limit)
    max_bad_ratio: float | None = None  # ... or with more than this share of its rows dead-lettered
    query_name: str | None = None
    on_missing_file: str = "report"  # a storage data file gone before it was read: report it, or fail the batch

    def __post_init__(self) -> None:
        # option errors surface here, before any SparkSession exists
        parse_trigger_interval(self.trigger_interval)
        if self.on_missing_file not in ON_MISSING_FILE:
            raise ConfigError(
                f"Invalid value {self.on_missing_file!r} for option '--on-missing-file': valid values are "
                + ", ".join(ON_MISSING_FILE) + ".", option="on-missing-file", value=self.on_missing_file,
                choices=list(ON_MISSING_FILE))
        if self.kafka_producer not in KAFKA_PRODUCERS:
            raise ConfigError(
                f"Invalid value {self.kafka_producer!r} for option '--producer': valid values are "
                + ", ".join(KAFKA_PRODUCERS) + ".", option="producer", value=self.kafka_producer,
                choices=list(KAFKA_PRODUCERS))

    @property
    def checkpoint_uri(self) -> StorageURI:
        """Where the checkpoint and all side state live (:mod:`~avro_registry_sink.storage_fs`)."""
        return parse_storage_uri(str(self.checkpoint), option="checkpoint")


#: ``--producer``: Spark's Kafka sink when available (auto), always (spark), or confluent-kafka's producer.
KAFKA_PRODUCERS = ("auto", "spark", "confluent")
