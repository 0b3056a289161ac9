"""``register --ddl`` (central registration) against the registry over HTTP: ``--on-incompatible new-major`` makes
the majors and rules the job makes (and a confluent-kafka consumer pinned to major 1 reads a record of major 2);
``stop`` tries every table of the file and lists every refused one; each table's own DDL is recorded; a schema
that is registered already says so."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor
from confluent_kafka.serialization import MessageField, SerializationContext
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.manager import MAJOR_VERSION, SchemaManager
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.settings.config import RegistryConfig
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl

pytestmark = pytest.mark.integration

CREATE = "CREATE TABLE {s}.t (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL, qty INT NOT NULL)"
RENAME = "ALTER TABLE {s}.t RENAME COLUMN name TO full_name"


@pytest.fixture
def schema_name() -> str:
    return "rg" + uuid.uuid4().hex[:10]


@pytest.fixture
def client(registry_url):
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as c:
        yield c


def register(tmp: Path, registry_url: str, ddl: str, version: int, *extra: str):
    path = tmp / f"v{version}.sql"
    path.write_text(ddl)
    return CliRunner().invoke(app, [str(a) for a in ("register", "--ddl", path, "--registry", registry_url,
                                                     "--checkpoint", tmp / "ck", "--table-version", version,
                                                     "--json", *extra)])


def test_new_major_as_the_job_makes_it_read_by_a_consumer_pinned_to_major_1(tmp_path, registry_url, client,
                                                                            schema_name):
    s = schema_name
    first = register(tmp_path, registry_url, CREATE.format(s=s), 100, "--on-incompatible", "new-major")
    assert first.exit_code == 0, first.output
    second = register(tmp_path, registry_url, CREATE.format(s=s) + ";\n" + RENAME.format(s=s), 200,
                      "--on-incompatible", "new-major")
    assert second.exit_code == 0, second.output
    out = json.loads(second.stdout)
    verdicts = {r["subject"]: (r["verdict"], r["version"]) for r in out["registered"]}
    assert verdicts == {f"{s}_t-key": ("already registered", 1), f"{s}_t-value": ("new major", 2)}
    [major] = out["new_majors"]
    assert (major["subject"], major["old_major"], major["new_major"]) == (f"{s}_t-value", 1, 2)
    assert major["changes"] == ["name renamed to full_name"]
    value = next(r for r in out["registered"] if r["kind"] == "value")
    assert value["ddl"] == CREATE.format(s=s) + ";\n" + RENAME.format(s=s)

    # the job's own manager, the same table versions on another schema: the same majors, metadata and rules
    job_schema = s + "j"
    v1 = parse_ddl(CREATE.format(s=job_schema))[0].model_copy(update={"version": 100})
    v2 = apply_ddl(v1, RENAME.format(s=job_schema)).model_copy(update={"version": 200})
    manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), on_incompatible="new-major",
                            ddl_history=lambda schema, table: [(200, RENAME.format(s=job_schema))])
    manager.prepare_batch([v1])
    manager.prepare_batch([v2])
    for kind in ("key", "value"):
        ours, job = f"{s}_t-{kind}", f"{job_schema}_t-{kind}"
        assert client.get_versions(ours) == client.get_versions(job)
        for number in client.get_versions(ours):
            a, b = client.get_version(ours, number), client.get_version(job, number)
            assert a.properties == b.properties and a.rule_set == b.rule_set
    assert client.get_latest(f"{s}_t-value").properties[MAJOR_VERSION] == "2"

    # a consumer pinned to major 1 reads a record written with major 2, through the DOWNGRADE rule
    JsonataExecutor.register()
    sr = SchemaRegistryClient({"url": registry_url, "timeout": 30})
    try:
        ctx = SerializationContext(f"{s}_t", MessageField.VALUE)
        writer = AvroSerializer(sr, None, conf={"auto.register.schemas": False,
                                                "use.latest.with.metadata": {MAJOR_VERSION: "2"}})
        record = writer({"id": 7, "full_name": "bob", "qty": 3}, ctx)
        reader = AvroDeserializer(sr, conf={"use.latest.with.metadata": {MAJOR_VERSION: "1"}})
        assert reader(record, ctx) == {"id": 7, "name": "bob", "qty": 3}
    finally:
        sr.close()

    history = CliRunner().invoke(app, ["history", "--checkpoint", str(tmp_path / "ck"), "--json"])
    rows = [(r["subject"], r["table_version"], r["verdict"]) for r in json.loads(history.stdout)["history"]]
    assert (f"{s}_t-value", 200, "new major") in rows
    assert (f"{s}_t-key", 200, "already registered") not in rows  # nothing registered: not journaled


def test_stop_tries_every_table_and_lists_each_refused_one(tmp_path, registry_url, client, schema_name):
    s = schema_name
    base = ";\n".join(f"CREATE TABLE {s}.{t} (id INT NOT NULL PRIMARY KEY, a INT NOT NULL)" for t in "abc")
    assert register(tmp_path, registry_url, base, 100).exit_code == 0
    changed = (base + f";\nALTER TABLE {s}.a MODIFY a VARCHAR(8) NOT NULL;\nALTER TABLE {s}.b ADD COLUMN n INT;\n"
               f"ALTER TABLE {s}.c RENAME COLUMN a TO a2")
    result = register(tmp_path, registry_url, changed, 200, "--on-incompatible", "stop")
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert [r["table"] for r in out["refused"]] == [f"{s}.a", f"{s}.c"]
    assert "2 of 3 tables" in result.output and f"{s}.a:" in result.output and f"{s}.c:" in result.output
    assert client.get_versions(f"{s}_b-value") == [1, 2]  # the compatible table after a refused one
    assert client.get_versions(f"{s}_a-value") == client.get_versions(f"{s}_c-value") == [1]
    by_subject = {r["subject"]: r for r in out["registered"]}
    assert by_subject[f"{s}_b-value"]["verdict"] == "compatible"
    assert by_subject[f"{s}_b-value"]["ddl"] == (f"CREATE TABLE {s}.b (id INT NOT NULL PRIMARY KEY, a INT NOT NULL);"
                                                 f"\nALTER TABLE {s}.b ADD COLUMN n INT")
    assert by_subject[f"{s}_a-key"]["verdict"] == "already registered"

    again = register(tmp_path, registry_url, base, 300)  # the first file again: nothing new
    assert again.exit_code == 0, again.output
    assert {r["verdict"] for r in json.loads(again.stdout)["registered"]} == {"already registered"}


def test_bad_policy_is_refused_with_the_choices(tmp_path, registry_url, schema_name):
    result = register(tmp_path, registry_url, CREATE.format(s=schema_name), 100, "--on-incompatible", "ignore")
    assert result.exit_code == 2 and "stop, new-major" in result.output
