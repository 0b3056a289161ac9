"""``avro-registry-sink demo`` and ``avro-registry-sink run`` (in-process, on the session SparkSession)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.tabledef.ddl import parse_ddl
from avro_registry_sink.tabledef.storage import schema_file_checksum, write_table_schema_file
from tests.support.job import decode_file_sink, side_state

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
    assert events[0]["event"] == "start" and events[-1]["event"] == "finish"
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


def test_a_schema_file_rewritten_in_place_is_refused_and_its_new_rows_held(spark, tmp_path, registry, capfd):
    """Batch 1 delivers rows of table version V; then V's schema file is rewritten in place (a column renamed)
    and a new data file of V arrives, with a data file of another table. The rewritten file is refused (its
    content no longer matches the checksum in its name) and reported once; the new file of V is held, not
    delivered under a second schema; the other table is delivered; the subject keeps one version."""
    version = 449640297946939392
    root = tmp_path / "in"
    orders, other = (parse_ddl(f"CREATE TABLE shop.{name} (id INT NOT NULL PRIMARY KEY, n INT NULL, "
                               "v VARCHAR(16) NULL)")[0].model_copy(update={"version": version})
                     for name in ("orders", "other"))
    orders_schema = write_table_schema_file(orders, root)
    write_table_schema_file(other, root)

    def data(table: str, number: int, ids: range) -> str:
        relpath = f"shop/{table}/{version}/CDC{number:020d}.csv"
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(f'"I","{table}","shop",{version + i},{i},{i * 10},"v{i}"\r\n'.encode()
                                  for i in ids))
        return relpath

    data("orders", 1, range(1, 4))
    args = ["run", "--source", str(root), "--available-now", "--sink-uri", f"file://{tmp_path / 'out'}",
            "--registry", registry.urls[0], "--state-dir", str(tmp_path / "state"),
            "--csv", "include-commit-ts=true", "--progress", "json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert {key["id"] for _, _, key, _ in decode_file_sink(tmp_path / "out", registry)["shop_orders"]} == {1, 2, 3}
    assert registry.get_versions("shop_orders-value") == [1]

    text = orders_schema.read_text(encoding="utf-8")
    before = orders_schema.stat().st_mtime_ns
    orders_schema.write_text(text.replace('"ColumnName": "v"', '"ColumnName": "v_renamed"'), encoding="utf-8")
    os.utime(orders_schema, ns=(before + 10**9, before + 10**9))
    held = data("orders", 2, range(4, 6))
    data("other", 1, range(1, 4))
    capfd.readouterr()
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output  # as for any held file: the run ends normally
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    relpath = orders_schema.relative_to(root).as_posix()
    refused = [w for w in summary["warnings"] if w.startswith(f"{relpath}: refused")]
    assert len(refused) == 1, summary["warnings"]
    assert "content was changed after TiCDC wrote it" in refused[0] and "Restore the file TiCDC wrote" in refused[0]
    correct = f"schema_{version}_{schema_file_checksum(json.loads(orders_schema.read_text())):010d}.json"
    assert correct in refused[0]
    assert any(w.startswith(f"{held}: held, not read") for w in summary["warnings"])
    delivered = decode_file_sink(tmp_path / "out", registry)
    assert {key["id"] for _, _, key, _ in delivered["shop_orders"]} == {1, 2, 3}  # nothing of the new file
    assert [(key, value) for _, _, key, value in delivered["shop_other"]] == [
        ({"id": i}, {"id": i, "n": i * 10, "v": f"v{i}"}) for i in range(1, 4)]
    assert registry.get_versions("shop_orders-value") == [1] and registry.get_versions("shop_orders-key") == [1]
    checkpoint = Path(summary["checkpoint"])
    assert list(side_state(checkpoint, "held")["held"]) == [held]
    assert "Traceback" not in second.stderr

    data("other", 2, range(4, 5))  # a later batch: the file is still refused, its version still held
    third = runner.invoke(app, args)
    assert third.exit_code == 0, third.output
    warnings = json.loads(third.stdout.strip().splitlines()[-1])["warnings"]
    assert warnings == ["1 data file(s) still held, waiting for their schema files."]  # reported once only
    delivered = decode_file_sink(tmp_path / "out", registry)
    assert {key["id"] for _, _, key, _ in delivered["shop_orders"]} == {1, 2, 3}
    assert {key["id"] for _, _, key, _ in delivered["shop_other"]} == {1, 2, 3, 4}
    assert registry.get_versions("shop_orders-value") == [1]
    jvm = capfd.readouterr().err
    assert "Traceback" not in jvm, jvm[-3000:]
