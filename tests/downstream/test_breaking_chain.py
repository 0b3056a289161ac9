"""A table loaded through Kafka Connect's JDBC sink with schema evolution off, across a breaking change.

The user's flow with ``schema.evolution=none`` (Debezium's ``auto.evolve=false``): the downstream table is created
by the user (here from the first schema, as the sink would create it), the job (storage tree -> Kafka, Apicurio)
delivers version 1; then the breaking DDL (INT -> VARCHAR, a rename, a NOT NULL column without default) is
registered from CI (``register``), ``diff --table ... --sql`` gives the ALTER TABLEs, they are applied downstream,
and the job, run with ``--no-auto-register``, delivers version 2 through the same connector. Every row must then
hold the new definition's values: the old rows carried over (renamed column kept, INT cast to text, the new
column's zero value), the new rows as written.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.history.alter import create_table
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.downstream.sinkdb import Database, add_connector, connector_config, delete_connector, wait_applied

pytestmark = [pytest.mark.downstream, pytest.mark.kafka, pytest.mark.spark,
              pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()
V1 = ("CREATE TABLE shop.items (id INT NOT NULL PRIMARY KEY, qty INT NOT NULL, name VARCHAR(32) NOT NULL, "
      "note VARCHAR(64))")
BREAKING = ("ALTER TABLE shop.items MODIFY qty VARCHAR(20) NOT NULL, RENAME COLUMN name TO title, "
            "ADD COLUMN stock INT NOT NULL")
TS1, TS2 = 449640294087655426, 449640295472562180


def cli(*args):
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result


def write_version(root: Path, table, query: str, rows: list[str], commit_ts: int) -> None:
    write_table_schema_file(table, root, query=query, ddl_type=3)
    directory = root / "shop" / "items" / str(table.version)
    (directory / "meta").mkdir(parents=True, exist_ok=True)
    (directory / "meta" / "CDC.index").write_text("CDC000001.csv\n")
    (directory / "CDC000001.csv").write_text("".join(f'"I","items","shop",{commit_ts},false,{r}\r\n' for r in rows))


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
def test_breaking_change_through_the_jdbc_sink_with_evolution_off(chain, tmp_path: Path, kind: str):
    database: Database = chain.databases[kind]
    topic_rule = f"hist{uuid.uuid4().hex[:8]}_{{schema}}_{{table}}"
    topic = topic_rule.replace("{schema}", "shop").replace("{table}", "items")
    v1 = parse_ddl(V1)[0].model_copy(update={"version": TS1})
    v2 = apply_ddl(v1, BREAKING).model_copy(update={"version": TS2})
    tree, ck = tmp_path / "tree", tmp_path / "ck"
    (tmp_path / "v1.sql").write_text(V1 + ";\n")
    (tmp_path / "v2.sql").write_text(V1 + ";\n" + BREAKING + ";\n")
    write_version(tree, v1, V1, ['1,5,"pen",\\N', '2,7,"ink","blue"'], TS1 + 1)
    sink = f"kafka://{chain.bootstrap}/?protocol=avro&partition-num=1&schema-registry={chain.apicurio}"
    run = ["run", "--source", tree, "--available-now", "--sink-uri", sink, "--checkpoint", ck,
           "--state-dir", tmp_path / "state", "--topic-rule", topic_rule, "--tables", tmp_path / "v1.sql",
           "--csv", "include-commit-ts=true", "--csv", "output-old-value=true", "--progress", "none"]
    cli(*run)

    database.execute(f"DROP TABLE IF EXISTS {database.quote(topic)}")
    first = derive_schemas(v1)
    database.execute(create_table(first.value_json, first.key_json, topic, kind))  # the user's table: no auto-create
    name = f"breaking-{kind}-{topic}"
    add_connector(chain.connect, name, connector_config([topic], database, chain.apicurio,
                                                        **{"schema.evolution": "none"}))
    try:
        wait_applied(chain.connect, name, chain.bootstrap, [topic])
        assert database.count(topic) == 2

        # CI registers the breaking change (Apicurio's default level is NONE), the ALTERs come from the journal
        cli("register", "--ddl", tmp_path / "v2.sql", "--registry", chain.apicurio, "--checkpoint", ck,
            "--table-version", TS2, "--topic-rule", topic_rule)
        out = cli("diff", "--table", "shop.items", TS1, TS2, "--checkpoint", ck, "--sql", kind, "--json")
        diff = json.loads(out.stdout)
        assert {c["kind"] for c in diff["changes"]} >= {"type", "renamed", "added"}
        for statement in diff["sql"]["statements"]:
            database.execute(statement)

        write_version(tree, v2, BREAKING, ['3,"12 kg","cap",\\N,4', '1,"6","pen","red",9'], TS2 + 1)
        cli(*run, "--no-auto-register")
        wait_applied(chain.connect, name, chain.bootstrap, [topic])
    finally:
        delete_connector(chain.connect, name)
    rows = {r["id"]: r for r in database.rows(topic)}
    assert {k: (r["qty"], r["title"], r["note"], r["stock"]) for k, r in rows.items()} == {
        1: ("6", "pen", "red", 9), 2: ("7", "ink", "blue", 0), 3: ("12 kg", "cap", None, 4)}
    history = json.loads(cli("history", "--checkpoint", ck, "--table", "shop.items", "--json").stdout)["history"]
    value = [r for r in history if r["kind"] == "value"]
    assert [(r["table_version"], r["source"]) for r in value] == [(TS1, "schema-file"), (TS2, "register")]
