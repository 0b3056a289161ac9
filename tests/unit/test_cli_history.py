"""`register`, `history` and `diff` end to end on the embedded registry (its SQLite file under --state-dir) and a
checkpoint's journal: the corpus of breaking and compatible changes, terminal tables and --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.config import RegistryConfig
from avro_registry_sink.history.alter import alter_statements
from avro_registry_sink.history.journal import HistoryJournal
from avro_registry_sink.registry.connect import connect
from tests.support.schema_changes import BASE, CORPUS, SchemaChange, corpus_diff

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def register(tmp: Path, ddl: str, version: int, *extra: str):
    path = tmp / f"v{version}.sql"
    path.write_text(ddl)
    return cli("register", "--ddl", path, "--state-dir", tmp / "state", "--checkpoint", tmp / "ck",
               "--table-version", version, *extra)


def set_level(tmp: Path, level: str) -> None:
    with connect(RegistryConfig(embedded_data=str(tmp / "state" / "registry.db"))) as client:
        client.set_config(level)


@pytest.mark.parametrize("change", CORPUS, ids=lambda c: c.name)
def test_corpus_history_diff_and_sql(tmp_path: Path, change: SchemaChange):
    assert register(tmp_path, BASE, 100).exit_code == 0
    if change.refused:  # registered anyway, as the breaking-DDL policy (or a registry at NONE) lets it
        refused = register(tmp_path, BASE + ";\n" + change.ddl, 150)
        assert refused.exit_code == 1 and "incompatible" in refused.output
        set_level(tmp_path, "NONE")
    result = register(tmp_path, BASE + ";\n" + change.ddl, 200, "--json")
    assert result.exit_code == 0, result.output
    history = json.loads(cli("history", "--checkpoint", tmp_path / "ck", "--table", "shop.items", "--json").stdout)
    rows = [(r["subject"], r["table_version"], r["verdict"]) for r in history["history"]]
    assert rows[:2] == [("shop_items-key", 100, "new subject"), ("shop_items-value", 100, "new subject")]
    if change.refused:
        assert any(v == "incompatible" and t == 150 for _, t, v in rows)
        refusal = next(r for r in history["history"] if r["verdict"] == "incompatible")
        assert refusal["reasons"] and refusal["ddl"].endswith(change.ddl) and refusal["schema_id"] is None
    new = [r for r in history["history"] if r["table_version"] == 200]
    value_changed = any(k != "key" for k in change.kinds) and change.kinds
    assert {r["subject"] for r in new} == ({"shop_items-value"} if value_changed else set()) | (
        {"shop_items-key"} if {"key"} & set(change.kinds) or change.name == "drop-and-recreate" else set())
    for r in new:
        assert r["source"] == "register" and r["commit_ts"] == 200 and r["major_version"] is None
        assert r["verdict"] == "compatible" and r["fingerprint"] and r["version"] == 2

    out = cli("diff", "--table", "shop.items", "100", "200", "--checkpoint", tmp_path / "ck", "--sql", "postgres",
              "--json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert {c["kind"] for c in data["changes"]} == set(change.kinds)
    assert data["sql"]["statements"] == alter_statements(corpus_diff(change), "shop_items", "postgres")
    assert data["from"]["table_version"] == 100 and data["to"]["table_version"] == 200

    if value_changed:  # the same diff by subject versions (renames from the journal)
        out = cli("diff", "--subject", "shop_items-value", "1", "latest", "--state-dir", tmp_path / "state",
                  "--checkpoint", tmp_path / "ck", "--sql", "mysql", "--json")
        data = json.loads(out.stdout)
        assert {c["kind"] for c in data["changes"]} == set(change.kinds)
        assert data["sql"]["statements"] == alter_statements(corpus_diff(change), "shop_items", "mysql")


def test_terminal_tables(tmp_path: Path):
    assert register(tmp_path, BASE, 100).exit_code == 0
    change = next(c for c in CORPUS if c.name == "rename-and-retype")
    set_level(tmp_path, "NONE")
    assert register(tmp_path, BASE + ";\n" + change.ddl, 200).exit_code == 0
    out = cli("history", "--checkpoint", tmp_path / "ck")
    assert out.exit_code == 0, out.output
    for text in ("shop_items-value", "new subject", "compatible", "CHANGE qty quantity", "table version", "200"):
        assert text in out.stdout
    out = cli("diff", "--table", "shop.items", "100", "200", "--checkpoint", tmp_path / "ck", "--sql", "postgres")
    assert out.exit_code == 0, out.output
    assert "renamed" in out.stdout and "qty: int NOT NULL" in out.stdout and "quantity: long NOT NULL" in out.stdout
    assert 'ALTER TABLE "shop_items" RENAME COLUMN "qty" TO "quantity";' in out.stdout
    out = cli("history", "--subject", "shop_items-value", "--state-dir", tmp_path / "state")  # the registry alone
    assert out.exit_code == 0 and "registered" in out.stdout and "shop.items" in out.stdout
    out = cli("diff", "--table", "shop.items", "100", "100", "--checkpoint", tmp_path / "ck")
    assert "No field changes" in out.stdout


def test_bad_arguments(tmp_path: Path):
    assert register(tmp_path, BASE, 100).exit_code == 0
    ck = tmp_path / "ck"
    assert cli("history").exit_code == 2
    assert cli("diff", "--table", "shop.items", "1", "--checkpoint", ck).exit_code == 2
    out = cli("diff", "--table", "shop.items", "1", "2", "--checkpoint", ck)
    assert out.exit_code == 2 and "versions on record: 100" in out.output
    assert cli("diff", "--table", "shop.items", "100", "100", "--checkpoint", ck, "--sql", "oracle").exit_code == 2
    assert cli("diff", "--subject", "x-value", "--table", "t", "1", "2").exit_code == 2
    assert register(tmp_path, BASE, 101, "--on-incompatible", "ignore").exit_code == 2


def test_journal_read_dedupes_and_skips_torn_lines(tmp_path: Path):
    assert register(tmp_path, BASE, 100).exit_code == 0
    assert register(tmp_path, BASE, 100).exit_code == 0  # the same schemas again: nothing new on record
    journal = HistoryJournal.at(str(tmp_path / "ck"))
    assert len(journal.read()) == 2
    (tmp_path / "ck" / "history" / "batch-9.jsonl").write_text('{"table": "s.t", "tab')
    assert len(journal.read()) == 2
