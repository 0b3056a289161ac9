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
