"""A run that read nothing says so (issue 22): the JSON summary and ``finish`` event carry ``nothing_read`` and a
note, and the terminal summary a line, instead of a bare "ok" with 0 rows."""

from __future__ import annotations

import json

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
