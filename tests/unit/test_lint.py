"""The code base passes ruff (pyflakes, pycodestyle, import order, bugbear, pyupgrade, simplify, ruff's own rules;
settings in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_reports_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise",
                           "avro_registry_sink", "bench", "tests", "conftest.py"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
