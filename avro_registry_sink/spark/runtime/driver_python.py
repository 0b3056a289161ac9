"""The Python that Spark starts on the driver to plan the storage source's batches.

Spark runs a Python data source's planning (``latestOffset``, ``partitions``) in a Python process of its
own, a new one for each streaming query (never forked from the executors' daemon), with
``$SPARK_HOME/python/lib/pyspark.zip`` first on its ``PYTHONPATH``. Python cannot cache compiled modules
inside a zip, so that process compiles pyspark's modules from source on each start: 0.52-0.58 s here
against 0.17-0.18 s for the same imports from the installed package, whose ``__pycache__`` holds them
compiled. The query waits for it before its first batch.

:func:`driver_python` gives the source an interpreter that is the driver's own Python with the driver's own
``pyspark`` and ``py4j`` packages put first on the path: a directory holding a link to each (nothing else
of the driver's environment moves ahead of ``PYTHONPATH``), and a ``sh`` launcher that adds it and runs the
interpreter. The planning process then imports the very pyspark the driver runs. Both are written once
per interpreter and package location, in ``python/`` of the product's cache directory
(:func:`~avro_registry_sink.cache_dir.cache_root`). Where that cannot help or cannot work (the driver's
pyspark itself comes from a zip, a system without ``sh``, a cache that cannot be written or executed) the
driver's interpreter is used as it is.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import sys
import tempfile
from pathlib import Path

from avro_registry_sink.cache_dir import cache_root

__all__ = ["driver_python"]

log = logging.getLogger(__name__)

_LAUNCHER = "python"
_PATH_DIR = "path"


def _package_dirs() -> dict[str, Path] | None:
    """The directories of the driver's ``pyspark`` and ``py4j`` packages, or ``None`` when either is not a
    plain directory (imported from a zip)."""
    import py4j
    import pyspark

    dirs = {}
    for module in (pyspark, py4j):
        where = Path(module.__file__ or "").parent
        if not where.is_dir():
            return None
        dirs[module.__name__] = where.resolve()
    return dirs


def _launcher_text(executable: str, path_dir: Path) -> str:
    return ("#!/bin/sh\n"
            "# Written by avro-registry-sink: the driver's pyspark and py4j first on the path (see its driver_python).\n"
            f"PYTHONPATH={shlex.quote(str(path_dir))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
            "export PYTHONPATH\n"
            f"exec {shlex.quote(executable)} \"$@\"\n")


def _write(path: Path, text: str, mode: int) -> None:
    """Write ``text`` to ``path`` unless it holds it already; atomically, so concurrent drivers agree."""
    if path.is_file() and path.read_text() == text and os.access(path, os.X_OK if mode & 0o100 else os.R_OK):
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target, target_is_directory=True)
    os.replace(tmp, link)


def driver_python(root: Path | None = None) -> str:
    """The executable for Spark's driver-side Python source processes (see the module docs); the driver's
    ``sys.executable`` when no launcher can be used. ``root``: the cache directory (default :func:`cache_root`)."""
    executable = sys.executable
    if os.name != "posix" or not executable or not Path("/bin/sh").exists():
        return executable
    dirs = _package_dirs()
    if dirs is None:
        return executable
    digest = hashlib.sha256("\0".join([executable, *map(str, dirs.values())]).encode()).hexdigest()[:16]
    home = (root or cache_root()) / "python" / digest
    launcher = home / _LAUNCHER
    try:
        (home / _PATH_DIR).mkdir(parents=True, exist_ok=True)
        for name, target in dirs.items():
            _link(home / _PATH_DIR / name, target)
        _write(launcher, _launcher_text(executable, home / _PATH_DIR), 0o755)
    except OSError as exc:
        log.debug("no launcher for the source's Python in %s (%s); Spark uses %s as it is", home, exc, executable)
        return executable
    if not os.access(launcher, os.X_OK):  # e.g. a cache on a filesystem mounted noexec
        return executable
    return str(launcher)
