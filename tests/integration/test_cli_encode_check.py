"""`encode` and `check` commands end to end: real registries over HTTP, bytes decoded by confluent-kafka."""

from __future__ import annotations

import base64
import json
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.settings.config import RegistryConfig

pytestmark = [pytest.mark.integration, pytest.mark.every_registry]  # embedded and Apicurio
ORDERS = Path(__file__).parent.parent / "data" / "cli_orders.sql"
runner = CliRunner()


def events_file(tmp_path: Path, events: list) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "\n")
    return path


EVENTS = [
    {"schema": "shop", "table": "orders", "op": "insert", "commit_ts": 417318403368288260,
     "values": {"id": 1, "amount": "10.50", "status": "paid", "note": None, "blob": base64.b64encode(b"\x00\xff").decode()}},
    {"schema": "shop", "table": "orders", "op": "update", "commit_ts": 417318403368288261,
     "values": {"id": 1, "amount": "11.00", "status": "shipped", "note": "n", "blob": None}},
    {"schema": "shop", "table": "customers", "op": "insert", "commit_ts": 417318403368288262,
     "values": {"email": "a@b.c", "name": "Ann"}},
    {"schema": "shop", "table": "orders", "op": "delete", "commit_ts": 417318403368288263,
     "values": {"id": 1, "amount": "11.00", "status": "shipped", "note": "n", "blob": None}},
]


def test_encode_with_in_process_registry_ids_start_at_1(tmp_path):
    result = runner.invoke(app, ["encode", "--ddl", str(ORDERS), "--events", str(events_file(tmp_path, EVENTS)),
                                 "--enable-tidb-extension", "true"])
    assert result.exit_code == 0, result.output
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [o["topic"] for o in out] == ["shop_orders", "shop_orders", "shop_customers", "shop_orders"]
    assert (out[0]["key_schema_id"], out[0]["value_schema_id"]) == (1, 2)
    assert (out[2]["key_schema_id"], out[2]["value_schema_id"]) == (3, 4)
    assert out[0]["key"].startswith("0000000001") and out[0]["value"].startswith("0000000002")
    assert out[3]["value"] is None and out[3]["key"] == out[0]["key"]  # tombstone keyed like the insert
    assert out[0]["partition"] == out[1]["partition"] == out[3]["partition"]  # one row, one partition


def test_encode_bytes_decode_with_confluent_against_a_real_registry(tmp_path, registry_url):
    db = "enc" + uuid.uuid4().hex[:8]
    ddl = tmp_path / "t.sql"
    ddl.write_text(ORDERS.read_text().replace("shop", db))
    events = [dict(e, schema=db) for e in EVENTS]
    result = runner.invoke(app, ["encode", "--ddl", str(ddl), "--events", str(events_file(tmp_path, events)),
                                 "--registry", registry_url])
    assert result.exit_code == 0, result.output
    out = [json.loads(line) for line in result.stdout.splitlines()]
    # a timeout: one CI run saw Apicurio leave the deserializer's first request unanswered for 600 s
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_url, "timeout": 60}))
    value = deserializer(bytes.fromhex(out[0]["value"]), SerializationContext(f"{db}_orders", MessageField.VALUE))
    assert value == {"id": 1, "amount": Decimal("10.50"), "status": "paid", "note": None, "blob": b"\x00\xff"}


def test_bad_events_are_reported_by_line_and_do_not_stop_the_others(tmp_path):
    events = [
        EVENTS[0],
        "{not json",
        {"schema": "shop", "table": "nope", "op": "insert", "values": {}},
        {"schema": "shop", "table": "orders", "op": "upsert", "values": {}},
        {"schema": "shop", "table": "orders", "op": "insert", "values": {"id": 2, "amount": "x", "status": "new", "note": None, "blob": None}},
        {"schema": "shop", "table": "orders", "op": "insert", "values": {"id": 3, "amount": "1", "status": "new", "note": None, "blob": "!!"}},
        EVENTS[2],
    ]
    result = runner.invoke(app, ["encode", "--ddl", str(ORDERS), "--events", str(events_file(tmp_path, events))])
    assert result.exit_code == 2
    assert len(result.stdout.splitlines()) == 2
    errors = result.stderr.strip().splitlines()
    assert [e.split(":")[1].strip() for e in errors] == ["line 2", "line 3", "line 4", "line 5", "line 6"]
    assert "not valid JSON" in errors[0]
    assert "shop.nope" in errors[1] and "shop.orders" in errors[1]
    assert "'upsert'" in errors[2]
    assert "'amount'" in errors[3] and "shop.orders" in errors[3]
    assert "base64" in errors[4] and "'blob'" in errors[4]


def test_check_gates_ddl_changes(tmp_path, registry_url):
    db = "chk" + uuid.uuid4().hex[:8]
    v1 = tmp_path / "v1.sql"
    v1.write_text(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10));")
    first = runner.invoke(app, ["check", "--ddl", str(v1), "--registry", registry_url, "--output", "json"])
    assert first.exit_code == 0, first.output
    assert {s["status"] for s in json.loads(first.stdout)["subjects"]} == {"new subject"}
    assert runner.invoke(app, ["encode", "--ddl", str(v1), "--events", str(events_file(tmp_path, [
        {"schema": db, "table": "t", "op": "insert", "values": {"id": 1, "a": "x"}}])), "--registry", registry_url]).exit_code == 0
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        client.set_config("BACKWARD", f"{db}_t-value")  # Confluent's default; Apicurio's is NONE
    same = runner.invoke(app, ["check", "--ddl", str(v1), "--registry", registry_url, "--output", "json"])
    assert {s["status"] for s in json.loads(same.stdout)["subjects"]} == {"unchanged"}
    ok = tmp_path / "ok.sql"
    ok.write_text(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10), b INT NULL);")
    result = runner.invoke(app, ["check", "--ddl", str(ok), "--registry", registry_url, "--output", "json"])
    assert result.exit_code == 0, result.output
    statuses = {s["subject"]: s["status"] for s in json.loads(result.stdout)["subjects"]}
    assert statuses == {f"{db}_t-key": "unchanged", f"{db}_t-value": "compatible"}
    bad = tmp_path / "bad.sql"
    bad.write_text(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10), b INT NOT NULL);")
    result = runner.invoke(app, ["check", "--ddl", str(bad), "--registry", registry_url])
    assert result.exit_code == 1
    assert "incompatible" in result.stdout and f"{db}_t-value" in result.stdout
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in result.stdout  # why, even where the registry does not say
    # nothing was registered by check
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        assert client.get_versions(f"{db}_t-value") == [1]


def test_check_shows_what_each_policy_would_do_with_a_breaking_change(tmp_path, registry_url, registry_flavour):
    db = "pol" + uuid.uuid4().hex[:8]
    v1 = tmp_path / "v1.sql"
    v1.write_text(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT NOT NULL);")
    assert runner.invoke(app, ["encode", "--ddl", str(v1), "--events", str(events_file(tmp_path, [
        {"schema": db, "table": "t", "op": "insert", "values": {"id": 1, "a": 2}}])), "--registry", registry_url]
    ).exit_code == 0
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        client.set_config("BACKWARD", f"{db}_t-value")
    renamed = tmp_path / "renamed.sql"
    renamed.write_text(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT NOT NULL);\n"
                       f"ALTER TABLE {db}.t RENAME COLUMN a TO amount;")
    result = runner.invoke(app, ["check", "--ddl", str(renamed), "--registry", registry_url, "--output", "json"])
    assert result.exit_code == 1, result.output
    [value] = [s for s in json.loads(result.stdout)["subjects"] if s["subject"] == f"{db}_t-value"]
    assert value["status"] == "incompatible"
    assert "the job stops" in value["policies"]["stop"][0]
    new_major = "\n".join(value["policies"]["new-major"])
    if registry_flavour.expect("data_contracts")["kept"]:
        assert "as major version 2" in new_major
        assert "change: a renamed to amount" in new_major
        assert "migration rules: upgrade_1_to_2, downgrade_2_to_1" in new_major
        assert '{"id": $.`id`, "amount": ($v := $.`a`; $v)}' in new_major  # a projection onto the new version
    else:
        assert "keeps no data contracts" in new_major
    table = runner.invoke(app, ["check", "--ddl", str(renamed), "--registry", registry_url])
    assert "--on-incompatible new-major" in table.stdout and "--on-incompatible stop" in table.stdout
