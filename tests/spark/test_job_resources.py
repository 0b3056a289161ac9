"""Bounded memory: batch sizes derived from the heap, a JVM that runs out of memory reported as such, and the
session's pipelined Python workers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from avro_registry_sink.settings.config import parse_sink_uri
from avro_registry_sink.spark.driver.job import resource_failure, run_job, trigger_limits
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.runtime.session import memory_bytes, trigger_budget
from avro_registry_sink.spark.sources.sources import parse_source

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]


def test_batches_are_sized_from_the_heap_unless_the_options_say(spark, tmp_path):
    storage = JobOptions(source=parse_source(str(tmp_path)), checkpoint=tmp_path / "ck")
    heap = memory_bytes(spark.conf.get("spark.driver.memory"))
    assert heap >= 1 << 30  # never Spark's 1 GiB-or-less default without being asked
    assert trigger_limits(spark, storage) == {"max_bytes_per_trigger": trigger_budget(heap)}
    kafka = JobOptions(source=parse_source("canal-json+kafka://127.0.0.1:9/t"), checkpoint=tmp_path / "ck")
    streamed = trigger_budget(heap, streamed=True) // 1024
    assert trigger_limits(spark, kafka) == {"max_offsets_per_trigger": streamed}
    assert streamed == min(heap // 4, 1 << 30) // 1024
    # a batch counted before it is written (a bad-row budget, a Kafka sink) is cached: a smaller share
    sink = parse_sink_uri("kafka://127.0.0.1:9/?protocol=avro&schema-registry=http://127.0.0.1:9")
    cached = JobOptions(source=kafka.source, checkpoint=tmp_path / "ck", sink=sink, max_bad_rows=10)
    assert trigger_limits(spark, cached) == {"max_offsets_per_trigger": trigger_budget(heap) // 1024}
    file_sink = JobOptions(source=kafka.source, checkpoint=tmp_path / "ck", max_bad_rows=10)
    assert trigger_limits(spark, file_sink) == {"max_offsets_per_trigger": streamed}
    given = JobOptions(source=parse_source(str(tmp_path)), checkpoint=tmp_path / "ck", max_files_per_trigger=3)
    assert trigger_limits(spark, given) == {"max_files_per_trigger": 3}


def test_a_byte_budget_splits_a_backlog_into_batches(spark, tmp_path, registry):
    from avro_registry_sink.settings.config import SinkConfig
    from avro_registry_sink.sources.demo import generate_demo
    from tests.support.job import stamp_in_order

    manifest = generate_demo(tmp_path / "in", rows_per_table=8)
    stamp_in_order(tmp_path / "in", manifest.data_files)
    options = JobOptions(source=parse_source(str(tmp_path / "in")), checkpoint=tmp_path / "ck",
                         sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), csv_options=manifest.csv_options,
                         tables=tuple(manifest.tables.values()), max_bytes_per_trigger=1)  # one file per batch
    result = run_job(spark, options, registry=registry)
    assert result.totals.batches == len(manifest.data_files)
    assert result.totals.rows == sum(c.inserts + c.updates + c.deletes for c in manifest.counts.values())


def test_resource_failures_name_the_cause_and_the_setting():
    settings = {"heap": "6g", "batch": "max-bytes-per-trigger=768m"}
    assert resource_failure("[Errno 111] Connection refused", 52, settings).startswith(
        "The Spark JVM ran out of memory (exit status 52")
    worker = resource_failure("org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)", None,
                              settings)
    assert "Python worker" in worker and "max-bytes-per-trigger=768m" in worker
    assert resource_failure("IncompatibleSchema: ...", None, settings) is None


#: ``avro-registry-sink run`` in a 512 MiB heap, where a Spark task of the batch allocates a 1 GiB string: a
#: real OutOfMemoryError that ends the JVM (the sink is only where the allocation is started).
_OOM_SCRIPT = textwrap.dedent('''
    import sys
    from pathlib import Path
    from avro_registry_sink import cli
    from avro_registry_sink.sources.demo import generate_demo
    from avro_registry_sink.spark.driver import job
    from avro_registry_sink.spark.sinks.sinks import FileSink

    class HungrySink(FileSink):
        def write(self, records, batch_id, **kw):
            records.sparkSession.range(1).selectExpr("length(repeat('x', id + 1073741824))").collect()

    job.build_sink = lambda config, *a, **k: HungrySink(config.path)
    work = Path(sys.argv[1])
    manifest = generate_demo(work / "in", rows_per_table=4)
    (work / "tables.sql").write_text(";\\n".join(manifest.create_statements.values()) + ";\\n")
    sys.argv = ["avro-registry-sink", "run", "--source", str(work / "in"), "--available-now",
                "--sink-uri", f"file://{work / 'out'}?protocol=avro", "--state-dir", str(work / "state"),
                "--tables", str(work / "tables.sql"), "--csv", "include-commit-ts=true",
                "--csv", "output-old-value=true", "--progress", "none"]
    cli.main()
''')


def test_the_jvms_exit_status_is_awaited_only_when_the_jvm_may_have_died():
    """A Java exception the JVM sent back says it is alive: no 2-s wait for an exit status before the report."""
    from py4j.protocol import Py4JError, Py4JNetworkError

    from avro_registry_sink.spark.driver.job import _jvm_may_have_died

    class Py4JJavaError(Exception):  # py4j's own needs a live JVM to print itself; only its name and module count
        pass

    Py4JJavaError.__module__ = "py4j.protocol"
    assert not _jvm_may_have_died(Py4JJavaError("org.apache.spark.SparkException: Python worker exited unexpectedly"))
    assert _jvm_may_have_died(Py4JJavaError("java.lang.OutOfMemoryError: Java heap space"))
    assert _jvm_may_have_died(Py4JNetworkError("Answer from Java side is empty"))
    assert _jvm_may_have_died(Py4JError("An error occurred while calling o42.awaitTermination"))
    assert _jvm_may_have_died(ConnectionRefusedError(111, "Connection refused"))
    assert not _jvm_may_have_died(ValueError("a failpoint"))


def test_a_jvm_out_of_memory_is_reported_as_such(tmp_path):
    done = subprocess.run([sys.executable, "-c", _OOM_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "AVRO_SINK_DRIVER_MEMORY": "512m"})
    assert done.returncode == 1, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    line = errors[0]
    assert "ran out of memory" in line and "AVRO_SINK_DRIVER_MEMORY" in line and "512m" in line, line
    assert "Batch 0 was not committed" in line and "Connection refused" not in line
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


def test_python_workers_read_their_next_batches_while_they_encode(spark):
    """Sessions turn on Spark 4.3's pipelined Python workers (``session.DEFAULT_CONF``): the JVM tells a worker
    so through ``SPARK_PIPELINED_UDF``, and the worker then reads its input in a thread of its own."""
    import pyarrow as pa

    def probe(batches):
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"pipelined": [os.environ.get("SPARK_PIPELINED_UDF", "")] * batch.num_rows})

    seen = {row.pipelined for row in spark.range(0, 8, 1, 2).mapInArrow(probe, "pipelined string").collect()}
    assert seen == {"1"}
