"""The job submitted with spark-submit to a real standalone cluster whose executors lack the package.

``scripts/spark-cluster.sh`` starts a master and two workers (1 core each) from pyspark's own Spark; their
executors' default Python is the system's ``python3``, which has neither this project nor its dependencies.
The job goes there as the README says: ``avro-registry-sink package`` builds the executor environment and
``submit.py``, spark-submit ships the environment with ``--archives``. The submission writes to Kafka exactly
once, with the JVM slice writer on the cluster's executors; what a read_committed consumer reads equals the local
run of the same input (file sink, same topic rule, same registry) byte for byte: the same topics, partitions,
schema ids, keys, values and commit ts. The master's ``/json`` shows the application ran on the cluster.

One submission proves both the cluster's executors and exactly-once there (each submission is a driver JVM and
an executor JVM per worker); the cluster starts and the environment is built while the local run goes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig, SinkConfig
from avro_registry_sink.sources.demo import generate_demo, write_rerun_files
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sinks.sinks import read_file_sink
from avro_registry_sink.spark.sources.sources import parse_source
from tests.support.servers import ensure_kafka, ensure_spark_cluster, start_in_background

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.kafka, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.timeout(2400)]  # JVM starts and first downloads (hadoop-aws, pip) on a busy machine

CLI = str(Path(sys.executable).with_name("avro-registry-sink"))
APP_NAME = "avro-registry-sink-cluster-test"


def _records(where: Path) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for r in read_file_sink(where):
        out.setdefault(r.topic, []).append((r.partition, r.key, r.value, r.commit_ts))
    return {topic: sorted(rows, key=repr) for topic, rows in out.items()}


def _kafka_records(bootstrap: str, prefix: str) -> dict[str, list[tuple]]:
    """The records of the topics named ``<prefix>_...``, as a read_committed consumer reads them:
    ``(partition, key, value, commit ts header)``."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cluster-{prefix}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        topics = consumer.list_topics(timeout=30).topics
        parts = [TopicPartition(t, p, 0) for t in topics if t.startswith(prefix + "_") for p in topics[t].partitions]
        consumer.assign(parts)
        pending, out = {(tp.topic, tp.partition) for tp in parts}, {}
        deadline = time.monotonic() + 60
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                pending.discard((msg.topic(), msg.partition()))
                continue
            commit_ts = dict(msg.headers() or []).get("commit_ts")
            out.setdefault(msg.topic(), []).append((msg.partition(), msg.key(), msg.value(),
                                                    int(commit_ts) if commit_ts is not None else None))
        assert parts and not pending, (parts, pending)
        return {topic: sorted(rows, key=repr) for topic, rows in out.items()}
    finally:
        consumer.close()


def test_spark_submit_to_a_standalone_cluster_gives_the_local_output(spark, tmp_path):
    start_in_background("spark-cluster.sh")  # ensure_spark_cluster waits for it below
    worker_python = os.environ.get("SPARK_CLUSTER_PYTHON", "/usr/bin/python3")
    for module in ("avro_registry_sink", "pyarrow"):  # the executors' own Python (away from this checkout)
        lacks = subprocess.run([worker_python, "-c", f"import {module}"], capture_output=True, text=True,
                               cwd=tmp_path)
        assert lacks.returncode != 0 and "No module named" in lacks.stderr, module

    building = subprocess.Popen([CLI, "package", "--out", str(tmp_path / "dist")], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        manifest = generate_demo(tmp_path / "input", rows_per_table=12)
        ddl, settings = write_rerun_files(manifest, tmp_path)
        bootstrap, prefix = ensure_kafka(), f"cl{uuid.uuid4().hex[:8]}"
        rule = prefix + "_{schema}_{table}"
        with EmbeddedRegistry() as server, RegistryClient(RegistryConfig(urls=(server.url,))) as registry:
            # the reference, on the session's Spark while the environment is built: the same topic rule and
            # registry as the submission, so the same topics, subjects and schema ids
            local = run_job(spark, JobOptions(
                source=parse_source(str(tmp_path / "input")), checkpoint=tmp_path / "local-ck",
                sink=SinkConfig(scheme="file", path=str(tmp_path / "local-out")), csv_options=manifest.csv_options,
                topic_rule=rule, tables=tuple(manifest.tables.values())), registry=registry)
            assert local.totals.rows == len(manifest.all_events) and local.totals.errors == 0

            stdout, stderr = building.communicate(timeout=1200)
            assert building.returncode == 0, stderr[-3000:]
            archive, submit = tmp_path / "dist" / "executor-env.tar.gz", tmp_path / "dist" / "submit.py"
            assert archive.exists() and submit.exists() and "spark-submit" in stdout

            import pyspark

            cluster = ensure_spark_cluster()
            spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
            env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                                                                     "AVRO_SINK_SPARK_MASTER", "PYTHONPATH")}
            env["SPARK_LOCAL_IP"] = "127.0.0.1"
            # exactly once into Kafka: the JVM slice writer, built on the driver's side, runs in the cluster's executors
            submitted = subprocess.run([
                str(spark_submit), "--master", cluster.master, "--name", APP_NAME,
                "--archives", f"{archive}#env", "--conf", "spark.pyspark.python=./env/bin/python",
                "--conf", f"spark.pyspark.driver.python={sys.executable}", "--conf", "spark.executor.memory=768m",
                "--conf", "spark.sql.shuffle.partitions=3",
                str(submit), "run", "--source", str(tmp_path / "input"), "--tables", str(ddl), "--config",
                str(settings), "--available-now", "--registry", server.url, "--progress", "none",
                "--checkpoint", str(tmp_path / "cluster-eos-ck"), "--delivery", "exactly-once", "--producer", "spark",
                "--topic-rule", rule, "--sink-uri", f"kafka://{bootstrap}/?protocol=avro&partition-num=3",
            ], env=env, capture_output=True, text=True, timeout=1200)
            assert submitted.returncode == 0, submitted.stderr[-4000:]
            summary = json.loads(submitted.stdout.strip().splitlines()[-1])
            assert summary["rows"] == local.totals.rows and summary["errors"] == 0
    finally:
        if building.poll() is None:
            building.kill()
            building.communicate()

    # read_committed, once each: the local run's records, byte for byte (same schema ids, same partitions)
    expected = _records(tmp_path / "local-out")
    assert sorted(expected) == sorted(prefix + "_" + t for t in ("crm_events", "shop_customers", "shop_orders"))
    assert _kafka_records(bootstrap, prefix) == expected

    with urllib.request.urlopen(f"{cluster.ui}/json/", timeout=10) as answer:
        state = json.load(answer)
    apps = [a for a in state["completedapps"] + state["activeapps"] if a["name"] == APP_NAME]
    assert apps, f"the master knows no application {APP_NAME!r}: {state}"
    app = apps[-1]
    assert app["state"] == "FINISHED"
    ran = 0  # its executors, as the workers report them
    for worker in state["workers"]:
        with urllib.request.urlopen(f"{worker['webuiaddress']}/json/", timeout=10) as answer:
            seen = json.load(answer)
        ran += sum(e["appid"] == app["id"] for e in seen["executors"] + seen["finishedexecutors"])
    assert ran >= 1
