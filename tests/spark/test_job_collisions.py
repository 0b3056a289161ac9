"""Tables whose topics or subjects collide are refused by ``run``, naming both tables (issue 17).

TiCDC's topic names turn every character outside [A-Za-z0-9._-] into ``_``, so ``shop.订单`` and
``shop.商品`` both become topic ``shop___``: within one batch, across runs of one checkpoint (the
checkpoint's side state, ``state/owners/``) and against a subject another checkpoint registered (the registry's
latest schema names another table), the run fails with exit 1 before anything is written or committed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig
from avro_registry_sink.spark.sinks.sinks import read_file_sink
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.support.job import decode_file_sink, side_state

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()


def advice(table: str) -> str:
    return (
        f"Give {table} a topic of its own with a dispatcher rule in the changefeed TOML (--config), listed before any "
        f"other rule that matches it: [[sink.dispatchers]] matcher = ['{table}'] topic = '<a topic of its own>', and "
        "after it, unless dispatcher rules route the other tables already, one with matcher = ['*.*'] topic = "
        "'{schema}_{table}' (a --topic-rule comes before every dispatcher rule: leave it out); or use a topic rule "
        "that keeps the two names apart."
    )


def add_table(root: Path, schema: str, table: str, version: int, note: str) -> None:
    """A TiCDC storage-sink table: its schema file and one CSV data file with one insert."""
    definition = TableDef(schema_name=schema, table=table, version=version, primary_key=("id",),
                          columns=(ColumnDef(name="id", type=MySQLType.INT, nullable=False),
                                   ColumnDef(name="note", type=MySQLType.VARCHAR, length=20)))
    write_table_schema_file(definition, root)
    directory = root / schema / table / str(version) / "2024-05-09"
    (directory / "meta").mkdir(parents=True, exist_ok=True)
    (directory / "CDC000001.csv").write_text(f'"I","{table}","{schema}",449118655446581249,1,"{note}"\n',
                                             encoding="utf-8")
    (directory / "meta" / "CDC.index").write_text("CDC000001.csv\n", encoding="utf-8")


def run(source: Path, work: Path, *extra: str):
    return runner.invoke(app, [
        "run", "--source", f"storage://{source}", "--available-now", "--sink-uri", f"file://{work / 'out'}?protocol=avro",
        "--state-dir", str(work / "state"), "--csv", "include-commit-ts=true", "--progress", "json", *extra])


def refused(result, capfd, message: str) -> None:
    """Exit 1 with ``message`` as the error (on stderr and in the finish event), and no traceback anywhere."""
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines()[-1] == f"error: {message}"
    finish = json.loads([line for line in result.stderr.splitlines() if '"finish"' in line][-1])
    assert (finish["status"], finish["error"], finish["rows"]) == ("failed", message, 0)
    assert "Traceback" not in result.output
    jvm = capfd.readouterr().err  # what Spark's JVM and Python workers wrote on the real stderr
    assert "Traceback" not in jvm, jvm[-3000:]


def commits(work: Path) -> list[str]:
    (checkpoint,) = (work / "state" / "checkpoints").iterdir()
    directory = checkpoint / "spark" / "commits"
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith(".")) if directory.exists() else []


def delivered(work: Path) -> list[tuple[str, str, int, int | None]]:
    """(file, topic, batch, commit ts) of every record in the file sink, and every file it holds."""
    out = work / "out"
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) if out.exists() else []
    records = [(f"{r.topic}/batch-{r.batch:010d}-part-00000.jsonl", r.topic, r.batch, r.commit_ts)
               for r in read_file_sink(out)] if files else []
    assert [r[0] for r in records] == files
    return records


def decoded(work: Path) -> dict[str, list]:
    """The file sink's records decoded with the registry's schemas (the state dir's embedded registry)."""
    with EmbeddedRegistry(data=work / "state" / "registry.db") as server, \
            RegistryClient(RegistryConfig(urls=(server.url,))) as client:
        return decode_file_sink(work / "out", client)


def subjects(work: Path) -> dict[str, list[int]]:
    with EmbeddedRegistry(data=work / "state" / "registry.db") as server, \
            RegistryClient(RegistryConfig(urls=(server.url,))) as client:
        return {s: client.get_versions(s) for s in client.get_subjects()}


def test_two_non_ascii_tables_of_one_tree_are_refused_and_nothing_is_written(spark, tmp_path, capfd):
    add_table(tmp_path / "in", "shop", "订单", 449118600000000001, "order")
    add_table(tmp_path / "in", "shop", "商品", 449118600000000002, "goods")
    capfd.readouterr()

    result = run(tmp_path / "in", tmp_path)

    refused(result, capfd, (
        "Tables shop.商品 and shop.订单 would both go to topic 'shop___' (rule '{schema}_{table}', which turns every "
        "character of a name outside [A-Za-z0-9._-] into '_'); Avro with TopicNameStrategy allows one table per "
        "topic (one schema per subject). " + advice("shop.订单")))
    assert delivered(tmp_path) == [] and commits(tmp_path) == []
    (checkpoint,) = (tmp_path / "state" / "checkpoints").iterdir()
    assert side_state(checkpoint, "owners") is None

    # the advice, followed: shop.订单 gets a topic of its own, the other tables keep the rule
    settings = tmp_path / "changefeed.toml"
    settings.write_text("[[sink.dispatchers]]\nmatcher = ['shop.订单']\ntopic = 'shop_orders'\n\n"
                        "[[sink.dispatchers]]\nmatcher = ['*.*']\ntopic = '{schema}_{table}'\n", encoding="utf-8")
    fixed = run(tmp_path / "in", tmp_path, "--config", str(settings))
    assert fixed.exit_code == 0, fixed.output
    assert decoded(tmp_path) == {"shop___": [(1, 449118655446581249, {"id": 1}, {"id": 1, "note": "goods"})],
                                 "shop_orders": [(1, 449118655446581249, {"id": 1}, {"id": 1, "note": "order"})]}
    assert side_state(checkpoint, "owners")["topics"] == {
        "shop___": {"table": ["shop", "商品"], "subjects": ["shop___-key", "shop___-value"]},
        "shop_orders": {"table": ["shop", "订单"], "subjects": ["shop_orders-key", "shop_orders-value"]},
    }


def test_a_table_appearing_in_a_later_run_cannot_take_the_topic_of_an_earlier_one(spark, tmp_path, capfd):
    add_table(tmp_path / "in", "shop", "订单", 449118600000000001, "order")
    first = run(tmp_path / "in", tmp_path)
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout.strip().splitlines()[-1])
    assert (summary["per_table"], summary["per_topic"]) == ({"shop.订单": 1}, {"shop___": 1})
    before = delivered(tmp_path)
    assert before == [("shop___/batch-0000000000-part-00000.jsonl", "shop___", 0, 449118655446581249)]
    assert commits(tmp_path) == ["0"]
    delivered_first = decoded(tmp_path)
    assert delivered_first == {"shop___": [(1, 449118655446581249, {"id": 1}, {"id": 1, "note": "order"})]}

    add_table(tmp_path / "in", "shop", "商品", 449118600000000002, "goods")  # the same tree, the same checkpoint
    capfd.readouterr()
    second = run(tmp_path / "in", tmp_path)

    refused(second, capfd, (
        "Tables shop.订单 (routed there by an earlier batch or run of this checkpoint) and shop.商品 would both go to "
        "topic 'shop___' (rule '{schema}_{table}', which turns every character of a name outside [A-Za-z0-9._-] "
        "into '_'); Avro with TopicNameStrategy allows one table per topic (one schema per subject). "
        + advice("shop.商品")))
    assert delivered(tmp_path) == before and commits(tmp_path) == ["0"]
    assert decoded(tmp_path) == delivered_first
    assert subjects(tmp_path) == {"shop___-key": [1], "shop___-value": [1]}


def test_a_subject_another_checkpoint_registered_for_another_table_is_refused(spark, tmp_path, capfd):
    add_table(tmp_path / "first", "a_b", "c", 449118600000000001, "abc")
    first = run(tmp_path / "first", tmp_path)  # its own checkpoint, the shared state dir's embedded registry
    assert first.exit_code == 0, first.output
    before = delivered(tmp_path)
    assert before == [("a_b_c/batch-0000000000-part-00000.jsonl", "a_b_c", 0, 449118655446581249)]

    add_table(tmp_path / "second", "a", "b_c", 449118600000000001, "abc")  # another tree: another checkpoint
    capfd.readouterr()
    second = run(tmp_path / "second", tmp_path)

    refused(second, capfd, (
        "Tables a_b.c and a.b_c would both go to topic 'a_b_c': its subject 'a_b_c-value' in the schema registry "
        "already holds the schema of table a_b.c (version 1, schema id 2; as its Avro record names it, every "
        "character outside [A-Za-z0-9_] of a name turned into '_'), registered by another run or changefeed. "
        "Registering a.b_c's schema there would make it a new version of that subject and mix two tables in one "
        "topic; nothing of this batch was written. " + advice("a.b_c")
        + " If subject 'a_b_c-value' is stale, delete it (and its key subject) from the registry instead."))
    assert delivered(tmp_path) == before
    checkpoints = sorted((tmp_path / "state" / "checkpoints").iterdir())
    assert len(checkpoints) == 2
    assert sorted(p.name for p in checkpoints if side_state(p, "owners") is not None) == [
        p.name for p in checkpoints if "first" in p.name]
    assert subjects(tmp_path) == {"a_b_c-key": [1], "a_b_c-value": [1]}
