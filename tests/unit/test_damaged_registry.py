"""A damaged, unreadable or locked embedded-registry SQLite file: ``run``, ``replay``, ``encode`` and ``registry serve``
(the real CLI, a process each) exit 2 with one line naming the file and what to do, never a traceback. A locked
file is waited for ``AVRO_SINK_REGISTRY_LOCK_TIMEOUT`` (or ``--lock-timeout``) seconds first. ``run`` and ``replay``
find it before Spark starts: the subprocess has no usable Java (``JAVA_HOME`` points nowhere), so a run that got as
far as starting Spark would fail differently (a Java gateway traceback, exit 1).

A zero-length file is an empty registry (SQLite's own rule, and the state of a file created but not yet written).

The invocations are children forked from one driver process that imported the CLI once
(tests/support/cli_batch.py), a few at a time (the locked cases mostly wait); one also runs as
``python -m avro_registry_sink.cli`` and must answer byte for byte alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from avro_registry_sink.registry.embedded import EmbeddedRegistry, RegistryStore
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.sources.sources import parse_source
from tests.support.cli_batch import CliCase, CliResult, run_cli_batch

CLI = [sys.executable, "-m", "avro_registry_sink.cli"]
LOCK_WAIT = 1.0  # seconds the commands wait for the locked file here
DDL = "CREATE TABLE shop.items (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(20));\n"
EVENT = {"schema": "shop", "table": "items", "op": "insert", "commit_ts": 1, "values": {"id": 1, "name": "a"}}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A storage tree, a DDL and events file, and a registry file with some schemas (several SQLite pages)."""
    root = tmp_path_factory.mktemp("damaged-registry")
    generate_demo(root / "tree", rows_per_table=4)
    (root / "items.sql").write_text(DDL)
    (root / "events.jsonl").write_text(json.dumps(EVENT) + "\n")
    with RegistryStore.open(str(root / "good.db")) as store:
        for i in range(30):
            fields = [{"name": f"f{j}_{'x' * 40}", "type": "long"} for j in range(i + 1)]
            store.register(f"t{i}-value", json.dumps({"type": "record", "name": f"R{i}", "fields": fields}))
    return root


def _damage(root: Path, how: str, path: Path) -> None:
    """Put a registry file damaged ``how`` at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    good = (root / "good.db").read_bytes()
    if how == "half":
        path.write_bytes(good[: len(good) // 2])
    elif how == "garbage":
        path.write_bytes(bytes((i * 7919 + 13) % 251 for i in range(len(good))))
    elif how == "directory":
        path.mkdir()
    elif how in ("locked", "zero-length"):
        path.write_bytes(good if how == "locked" else b"")
    else:  # pragma: no cover
        raise ValueError(how)


@contextlib.contextmanager
def _holding() -> Iterator[Callable[[Path], None]]:
    """``hold(path)``: another connection holds the file in an exclusive transaction until the block ends."""
    holders: list[sqlite3.Connection] = []

    def hold(path: Path) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        holders.append(conn)

    try:
        yield hold
    finally:
        for conn in holders:
            conn.execute("ROLLBACK")
            conn.close()


EXPECTED = {
    "half": "is damaged (database disk image is malformed",
    "garbage": "is not a SQLite database",
    "directory": "is a directory, not a file",
    "locked": f"is locked by another process (waited {LOCK_WAIT:g} s",
}
ADVICE = {
    "half": "restore it (with its -wal and -shm files) from a backup, or move it aside and use another file",
    "garbage": "registers their schemas again",
    "directory": "remove or rename the directory",
    "locked": "stop the other process",
}


def _command(command: str, root: Path, work: Path) -> tuple[list[str], Path]:
    """The command line of ``command`` using a registry file under ``work``, and that file's path."""
    if command in ("run", "replay"):
        checkpoint = work / "checkpoint"
        checkpoint.mkdir()
        if command == "replay":  # a checkpoint of this source (else replay has nothing to replay)
            source = parse_source(str(root / "tree")).describe()
            (checkpoint / "job.json").write_text(json.dumps({"source": source}))
        args = [command, "--source", str(root / "tree"), "--state-dir", str(work / "state"),
                "--checkpoint", str(checkpoint)]
        return args + (["--available-now"] if command == "run" else []), work / "state" / "registry.db"
    data = work / "registry" / "registry.db"
    if command == "encode":
        (work / "settings.toml").write_text(f"[registry]\nembedded-data = {json.dumps(str(data))}\n")
        return ["encode", "--ddl", str(root / "items.sql"), "--events", str(root / "events.jsonl"),
                "--config", str(work / "settings.toml")], data
    return ["registry", "serve", "--port", "0", "--data", str(data)], data


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "JAVA_HOME": str(root / "no-java"), "PYTHONWARNINGS": "ignore",
            "AVRO_SINK_REGISTRY_LOCK_TIMEOUT": str(LOCK_WAIT)}


def _run(args: list[str], root: Path) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=_env(root), timeout=120, cwd=root)
    return done, time.monotonic() - started


CASES = [("run", "half"), ("run", "garbage"), ("run", "directory"), ("run", "locked"),
         ("replay", "garbage"), ("replay", "locked"),
         ("registry serve", "half"), ("registry serve", "garbage"), ("registry serve", "locked"),
         ("encode", "half"), ("encode", "locked")]


@dataclasses.dataclass
class Batch:
    """Every invocation's result: CASES' by (command, how), the others' by name; the files they used."""

    cases: dict[tuple[str, str], tuple[list[str], Path, CliResult]]
    others: dict[str, tuple[list[str], Path, CliResult]]


@pytest.fixture(scope="module")
def batch(root, tmp_path_factory) -> Batch:
    """CASES and the lock-timeout and zero-length invocations, run together while their files are held."""
    invocations: dict[object, tuple[CliCase, Path]] = {}
    with _holding() as hold:
        waits = tmp_path_factory.mktemp("lock-timeout") / "registry.db"
        _damage(root, "locked", waits)
        hold(waits)
        invocations["lock-timeout"] = (CliCase(["registry", "serve", "--port", "0", "--data", str(waits),
                                                "--lock-timeout", "3"]), waits)  # first: the longest wait
        for command, how in CASES:
            work = tmp_path_factory.mktemp(f"{command.split()[-1]}-{how}")
            args, data = _command(command.split()[-1], root, work)
            _damage(root, how, data)
            if how == "locked":
                hold(data)
            invocations[(command, how)] = (CliCase(args), data)
        bad = tmp_path_factory.mktemp("bad-lock-timeout") / "r.db"
        invocations["bad-lock-timeout"] = (CliCase(["registry", "serve", "--port", "0", "--data", str(bad)],
                                                   env={"AVRO_SINK_REGISTRY_LOCK_TIMEOUT": "soon"}), bad)
        args, data = _command("encode", root, tmp_path_factory.mktemp("zero-length"))
        _damage(root, "zero-length", data)
        invocations["zero-length"] = (CliCase(args), data)
        results = run_cli_batch([case for case, _ in invocations.values()], env=_env(root), cwd=root, parallel=3)
    done = {key: (list(case.argv), data, result)
            for (key, (case, data)), result in zip(invocations.items(), results, strict=True)}
    return Batch(cases={k: v for k, v in done.items() if isinstance(k, tuple)},
                 others={k: v for k, v in done.items() if isinstance(k, str)})


@pytest.mark.parametrize(("command", "how"), CASES, ids=[f"{c}-{h}" for c, h in CASES])
def test_a_damaged_or_locked_registry_file_is_one_line_and_exit_2(batch, command, how):
    _, data, done = batch.cases[(command, how)]
    seconds = done.seconds

    output = done.stdout + done.stderr
    assert "Traceback" not in output and "Java gateway" not in output, output
    assert done.returncode == 2, output
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"The embedded registry's SQLite file {str(data)!r}" in lines[0], lines[0]
    assert EXPECTED[how] in lines[0] and ADVICE[how] in lines[0], lines[0]
    if how == "locked":  # waited the configured time, then gave up (the process starts in about a second)
        assert LOCK_WAIT <= seconds < LOCK_WAIT + 30, seconds
        assert "AVRO_SINK_REGISTRY_LOCK_TIMEOUT" in lines[0]
    if command == "registry serve":
        assert lines[0].endswith("(option '--data')")


def test_the_batch_answers_as_python_m_does(batch, root):
    """The driver is faithful: a case as a process of its own prints the same bytes, with the same status."""
    args, data, done = batch.cases[("run", "half")]
    work = data.parent.parent
    shutil.rmtree(work)  # the same paths again, as the batch had them before its run
    work.mkdir()
    again, _ = _command("run", root, work)
    assert again == args
    _damage(root, "half", data)
    alone, _ = _run(args, root)
    assert (alone.returncode, alone.stdout, alone.stderr) == (done.returncode, done.stdout, done.stderr)


def test_serve_waits_as_long_as_lock_timeout_says(batch):
    _, _, done = batch.others["lock-timeout"]

    assert done.returncode == 2, done.stderr
    assert "is locked by another process (waited 3 s" in done.stderr and done.seconds >= 3


def test_a_bad_lock_timeout_is_refused(batch):
    _, _, done = batch.others["bad-lock-timeout"]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "Invalid value 'soon' for AVRO_SINK_REGISTRY_LOCK_TIMEOUT" in done.stderr


def test_a_zero_length_file_is_an_empty_registry(batch):
    _, data, done = batch.others["zero-length"]

    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[0])
    assert (out["key_schema_id"], out["value_schema_id"]) == (1, 2)
    with RegistryStore.open(str(data)) as store:
        assert store.list_subjects() == ["shop_items-key", "shop_items-value"]


def test_a_file_locked_while_serving_gets_an_error_answer_not_a_stack(root, tmp_path, caplog):
    data = tmp_path / "registry.db"
    shutil.copy(root / "good.db", data)
    with EmbeddedRegistry(str(data), lock_timeout=0.5) as registry:
        holder = sqlite3.connect(data, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            answer = httpx.post(f"{registry.url}/subjects/late-value/versions", json={"schema": '"string"'})
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert answer.status_code == 500 and answer.json()["error_code"] == 50002, answer.text
        assert "is locked by another process (waited 0.5 s" in answer.json()["message"]
        again = httpx.post(f"{registry.url}/subjects/late-value/versions", json={"schema": '"string"'})
        assert again.status_code == 200, again.text  # the lock is gone: the registry goes on
    assert not [r for r in caplog.records if r.exc_info], "no stack trace logged"


def test_store_errors_name_the_file(root, tmp_path):
    from avro_registry_sink.errors import RegistryFileError

    _damage(root, "half", tmp_path / "half.db")
    with pytest.raises(RegistryFileError) as caught:
        RegistryStore.open(str(tmp_path / "half.db"))
    assert caught.value.path == str(tmp_path / "half.db") and caught.value.problem == "damaged"
