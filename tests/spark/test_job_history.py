"""The job's history journal, and registration from CI (``register``, then ``run --no-auto-register``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.sources.demo import ADD_CHANNEL, generate_demo

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture
def demo(tmp_path: Path):
    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    creates = ";\n".join(manifest.create_statements.values()) + ";\n"
    (tmp_path / "v1.sql").write_text(creates, encoding="utf-8")
    (tmp_path / "v2.sql").write_text(creates + ADD_CHANNEL + ";\n", encoding="utf-8")
    return manifest


def run_args(tmp_path: Path, state: str, *extra):
    return ["run", "--source", tmp_path / "in", "--available-now", "--sink-uri", f"file://{tmp_path / state / 'out'}",
            "--state-dir", tmp_path / state, "--checkpoint", tmp_path / state / "ck", "--tables", tmp_path / "v1.sql",
            "--csv", "include-commit-ts=true", "--csv", "output-old-value=true", "--progress", "none", *extra]


def test_job_records_every_registration_and_diffs_its_table_versions(spark, tmp_path: Path, demo):
    result = cli(*run_args(tmp_path, "a"))
    assert result.exit_code == 0, result.output
    ck = tmp_path / "a" / "ck"
    history = json.loads(cli("history", "--checkpoint", ck, "--json").stdout)["history"]
    assert sorted((r["subject"], r["verdict"]) for r in history) == sorted(
        [(f"{t.replace('.', '_')}-{k}", "new subject") for t in demo.tables for k in ("key", "value")]
        + [("shop_orders-value", "compatible")])
    orders = [r for r in history if r["subject"] == "shop_orders-value"]
    first, second = sorted(orders, key=lambda r: r["version"])
    assert second["source"] == "schema-file" and second["source_detail"].endswith(".json")
    assert "ADD COLUMN `channel`" in second["ddl"] and second["commit_ts"] == second["table_version"]
    assert second["table_version"] > first["table_version"] and second["previous_version"] == first["version"]
    assert second["batch"] is not None and second["schema_id"] and len(second["fingerprint"]) == 64
    assert "major_version" in second and "rules" in second  # filled by the breaking-DDL policy where it runs

    out = cli("diff", "--table", "shop.orders", first["table_version"], second["table_version"], "--checkpoint", ck,
              "--sql", "postgres", "--json")
    data = json.loads(out.stdout)
    assert [(c["kind"], c["field"]) for c in data["changes"]] == [("added", "channel")]
    assert data["sql"]["statements"] == [
        'ALTER TABLE "shop_orders" ADD COLUMN "channel" text NOT NULL DEFAULT \'web\'']
    table = cli("history", "--checkpoint", ck, "--table", "shop.orders")
    assert table.exit_code == 0 and "schema-file" in table.stdout and "`channel`" in table.stdout
    assert str(second["table_version"]) in table.stdout and "compatible" in table.stdout


def test_registration_from_ci_then_the_job_without_auto_register(spark, tmp_path: Path, demo):
    for ddl in ("v1.sql", "v2.sql"):  # CI registers what each DDL needs, before the job meets it
        registered = cli("register", "--ddl", tmp_path / ddl, "--state-dir", tmp_path / "ci", "--json")
        assert registered.exit_code == 0, registered.output
    result = cli(*run_args(tmp_path, "ci", "--no-auto-register"))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["rows"] == len(demo.all_events) and summary["errors"] == 0
    assert not (tmp_path / "ci" / "ck" / "history").exists()  # the job registered nothing

    # Only the first DDL registered: the altered table's schema is missing, the batch fails, nothing is written.
    registered = cli("register", "--ddl", tmp_path / "v1.sql", "--state-dir", tmp_path / "half")
    assert registered.exit_code == 0, registered.output
    result = cli(*run_args(tmp_path, "half", "--no-auto-register"))
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert "auto-register is false" in message and "'shop_orders-value'" in message
    assert '"name":"channel"' in message  # the schema it needed
    out = tmp_path / "half" / "out"
    assert not out.exists() or not [p for p in out.rglob("*.jsonl") if "_staging" not in p.parts]


def test_auto_register_from_the_environment_and_the_settings_file(spark, tmp_path: Path, demo):
    registered = cli("register", "--ddl", tmp_path / "v1.sql", "--state-dir", tmp_path / "env")
    assert registered.exit_code == 0
    result = runner.invoke(app, [str(a) for a in run_args(tmp_path, "env")], env={"AVRO_SINK_AUTO_REGISTER": "false"})
    assert result.exit_code == 1 and "auto-register is false" in result.stderr
    settings = tmp_path / "settings.toml"
    settings.write_text("[sink]\nauto-register = false\n")
    result = cli(*run_args(tmp_path, "env", "--config", settings))
    assert result.exit_code == 1 and "auto-register is false" in result.stderr
    settings.write_text("auto-register = 'maybe'\n")
    result = cli(*run_args(tmp_path, "env", "--config", settings))
    assert result.exit_code == 2 and "auto-register" in result.stderr


def test_changelog_ddls_are_on_record_with_their_renames(spark, tmp_path: Path):
    from avro_registry_sink.model import Op
    from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
    from tests.support.job import canal_ddl, canal_dml

    create = "CREATE TABLE `moves` (`id` INT NOT NULL, `v` VARCHAR(8), PRIMARY KEY (`id`))"
    rename = "ALTER TABLE `moves` RENAME COLUMN `v` TO `w`"
    (v1,) = parse_ddl(create.replace("`moves`", "`shop`.`moves`"))
    v2 = apply_ddl(v1, rename)
    ts = 449_640_294_064_586_754
    src = tmp_path / "canal"
    src.mkdir()
    (src / "part-1.json").write_text("\n".join([
        canal_ddl("shop", "moves", "CREATE", create, ts), canal_dml(v1, Op.INSERT, ts + 1, None, {"id": 1, "v": "a"}),
        canal_ddl("shop", "moves", "ALTER", rename, ts + 2), canal_dml(v2, Op.INSERT, ts + 3, None, {"id": 2, "w": "b"}),
    ]) + "\n")
    result = cli("run", "--source", f"canal-json+file://{src}", "--available-now", "--sink-uri",
                 f"file://{tmp_path / 'out'}", "--state-dir", tmp_path / "s", "--checkpoint", tmp_path / "ck",
                 "--progress", "none")
    assert result.exit_code == 0, result.output
    history = json.loads(cli("history", "--checkpoint", tmp_path / "ck", "--subject", "shop_moves-value",
                             "--json").stdout)["history"]
    assert [(r["table_version"], r["source"], r["ddl"], r["renames"]) for r in history] == [
        (ts, "ddl", create, {}), (ts + 2, "ddl", rename, {"v": "w"})]
    out = json.loads(cli("diff", "--table", "shop.moves", ts, ts + 2, "--checkpoint", tmp_path / "ck", "--sql",
                         "mysql", "--json").stdout)
    assert [(c["kind"], c["field"]) for c in out["changes"]] == [("renamed", "w")]
    assert out["sql"]["statements"] == ["ALTER TABLE `shop_moves` RENAME COLUMN `v` TO `w`"]
