"""Bad invocations of the real CLI (a process each): exit 2, one line naming the option, no traceback, and
nothing reaches Spark - the process has no usable Java (``JAVA_HOME`` points nowhere), so a run that got as
far as starting Spark would fail differently (a Java gateway traceback, exit 1).

The cases run as children of one driver process (tests/support/cli_batch.py: one interpreter start and one
import of the package instead of one each); two of them also run as ``python -m avro_registry_sink.cli``, and the
two processes must answer byte for byte alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from avro_registry_sink.sources.demo import generate_demo
from tests.support.cli_batch import CliResult, run_cli_batch

CLI = [sys.executable, "-m", "avro_registry_sink.cli"]

DDL = """
CREATE TABLE shop.users (id BIGINT NOT NULL PRIMARY KEY, email VARCHAR(64) NOT NULL, ssn VARCHAR(11),
  UNIQUE KEY uk (email));
CREATE TABLE shop.tmp_import (id INT PRIMARY KEY);
CREATE TABLE crm.notes (id INT PRIMARY KEY, body TEXT);
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli-errors")
    generate_demo(root / "tree", rows_per_table=4)
    (root / "ok.sql").write_text(DDL)
    (root / "bad_type.sql").write_text("CREATE TABLE s.t (id INT PRIMARY KEY, a MEDIUMINTT);")
    (root / "typo.toml").write_text("[sink]\nprotocol = 'avro'\nenable-tidb-extention = true\n")
    (root / "broken.toml").write_text("[sink\nprotocol = 'avro'\n")
    (root / "old.toml").write_text("enable-old-value = true\n[sink]\nprotocol = 'avro'\n")
    (root / "nokey.toml").write_text("[[sink.column-selectors]]\nmatcher = ['shop.users']\ncolumns = ['ssn']\n")
    (root / "filter.toml").write_text(
        "[filter]\nrules = ['*.*', '!shop.tmp_*']\n[[sink.column-selectors]]\nmatcher = ['shop.users']\n"
        "columns = ['*', '!ssn']\n")
    (root / "events.jsonl").write_text("\n".join(json.dumps(e) for e in [
        {"schema": "shop", "table": "users", "op": "insert", "commit_ts": 5,
         "values": {"id": 1, "email": "a@b", "ssn": "123-45-6789"}},
        {"schema": "shop", "table": "tmp_import", "op": "insert", "commit_ts": 6, "values": {"id": 1}},
    ]) + "\n")
    (root / "one.jsonl").write_text(json.dumps({"schema": "shop", "table": "users", "op": "insert",
                                                "values": {"id": 1, "email": "e", "ssn": None}}) + "\n")
    # nothing listens there (this suite's port range); give up at once
    (root / "nobody.toml").write_text('[registry]\nurls = "http://127.0.0.1:20299"\nmax-retries = 0\n'
                                      'unavailable-budget = 0\n')
    (root / "checkpoint").mkdir()
    (root / "checkpoint" / "job.json").write_text(json.dumps({"source": "storage:///somewhere/else"}))
    return {p.name: p for p in root.iterdir()} | {"root": root}


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "JAVA_HOME": str(root / "no-java"), "AVRO_SINK_HOME": str(root / "state"),
            "PYTHONWARNINGS": "ignore"}


def _run(args: list[str], root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=_env(root), timeout=300, cwd=root)


def _argv(args: list[str], files: dict[str, Path]) -> list[str]:
    out = []
    for arg in args:
        for name, path in files.items():
            arg = arg.replace("{" + name + "}", str(path))
        out.append(arg)
    return out


CASES = [
    (["run", "--source", "{tree}", "--trigger-interval", "5 sekunds"],
     "'--trigger-interval': unknown unit 'sekunds' (did you mean 'seconds'?)"),
    (["run", "--source", "{tree}", "--sink-uri", "kafka://127.0.0.1:1/t?protocol=avro&enable-tidb-extention=true"],
     "did you mean 'enable-tidb-extension'?"),
    (["run", "--source", "{tree}", "--sink-uri", "kafka://127.0.0.1:1/t?protocol=avro&transaction-atomicity=table"],
     "'transaction-atomicity'"),
    (["run", "--source", "{tree}", "--sink-uri", "file:///tmp/out?protocol=avro&flush-interval=5s"],
     "'flush-interval' is not supported"),
    (["run", "--source", "{tree}", "--sink-uri", "kafka://127.0.0.1:1/t?protocol=canal-json"],
     "valid values are \"avro\" or \"flat-avro\""),
    (["run", "--source", "{tree}", "--start-ts", "42"], "TiCDC's option '--start-ts' is not supported"),
    (["run", "--source", "{tree}", "--changefeed-id", "cf"], "'--changefeed-id' is not supported"),
    (["run", "--source", "{tree}", "--sink-urii", "x"], "No such option: --sink-urii"),
    (["run", "--source", "{tree}", "--config", "{typo.toml}"], "did you mean 'sink.enable-tidb-extension'?"),
    (["run", "--source", "{tree}", "--config", "{broken.toml}"], "is not valid TOML"),
    (["run", "--source", "{tree}", "--config", "{old.toml}"], "'enable-old-value'"),
    (["run", "--source", "{tree}", "--config", "{root}/missing.toml"], "does not exist"),
    (["run", "--source", "{tree}", "--tables", "{bad_type.sql}"], "MEDIUMINTT"),
    (["run", "--source", "{tree}", "--tables", "{root}/missing.sql"], "cannot read DDL file"),
    (["run", "--source", "{tree}", "--csv", "delimter=|"], "did you mean 'delimiter'?"),
    (["run", "--source", "{tree}", "--csv", "delimiter=abcd"], "Invalid CSV setting 'delimiter'"),
    (["run", "--source", "{tree}", "--csv", "include-commit-ts=yes"], "'include-commit-ts'"),
    (["run", "--source", "{tree}", "--checkpoint", "{checkpoint}"], "belongs to source"),
    (["run", "--source", "{tree}", "--checkpoint", "{ok.sql}"], "is a file, not a directory"),
    (["run", "--source", "{tree}", "--producer", "kafka"], "'--producer': valid values are auto, spark, confluent"),
    (["run", "--source", "{tree}", "--progress", "fancy"], "valid values are auto, rich, json or none"),
    (["run", "--source", "{root}/missing-dir"], "missing-dir"),
    (["run", "--source", "mysql://127.0.0.1/x"], "Invalid source"),
    (["run", "--source", "{tree}", "--max-files-per-trigger", "0"], "'--max-files-per-trigger'"),
    (["run", "--source", "{tree}", "--schema-registry", "ftp://u@r:1"], "http:// or https://"),
    (["run", "--source", "{tree}", "--topic-rule", "cdc {schema}"], "Invalid topic rule 'cdc {schema}'"),
    (["run", "--source", "{tree}", "--tables", "{ok.sql}", "--config", "{nokey.toml}"],
     "leaves no primary key or unique key of table shop.users"),
    (["schemas", "--ddl", "{ok.sql}", "--avro-decimal-handling-mode", "PRECISE"], "(case-sensitive)"),
    (["schemas", "--ddl", "{ok.sql}", "--config", "{nokey.toml}"], "leaves no primary key or unique key"),
    (["schemas"], "Missing option '--ddl'"),
    (["encode", "--ddl", "{ok.sql}", "--events", "{root}/missing.jsonl"], "cannot read events file"),
    (["check", "--ddl", "{ok.sql}", "--schema-registry", "ftp://r:1"], "http:// or https://"),
    (["registry", "serve", "--port", "eighty"], "Invalid value for '--port'"),
]


#: Invocations that get past the options: the batch runs them with CASES.
GOOD = {
    "schemas-filtered": ["schemas", "--ddl", "{ok.sql}", "--config", "{filter.toml}"],
    "encode-filtered": ["encode", "--ddl", "{ok.sql}", "--events", "{events.jsonl}", "--config", "{filter.toml}"],
    "check-unreachable": ["check", "--ddl", "{ok.sql}", "--schema-registry", "http://127.0.0.1:20299", "--config",
                          "{nobody.toml}"],
    "encode-unreachable": ["encode", "--ddl", "{ok.sql}", "--events", "{one.jsonl}", "--config", "{nobody.toml}"],
    "reaches-spark": ["run", "--source", "{tree}", "--available-now", "--progress", "none"],
}


@pytest.fixture(scope="module")
def results(files) -> list[CliResult]:
    """Every case's process (CASES, then GOOD), all forked from one driver that imported the CLI once."""
    argvs = [_argv(args, files) for args, _ in CASES] + [_argv(args, files) for args in GOOD.values()]
    return run_cli_batch(argvs, env=_env(files["root"]), cwd=files["root"])


@pytest.fixture(scope="module")
def good(results) -> dict[str, CliResult]:
    return dict(zip(GOOD, results[len(CASES):], strict=True))


@pytest.mark.parametrize("case", range(len(CASES)), ids=[" ".join(a[:1] + a[-2:]) for a, _ in CASES])
def test_bad_invocation_exits_2_with_one_line(results, case):
    expected = CASES[case][1]
    result = results[case]
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "Java gateway" not in output, output
    assert result.returncode == 2, output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error"), result.stderr
    assert expected in lines[0], lines[0]


@pytest.mark.parametrize("case", [0, len(CASES) - 1], ids=["run-option-value", "click-usage-error"])
def test_the_batch_answers_as_python_m_does(files, results, case):
    """The driver is faithful: the same case as a process of its own prints the same bytes, with the same status."""
    alone = _run(_argv(CASES[case][0], files), files["root"])
    assert (alone.returncode, alone.stdout, alone.stderr) == (
        results[case].returncode, results[case].stdout, results[case].stderr)


def test_schemas_honours_filter_rules_and_column_selectors(good):
    result = good["schemas-filtered"]
    assert result.returncode == 0, result.stderr
    tables = json.loads(result.stdout)["tables"]
    assert [(t["schema"], t["table"]) for t in tables] == [("shop", "users"), ("crm", "notes")]
    users = json.loads(tables[0]["value_schema"]) if isinstance(tables[0]["value_schema"], str) else tables[0]["value_schema"]
    assert [f["name"] for f in users["fields"]] == ["id", "email"]
    assert "ssn" not in result.stdout


def test_encode_skips_filtered_tables_and_leaves_out_selected_columns(good):
    import io

    import fastavro

    result = good["encode-filtered"]
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "filtered: 1 events of shop.tmp_import left out by [filter] rules"
    [line] = result.stdout.strip().splitlines()
    record = json.loads(line)
    value = bytes.fromhex(record["value"])
    assert b"123-45-6789" not in value and record["topic"] == "shop_users"
    schema = fastavro.parse_schema({"type": "record", "name": "users", "fields": [
        {"name": "id", "type": "long"}, {"name": "email", "type": "string"}]})
    assert fastavro.schemaless_reader(io.BytesIO(value[5:]), schema, schema) == {"id": 1, "email": "a@b"}


@pytest.mark.parametrize("name", ["check-unreachable", "encode-unreachable"])
def test_unreachable_registry_is_exit_1_for_check_and_encode(good, name):
    result = good[name]
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "unreachable" in result.stderr.lower(), result.stderr


def test_a_run_that_starts_spark_fails_otherwise(good):
    """The premise of "nothing reaches Spark": a good run in the same batch gets as far as Spark, which fails
    without Java (a Java gateway traceback, exit 1), so a bad invocation that slipped through would show it."""
    result = good["reaches-spark"]
    assert result.returncode == 1, result.stderr
    assert "Java gateway" in result.stderr and "Traceback" in result.stderr, result.stderr[-2000:]
