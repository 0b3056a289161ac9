"""The storage source's planning process, and a local session's Python workers, run with the driver's own
pyspark first on their path.

Spark starts those processes with its ``pyspark.zip`` first on ``PYTHONPATH``, which Python compiles from
source on every start; :mod:`avro_registry_sink.spark.runtime.driver_python` gives them a launcher that puts the driver's
installed (compiled) pyspark ahead of it. This checks the processes Spark really started.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest

from avro_registry_sink.spark.runtime.session import master_of
from avro_registry_sink.spark.sources.storage_source import storage_tree_stream
from avro_registry_sink.storage_fs import parse_storage_uri

pytestmark = [pytest.mark.spark, pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")]

RUNNER = b"python_streaming_source_runner"


def _source_processes() -> list[dict[str, str]]:
    """The environments of this machine's running source planning processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if RUNNER not in (entry / "cmdline").read_bytes():
                continue
            raw = (entry / "environ").read_bytes()
        except OSError:  # ended meanwhile, or not ours
            continue
        found.append(dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item))
    return found


def test_the_source_process_imports_the_drivers_pyspark_first(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("AVRO_SINK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "tree").mkdir()
    stream = storage_tree_stream(spark, parse_storage_uri(str(tmp_path / "tree"), option="source"))
    query = (stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        deadline, ours = time.time() + 60, []
        while time.time() < deadline and not ours:
            assert query.exception() is None, query.exception()
            ours = [env for env in _source_processes()
                    if env.get("PYTHONPATH", "").startswith(str(tmp_path / "cache" / "python"))]
            time.sleep(0.2)
    finally:
        query.stop()
    assert ours, "no source planning process with the launcher's path first"
    first, *rest = ours[0]["PYTHONPATH"].split(os.pathsep)
    assert sorted(p.name for p in Path(first).iterdir()) == ["py4j", "pyspark"]
    assert any(p.endswith("pyspark.zip") for p in rest)  # Spark's zip is still there, behind the driver's pyspark


def test_a_local_sessions_workers_import_the_drivers_pyspark(spark):
    if not master_of(spark).startswith("local") or os.environ.get("PYSPARK_PYTHON", sys.executable) != sys.executable:
        pytest.skip("the workers run another interpreter than the driver's")

    def where(batches):
        import pyspark  # the worker's own

        for batch in batches:
            yield pa.RecordBatch.from_pydict({"file": [pyspark.__file__] * batch.num_rows,
                                              "path": [os.environ.get("PYTHONPATH", "")] * batch.num_rows})

    rows = spark.range(2).mapInArrow(where, "file STRING, path STRING").collect()
    assert {os.path.realpath(r.file) for r in rows} == {os.path.realpath(pyspark.__file__)}  # not Spark's zip
    assert all(".zip" not in r.file for r in rows)
    first = rows[0].path.split(os.pathsep)[0]
    assert sorted(p.name for p in Path(first).iterdir()) == ["py4j", "pyspark"]
