"""No silent zero (issue 22): a --source that holds no TiCDC tree, a parent or child directory of one, or an
empty one is refused before Spark starts (exit 2, what was found and what was expected), unless
--wait-for-data. In-process through the CLI; Spark must not start (``job_session`` fails the test)."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.sources.tree_check import find_tree

runner = CliRunner()


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("no-silent-zero")
    generate_demo(root / "data" / "ticdc", rows_per_table=4)
    return root / "data" / "ticdc"


@pytest.fixture(autouse=True)
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started: the source should have been refused before")

    monkeypatch.setattr("avro_registry_sink.spark.driver.job.job_session", refuse)


def _run(source, tmp_path, *extra):
    return runner.invoke(app, ["run", "--source", str(source), "--available-now", "--state-dir", str(tmp_path / "state"),
                               *extra])


def _error(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_the_parent_of_a_tree_names_the_tree(tree, tmp_path):
    line = _error(_run(tree.parent, tmp_path))
    assert "holds no TiCDC storage-sink tree at its top, but one in 'ticdc'" in line
    assert f"give --source '{tree}'" in line


def test_a_schema_folder_of_a_tree_names_the_tree(tree, tmp_path):
    line = _error(_run(tree / "shop", tmp_path))
    assert "looks like a <schema> folder of a TiCDC storage-sink tree" in line
    assert f"give the tree's top, --source '{tree}'" in line and "schema_<version>_<checksum>.json" in line


def test_a_table_folder_of_a_tree_names_the_tree(tree, tmp_path):
    line = _error(_run(tree / "shop" / "orders", tmp_path))
    assert "a <schema>/<table> folder" in line and f"--source '{tree}'" in line


def test_an_empty_directory_is_refused_unless_waiting(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _error(_run(empty, tmp_path))
    assert "is empty" in line and "--wait-for-data" in line and "<schema>/<table>/meta/schema_" in line


def test_a_directory_of_other_files_says_what_it_holds(tmp_path):
    other = tmp_path / "other"
    (other / "logs").mkdir(parents=True)
    (other / "README.txt").write_text("hello")
    (other / "logs" / "a.log").write_text("x")
    line = _error(_run(other, tmp_path))
    assert "holds 2 files ('README.txt', 'logs/a.log') but no TiCDC storage-sink tree" in line


def test_an_empty_changelog_directory_is_refused(tmp_path):
    empty = tmp_path / "canal"
    empty.mkdir()
    line = _error(_run(f"canal-json+file://{empty}", tmp_path))
    assert "is empty" in line and "--wait-for-data" in line


def test_waiting_for_data_lets_an_empty_directory_through(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    started = []

    def session(*args, **kwargs):
        started.append(True)
        raise RuntimeError("stop here")  # the checks passed: Spark would start now

    monkeypatch.setattr("avro_registry_sink.spark.driver.job.job_session", session)
    result = _run(empty, tmp_path, "--wait-for-data")
    assert started and isinstance(result.exception, RuntimeError), result.output


def test_a_wrong_level_is_refused_even_when_waiting(tree, tmp_path):
    line = _error(_run(tree.parent, tmp_path, "--wait-for-data"))
    assert "but one in 'ticdc'" in line


def test_the_tree_itself_and_a_tree_without_metadata_pass(tree, tmp_path):
    assert find_tree(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()).kind == "tree"
    copy = tmp_path / "copy"
    shutil.copytree(tree, copy)
    (copy / "metadata").unlink()  # before TiCDC's first checkpoint: schema and data files only
    assert find_tree(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()).kind == "tree"
    only_schemas = [p.relative_to(copy).as_posix() for p in copy.rglob("schema_*.json")]
    assert find_tree(only_schemas).kind == "tree"  # a changefeed that has written no data yet


@pytest.mark.parametrize(("paths", "kind", "detail"), [
    (["shop/orders/449/3/2024-05-09/CDC000001.csv"], "tree", ""),  # partition and date directories
    (["2024/orders/449/CDC000001.csv"], "tree", ""),  # a schema whose name is digits
    (["x/y/shop/orders/449/meta/CDC.index"], "below", "x/y"),
    (["orders/449/2024-05-09/CDC000001.csv"], "above", 1),
    (["449/2024-05-09/meta/CDC.index"], "above", 2),
    (["notes/meta/readme.json"], "none", ""),
])
def test_find_tree(paths, kind, detail):
    finding = find_tree(paths)
    assert finding.kind == kind
    if kind == "below":
        assert finding.where == detail
    if kind == "above":
        assert finding.levels == detail


def test_the_terminal_summary_says_when_nothing_was_read(tmp_path):
    from types import SimpleNamespace

    from rich.console import Console

    from avro_registry_sink.cli import _nothing_read, _print_totals
    from avro_registry_sink.ops.progress import BatchReport, JobTotals
    from avro_registry_sink.spark.sources.sources import parse_source

    source = parse_source(str(tmp_path))
    totals = JobTotals()
    note = _nothing_read(totals, source)
    assert note and str(tmp_path) in note and JobTotals().to_json()["nothing_read"] is True
    console = Console(record=True, width=200)
    _print_totals(SimpleNamespace(totals=totals, sink="file", checkpoint=tmp_path, dead_letters=[]), console, note)
    assert "Nothing read: " in console.export_text()

    totals.add(BatchReport(batch_id=0, inputs=1, rows=3))
    assert _nothing_read(totals, source) is None and totals.to_json()["nothing_read"] is False
