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
# The exactly-once JVM slice writer's jar (setup.py's build_jar step): pip's isolated build above has no pyspark
# to compile against, so it is built here, in place, with this venv's pyspark and the kafka-clients jar that
# Spark's Kafka connector of this pyspark depends on (its version read from the connector's pom on Maven
# Central, the jar fetched once into the product's cache directory, build/). Skipped while the jar matches the
# source; optional: without javac or the network the build says why, and the driver compiles it at run time
# (with javac) or exactly-once slices are written in Python.
if ! .venv/bin/python -c 'import sys, pyspark; from avro_registry_sink.spark.sinks import jvm_writer
sys.exit(jvm_writer.packaged_problem(pyspark.__version__) is not None)'; then
  client="$(.venv/bin/python - <<'PY'
import hashlib, re, sys, urllib.request
from avro_registry_sink.cache_dir import cache_root
from avro_registry_sink.spark.runtime.packages import kafka_package

CENTRAL = "https://repo1.maven.org/maven2"
group, artifact, version = kafka_package().split(":")
try:
    with urllib.request.urlopen(f"{CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.pom",
                                timeout=60) as answer:
        pom = answer.read().decode()
    found = re.search(r"<artifactId>kafka-clients</artifactId>\s*<version>([^<$]+)</version>", pom)
    if found is None:
        sys.exit(f"install.sh: no kafka-clients version in {artifact} {version}'s pom")
    client = found.group(1)
    jar = cache_root() / "build" / f"kafka-clients-{client}.jar"
    if not jar.is_file():
        url = f"{CENTRAL}/org/apache/kafka/kafka-clients/{client}/kafka-clients-{client}.jar"
        with urllib.request.urlopen(url, timeout=300) as answer:
            data = answer.read()
        with urllib.request.urlopen(url + ".sha1", timeout=60) as answer:
            sha1 = answer.read().decode().split()[0]
        if hashlib.sha1(data).hexdigest() != sha1:
            sys.exit(f"install.sh: {url} does not match its .sha1")
        jar.parent.mkdir(parents=True, exist_ok=True)
        jar.with_suffix(".part").write_bytes(data)
        jar.with_suffix(".part").replace(jar)
    print(jar)
except OSError as exc:
    sys.exit(f"install.sh: kafka-clients of {artifact} {version} not fetched from Maven Central: {exc}")
PY
)" || client=""
  if [ -n "$client" ]; then
    AVRO_SINK_KAFKA_CLIENTS_JAR="$client" .venv/bin/python setup.py -q build_jar --inplace
  else
    .venv/bin/python setup.py -q build_jar --inplace
  fi
fi
