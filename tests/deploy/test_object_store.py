"""The job on a real S3 API (S3Proxy from scripts/s3proxy.sh), as users run it: TiCDC's s3:// URIs.

A TiCDC storage tree (CDC.index, schema files, date directories, CSV and canal-json data files) is put on
the store; the job reads it through ``s3://bucket/prefix?endpoint=...&access-key=...``, writes its file-sink
output and its checkpoint (Spark's offsets and every side file) to the same store, is killed after a
committed batch and restarted, and what it wrote equals the local run of the same tree record for record.

The kill is a failpoint's (``kill -9`` of the driver at a fixed point of the second batch, after its side state and
output are written and before Spark commits it), so the reference run goes on the session's Spark meanwhile,
without polling the store for the moment to kill.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from avro_registry_sink.failpoints import COUNTS_ENV, ENV
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig, SinkConfig
from avro_registry_sink.sources.demo import generate_demo, write_rerun_files
from avro_registry_sink.sources.storage import StorageLayout
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sinks.sinks import read_file_sink
from avro_registry_sink.spark.sources.sources import parse_source
from avro_registry_sink.storage_fs import parse_storage_uri
from tests.support.servers import ensure_s3proxy

pytestmark = [pytest.mark.s3, pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.timeout(2400)]  # JVM starts and first downloads (hadoop-aws, pip) on a busy machine

CLI = str(Path(sys.executable).with_name("avro-registry-sink"))
RUN_TIMEOUT = 1200  # the first run fetches hadoop-aws and the AWS SDK bundle from Maven Central


@pytest.fixture(scope="module")
def s3():
    return ensure_s3proxy()


def _upload_in_ticdc_order(local: Path, uri: str) -> None:
    """Put a storage tree on the store as TiCDC writes it: metadata and schema files first, then data files
    (each followed by its directory's CDC.index) in TiCDC's order."""
    store = parse_storage_uri(uri).filesystem()
    layout = StorageLayout(local)
    data = [f.relpath for f in layout.data_files()]
    others = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    first = [p for p in others if p not in data and not p.endswith("CDC.index")]
    for relpath in first:
        store.write_bytes(relpath, (local / relpath).read_bytes())
    for relpath in data:
        store.write_bytes(relpath, (local / relpath).read_bytes())
        index = relpath.rpartition("/")[0] + "/meta/CDC.index"
        store.write_bytes(index, (local / index).read_bytes())
        time.sleep(0.01)


def _records(where) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = defaultdict(list)
    for r in read_file_sink(where):
        out[r.topic].append((r.partition, r.key, r.value, r.commit_ts))
    return out


def test_storage_tree_on_s3_equals_the_local_run_and_resumes_after_a_kill(spark, s3, tmp_path):
    bucket = f"ticdc-{uuid.uuid4().hex[:8]}"  # a store that is reused between runs starts empty for this test
    s3.create_bucket(bucket)
    manifest = generate_demo(tmp_path / "input", rows_per_table=16)
    ddl, settings = write_rerun_files(manifest, tmp_path)
    source = s3.uri(bucket, "cdc/changefeed-1")
    checkpoint = s3.uri(bucket, "jobs/ck")
    output = s3.uri(bucket, "jobs/out")
    _upload_in_ticdc_order(tmp_path / "input", source)

    with EmbeddedRegistry() as server, RegistryClient(RegistryConfig(urls=(server.url,))) as registry:
        args = [CLI, "run", "--source", source, "--checkpoint", checkpoint, "--sink-uri", f"{output}&protocol=avro",
                "--registry", server.url, "--tables", str(ddl), "--config", str(settings), "--progress", "json",
                "--state-dir", str(tmp_path / "state")]
        env = {k: v for k, v in os.environ.items() if k not in (ENV, COUNTS_ENV)}
        env["AVRO_SINK_SPARK_MASTER"] = "local[2]"
        # a continuous run, two data files per micro-batch, killed (SIGKILL) in its second batch: the first is
        # committed, the second's output and side state are on the store, Spark's commit of it is not
        with open(tmp_path / "first.out", "w") as out, open(tmp_path / "first.err", "w") as err:
            first = subprocess.Popen([*args, "--continuous", "--trigger-interval", "1 second",
                                      "--max-files-per-trigger", "2"], env={**env, ENV: "job.after-side-write=kill@2"},
                                     stdout=out, stderr=err, text=True)
        try:
            # the reference, meanwhile: the same tree from the local disk, on the session's SparkSession
            local = run_job(spark, JobOptions(
                source=parse_source(str(tmp_path / "input")), checkpoint=tmp_path / "local-ck",
                sink=SinkConfig(scheme="file", path=str(tmp_path / "local-out")), csv_options=manifest.csv_options,
                tables=tuple(manifest.tables.values())), registry=registry)
            assert local.totals.errors == 0 and local.totals.rows == len(manifest.all_events)
            first.wait(timeout=RUN_TIMEOUT)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        assert first.returncode == -9, (tmp_path / "first.err").read_text()[-3000:]
        state = parse_storage_uri(checkpoint).filesystem()
        def logged(log: str) -> list[str]:  # Spark's log entries (no hidden checksum files)
            return [f.rsplit("/", 1)[1] for f in state.list_files(f"spark/{log}") if not f.rsplit("/", 1)[1].startswith(".")]

        assert logged("commits") == ["0"] and logged("offsets") == ["0", "1"]  # stopped mid-way: batch 1 planned only

        # restarted (a new driver process): it resumes from the checkpoint on the store
        second = subprocess.run([*args, "--available-now"], env=env, capture_output=True, text=True,
                                timeout=RUN_TIMEOUT)
        assert second.returncode == 0, second.stderr[-3000:]
        summary = json.loads(second.stdout.strip().splitlines()[-1])
        assert summary["errors"] == 0
        assert 0 < summary["rows"] < local.totals.rows  # only what the killed run had not committed
        assert "avro-sink-test-secret" not in second.stdout + second.stderr  # credentials never shown

    # everything the job keeps lives under the checkpoint URI on the store, nothing on the driver's disk
    files = state.list_files()
    assert "job.json" in files and any(f.startswith("state/numbers/") for f in files)
    assert any(f.startswith("spark/offsets/") for f in files) and any(f.startswith("spark/commits/") for f in files)
    assert not (tmp_path / "state" / "checkpoints").exists()

    expected, got = _records(tmp_path / "local-out"), _records(parse_storage_uri(output))
    assert sorted(got) == sorted(expected) == ["crm_events", "shop_customers", "shop_orders"]
    for topic in expected:  # the same records (same schema ids, same bytes), none lost, none twice
        assert sorted(got[topic], key=repr) == sorted(expected[topic], key=repr), topic
        by_key: dict[bytes, list[int]] = defaultdict(list)
        for _, key, _, commit_ts in got[topic]:
            by_key[key].append(commit_ts)
        assert all(ts == sorted(ts) for ts in by_key.values()), f"{topic}: a key's changes out of order"
