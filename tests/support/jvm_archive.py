"""The JVM options of the suite's Spark drivers: the product's class archive, C1 only and the serial collector.

The suite starts a Spark driver JVM well over a hundred times: the session SparkSession, and every CLI
subprocess of the job, fault, kill and deployment tests. Each uses the product's class-data-sharing archive
(:mod:`avro_registry_sink.spark.runtime.class_archive`, dumped once before the suite: ``scripts/test.sh`` does
so while ruff and mypy run), which ``local_session`` adds by itself. On top, through ``SPARK_SUBMIT_OPTS`` (which
spark-submit adds to the driver's java command and which pyspark's own launch goes through):

* ``-XX:TieredStopAtLevel=1``: C1 only: the tests' JVMs are short-lived and process little data, so C2's
  compile threads cost more than they save;
* ``-XX:+UseSerialGC``: small heaps, no parallel GC threads competing for the 2 cores.

None of these changes what a test observes: the same classes, the same bytecode, the same results.
``AVRO_SINK_TEST_PLAIN_JVM=1`` runs the suite with Spark's default JVM options and no archive; a
``SPARK_SUBMIT_OPTS`` already set is left as it is.
"""

from __future__ import annotations

import os

from avro_registry_sink.spark.runtime.class_archive import ARCHIVE_ENV, ensure_archive

JIT_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
PLAIN_ENV = "AVRO_SINK_TEST_PLAIN_JVM"


def driver_options() -> str | None:
    """The ``SPARK_SUBMIT_OPTS`` the suite runs with, or None to leave the JVM's defaults (and no archive)."""
    if os.environ.get(PLAIN_ENV) == "1":
        os.environ[ARCHIVE_ENV] = "0"
        return None
    if os.environ.get("SPARK_SUBMIT_OPTS"):
        return None
    ensure_archive()
    return " ".join(JIT_OPTIONS)
