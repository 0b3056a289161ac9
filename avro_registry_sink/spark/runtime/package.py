"""What a Spark cluster's executors need to run the job's Python stages: a packed virtual environment.

:func:`build_executor_env` creates a fresh virtual environment, installs this project (a wheel built from the
source tree, or the installed version from the package index) and its dependencies except PySpark (the
cluster's Spark brings its own), and packs it with ``venv-pack`` for spark-submit's ``--archives``::

    --archives dist/executor-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python

The environment's ``python`` links to the interpreter it was made from (``venv-pack``'s rule): the executors'
machines need a Python of the same version at the same path (the same image or OS packages), or use
``conda-pack`` / a container image with the package installed instead (see the README).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import requires, version
from pathlib import Path

__all__ = ["SUBMIT_SCRIPT", "build_executor_env", "executor_requirements", "source_tree"]

#: The spark-submit application file (copied next to the archive).
SUBMIT_SCRIPT = Path(__file__).with_name("submit.py")

#: Provided by the cluster's Spark (and a wrong version would clash with it).
_PROVIDED_BY_SPARK = {"pyspark"}


def source_tree() -> Path | None:
    """The project's source tree when this package runs from one (an editable or in-place install)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() and (root / "avro_registry_sink").is_dir() else None


def executor_requirements() -> list[str]:
    """The project's runtime requirements minus what the cluster's Spark provides (no extras)."""
    out = []
    for req in requires("avro-registry-sink") or []:
        if "extra ==" in req:
            continue
        name = re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower()
        if name not in _PROVIDED_BY_SPARK:
            out.append(req)
    return out


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed:\n{(done.stderr or done.stdout)[-3000:]}")


def build_executor_env(out_dir: Path | str, *, name: str = "executor-env.tar.gz", compress_level: int = 1) -> Path:
    """Build ``<out_dir>/<name>`` (the packed environment) and ``<out_dir>/submit.py``; returns the archive.

    >>> # build_executor_env("dist")  # dist/executor-env.tar.gz, dist/submit.py
    """
    import venv_pack

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    archive = out / name
    with tempfile.TemporaryDirectory(prefix="avro-registry-sink-env-") as tmp:
        env = Path(tmp) / "env"
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", str(env)])
        python = str(env / "bin" / "python")
        tree = source_tree()
        if tree is not None:
            wheels = Path(tmp) / "wheels"
            _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(tree)])
            project = [str(p) for p in wheels.glob("*.whl")]
        else:
            project = [f"avro-registry-sink=={version('avro-registry-sink')}"]
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
        _run([*pip, "--no-deps", *project])
        _run([*pip, *executor_requirements()])
        archive.unlink(missing_ok=True)
        venv_pack.pack(prefix=str(env), output=str(archive), compress_level=compress_level, force=True)
    shutil.copyfile(SUBMIT_SCRIPT, out / "submit.py")
    return archive
