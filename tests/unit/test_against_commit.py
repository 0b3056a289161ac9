"""``bench/against_commit.py``: each version imports its own tree, and the report reads its runs right.

The timed runs themselves are the bench's (the job's CLI, minutes); this checks what would make them wrong.
"""

from __future__ import annotations

import subprocess

import pytest

from bench.against_commit import (
    REPO,
    Run,
    commit_of,
    imported_from,
    parse_env,
    remove_worktree,
    report,
    run_env,
    versions,
)


def test_the_base_worktree_imports_its_own_package(tmp_path):
    base = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD~1"], capture_output=True, text=True,
                          check=True).stdout.strip()
    roots = versions(base, tmp_path)
    try:
        assert imported_from(roots["base"]).is_relative_to(roots["base"])
        assert imported_from(roots["head"]).is_relative_to(REPO)
        assert base.startswith(commit_of(roots["base"]))
    finally:
        remove_worktree(roots["base"])
    assert not roots["base"].exists()
    with pytest.raises(RuntimeError, match="PYTHONPATH does not take"):
        imported_from(tmp_path)  # nothing to import there: the installed package answers, and is refused


def test_the_report_puts_head_over_base_per_round_and_fails_a_run_that_lost_rows():
    runs = {"storage CSV -> file": [
        Run("base", 20.0, 30.0, 2 * 2**30, 1000, 0.5, peak_split={"jvm": 2**30, "python workers": 2**30}),
        Run("head", 10.0, 15.0, 2**30, 1000, 0.4, peak_split={"jvm": 2**29, "other": 2**29}),
        Run("base", 22.0, 31.0, 2 * 2**30, 1000, 0.3, peak_split={"jvm": 2**30, "python workers": 2**30}),
        Run("head", 11.0, 16.0, 2**30, 1000, 0.2, peak_split={"jvm": 2**29, "other": 2**29})],
        "canal-json topic -> Kafka": [
        Run("base", 10.0, 1, 0, 500, 0.1), Run("head", 9.0, 1, 0, 0, 0.1, error="400 offsets written for 500 rows")]}
    text = report(runs, 1000, {"base": "aaaa", "head": "bbbb"})
    lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    row = lines["storage CSV -> file"].split(" | ")
    assert row[2:6] == ["21.0 (20.0-22.0)", "10.5 (10.0-11.0)", "48 (45-50)", "95 (91-100)"]
    assert row[6].startswith("2.00x (2.00-2.00")
    assert row[8] == "2.00 / 1.00"
    assert row[9] == "1.00, 0.00, 1.00, 0.00 / 0.50, 0.00, 0.00, 0.50"  # jvm, planners, workers, other
    assert row[-1].endswith("none |")
    lost = lines["canal-json topic -> Kafka"].split(" | ")
    assert lost[3] == "-" and lost[6] == "-" and "head: 400 offsets written for 500 rows" in lost[-1]


def test_a_versions_own_variables_reach_only_its_runs(monkeypatch):
    monkeypatch.setenv("AVRO_SINK_DRIVER_MEMORY", "9g")  # the caller's settings are dropped for both
    assert parse_env(["AVRO_SINK_DRIVER_MEMORY=2g", "X=a=b"]) == {"AVRO_SINK_DRIVER_MEMORY": "2g", "X": "a=b"}
    head = run_env(REPO, parse_env(["AVRO_SINK_DRIVER_MEMORY=2g"]))
    base = run_env(REPO)
    assert head["AVRO_SINK_DRIVER_MEMORY"] == "2g" and "AVRO_SINK_DRIVER_MEMORY" not in base
    assert head["PYTHONPATH"] == str(REPO)
    with pytest.raises(SystemExit, match="NAME=VALUE, not 'oops'"):
        parse_env(["oops"])
