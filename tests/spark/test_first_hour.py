"""A run that read nothing says so (issue 22): the JSON summary and ``finish`` event carry ``nothing_read`` and a
note, and the terminal summary a line, instead of a bare "ok" with 0 rows."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.sources.demo import generate_demo, write_rerun_files

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()


def _summary(result) -> tuple[dict, dict]:
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    [finish] = [json.loads(line) for line in result.stderr.splitlines()
                if line.startswith("{") and json.loads(line)["event"] == "finish"]
    return summary, finish


def test_a_run_that_reads_nothing_says_so(spark, tmp_path):
    manifest = generate_demo(tmp_path / "in", rows_per_table=4)
    ddl, settings = write_rerun_files(manifest, tmp_path)
    args = ["run", "--source", str(tmp_path / "in"), "--available-now", "--tables", str(ddl), "--config", str(settings),
            "--sink-uri", f"file://{tmp_path / 'out'}", "--state-dir", str(tmp_path / "state"), "--progress", "json"]

    summary, finish = _summary(runner.invoke(app, args))
    assert summary["rows"] > 0 and summary["nothing_read"] is False and "note" not in summary
    assert finish["nothing_read"] is False

    summary, finish = _summary(runner.invoke(app, args))  # the same checkpoint: nothing new
    assert summary["rows"] == 0 and summary["nothing_read"] is True and finish["nothing_read"] is True
    assert summary["note"].startswith("nothing was read: ") and "0 rows written" in summary["note"]

    empty = tmp_path / "empty"
    empty.mkdir()
    summary, finish = _summary(runner.invoke(app, [
        "run", "--source", str(empty), "--wait-for-data", "--available-now", "--sink-uri", f"file://{tmp_path / 'o2'}",
        "--state-dir", str(tmp_path / "state"), "--progress", "json"]))
    assert summary["nothing_read"] is True and str(empty) in summary["note"]


def test_spark_submit_with_an_archive_under_a_local_master_names_the_cause(tmp_path):
    """The README's --archives ...#env line under local[2]: Spark never unpacks the archive where the workers
    look, and every batch failed at its first Python stage, blamed on the sink ("Writing batch 0 to Kafka ...
    failed"). Submitted through the product's spark-submit entry, from an environment that is not activated
    (no SPARK_HOME, the venv's bin not on PATH: its own spark-submit fails with "Could not find valid
    SPARK_HOME")."""
    import os
    import subprocess
    import sys
    import tarfile
    from pathlib import Path

    from avro_registry_sink.spark.runtime.package import SUBMIT_SCRIPT

    generate_demo(tmp_path / "in", rows_per_table=4)
    archive = tmp_path / "env.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "in" / "metadata", arcname="bin/python")  # a stand-in: local mode never unpacks it here
    root = Path(__file__).resolve().parents[2]
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": str(root),
           "SPARK_LOCAL_IP": "127.0.0.1", "JAVA_HOME": os.environ.get("JAVA_HOME", "")}
    env = {k: v for k, v in env.items() if v}
    done = subprocess.run([
        sys.executable, "-m", "avro_registry_sink.cli", "spark-submit", "--master", "local[2]",
        "--archives", f"{archive}#env", "--conf", "spark.pyspark.python=./env/bin/python",
        str(SUBMIT_SCRIPT), "run", "--source", str(tmp_path / "in"), "--available-now",
        "--state-dir", str(tmp_path / "state"), "--progress", "none",
    ], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)

    assert "Could not find valid SPARK_HOME" not in done.stderr
    assert done.returncode == 2, done.stderr[-3000:]
    # spark-submit hands the driver's stderr to its stdout; the JVM's log lines go to stderr
    errors = re.findall(r"error: [^\n]*", done.stdout + done.stderr)
    shown = done.stdout + "\n".join(line for line in done.stderr.splitlines() if " INFO " not in line)
    assert len(errors) == 1 and "Spark cannot start its Python workers" in errors[0], shown[-3000:]
    assert "'./env/bin/python'" in errors[0] and "--archives" in errors[0] and "local[2]" in errors[0]
    assert "Kafka" not in errors[0]
