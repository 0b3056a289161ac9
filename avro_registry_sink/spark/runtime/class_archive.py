"""A class-data-sharing archive of Spark's classes, so that a local Spark driver starts faster.

Most of a local session's start is the JVM loading, verifying and linking the same few thousand Spark classes.
A dynamic CDS archive (JDK 13+: ``-XX:ArchiveClassesAtExit`` to dump, ``-XX:SharedArchiveFile`` to use) holds them
ready to map: on this project's 2-core machine a small ``run`` took 15.6 s with it against 20.8 s without (median
of 4 pairs), and at 10^6 rows a CSV tree to files ran 1.30x as fast (``bench/results.md``).

* ``python -m avro_registry_sink.spark.runtime.class_archive`` dumps it (``scripts/install.sh`` does): a demo
  job on a local session, its driver JVM writing the classes it loaded when it exits. The process group is awaited
  and the file renamed into place only when complete: a JVM given a truncated archive crashes (SIGBUS), so a
  partial file is never used.
* :func:`~avro_registry_sink.spark.runtime.session.local_session` adds :func:`driver_option` to the driver's Java
  options when the archive of this JDK, pyspark and jar set exists (its file name is their fingerprint: after an
  upgrade the old archive is simply not found). A JVM that finds it unusable loads classes as usual, silently.

It lives in ``jvm/`` of the product's cache (:func:`~avro_registry_sink.cache_dir.cache_root`), about 170 MB.
Each new install (a fresh venv's jars, a JDK or pyspark upgrade) dumps a new one; after a dump only the
:data:`KEEP` newest archives of the same JVM options stay (two venvs sharing the cache keep theirs), and
``.partial`` files of dumps whose process is gone are removed.
``AVRO_SINK_CLASS_ARCHIVE=0`` turns it off; a ``SPARK_SUBMIT_OPTS`` that names an archive of its own is left alone.
Only local sessions started by this package use it (spark-submit starts its driver before any Python runs).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from avro_registry_sink.cache_dir import cache_root

__all__ = ["ARCHIVE_ENV", "KEEP", "archive_path", "driver_option", "ensure_archive"]

#: ``0`` (or ``false``/``off``): start local drivers without the archive and never dump one.
ARCHIVE_ENV = "AVRO_SINK_CLASS_ARCHIVE"
#: The dump: a demo job's JVM start, run and exit (with the archive written), on a busy machine.
DUMP_TIMEOUT = 300.0
#: The JVM's own messages about the archive (an archive of another class path is ignored, and says so).
QUIET = "-Xlog:cds=off,cds+dynamic=off"
#: How many archives of one set of JVM options a dump leaves (itself included), newest first.
KEEP = 2


def _turned_off() -> bool:
    return os.environ.get(ARCHIVE_ENV, "1").strip().lower() in ("0", "false", "off", "no")


def _enabled() -> bool:
    submit = os.environ.get("SPARK_SUBMIT_OPTS", "")
    return not _turned_off() and "SharedArchiveFile" not in submit and "ArchiveClassesAtExit" not in submit


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home, "bin", "java") if home else (Path(w) if (w := shutil.which("java")) else None)
    return found.resolve() if found is not None and found.exists() else None


def _fingerprint(java_options: Sequence[str]) -> str | None:
    """What the archive depends on: the JDK (its binary), pyspark's version, the driver's class path (Spark's conf
    directory and jars) and the JVM options it is dumped and used with (an archive dumped with another JIT or
    collector maps less)."""
    import pyspark

    java = _java()
    if java is None:
        return None
    home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    # The conf directory heads the driver's class path, and a JVM maps an archive only on the class path it was
    # dumped with: another SPARK_CONF_DIR needs an archive of its own.
    conf_dir = Path(os.environ.get("SPARK_CONF_DIR") or home / "conf").resolve()
    parts = [str(java), str(java.stat().st_size), str(int(java.stat().st_mtime)), pyspark.__version__,
             str(conf_dir), *java_options]
    for jar in sorted((home / "jars").glob("*.jar")):
        stat = jar.stat()
        parts.append(f"{jar.name}:{stat.st_size}:{int(stat.st_mtime)}")  # CDS checks each jar's size and time
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _options_key(java_options: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(java_options).encode()).hexdigest()[:8]


def archive_path(java_options: Sequence[str] = ()) -> Path | None:
    """Where the archive of this JDK, pyspark, jar set and ``java_options`` lives (``None``: no ``java`` to run):
    ``spark-driver-<options>-<fingerprint>.jsa``, the options' own key first so that a dump finds its
    predecessors."""
    fingerprint = _fingerprint(java_options)
    if not fingerprint:
        return None
    return cache_root() / "jvm" / f"spark-driver-{_options_key(java_options)}-{fingerprint}.jsa"


#: Archive and lock names of the version before options had their own key (not usable by this one).
_UNKEYED = re.compile(r"spark-driver-[0-9a-f]{16}\.(jsa|lock)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prune(target: Path) -> None:
    """After ``target`` was dumped: remove the archives of its options beyond the :data:`KEEP` newest (with their
    lock files) and the ``.partial`` files of dumps whose process is gone.

    A running JVM that maps a removed archive keeps its mapping (the file lives on until it exits); a driver
    started later without it loads classes from the jars."""
    prefix = target.name.rsplit("-", 1)[0] + "-"  # spark-driver-<options>-
    archives = sorted((p for p in target.parent.glob(f"{prefix}*.jsa") if p.is_file()),
                      key=lambda p: p.stat().st_mtime, reverse=True)
    stale = [p for p in archives[KEEP:] if p != target]
    stale += [p for p in target.parent.glob("spark-driver-*") if _UNKEYED.fullmatch(p.name)]  # named by an older version
    for partial in target.parent.glob("spark-driver-*.partial"):
        pid = partial.suffixes[-2].lstrip(".") if len(partial.suffixes) >= 2 else ""
        if pid.isdigit() and not _alive(int(pid)):
            stale.append(partial)
    for path in stale:
        path.unlink(missing_ok=True)
        if path.suffix == ".jsa":
            path.with_suffix(".lock").unlink(missing_ok=True)


def driver_option() -> str | None:
    """The Java options that make a local driver use the archive, or ``None`` (none dumped, or turned off)."""
    if not _enabled():
        return None
    path = archive_path()
    if path is None or not path.is_file():
        return None
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def _wait_for_group(pgid: int, deadline: float) -> None:
    """Wait until no process of the group is left: the driver JVM outlives the CLI while it writes the dump."""
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _dump(target: Path, java_options: Sequence[str]) -> None:
    """Run the demo job once with ``-XX:ArchiveClassesAtExit`` (and ``java_options``) and move the finished archive
    to ``target``."""
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    env.update({"SPARK_SUBMIT_OPTS": " ".join([f"-XX:ArchiveClassesAtExit={partial}", QUIET, *java_options]),
                ARCHIVE_ENV: "0",
                "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable),
                "PYSPARK_DRIVER_PYTHON": env.get("PYSPARK_DRIVER_PYTHON", sys.executable)})
    deadline = time.monotonic() + DUMP_TIMEOUT
    with tempfile.TemporaryDirectory(prefix="avro-sink-class-archive-") as work:
        process = subprocess.Popen(
            [sys.executable, "-c", "from avro_registry_sink.cli import main; main()", "demo", "--dir",
             str(Path(work) / "demo"), "--rows", "20", "--progress", "none"],
            env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            process.wait(timeout=DUMP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        finally:
            _wait_for_group(process.pid, deadline)
    if process.returncode == 0 and partial.is_file() and partial.stat().st_size > 0:
        partial.replace(target)  # atomic: a reader sees the whole archive or none
    else:
        partial.unlink(missing_ok=True)


def ensure_archive(java_options: Sequence[str] = ()) -> Path | None:
    """The archive for drivers started with ``java_options`` (none: the JVM's defaults, what
    :func:`driver_option` uses), dumped first if there is none (one process dumps; others wait for it); ``None``
    if turned off, without ``java``, or if the dump failed (drivers then start as usual)."""
    if _turned_off():
        return None
    target = archive_path(java_options)
    if target is None:
        return None
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.is_file():
            _dump(target, java_options)
            if target.is_file():
                _prune(target)
    return target if target.is_file() else None


if __name__ == "__main__":
    made = ensure_archive()
    print(f"Spark's class archive: {made}" if made else
          "No class archive (turned off, no java, or the dump failed): local Spark drivers start without one.")
