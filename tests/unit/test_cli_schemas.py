"""The `schemas` command contract: JSON document on stdout, exit 2 with one line on stderr for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app

DATA = Path(__file__).parent.parent / "data"
ORDERS = DATA / "cli_orders.sql"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_schemas_document():
    result = run("schemas", "--ddl", str(ORDERS))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(t["schema"], t["table"]) for t in doc["tables"]] == [("shop", "orders"), ("shop", "customers")]
    orders = doc["tables"][0]
    assert orders["topic"] == "shop_orders"
    assert (orders["key_subject"], orders["value_subject"]) == ("shop_orders-key", "shop_orders-value")
    assert orders["key_schema"]["fields"] == [
        {"name": "id", "type": {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}}
    ]
    fields = {f["name"]: f for f in orders["value_schema"]["fields"]}
    assert fields["amount"] == {
        "name": "amount",
        "type": {"type": "bytes", "connect.parameters": {"tidb_type": "DECIMAL"}, "logicalType": "decimal", "precision": 10, "scale": 2},
    }
    assert fields["status"]["default"] == "new"
    assert fields["blob"]["type"] == ["null", {"type": "bytes", "connect.parameters": {"tidb_type": "BLOB"}}]
    customers = doc["tables"][1]
    assert [f["name"] for f in customers["key_schema"]["fields"]] == ["email"]


def test_options_and_sink_uri():
    result = run("schemas", "--ddl", str(ORDERS), "--enable-tidb-extension", "true",
                 "--avro-decimal-handling-mode", "string", "--topic-rule", "cdc.{schema}.{table}")
    assert result.exit_code == 0, result.output
    orders = json.loads(result.stdout)["tables"][0]
    assert orders["topic"] == "cdc.shop.orders" and orders["value_subject"] == "cdc.shop.orders-value"
    names = [f["name"] for f in orders["value_schema"]["fields"]]
    assert names[-3:] == ["_tidb_op", "_tidb_commit_ts", "_tidb_commit_physical_time"]
    amount = next(f for f in orders["value_schema"]["fields"] if f["name"] == "amount")
    assert amount == {"default": "0.00", "name": "amount", "type": {"type": "string", "connect.parameters": {"tidb_type": "DECIMAL"}}}
    uri = "kafka://k:9092/x?protocol=avro&avro-decimal-handling-mode=string&subject-naming=ticdc"
    result = run("schemas", "--ddl", str(ORDERS), "--sink-uri", uri, "--topic-rule", "cdc.{schema}.{table}")
    assert json.loads(result.stdout)["tables"][0]["value_subject"] == "cdc_shop_orders-value"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--enable-tidb-extension", "maybe"], "'enable-tidb-extension'"),
        (["--avro-decimal-handling-mode", "PRECISE"], "'avro-decimal-handling-mode'.*precise"),
        (["--avro-bigint-unsigned-handling-mode", "int"], "'avro-bigint-unsigned-handling-mode'"),
        (["--topic-rule", "{table}-{schema}"], "Invalid topic rule"),
        (["--topic-rule", "fixed"], "both go to topic 'fixed'"),
        (["--sink-uri", "kafka://k:9092/t?protocol=canal-json"], "'protocol'"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message):
    import re

    result = run("schemas", "--ddl", str(ORDERS), *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), result.stderr


def test_unknown_type_and_no_handle_key(tmp_path):
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE TABLE t (id INTT PRIMARY KEY);")
    result = run("schemas", "--ddl", str(bad))
    assert result.exit_code == 2 and "INTT" in result.stderr
    nokey = tmp_path / "nokey.sql"
    nokey.write_text("CREATE TABLE db.t (a INT, b INT);")
    result = run("schemas", "--ddl", str(nokey))
    assert result.exit_code == 2 and "db.t" in result.stderr and "no primary key" in result.stderr
    result = run("schemas", "--ddl", str(tmp_path / "missing.sql"))
    assert result.exit_code == 2 and "missing.sql" in result.stderr


def test_console_script_runs():
    exe = Path(sys.executable).with_name("avro-registry-sink")
    proc = subprocess.run([str(exe), "schemas", "--ddl", str(ORDERS)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tables"][0]["table"] == "orders"
