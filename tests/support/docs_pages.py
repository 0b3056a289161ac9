"""The documentation's runnable blocks, found and run as a reader runs them (tests/spark/test_docs_runnable.py,
tests/spark/test_docs_tutorials.py).

A ```bash fence right after ``<!-- runnable -->`` is run as written: a page's runnable blocks in order in one
shell, as a reader pastes them into one terminal, in a fresh directory with the package's commands on the PATH.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import ensure_kafka, free_port

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- runnable -->\s*\n```bash\n(.*?)```", re.S)


def pages() -> list[Path]:
    """Every page of docs/ (tutorials/ too) and the README."""
    return [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]  # the tutorials/ pages too


def name_of(page: Path) -> str:
    """A page's name as the tests key it: its path under docs/, or the README's file name."""
    return page.relative_to(ROOT / "docs").as_posix() if page.is_relative_to(ROOT / "docs") else page.name


def blocks() -> list[tuple[str, int, str]]:
    """Every runnable block: (page, its number on the page from 1, its text)."""
    out = []
    for page in pages():
        for number, match in enumerate(BLOCK.finditer(page.read_text(encoding="utf-8")), start=1):
            out.append((name_of(page), number, match.group(1)))
    return out


@dataclass(frozen=True)
class PageRun:
    """One page's runnable blocks run in one shell: where, with which variables, and what it printed."""

    page: str
    directory: Path
    env: dict[str, str]
    returncode: int
    stdout: str
    stderr: str

    def failure(self) -> str:
        """Which block failed (its marker is the last on stderr), with the ends of both outputs."""
        started = self.started()
        number = max(started, default=0)
        script = next((s for name, n, s in blocks() if name == self.page and n == number), "")
        return (f"{self.page} block {number} failed (exit {self.returncode}):\n{script}\n--- stdout\n"
                f"{self.stdout[-2000:]}\n--- stderr\n{self.stderr[-3000:]}")

    def started(self) -> dict[int, float]:
        """When each block started (bash's EPOCHREALTIME), by block number."""
        return {int(n): float(at) for n, at in re.findall(r"^::docs block (\d+) at ([\d.]+)$", self.stderr, re.M)}


def run_page(page: str, directory: Path, env: dict[str, str]) -> PageRun:
    """The page's runnable blocks, in order, in one ``bash -euo pipefail`` (a marker on stderr before each)."""
    script = "\n".join(f'echo "::docs block {number} at $EPOCHREALTIME" >&2\n{text}'
                       for name, number, text in blocks() if name == page)
    with (directory / ".page.out").open("w+") as out, (directory / ".page.err").open("w+") as err:
        # files, not pipes: a background process of a failed block (a registry) keeps no reader of ours waiting
        shell = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=directory, env=env, stdout=out,
                                 stderr=err, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            returncode = shell.wait(timeout=600)
        finally:
            with contextlib.suppress(ProcessLookupError):  # what a failed block left running in the background
                os.killpg(shell.pid, signal.SIGTERM)
        out.seek(0)
        err.seek(0)
        return PageRun(page, directory, env, returncode, out.read(), err.read())


def page_runner(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], PageRun]:
    """Runs a page's blocks once for the caller's fixture (a module's), with the suite's broker on the PATH's
    commands: ``KAFKA_BOOTSTRAP``, a ``REGISTRY_PORT`` of the page's own and a ``TOPIC_PREFIX`` of this run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVRO_SINK_")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, COLUMNS="160", KAFKA_BOOTSTRAP=ensure_kafka(),
               REGISTRY_PORT=str(free_port()), TOPIC_PREFIX=f"docs_{uuid.uuid4().hex[:8]}")
    env.pop("REGISTRY", None)
    done: dict[str, PageRun] = {}

    def run(page: str) -> PageRun:
        if page not in done:
            # a registry port of its own: a page's background registry may outlive its shell by a moment
            own = {**env, "REGISTRY_PORT": str(free_port())}
            done[page] = run_page(page, tmp_path_factory.mktemp(page.replace("/", "-")), own)
        return done[page]

    return run
