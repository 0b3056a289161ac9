"""The errors a run of the job stops with (re-exported by :mod:`avro_registry_sink.spark.driver.job`), kept apart so that
the job's batch sources raise them without importing the job."""

from __future__ import annotations

from avro_registry_sink.errors import AvroSinkError

__all__ = ["JobFailed", "MissingInputFiles", "SparkResourceError"]


class JobFailed(AvroSinkError):
    """The streaming query stopped with an error; nothing of the failing batch was committed."""


class MissingInputFiles(JobFailed):
    """Data files of a batch vanished before they were read, and ``--on-missing-file fail`` was given."""


class SparkResourceError(JobFailed):
    """Spark ran out of a resource (JVM heap, a Python worker, an executor): the message names the setting."""
