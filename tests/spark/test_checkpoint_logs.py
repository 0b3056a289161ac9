"""Spark's offset and commit logs of a query whose checkpoint is local: written through Hadoop's FileSystem API.

``FileContext`` (Spark's default) renames each log file with ``readlink`` processes when Hadoop's native
library is missing (40 ms a file here, two files a micro-batch); ``session.local_checkpoint_logs`` gives the
query it starts the FileSystem-based manager and leaves the session as it was. The job's own query is checked
in ``test_job_changelog`` (its continuous run).
"""

from __future__ import annotations

import time

import pytest

from avro_registry_sink.spark.runtime.session import local_checkpoint_logs
from tests.support.job import log_file_manager

pytestmark = [pytest.mark.spark]

KEY = "spark.sql.streaming.checkpointFileManagerClass"


def _start(spark, checkpoint):
    return (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
            .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds").start())


def _committed(query, checkpoint, batches: int = 2) -> bool:
    deadline = time.time() + 60
    while time.time() < deadline:
        if all((checkpoint / "commits" / str(n)).exists() for n in range(batches)):
            return True
        assert query.exception() is None, query.exception()
        time.sleep(0.1)
    return False


def test_only_the_query_started_inside_gets_the_file_system_manager_and_commits_with_it(spark, tmp_path):
    assert spark.conf.get(KEY, None) is None
    with local_checkpoint_logs(spark) as open_logs:
        inside = _start(spark, tmp_path / "inside")
        open_logs(inside)
    assert spark.conf.get(KEY, None) is None  # the session as it was
    outside = _start(spark, tmp_path / "outside")
    try:
        assert log_file_manager(spark, inside, "offsetLog") == "FileSystemBasedCheckpointFileManager"
        assert log_file_manager(spark, inside, "commitLog") == "FileSystemBasedCheckpointFileManager"
        assert log_file_manager(spark, outside, "offsetLog") == "FileContextBasedCheckpointFileManager"
        assert _committed(inside, tmp_path / "inside") and _committed(outside, tmp_path / "outside")
        assert (tmp_path / "inside" / "offsets" / "1").read_text().startswith("v1")
    finally:
        inside.stop()
        outside.stop()
    # a restart reads what the FileSystem manager wrote, and goes on from it
    with local_checkpoint_logs(spark) as open_logs:
        again = _start(spark, tmp_path / "inside")
        open_logs(again)
    try:
        done = max(int(p.name) for p in (tmp_path / "inside" / "commits").iterdir() if p.name.isdigit())
        assert _committed(again, tmp_path / "inside", done + 2)
    finally:
        again.stop()


def test_a_manager_the_session_chose_is_kept(spark, tmp_path):
    chosen = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"
    spark.conf.set(KEY, chosen)
    try:
        with local_checkpoint_logs(spark) as open_logs:
            query = _start(spark, tmp_path / "ck")
            open_logs(query)
        try:
            assert spark.conf.get(KEY) == chosen
            assert log_file_manager(spark, query, "offsetLog") == "FileContextBasedCheckpointFileManager"
        finally:
            query.stop()
    finally:
        spark.conf.unset(KEY)
