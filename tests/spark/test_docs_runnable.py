"""The documentation's runnable blocks (a ```bash fence right after ``<!-- runnable -->``) pass as written, in
order per page, in a fresh directory with the package's commands on the PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- runnable -->\s*\n```bash\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, int, str]]:
    out = []
    for page in sorted((ROOT / "docs").rglob("*.md")):  # the tutorials/ pages too
        for number, match in enumerate(BLOCK.finditer(page.read_text(encoding="utf-8")), start=1):
            out.append((page.relative_to(ROOT / "docs").as_posix(), number, match.group(1)))
    return out


def test_there_are_runnable_blocks():
    assert len(_blocks()) >= 3


@pytest.mark.parametrize("page", sorted({name for name, _, _ in _blocks()}))
def test_the_runnable_blocks_of_a_page_pass(page, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVRO_SINK_")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, COLUMNS="160")
    for name, number, script in _blocks():
        if name != page:
            continue
        ran = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=600)
        assert ran.returncode == 0, f"{page} block {number}:\n{script}\n{ran.stdout[-2000:]}\n{ran.stderr[-3000:]}"
        assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
