"""The documentation site (``docs/``, ``mkdocs.yml``) builds with no warning: every page in the nav, every link
and anchor found, the API pages generated from the package's docstrings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                            "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT, env=env,
                           timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "WARNING" not in built.stderr, built.stderr[-3000:]
    assert (tmp_path / "site" / "python-api" / "index.html").read_text().count("to_flat_avro") > 3
