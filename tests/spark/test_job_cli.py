"""``avro-registry-sink demo`` and ``avro-registry-sink run`` (in-process, on the session SparkSession)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.sources.demo import generate_demo

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()


def test_demo_prints_topics_subjects_and_decoded_samples(spark, tmp_path):
    result = runner.invoke(app, ["demo", "--dir", str(tmp_path), "--rows", "6"], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    out = result.stdout
    for topic in ("crm_events", "shop_customers", "shop_orders"):
        assert topic in out
    assert "MISMATCH" not in out and out.count(" ok ") == 3
    assert "shop_orders-value: v1 (" in out and "v2 (" in out  # the ALTER TABLE registered a second version
    assert '"channel"' in out  # the sample of shop_orders is decoded with the altered schema
    assert list((tmp_path / "output" / "shop_orders").glob("batch-*.jsonl"))
    assert spark.sparkContext._jsc is not None  # the session it found is left running


def test_run_storage_directory_with_json_summary(spark, tmp_path):
    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    ddl = tmp_path / "tables.sql"
    ddl.write_text(";\n".join(manifest.create_statements.values()) + ";\n", encoding="utf-8")
    args = [
        "run", "--source", f"storage://{tmp_path / 'in'}", "--available-now",
        "--sink-uri", f"file://{tmp_path / 'out'}?protocol=avro", "--state-dir", str(tmp_path / "state"),
        "--tables", str(ddl), "--csv", "include-commit-ts=true", "--csv", "output-old-value=true",
        "--topic-rule", "cdc_{schema}_{table}", "--progress", "json",
    ]

    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout.strip().splitlines()[-1])
    assert summary["status"] == "ok" and summary["errors"] == 0
    assert summary["rows"] == len(manifest.all_events)
    assert sorted(summary["per_topic"]) == ["cdc_crm_events", "cdc_shop_customers", "cdc_shop_orders"]
    assert len(summary["schemas"]) == 7  # 3 keys + 3 values + the altered orders value
    events = [json.loads(line) for line in first.stderr.splitlines() if line.startswith("{")]
    assert [e["event"] for e in events][0] == "start" and events[-1]["event"] == "finish"
    assert all("lag_seconds" in e for e in events if e["event"] == "batch")
    assert (tmp_path / "state" / "registry.db").exists()  # the embedded registry keeps its ids

    again = runner.invoke(app, args)  # same checkpoint: nothing new to do
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout.strip().splitlines()[-1])["rows"] == 0


def test_run_rejects_a_bad_source(tmp_path):
    result = runner.invoke(app, ["run", "--source", "kinesis://stream", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "Invalid source" in result.stderr


def test_dead_lettered_rows_are_counted_in_the_summary_without_spark_traces(spark, tmp_path, capfd):
    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    csv_file = next(f for f in manifest.data_files if f.endswith(".csv"))
    with open(tmp_path / "in" / csv_file, "a", encoding="utf-8") as fh:
        fh.write('"I","orders","shop",not-a-number\r\n')  # a bad line, dead-lettered on its own
    ddl = tmp_path / "tables.sql"
    ddl.write_text(";\n".join(manifest.create_statements.values()) + ";\n", encoding="utf-8")
    capfd.readouterr()
    result = runner.invoke(app, [
        "run", "--source", str(tmp_path / "in"), "--available-now", "--sink-uri", f"file://{tmp_path / 'out'}",
        "--state-dir", str(tmp_path / "state"), "--tables", str(ddl), "--csv", "include-commit-ts=true",
        "--csv", "output-old-value=true", "--progress", "json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["dead_lettered"] == 1 and summary["rows"] == len(manifest.all_events)
    (path,) = summary["dead_letter_files"]
    assert path.endswith(".jsonl") and "dead-letter" in path
    finish = json.loads([line for line in result.stderr.splitlines() if '"finish"' in line][-1])
    assert finish["dead_lettered"] == 1
    jvm = capfd.readouterr().err  # what Spark's JVM and Python workers wrote on the real stderr
    assert "Traceback" not in jvm and " ERROR " not in jvm, jvm[-3000:]
