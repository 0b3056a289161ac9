"""A class-data-sharing archive for the suite's Spark driver JVMs, and the options that use it.

The suite starts a Spark driver JVM well over a hundred times: the session SparkSession, and every CLI
subprocess of the job, fault, kill and deployment tests. On this 2-core machine most of each start is
spent loading and verifying Spark's classes and compiling them with C2, work that is the same every time.
So the suite runs its drivers with (``SPARK_SUBMIT_OPTS``, which spark-submit adds to the driver's java
command and which pyspark's own launch goes through):

* ``-XX:SharedArchiveFile``: a dynamic CDS archive of the classes the demo job loads, dumped once per
  JDK, pyspark and Spark jar set (:func:`ensure_archive`) into the virtual environment;
* ``-XX:TieredStopAtLevel=1``: C1 only: the tests' JVMs are short-lived and process little data, so C2's
  compile threads cost more than they save;
* ``-XX:+UseSerialGC``: small heaps, no parallel GC threads competing for the 2 cores.

None of these changes what a test observes: the same classes, the same bytecode, the same results. A JVM
that finds the archive invalid (another JDK, other jars) ignores it silently and loads classes as usual.
``AVRO_SINK_TEST_PLAIN_JVM=1`` runs the suite with Spark's default JVM options instead; a
``SPARK_SUBMIT_OPTS`` already set is left as it is.

``python -m tests.support.jvm_archive`` dumps the archive ahead of time (``scripts/test.sh`` does so
while ruff and mypy run).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JIT_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
PLAIN_ENV = "AVRO_SINK_TEST_PLAIN_JVM"
DUMP_TIMEOUT = 300.0


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _fingerprint() -> str:
    """What the archive depends on: the JDK build, the pyspark version and the driver's class path jars."""
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    version = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    jars = sorted(p.name for p in (_spark_home() / "jars").glob("*.jar"))
    import pyspark

    text = "\n".join([version, pyspark.__version__, *jars, *JIT_OPTIONS])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def archive_path() -> Path:
    """Where this environment's archive lives (beside the interpreter's packages, so a new venv dumps anew)."""
    return Path(sys.prefix) / "jvm-archive" / f"spark-driver-{_fingerprint()}.jsa"


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


def _dump(target: Path) -> None:
    """Run the demo job once with ``-XX:ArchiveClassesAtExit`` and move the finished archive to ``target``."""
    partial = target.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    env.update(SPARK_SUBMIT_OPTS=" ".join([f"-XX:ArchiveClassesAtExit={partial}", *JIT_OPTIONS]),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    deadline = time.monotonic() + DUMP_TIMEOUT
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as work:
        process = subprocess.Popen(
            [sys.executable, "-c", "from avro_registry_sink.cli import main; main()",
             "demo", "--dir", str(Path(work) / "demo"), "--progress", "none"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            process.wait(timeout=DUMP_TIMEOUT)
        finally:
            _wait_for_group(process.pid, deadline)
    if process.returncode == 0 and partial.exists() and partial.stat().st_size > 0:
        partial.replace(target)
    else:
        partial.unlink(missing_ok=True)


def ensure_archive() -> Path | None:
    """The archive, dumped first if this environment has none (one process dumps; others wait for it)."""
    target = archive_path()
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            _dump(target)
    return target if target.exists() else None


def driver_options() -> str | None:
    """The ``SPARK_SUBMIT_OPTS`` the suite runs with, or None to leave the JVM's defaults."""
    if os.environ.get(PLAIN_ENV) == "1" or os.environ.get("SPARK_SUBMIT_OPTS"):
        return None
    archive = ensure_archive()
    options = [*JIT_OPTIONS]
    if archive is not None:
        options.insert(0, f"-XX:SharedArchiveFile={archive}")
    return " ".join(options)


if __name__ == "__main__":
    print(ensure_archive() or "no archive: the dump failed (the suite runs without one)")
