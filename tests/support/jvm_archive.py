"""The JVM options of the suite's Spark drivers: a class archive of their own, C1 only and the serial collector.

The suite starts a Spark driver JVM well over a hundred times: the session SparkSession, and every CLI
subprocess of the job, fault, kill and deployment tests. On this 2-core machine most of each start is
spent loading and verifying Spark's classes and compiling them with C2, work that is the same every time.
So the suite runs its drivers with (``SPARK_SUBMIT_OPTS``, which spark-submit adds to the driver's java
command and which pyspark's own launch goes through):

* ``-XX:SharedArchiveFile``: the product's class-data-sharing archive
  (:mod:`avro_registry_sink.spark.runtime.class_archive`), dumped under the two options below: an archive dumped
  with the JVM's defaults maps less under them (a small ``run`` 15.2 s against 13.2 s);
* ``-XX:TieredStopAtLevel=1``: C1 only: the tests' JVMs are short-lived and process little data, so C2's
  compile threads cost more than they save;
* ``-XX:+UseSerialGC``: small heaps, no parallel GC threads competing for the 2 cores.

None of these changes what a test observes: the same classes, the same bytecode, the same results. Naming an
archive here keeps ``local_session`` from adding the product's default one. ``AVRO_SINK_TEST_PLAIN_JVM=1`` runs
the suite with Spark's default JVM options instead; a ``SPARK_SUBMIT_OPTS`` already set is left as it is.

``python -m tests.support.jvm_archive`` dumps the archive ahead of time (``scripts/test.sh`` does so
while ruff and mypy run).
"""

from __future__ import annotations

import os
from pathlib import Path

from avro_registry_sink.spark.runtime import class_archive

JIT_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
PLAIN_ENV = "AVRO_SINK_TEST_PLAIN_JVM"


def archive_path() -> Path | None:
    """Where the suite's archive lives (the product's cache, named for the JIT options too)."""
    return class_archive.archive_path(JIT_OPTIONS)


def ensure_archive() -> Path | None:
    """The suite's archive, dumped first if there is none."""
    return class_archive.ensure_archive(JIT_OPTIONS)


def driver_options() -> str | None:
    """The ``SPARK_SUBMIT_OPTS`` the suite runs with, or None to leave the JVM's defaults."""
    if os.environ.get(PLAIN_ENV) == "1" or os.environ.get("SPARK_SUBMIT_OPTS"):
        return None
    archive = ensure_archive()
    options = [*JIT_OPTIONS]
    if archive is not None:
        options.insert(0, f"-XX:SharedArchiveFile={archive} {class_archive.QUIET}")
    return " ".join(options)


if __name__ == "__main__":
    print(ensure_archive() or "no archive: the dump failed (the suite runs without one)")
