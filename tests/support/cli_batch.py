"""Many invocations of the real CLI for the price of one interpreter start.

A test that needs the CLI as a user runs it (exit status, stdout and stderr of a process, no Java) pays about
2 CPU-seconds a subprocess, nearly all of it the interpreter's start and the package's imports. :func:`run_cli_batch`
starts one driver process (this file as a script) that imports ``avro_registry_sink.cli`` once (plus the modules
the commands would import lazily, ``preload``), then forks one child per invocation. Each child is a process of
its own, as ``python -m avro_registry_sink.cli ARGS`` would be:

* it calls :func:`avro_registry_sink.cli.main`, the console script's and ``python -m``'s entry point, with
  ``sys.argv`` set, so the CLI's own error handling and exit-status mapping are the ones under test;
* its file descriptors 1 and 2 are files of its own (what the process writes, at the descriptor level) and 0
  is ``/dev/null``; the exit status is the one the interpreter would give: ``SystemExit``'s code, or a
  traceback through ``sys.excepthook`` and status 1 for an exception that escapes, after the ``atexit``
  handlers have run;
* nothing of one invocation reaches another: each child starts from the driver's state right after the
  imports (environment, working directory, loggers, warnings filters, module globals such as remembered
  secrets), and what it changes dies with it.

A case's ``env`` is applied to ``os.environ`` in the child, which is what the CLI reads; variables read by the
interpreter at its start (``PYTHONWARNINGS``, ``PYTHONPATH`` ...) take effect only through ``run_cli_batch``'s
``env``, which is the driver's environment. POSIX only (``os.fork``).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Modules the driver imports before forking: the entry point's module, and the job's driver that ``run`` and
#: ``replay`` import lazily (0.9 s a process otherwise). Importing them starts no JVM.
PRELOAD = ("avro_registry_sink.cli", "avro_registry_sink.spark.driver.job")


@dataclasses.dataclass(frozen=True)
class CliCase:
    """One invocation: the arguments after the program name, environment overrides and working directory."""

    argv: Sequence[str]
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cwd: str | None = None
    timeout: float = 120.0


@dataclasses.dataclass(frozen=True)
class CliResult:
    """What the invocation's process did (the attributes of ``subprocess.CompletedProcess`` the tests read)."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_cli_batch(cases: Sequence[CliCase | Sequence[str]], *, env: Mapping[str, str] | None = None,
                  cwd: str | Path | None = None, parallel: int = 1,
                  preload: Sequence[str] = PRELOAD) -> list[CliResult]:
    """Run every case in a child of one driver process (``parallel`` at a time); the results in case order.

    ``env`` is the driver's whole environment (default: this process's); ``cwd`` the children's default working
    directory. A plain argument list is a case with no overrides."""
    spec = {"preload": list(preload), "parallel": parallel, "cwd": str(cwd) if cwd is not None else None,
            "cases": [dataclasses.asdict(c if isinstance(c, CliCase) else CliCase(argv=list(c))) for c in cases]}
    budget = 60 + sum(c["timeout"] for c in spec["cases"])
    done = subprocess.run([sys.executable, "-P", __file__], input=json.dumps(spec), capture_output=True, text=True,
                          env=dict(os.environ if env is None else env), timeout=budget)
    if done.returncode != 0:
        raise RuntimeError(f"the CLI batch driver failed (exit {done.returncode}): {done.stderr[-3000:]}")
    results = [CliResult(**json.loads(line)) for line in done.stdout.splitlines()]
    if len(results) != len(cases):
        raise RuntimeError(f"the CLI batch driver answered {len(results)} of {len(cases)} cases: {done.stderr[-3000:]}")
    return results


def _exit_status(code: Any) -> int:
    """The status the interpreter exits with for ``SystemExit(code)`` (printing a non-integer code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _child(case: dict[str, Any], default_cwd: str | None, out: str, err: str) -> None:
    """The invocation's process: never returns."""
    status = 1
    try:
        signal.alarm(max(1, int(case["timeout"])))  # a hung invocation dies of SIGALRM (status -14)
        for fd, path in ((1, out), (2, err)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.environ.update(case["env"])
        if case["cwd"] or default_cwd:
            os.chdir(case["cwd"] or default_cwd)
        sys.argv = ["avro-registry-sink", *case["argv"]]
        from avro_registry_sink.cli import main

        try:
            main()
            status = 0
        except SystemExit as exc:
            status = _exit_status(exc.code)
        except BaseException:  # noqa: BLE001 - what the interpreter does with an exception that escapes
            sys.excepthook(*sys.exc_info())
            status = 1
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream: the interpreter ignores it too
                stream.flush()
        os._exit(status)


def _drive(spec: dict[str, Any]) -> None:
    for module in spec["preload"]:
        importlib.import_module(module)
    cases = spec["cases"]
    results: dict[int, dict[str, Any]] = {}
    running: dict[int, tuple[int, float, str, str]] = {}  # pid -> case, start, stdout file, stderr file
    tmp = tempfile.mkdtemp(prefix="cli-batch-")  # not TemporaryDirectory: its finalizer would run in each child's atexit
    try:
        pending = list(range(len(cases)))
        while pending or running:
            while pending and len(running) < max(1, spec["parallel"]):
                index = pending.pop(0)
                out, err = (os.path.join(tmp, f"{index}.{name}") for name in ("out", "err"))
                sys.stdout.flush()
                sys.stderr.flush()  # a child must not inherit (and write again) what the driver buffered
                started = time.monotonic()
                pid = os.fork()
                if pid == 0:
                    _child(cases[index], spec["cwd"], out, err)
                running[pid] = (index, started, out, err)
            pid, wait_status = os.wait()
            index, started, out, err = running.pop(pid)
            seconds = time.monotonic() - started
            results[index] = {"argv": cases[index]["argv"], "returncode": os.waitstatus_to_exitcode(wait_status),
                              "stdout": Path(out).read_text(encoding="utf-8", errors="replace"),
                              "stderr": Path(err).read_text(encoding="utf-8", errors="replace"), "seconds": seconds}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for index in range(len(cases)):
        print(json.dumps(results[index]))


if __name__ == "__main__":
    _drive(json.load(sys.stdin))
