"""`register`, `history` and `diff` end to end on the embedded registry (its SQLite file under --state-dir) and a
checkpoint's journal: the corpus of breaking and compatible changes, terminal tables and --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avro_registry_sink.cli import app
from avro_registry_sink.history.alter import alter_statements
from avro_registry_sink.history.journal import HistoryJournal
from avro_registry_sink.registry.connect import connect
from avro_registry_sink.settings.config import RegistryConfig
from tests.support.cli_runner import CachedCliRunner
from tests.support.schema_changes import BASE, CORPUS, SchemaChange, corpus_diff

runner = CachedCliRunner()  # the app's click command built once for the file's ~130 invocations


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


# --------------------------------------------------------------------------------------------------
# diff and history from the registry alone: what --on-incompatible new-major registered (majors, rules)


@pytest.fixture(scope="module")
def evolved(tmp_path_factory) -> Path:
    from tests.support.major_chain import register_evolutions

    tmp = tmp_path_factory.mktemp("evolved")
    register_evolutions(tmp / "state", tmp / "ck")
    return tmp


def sql_of(tmp: Path, subject: str, a: str, b: str, dialect: str, *extra: str) -> list[str]:
    out = cli("diff", "--subject", subject, a, b, "--sql", dialect, "--json", "--state-dir", tmp / "state", *extra)
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["sql"]["statements"]


def test_registry_only_diff_takes_the_rename_from_the_major_s_rules(evolved: Path):
    assert sql_of(evolved, "dn_ren-value", "1", "2", "postgres") == ['ALTER TABLE "dn_ren" RENAME COLUMN "a" TO "b"']
    assert sql_of(evolved, "dn_ren-value", "2", "1", "mysql") == ["ALTER TABLE `dn_ren` RENAME COLUMN `b` TO `a`"]
    # the journal says the same (its DDL)
    assert sql_of(evolved, "dn_ren-value", "1", "2", "postgres", "--checkpoint", evolved / "ck") == [
        'ALTER TABLE "dn_ren" RENAME COLUMN "a" TO "b"']


def test_a_key_subject_s_diff_alters_only_the_primary_key(evolved: Path):
    statements = sql_of(evolved, "dn_pk-key", "1", "2", "mysql")
    assert statements == ["ALTER TABLE `dn_pk` DROP PRIMARY KEY",
                          "ALTER TABLE `dn_pk` MODIFY COLUMN `region` varchar(255) NOT NULL",
                          "ALTER TABLE `dn_pk` ADD PRIMARY KEY (`id`, `region`)"]
    statements = sql_of(evolved, "dn_pk-key", "1", "2", "postgres")
    assert statements[-1] == 'ALTER TABLE "dn_pk" ADD PRIMARY KEY ("id", "region")' and len(statements) == 2
    assert not any("ADD COLUMN" in s for s in statements)


def test_a_readded_column_is_dropped_and_added_not_cast(evolved: Path):
    expected = ['ALTER TABLE "dn_readd" DROP COLUMN "a"', """ALTER TABLE "dn_readd" ADD COLUMN "a" text NOT NULL DEFAULT ''""",
                'ALTER TABLE "dn_readd" ALTER COLUMN "a" DROP DEFAULT']
    assert sql_of(evolved, "dn_readd-value", "1", "2", "postgres") == expected
    assert sql_of(evolved, "dn_readd-value", "1", "2", "postgres", "--checkpoint", evolved / "ck") == expected


def test_added_enum_and_text_not_null_get_mysql_s_values(evolved: Path):
    assert sql_of(evolved, "dn_en-value", "1", "2", "mysql") == [
        "ALTER TABLE `dn_en` ADD COLUMN `st` longtext NOT NULL DEFAULT ('x')",
        "ALTER TABLE `dn_en` ALTER COLUMN `st` DROP DEFAULT"]
    assert sql_of(evolved, "dn_tx-value", "1", "2", "mysql") == [
        "ALTER TABLE `dn_tx` ADD COLUMN `memo` longtext NOT NULL DEFAULT ('')",
        "ALTER TABLE `dn_tx` ALTER COLUMN `memo` DROP DEFAULT",
        "ALTER TABLE `dn_tx` ADD COLUMN `tag` longtext NOT NULL DEFAULT ('n/a')"]


def test_an_unexplained_drop_and_add_is_refused_until_a_flag_says_which(tmp_path: Path):
    assert register(tmp_path, BASE, 100).exit_code == 0
    set_level(tmp_path, "NONE")  # no majors, no rules: the registry says nothing of the rename
    change = next(c for c in CORPUS if c.name == "rename-not-null")
    assert register(tmp_path, BASE + ";\n" + change.ddl, 200).exit_code == 0
    base = ("diff", "--subject", "shop_items-value", "1", "2", "--state-dir", tmp_path / "state")
    out = cli(*base, "--sql", "postgres")
    assert out.exit_code == 2
    message = " ".join(out.output.split())
    for text in ("shop_items-value", "name dropped", "title added", "version 2", "--rename name=title",
                 "--allow-drop"):
        assert text in message, message
    plain = cli(*base)  # the field diff alone is no statement: it says what is open
    assert plain.exit_code == 0 and "Nothing on record says whether name (dropped)" in " ".join(plain.stdout.split())
    assert json.loads(cli(*base, "--json").stdout)["unexplained"]["dropped"] == ["name"]
    renamed = json.loads(cli(*base, "--sql", "postgres", "--rename", "name=title", "--json").stdout)
    assert renamed["sql"]["statements"] == ['ALTER TABLE "shop_items" RENAME COLUMN "name" TO "title"']
    dropped = json.loads(cli(*base, "--sql", "postgres", "--allow-drop", "--json").stdout)["sql"]["statements"]
    assert dropped[0] == 'ALTER TABLE "shop_items" DROP COLUMN "name"' and "ADD COLUMN \"title\"" in dropped[1]
    from_journal = json.loads(cli(*base, "--sql", "postgres", "--checkpoint", tmp_path / "ck", "--json").stdout)
    assert from_journal["sql"]["statements"] == ['ALTER TABLE "shop_items" RENAME COLUMN "name" TO "title"']


def test_registry_history_reads_majors_table_versions_and_rules(evolved: Path):
    out = cli("history", "--subject", "dn_ren-value", "--state-dir", evolved / "state", "--json")
    rows = [(r["version"], r["major_version"], r["table_version"], r["verdict"], r["rules"], r["source_detail"])
            for r in json.loads(out.stdout)["history"]]
    assert rows == [(1, 1, 1, "new subject", None, None),
                    (2, 2, 5, "new major", ["upgrade_1_to_2", "downgrade_2_to_1"], "a renamed to b")]
    table = cli("history", "--subject", "dn_ren-value", "--state-dir", evolved / "state").stdout
    assert "new major" in table and "a renamed to b" in table


def test_journal_history_shows_major_1_and_a_reused_version(tmp_path: Path):
    """A column added (a minor of major 1) and dropped again: the third table version's schema is version 1's,
    reused (not registered again) by a restarted job; the journal says so, with the major of each."""
    from avro_registry_sink.history.journal import HistoryRecorder
    from avro_registry_sink.manager import SchemaManager
    from avro_registry_sink.routing.rules import TopicRouter
    from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
    from tests.support.major_chain import registry_config

    ddl = {1: "CREATE TABLE dn.rv (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL)",
           5: "ALTER TABLE rv ADD COLUMN n INT NULL", 8: "ALTER TABLE rv DROP COLUMN n"}
    table = parse_ddl(ddl[1])[0].model_copy(update={"version": 1})
    tables = [table]
    for version in (5, 8):
        table = apply_ddl(table, ddl[version]).model_copy(update={"version": version})
        tables.append(table)
    with connect(registry_config(tmp_path / "state")) as client:
        recorder = HistoryRecorder(HistoryJournal.at(str(tmp_path / "ck")), client,
                                   lambda t: ("ddl", None, ddl[t.version]))
        for batch, t in enumerate(tables):  # a fresh manager each time: a restarted job
            manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), on_incompatible="new-major")
            manager.on_register, manager.on_registering = recorder.registered, recorder.registering
            manager.prepare_batch([t])
            recorder.flush(batch_id=batch)
    history = json.loads(cli("history", "--checkpoint", tmp_path / "ck", "--json").stdout)["history"]
    rows = [(r["subject"], r["table_version"], r["version"], r["major_version"], r["verdict"]) for r in history
            if r["subject"] == "dn_rv-value"]
    assert rows == [("dn_rv-value", 1, 1, 1, "new subject"), ("dn_rv-value", 5, 2, 1, "compatible"),
                    ("dn_rv-value", 8, 1, 1, "already registered")]
    table_text = cli("history", "--checkpoint", tmp_path / "ck").stdout
    assert "already registered" in table_text


def test_a_missing_checkpoint_is_an_error_naming_it(tmp_path: Path):
    assert register(tmp_path, BASE, 100).exit_code == 0
    typo = tmp_path / "ckk"
    for args in (("history", "--checkpoint", typo), ("diff", "--table", "shop.items", "100", "100", "--checkpoint", typo)):
        out = cli(*args)
        assert out.exit_code == 2 and str(typo) in " ".join(out.output.split()).replace(" ", ""), out.output


def test_the_corpus_from_the_registry_alone_gives_the_statements_of_its_ddl(tmp_path: Path):
    """Every case of the corpus registered under --on-incompatible new-major and diffed from the registry alone (the
    value subject, then the key subject) gives exactly the statements its DDL gives, which
    tests/downstream/test_alter_sql.py applies to PostgreSQL and MariaDB: renames come from the majors' rules."""
    from tests.support.major_chain import corpus_evolutions, evolution_sql, register_evolutions

    evolutions = corpus_evolutions()
    register_evolutions(tmp_path / "state", evolutions=evolutions)
    for evolution, change in zip(evolutions, CORPUS, strict=True):  # mysql: its key columns' types need the key too
        assert evolution_sql(tmp_path / "state", evolution, "mysql", "registry") == alter_statements(
            corpus_diff(change), evolution.topic, "mysql"), change.name
