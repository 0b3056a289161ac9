"""Damaged checkpoint files through the CLI: ``run`` (and ``replay``) exit 2 with one line naming the file, what was
found and what to do; no Python traceback, no Java stack trace. One small run makes the checkpoint; each case damages
a copy of it. Torn files are found before Spark starts; what only Spark can tell (a log written by a newer Spark, or
a torn file the check before the run did not see) is recognised in Spark's error."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.sources.demo import generate_demo

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()


@pytest.fixture(scope="module")
def finished(spark, tmp_path_factory) -> dict:
    """A finished run's checkpoint and state directory (embedded registry), and how to run on them again."""
    root = tmp_path_factory.mktemp("damaged-checkpoint")
    manifest = generate_demo(root / "in", rows_per_table=4)
    (root / "tables.sql").write_text(";\n".join(manifest.create_statements.values()) + ";\n", encoding="utf-8")
    work = {"root": root, "rows": len(manifest.all_events)}
    result = runner.invoke(app, _args(work, root))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["rows"] == work["rows"]
    assert sorted(p.name for p in (root / "checkpoint" / "spark" / "offsets").iterdir()) == [".0.crc", "0"]
    return work


def _args(work: dict, where: Path, command: str = "run") -> list[str]:
    root = work["root"]
    return [command, "--source", str(root / "in"), "--checkpoint", str(where / "checkpoint"),
            "--state-dir", str(where / "state"), "--sink-uri", f"file://{where / 'out'}?protocol=avro",
            "--tables", str(root / "tables.sql"), "--csv", "include-commit-ts=true", "--csv", "output-old-value=true",
            "--progress", "none", *(["--available-now"] if command == "run" else [])]


def _copy(work: dict, tmp_path: Path) -> Path:
    for part in ("checkpoint", "state"):
        shutil.copytree(work["root"] / part, tmp_path / part)
    return tmp_path / "checkpoint"


def _one_line(result, capfd) -> str:
    """The run's one error line; nothing else on stderr, no Python or Java stack anywhere."""
    jvm = capfd.readouterr().err  # what the JVM and Spark's Python side wrote on the process's own stderr
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # not an exception escaping the command
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in (result.output, jvm):
        assert "Traceback" not in text and not re.search(r"^\s+at [\w$.]+\(", text, re.M), text[-3000:]
    return lines[0]


def _tear(path: Path, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


CASES = [
    # (file, damage, what the line says)
    ("spark/offsets/0", lambda p: _tear(p, 5),
     ["is incomplete (5 bytes", "a crash, a full disk or a copy cut short",
      "delete spark/offsets/0, spark/offsets/.0.crc, spark/commits/0 and spark/commits/.0.crc in the checkpoint",
      "the next run then redoes batch 0"]),
    ("spark/commits/0", lambda p: _tear(p, 4),
     ["is incomplete (4 bytes", "delete spark/commits/0 and spark/commits/.0.crc", "redoes batch 0"]),
    ("spark/metadata", lambda p: _tear(p, 6), ["is incomplete", 'write a new query id into it, e.g. {"id":"']),
    ("spark/offsets/0", lambda p: p.unlink(), ["is missing while spark/commits/0 is there",
                                               "delete spark/commits/0 and spark/commits/.0.crc"]),
    ("job.json", lambda p: p.write_text('{"source": "stor'), ["is incomplete (16 bytes", "delete it: the next run "
                                                              "records the --source it is given there again"]),
    ("tables.json", lambda p: p.write_text("tables: none\n"), ["is damaged (not JSON", "restore it from a backup"]),
    ("held-files.json", lambda p: p.write_text(""), ["is empty (0 bytes)", "restore it from a backup"]),  # a release before
    ("state/numbers/0000000000.json", lambda p: p.write_text("[1, 2]"),
     ["is damaged (JSON, but a list", "delete it: it only serves the warning"]),
    ("state/owners/0000000000.json", lambda p: p.write_text('{"topics": '),
     ["is incomplete", "delete it: the tables that earlier batches sent"]),
]


@pytest.mark.parametrize(("name", "damage", "expected"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_a_damaged_checkpoint_file_is_one_line_naming_it(finished, tmp_path, capfd, name, damage, expected):
    checkpoint = _copy(finished, tmp_path)
    damage(checkpoint / name)
    capfd.readouterr()

    result = runner.invoke(app, _args(finished, tmp_path))

    line = _one_line(result, capfd)
    assert line.startswith(f"error: Checkpoint file {str(checkpoint / name)!r} "), line
    for fragment in expected:
        assert fragment in line, line
    assert not (tmp_path / "out").exists()  # found before any batch ran


def test_following_the_advice_for_a_torn_offsets_file_redoes_the_batch(finished, tmp_path, capfd):
    checkpoint = _copy(finished, tmp_path)
    _tear(checkpoint / "spark" / "offsets" / "0", 5)
    capfd.readouterr()
    line = _one_line(runner.invoke(app, _args(finished, tmp_path)), capfd)

    doomed = re.search(r"delete (.+) in the checkpoint", line).group(1).replace(" and ", ", ").split(", ")
    for name in doomed:
        (checkpoint / name).unlink()
    again = runner.invoke(app, _args(finished, tmp_path))

    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout.strip().splitlines()[-1])["rows"] == finished["rows"]  # batch 0 again, whole


def test_a_log_written_by_a_newer_spark_is_not_called_torn(finished, tmp_path, capfd):
    checkpoint = _copy(finished, tmp_path)
    offsets = checkpoint / "spark" / "offsets" / "0"
    offsets.write_text("v99" + offsets.read_text()[2:])  # complete, but a log version this Spark cannot read
    # A newer Spark writes the file whole: no stale checksum beside it (Hadoop's FileSystem API, which the job's
    # query writes its logs with, keeps a .crc of each file; Spark's default FileContext writes none)
    (offsets.parent / f".{offsets.name}.crc").unlink(missing_ok=True)
    capfd.readouterr()

    line = _one_line(runner.invoke(app, _args(finished, tmp_path)), capfd)

    assert line.startswith(f"error: Checkpoint file {str(offsets)!r} was written by a newer Spark"), line
    assert "log version v99" in line and "it is not damaged" in line and "delete" not in line


def test_a_torn_file_is_named_from_sparks_own_error_too(finished, tmp_path, capfd, monkeypatch):
    from avro_registry_sink.spark.driver import checkpoint_files

    monkeypatch.setattr(checkpoint_files, "check_checkpoint_files", lambda *a, **k: None)  # Spark meets it first
    checkpoint = _copy(finished, tmp_path)
    _tear(checkpoint / "spark" / "commits" / "0", 4)
    capfd.readouterr()

    line = _one_line(runner.invoke(app, _args(finished, tmp_path)), capfd)

    assert line.startswith(f"error: Checkpoint file {str(checkpoint / 'spark/commits/0')!r} is incomplete"), line
    assert "delete spark/commits/0 and spark/commits/.0.crc" in line


def test_replay_names_a_torn_dead_letter_line(finished, tmp_path, capfd):
    checkpoint = _copy(finished, tmp_path)
    letters = checkpoint / "dead-letter" / "batch-0000000000.jsonl"
    letters.parent.mkdir()
    letters.write_text(json.dumps({"id": "a", "raw_base64": "eA=="}) + "\n" + '{"id": "b", "raw_ba')
    capfd.readouterr()

    line = _one_line(runner.invoke(app, _args(finished, tmp_path, "replay")), capfd)

    assert line.startswith(f"error: Checkpoint file {str(letters)!r} is damaged: line 2 is incomplete"), line
    assert "remove that line" in line
