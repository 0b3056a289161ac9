#!/usr/bin/env bash
# Create .venv and install the project with its test dependencies (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
# The exactly-once JVM slice writer's jar (setup.py's build_jar step) is built by the editable install above, in
# place, in pip's isolated build (pyspark is a build requirement; the Kafka client jar is fetched from Maven Central
# once). Should that build have been unable to (no javac, offline), it is tried again here with this venv's pyspark,
# where it says why on stderr; optional: the driver then compiles it at run time (with javac) or exactly-once slices
# are written in Python.
if ! .venv/bin/python -c 'import sys, pyspark; from avro_registry_sink.spark.sinks import jvm_writer
sys.exit(jvm_writer.packaged_problem(pyspark.__version__) is not None)'; then
  .venv/bin/python setup.py -q build_jar --inplace
fi
# Spark's class-data-sharing archive (avro_registry_sink/spark/runtime/class_archive.py): local Spark drivers start
# about 4 s sooner from it. Dumped once per JDK, pyspark and jar set by a small demo job; optional.
if ! .venv/bin/python -c 'import sys; from avro_registry_sink.spark.runtime import class_archive as a
p = a.archive_path(); sys.exit(p is None or not p.is_file())'; then
  echo "install.sh: dumping Spark's class archive for faster local starts (once, about 30 s)" >&2
  .venv/bin/python -m avro_registry_sink.spark.runtime.class_archive >&2 || true
fi
