"""The launcher of the storage source's planning process: the driver's own pyspark and py4j first on its path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import py4j
import pyspark
import pytest

from avro_registry_sink.cache_dir import cache_root
from avro_registry_sink.spark.runtime.driver_python import driver_python
from avro_registry_sink.spark.runtime.packages import ivy_dir
from avro_registry_sink.spark.sinks.jvm_writer import jar_dir

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the launcher is a sh script")

WHERE = "import pyspark, py4j, os; print(os.path.realpath(pyspark.__file__)); print(os.path.realpath(py4j.__file__))"


def _decoy(root: Path) -> Path:
    """A directory with packages named pyspark and py4j that are not the driver's (as Spark's zip is not)."""
    for name in ("pyspark", "py4j"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("DECOY = True\n")
    return root


def _imports(executable: str, pythonpath: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([executable, "-c", WHERE], env=env, check=True, capture_output=True,
                          text=True).stdout.split()


def test_the_launcher_imports_the_drivers_pyspark_ahead_of_what_spark_puts_first(tmp_path):
    decoy = _decoy(tmp_path / "decoy")
    launcher = driver_python(tmp_path / "cache")
    assert launcher != sys.executable and Path(launcher).is_relative_to(tmp_path / "cache")
    driver = [os.path.realpath(pyspark.__file__), os.path.realpath(py4j.__file__)]
    assert _imports(launcher, decoy) == driver
    # without it, the first entry of PYTHONPATH wins (Spark puts its zip there): the test can fail
    assert _imports(sys.executable, decoy) == [str(decoy / "pyspark" / "__init__.py"), str(decoy / "py4j" / "__init__.py")]


def test_the_launcher_moves_nothing_else_ahead_of_pythonpath(tmp_path):
    """Only the two packages are linked: a checkout on PYTHONPATH still wins over an installed copy of anything."""
    launcher = driver_python(tmp_path / "cache")
    path_dir = Path(launcher).parent / "path"
    assert sorted(p.name for p in path_dir.iterdir()) == ["py4j", "pyspark"]
    (tmp_path / "mine" / "pyarrow").mkdir(parents=True)  # a package installed beside pyspark, shadowed on purpose
    (tmp_path / "mine" / "pyarrow" / "__init__.py").write_text("MINE = True\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "mine")}
    out = subprocess.run([launcher, "-c", "import pyarrow; print(getattr(pyarrow, 'MINE', False))"], env=env,
                         check=True, capture_output=True, text=True).stdout.strip()
    assert out == "True"


def test_written_once_and_reused(tmp_path):
    first = driver_python(tmp_path / "cache")
    before = os.stat(first)
    assert driver_python(tmp_path / "cache") == first
    after = os.stat(first)
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_a_damaged_launcher_is_written_again(tmp_path):
    launcher = Path(driver_python(tmp_path / "cache"))
    launcher.write_text("#!/bin/sh\nexit 3\n")
    assert driver_python(tmp_path / "cache") == str(launcher)
    assert "exec" in launcher.read_text() and os.access(launcher, os.X_OK)


def test_a_cache_that_cannot_be_written_leaves_the_drivers_python(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert driver_python(blocked) == sys.executable


def test_the_cache_root_follows_the_settings(monkeypatch, tmp_path):
    monkeypatch.delenv("AVRO_SINK_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "avro-registry-sink"
    monkeypatch.delenv("AVRO_SINK_IVY_DIR", raising=False)
    monkeypatch.delenv("AVRO_SINK_JAR_DIR", raising=False)
    monkeypatch.setenv("AVRO_SINK_CACHE_DIR", str(tmp_path / "own"))
    assert cache_root() == tmp_path / "own"
    assert (ivy_dir(), jar_dir()) == (str(tmp_path / "own" / "ivy"), tmp_path / "own" / "jars")
    monkeypatch.setenv("AVRO_SINK_IVY_DIR", str(tmp_path / "ivy"))  # a directory of its own still wins
    assert ivy_dir() == str(tmp_path / "ivy")
