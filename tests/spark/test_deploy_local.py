"""Local defaults stay: the demo leaves what a rerun of ``run`` on its input needs (compose/README.md's command)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()


def test_documented_rerun_of_the_demo_input_works(spark, tmp_path):
    demo = runner.invoke(app, ["demo", "--dir", str(tmp_path), "--rows", "6"], env={"COLUMNS": "200"})
    assert demo.exit_code == 0, demo.output
    assert (tmp_path / "tables.sql").exists() and (tmp_path / "ticdc.toml").exists()
    assert f"--tables {tmp_path / 'tables.sql'}" in demo.stdout  # the demo prints the command

    # compose/README.md: run --source /state/demo/input --tables /state/demo/tables.sql --config /state/demo/ticdc.toml
    rerun = runner.invoke(app, [
        "run", "--source", str(tmp_path / "input"), "--tables", str(tmp_path / "tables.sql"),
        "--config", str(tmp_path / "ticdc.toml"), "--available-now", "--state-dir", str(tmp_path / "state"),
        "--sink-uri", f"file://{tmp_path / 'rerun'}?protocol=avro", "--progress", "none",
    ])
    assert rerun.exit_code == 0, rerun.output
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert summary["errors"] == 0
    first = sum(len(list(p.read_text().splitlines())) for p in (tmp_path / "output").rglob("batch-*.jsonl"))
    assert summary["rows"] == first > 0  # every change of the demo, as the demo's own run wrote them
