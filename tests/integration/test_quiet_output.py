"""Quiet by default (issue 22): a run that fetches Spark's Kafka connector prints no Ivy resolution report, no Spark
banner and no JVM warnings on stderr; ``-v`` shows them. The CLI runs as a subprocess (its own JVM start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from avro_registry_sink.sources.demo import generate_demo
from tests.support.servers import ensure_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

NOISE = (":: resolving dependencies", "Ivy Default Cache", "found org.apache.spark#spark-sql-kafka",
         'Setting default log level to "WARN"', "WARNING: Using incubator modules")


def _run(tmp_path, topic_rule: str, *extra: str) -> subprocess.CompletedProcess:
    bootstrap = ensure_kafka()
    if not (tmp_path / "in").exists():
        manifest = generate_demo(tmp_path / "in", rows_per_table=4)
        (tmp_path / "tables.sql").write_text(";\n".join(manifest.create_statements.values()) + ";\n")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("AVRO_SINK_VERBOSE", None)
    return subprocess.run([sys.executable, "-c", "from avro_registry_sink.cli import main; main()", *extra, "run",
                           "--source", str(tmp_path / "in"), "--available-now", "--tables", str(tmp_path / "tables.sql"),
                           "--sink-uri", f"kafka://{bootstrap}/?protocol=avro&partition-num=1",
                           "--topic-rule", topic_rule, "--state-dir", str(tmp_path / "state"),
                           "--csv", "include-commit-ts=true", "--csv", "output-old-value=true", "--progress", "none"],
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_kafka_run_prints_no_jvm_chatter_unless_verbose(tmp_path):
    topic_rule = "q" + uuid.uuid4().hex[:6] + "_{schema}_{table}"
    quiet = _run(tmp_path, topic_rule)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    # nothing but what the job itself says: here, only that the records' schema ids live in the in-process registry
    said = [json.loads(line) for line in quiet.stderr.strip().splitlines()]
    assert [(e["event"], e.get("warning")) for e in said] == [("warning", "embedded-registry")], quiet.stderr[-3000:]

    # the same job again, verbose: Spark and the connector's resolution start as before, and the checkpoint leaves
    # it nothing to deliver (the batches' work was the quiet run's to show)
    loud = _run(tmp_path, topic_rule, "-v")
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert all(noise in loud.stderr for noise in NOISE[:2]), loud.stderr[-3000:]
