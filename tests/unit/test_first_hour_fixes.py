"""What a new user met in the first hour (issue 22, point 6), each through the CLI where it is CLI behaviour:
in-process (typer's CliRunner), before any SparkSession exists."""

from __future__ import annotations

import re
import select
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app, main
from avro_registry_sink.errors import RegistryUnavailable
from avro_registry_sink.manager import SchemaManager
from avro_registry_sink.redact import redact_text
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.routing.rules import build_router
from avro_registry_sink.settings.config import PartitionStrategy, RegistryConfig, load_config, parse_trigger_interval
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.tabledef.ddl import parse_ddl

runner = CliRunner()
TWO_TABLES = "CREATE TABLE shop.orders (id INT PRIMARY KEY, a INT);\nCREATE TABLE shop.items (id INT PRIMARY KEY);\n"


def _one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture()
def ddl(tmp_path) -> Path:
    path = tmp_path / "tables.sql"
    path.write_text(TWO_TABLES)
    return path


def test_a_partition_only_dispatcher_rule_takes_the_default_topic(tmp_path, ddl):
    settings = tmp_path / "ts.toml"
    settings.write_text("[[sink.dispatchers]]\nmatcher = ['shop.orders']\npartition = 'ts'\n")

    result = runner.invoke(app, ["schemas", "--ddl", str(ddl), "--config", str(settings)])

    assert result.exit_code == 0, result.output
    assert '"topic": "shop_orders"' in result.stdout and '"topic": "shop_items"' in result.stdout
    router = build_router(load_config(config_file=settings), None)
    assert router.route("shop", "orders").partition is PartitionStrategy.TS  # the rule's partition applies
    assert router.route("shop", "items").partition is PartitionStrategy.DEFAULT
    with_uri_topic = build_router(load_config(config_file=settings, sink_uri="kafka://k:9092/only?protocol=avro"), None)
    assert with_uri_topic.route("shop", "orders").topic == "only"  # TiCDC's default rule: the sink URI's topic


def test_one_topic_for_all_tables_is_refused_with_the_reason_and_the_ways_out(ddl):
    result = runner.invoke(app, ["schemas", "--ddl", str(ddl), "--sink-uri", "kafka://127.0.0.1:9092/all?protocol=avro"])

    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "shop.orders and shop.items would both go to topic 'all'" in line
    assert "one table per topic (one schema per subject)" in line
    assert "[[sink.dispatchers]]" in line and "'{schema}_{table}'" in line  # the alternatives
    assert "TiCDC accepts one topic for all tables" in line  # ... and why it is refused here all the same


def test_an_unreachable_object_store_endpoint_is_named_as_such(tmp_path):
    source = "s3://bucket/cdc?endpoint=http://127.0.0.1:1&access-key=AK&secret-access-key=SecretKey1"

    result = runner.invoke(app, ["run", "--source", source, "--state-dir", str(tmp_path)])

    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "the store cannot be reached: check endpoint" in line, line
    assert "bucket (container) does not exist" not in line and "SecretKey1" not in line


@pytest.mark.parametrize(("go", "spark"), [("10s", "10 seconds"), ("500ms", "500 milliseconds"),
                                           ("1m30s", "90 seconds"), ("1h", "3600 seconds"),
                                           ("2 minutes", "2 minutes")])
def test_trigger_interval_takes_go_durations(go, spark):
    assert parse_trigger_interval(go) == spark


def test_trigger_interval_10s_passes_the_cli(tmp_path):
    tree = tmp_path / "tree"
    generate_demo(tree, rows_per_table=4)
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "job.json").write_text('{"source": "storage:///somewhere/else"}')

    result = runner.invoke(app, ["run", "--source", str(tree), "--trigger-interval", "10s", "--checkpoint",
                                 str(checkpoint), "--state-dir", str(tmp_path / "state")])

    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "trigger-interval" not in line and "belongs to source" in line  # the interval passed; the next check spoke


def test_the_secret_mask_leaves_the_words_after_a_parameter_name(tmp_path):
    result = runner.invoke(app, ["run", "--source", "s3://b/p?endpoint=http://127.0.0.1:1&access-key=AK",
                                 "--state-dir", str(tmp_path)])

    assert result.exit_code == 2
    assert "gives access-key but not secret-access-key: give both" in _one_error_line(result)
    assert redact_text("token: abc, password: hunter2") == "token: ***, password: ***"  # values still masked


def test_values_are_shown_as_written_not_as_python_reprs(tmp_path, ddl):
    settings = tmp_path / "force.toml"
    settings.write_text("force-replicate = true\n[sink]\nprotocol = true\n")

    result = runner.invoke(app, ["schemas", "--ddl", str(ddl), "--config", str(settings)])

    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "Invalid value true for key 'force-replicate'" in line and "only false is supported" in line
    assert "True" not in line


def test_an_unreachable_registry_message_ends_with_one_period():
    config = RegistryConfig(urls=("http://127.0.0.1:1",), max_retries=0, timeout=2)
    [table] = parse_ddl("CREATE TABLE shop.orders (id INT PRIMARY KEY)")
    with RegistryClient(config) as client:
        manager = SchemaManager(client, build_router(load_config(), None), unavailable_budget=0)
        with pytest.raises(RegistryUnavailable) as info:
            manager.prepare_batch([table])
    message = str(info.value)
    assert "Connection refused" in message and not re.search(r"[^.]\.\.(?!\.)", message), message


def test_registry_serve_prints_its_url_when_ready(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "avro_registry_sink.cli", "registry", "serve", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path)
    try:
        ready, _, _ = select.select([process.stdout], [], [], 60)
        line = process.stdout.readline() if ready else ""
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found, line
        assert httpx.get(found.group(0) + "/subjects", timeout=10).json() == []  # ready: it answers at once
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("argv", [["run", "--sink-urii", "x"], ["run", "--start-ts", "1"], ["demo", "--rows", "x"],
                                  ["schemas", "--ddl", "/nonexistent.sql"]])
def test_every_error_has_the_same_prefix(monkeypatch, capsys, argv):
    monkeypatch.setattr(sys, "argv", ["avro-registry-sink", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and not err[0].startswith("error ("), err


COMMANDS = [[], ["run"], ["replay"], ["encode"], ["check"], ["schemas"], ["demo"], ["package"], ["registry"],
            ["registry", "serve"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "main")
def test_help_shows_metavars_help_texts_and_no_markup(command):
    import typer

    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200", "TERM": "dumb"})

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert not re.search(r"<(bool|str|path|int|float|list)[^>]*>", out), out  # typer's Python types
    assert "``" not in out and ":func:" not in out  # reST
    click_command = typer.main.get_command(app)
    for name in command:
        click_command = click_command.commands[name]
    import click

    context = click.Context(click_command)
    for param in click_command.get_params(context):
        assert getattr(param, "help", None), f"{' '.join(command)} {param.opts} has no help text"
    if command == ["run"]:
        assert "TiCDC's [sink] layout" in out and "DIR|URI" in out and "INTERVAL" in out
    if command == []:
        assert "spark-submit [spark-submit options]" in out  # command help is not taken for markup either
