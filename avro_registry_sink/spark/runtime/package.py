"""What a Spark cluster's executors need to run the job's Python stages: a packed virtual environment.

:func:`build_executor_env` creates a fresh virtual environment, installs this project (a wheel built from the
source tree, or the installed version from the package index) and its dependencies except PySpark (the
cluster's Spark brings its own) with uv, and packs it with ``venv-pack`` for spark-submit's ``--archives``::

    --archives dist/executor-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python

The environment's ``python`` links to the interpreter it was made from (``venv-pack``'s rule): the executors'
machines need a Python of the same version at the same path (the same image or OS packages), or use
``conda-pack`` / a container image with the package installed instead (see the README).

The environment is filled by uv (a dependency of this package) rather than pip: about 370 MB of wheels (pyarrow,
pandas, numpy...) took pip 21 s to install here and uv 3 s with a cold cache (``docs/deployment.md``). uv reads
no ``pip.conf``; a package index, extra index, find-links location or CA bundle given to pip through its
environment variables (``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_FIND_LINKS``, ``PIP_CERT``) is handed
to uv under its own names unless those are set (:func:`uv_environment`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import requires, version
from pathlib import Path

__all__ = ["SUBMIT_SCRIPT", "build_executor_env", "executor_requirements", "source_tree", "uv_environment"]

#: The spark-submit application file (copied next to the archive).
SUBMIT_SCRIPT = Path(__file__).with_name("submit.py")

#: Not installed for the executors: pyspark is the cluster's Spark's own (a wrong version would clash with it);
#: uv and venv-pack2 only build this environment, on the machine that runs ``package``.
_NOT_ON_EXECUTORS = {"pyspark", "uv", "venv-pack2"}


def source_tree() -> Path | None:
    """The project's source tree when this package runs from one (an editable or in-place install)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() and (root / "avro_registry_sink").is_dir() else None


def executor_requirements() -> list[str]:
    """The project's runtime requirements minus what the cluster's Spark provides and what only builds the
    environment (no extras)."""
    out = []
    for req in requires("avro-registry-sink") or []:
        if "extra ==" in req:
            continue
        name = re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0].lower()
        if name not in _NOT_ON_EXECUTORS:
            out.append(req)
    return out


#: pip's environment variables and uv's names for the same setting (uv reads neither pip's variables nor pip.conf).
_PIP_TO_UV = {"PIP_INDEX_URL": "UV_INDEX_URL", "PIP_EXTRA_INDEX_URL": "UV_EXTRA_INDEX_URL",
              "PIP_FIND_LINKS": "UV_FIND_LINKS", "PIP_CERT": "SSL_CERT_FILE"}


def uv_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment uv runs in: ``environ`` (default: this process's) with pip's index, find-links and CA
    settings copied to uv's names where uv's own are unset (find-links: pip separates them by spaces, uv by
    commas)."""
    env = dict(os.environ if environ is None else environ)
    for pip_name, uv_name in _PIP_TO_UV.items():
        value = env.get(pip_name, "").strip()
        if value and not env.get(uv_name):
            env[uv_name] = ",".join(value.split()) if uv_name == "UV_FIND_LINKS" else value
    return env


def _run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed:\n{(done.stderr or done.stdout)[-3000:]}")


def build_executor_env(out_dir: Path | str, *, name: str = "executor-env.tar.gz", compress_level: int = 1) -> Path:
    """Build ``<out_dir>/<name>`` (the packed environment) and ``<out_dir>/submit.py``; returns the archive.

    >>> # build_executor_env("dist")  # dist/executor-env.tar.gz, dist/submit.py
    """
    import venv_pack
    from uv import find_uv_bin

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    archive = out / name
    with tempfile.TemporaryDirectory(prefix="avro-registry-sink-env-") as tmp:
        env = Path(tmp) / "env"
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", "--without-pip", str(env)])  # uv installs; the executors run no pip
        python = str(env / "bin" / "python")
        tree = source_tree()
        if tree is not None:
            wheels = Path(tmp) / "wheels"
            _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(tree)])
            project = [str(p) for p in wheels.glob("*.whl")]
        else:
            project = [f"avro-registry-sink=={version('avro-registry-sink')}"]
        install, uv_env = [find_uv_bin(), "pip", "install", "--quiet", "--python", python], uv_environment()
        _run([*install, "--no-deps", *project], uv_env)
        _run([*install, *executor_requirements()], uv_env)
        archive.unlink(missing_ok=True)
        venv_pack.pack(prefix=str(env), output=str(archive), compress_level=compress_level, force=True)
    shutil.copyfile(SUBMIT_SCRIPT, out / "submit.py")
    return archive
