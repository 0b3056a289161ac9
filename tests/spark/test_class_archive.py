"""Spark's class archive (spark/runtime/class_archive.py): a local driver maps Spark's classes from it.

The end-to-end test starts a local session in a subprocess with the JVM's class-load log on and reads where
``SparkContext`` came from: the archive's shared objects ("top": the dynamic archive, which only the option
``local_session`` adds names; the JDK's own default archive holds no Spark class). When the archive is turned off,
``local_session`` adds no option (the second test), so the class comes from Spark's jar.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from avro_registry_sink.spark.runtime import class_archive

pytestmark = [pytest.mark.spark]

_SESSION = ("from avro_registry_sink.spark.runtime.session import local_session\n"
            "spark = local_session(master='local[1]')\n"
            "spark.stop()\n")


def _source_of_spark_context(tmp_path: Path, **env: str) -> str:
    log = tmp_path / f"class-load-{len(list(tmp_path.glob('class-load-*')))}.log"
    run_env = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    run_env.update(SPARK_SUBMIT_OPTS=f"-Xlog:class+load=info:file={log}", PYSPARK_PYTHON=sys.executable,
                   PYSPARK_DRIVER_PYTHON=sys.executable, **env)
    done = subprocess.run([sys.executable, "-c", _SESSION], env=run_env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cds" not in done.stdout + done.stderr, done.stderr[-3000:]  # the JVM says nothing of the archive
    line = next(line for line in log.read_text().splitlines() if " org.apache.spark.SparkContext " in line)
    return line.split(" source: ", 1)[1]


def test_a_local_driver_loads_spark_from_the_archive(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)  # the suite's own archive and JIT options (conftest)
    archive = class_archive.ensure_archive()  # scripts/install.sh and scripts/test.sh dumped it already
    assert archive is not None and archive.stat().st_size > 10 << 20
    assert class_archive.driver_option() == f"-XX:SharedArchiveFile={archive} {class_archive.QUIET}"

    assert _source_of_spark_context(tmp_path) == "shared objects file (top)"


def test_the_archive_is_used_only_when_whole_and_not_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("AVRO_SINK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    path = class_archive.archive_path()
    assert path is not None and path.parent == tmp_path / "jvm"
    path.parent.mkdir()
    path.with_name(f"{path.name}.123.partial").write_bytes(b"\0" * 64)  # a dump still being written: never mapped
    assert class_archive.driver_option() is None
    path.write_bytes(b"\0" * 64)
    assert class_archive.driver_option() == f"-XX:SharedArchiveFile={path} {class_archive.QUIET}"
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, "0")
    assert class_archive.driver_option() is None and class_archive.ensure_archive() is None
    monkeypatch.setenv(class_archive.ARCHIVE_ENV, "1")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:SharedArchiveFile=/elsewhere.jsa")  # the user's own archive wins
    assert class_archive.driver_option() is None


def test_another_spark_conf_dir_has_an_archive_of_its_own(tmp_path, monkeypatch):
    """The conf directory heads the driver's class path, and the JVM maps an archive only on the class path it
    was dumped with (checked by hand: with SPARK_CONF_DIR set, SparkContext came from Spark's jar)."""
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    default = class_archive.archive_path()
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    own = class_archive.archive_path()
    assert default is not None and own is not None and own != default
    assert own.name.rsplit("-", 1)[0] == default.name.rsplit("-", 1)[0]  # same options: pruned together


def test_a_dump_leaves_the_newest_archives_of_its_options_and_no_dead_partial_files(tmp_path, monkeypatch):
    monkeypatch.setenv("AVRO_SINK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    target = class_archive.archive_path()
    other_options = class_archive.archive_path(["-XX:TieredStopAtLevel=1"])
    assert target is not None and other_options is not None
    jvm = target.parent
    jvm.mkdir()
    key = target.name.rsplit("-", 1)[0]
    older = [jvm / f"{key}-{n:016x}.jsa" for n in range(3)]  # earlier installs: other jars, JDK or pyspark
    for age, path in enumerate(older):
        path.write_bytes(b"old")
        path.with_suffix(".lock").touch()
        os.utime(path, (1_000_000 - age, 1_000_000 - age))  # older[0] is the newest of them
    other_options.write_bytes(b"other")
    unkeyed = jvm / "spark-driver-0123456789abcdef.jsa"
    unkeyed.write_bytes(b"unkeyed")
    unkeyed.with_suffix(".lock").touch()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    dead_partial = jvm / f"{other_options.name}.{dead.pid}.partial"
    live_partial = jvm / f"{other_options.name}.{os.getpid()}.partial"
    dead_partial.write_bytes(b"half")
    live_partial.write_bytes(b"half")

    def dump(path: Path, java_options) -> None:  # the real dump runs in test_a_local_driver_loads_spark_...
        path.write_bytes(b"new")

    monkeypatch.setattr(class_archive, "_dump", dump)
    assert class_archive.ensure_archive() == target

    left = sorted(p.name for p in jvm.iterdir())
    assert left == sorted([target.name, target.with_suffix(".lock").name, older[0].name,
                           older[0].with_suffix(".lock").name, other_options.name, live_partial.name]), left
