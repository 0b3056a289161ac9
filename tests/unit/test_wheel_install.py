"""The wheel built from the repository's files carries the compiled scanner and the JVM slice writer's jar:
installed in a fresh venv on a machine without a C compiler, debezium-json payloads are read by the built library
(``native_scan.engine()``), and without ``javac`` a Spark session loads the writer from the packaged jar
(``jvm_writer.engine()``).

The wheel is built as a user builds it from a clean clone (the files git tracks, copied out; ``pip wheel`` with pip's
build isolation: its build requirements, pyspark among them, from the index or pip's cache), installed without its dependencies into a fresh
venv that sees this venv's third-party packages (and not this checkout's editable install) through a ``.pth``
file, and run with ``PATH`` holding no compiler and ``CC`` unset; for the jar, ``PATH`` holds ``java`` and the
shell tools Spark's launch scripts use but no ``javac``, and ``AVRO_SINK_JAVAC`` is empty (the driver then
looks for no ``javac``, not even beside its ``java.home``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from avro_registry_sink.spark.runtime.packages import ivy_dir
from avro_registry_sink.spark.sinks import jvm_writer
from tests.support.jvm_archive import JIT_OPTIONS, archive_path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = textwrap.dedent("""
    import json, shutil
    import pyarrow as pa
    import avro_registry_sink
    from avro_registry_sink.formats import native_scan
    from avro_registry_sink.formats.changelog_arrow import TableVersions, debezium_rows
    from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

    table = TableDef(schema_name="d", table="t", primary_key=("id",), columns=(
        ColumnDef(name="id", type=MySQLType.BIGINT, nullable=False), ColumnDef(name="name", type=MySQLType.VARCHAR)))
    texts = ['{"before":null,"after":{"id":%d,"name":"n\\\\u00e9%d"},"op":"c","ts_ms":1,'
             '"source":{"db":"d","table":"t","commit_ts":%d,"name":"x","pos":0}}' % (i, i, 1000 + i) for i in range(5)]
    messages = pa.array(texts, pa.string())
    scanned = native_scan.scan_debezium(messages, [("id", "int64"), ("name", "string")])
    found = debezium_rows(messages, TableVersions(history={("d", "t"): [(table.version, table)]},
                                                  planned=frozenset({("d", "t", table.version)})))
    print(json.dumps({
        "engine": native_scan.engine(), "package": avro_registry_sink.__file__, "cc": shutil.which("cc"),
        "declined": None if scanned is None else scanned[1].tolist(),
        "ids": [x for rows in found.tables for x in rows.columns.column("id").to_pylist()],
        "names": [x for rows in found.tables for x in rows.columns.column("name").to_pylist()],
        "slow": found.slow.tolist()}))
""")

_SPARK_PROBE = textwrap.dedent("""
    import json, os, shutil
    import pyspark
    # find-spark-home would look for python3 on PATH; the real path: the suite's class-data archive's class path
    os.environ["SPARK_HOME"] = os.path.dirname(os.path.realpath(pyspark.__file__))
    from avro_registry_sink.spark.driver.job import ensure_spark_kafka
    from avro_registry_sink.spark.runtime.session import local_session
    from avro_registry_sink.spark.sinks import jvm_writer
    from avro_registry_sink.spark.sinks.sinks import KafkaSink

    spark = local_session(master="local[1]")
    connector = ensure_spark_kafka(spark)  # as run_job does (from the Ivy cache: AVRO_SINK_IVY_DIR)
    sink = KafkaSink(["127.0.0.1:1"], spark=spark, delivery="exactly-once")  # nothing connects there
    cls = jvm_writer.load(spark).getClass()
    print(json.dumps({
        "connector": connector, "producer": sink.producer, "in_python": sink.transactions.in_python,
        "engine": jvm_writer.engine(spark), "class": cls.getName(), "jar": str(jvm_writer.JAR),
        "from": str(cls.getProtectionDomain().getCodeSource().getLocation().getPath()),
        "javac": shutil.which("javac"), "columns": list(cls.getField("RESULT").get(None).fieldNames())}))
    spark.stop()
""")


def _tracked_copy(dest: Path) -> None:
    """The files a clean clone has (tracked, as they are in the work tree)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        if not name or not (ROOT / name).is_file():
            continue  # a file deleted in the work tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)


def _dependencies_only(dest: Path) -> Path:
    """A directory of links to this venv's installed packages, less this package (and its editable finder)."""
    site = Path(sysconfig.get_paths()["purelib"])
    dest.mkdir()
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("avro_registry_sink", "__editable__", "_virtualenv")) or name.endswith(".pth"):
            continue
        (dest / entry.name).symlink_to(entry)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> SimpleNamespace:
    """The wheel built from the tracked files, installed in a fresh venv: ``tmp``, ``wheel``, ``python``, ``site``."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("the wheel is built from the files git tracks: run from a git checkout with git installed")
    tmp_path = tmp_path_factory.mktemp("wheel")
    clone = tmp_path / "clone"
    _tracked_copy(clone)
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v",
                            "-w", str(dist), str(clone)], capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel, = dist.glob("avro_registry_sink-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    fresh_site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                     capture_output=True, text=True, check=True).stdout.strip())
    (fresh_site / "dependencies.pth").write_text(f"{_dependencies_only(tmp_path / 'deps')}\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                                "--no-index", "-q", str(wheel)], capture_output=True, text=True, timeout=300,
                               check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    jar_step = [line.strip() for line in (built.stdout + built.stderr).splitlines() if "build_jar:" in line]
    return SimpleNamespace(tmp=tmp_path, wheel=wheel, python=python, site=fresh_site, jar_step=jar_step)


def test_the_wheel_runs_the_built_scanner_without_a_compiler(installed):
    tmp_path, wheel, python, fresh_site = installed.tmp, installed.wheel, installed.python, installed.site
    assert "-py3-none-any" not in wheel.name  # a platform wheel: it holds compiled code
    libraries = [n for n in zipfile.ZipFile(wheel).namelist()
                 if n.startswith("avro_registry_sink/formats/_debezium_scan") and n.endswith(".so")]
    assert len(libraries) == 1, zipfile.ZipFile(wheel).namelist()

    no_compiler = tmp_path / "bin"  # PATH: an empty directory (python is run by its full path)
    no_compiler.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "PYTHONPATH", "PYTHONHOME", "AVRO_SINK_NATIVE")}
    env.update(PATH=str(no_compiler), AVRO_SINK_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path))
    ran = subprocess.run([str(python), "-c", _PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    got = json.loads(ran.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(fresh_site)), got  # the wheel's package, not this checkout's
    assert got["cc"] is None
    assert got["engine"] == "built", (got, ran.stderr[-2000:])
    assert got["declined"] == [False] * 5
    assert got["ids"] == [0, 1, 2, 3, 4] and got["names"] == [f"né{i}" for i in range(5)] and got["slow"] == []
    assert not (tmp_path / "cache" / "lib").exists()  # nothing compiled at run time


@pytest.mark.spark  # a local session of its own, in the fresh venv
def test_the_wheel_runs_the_packaged_jvm_writer_without_javac(installed):
    tmp_path, python, fresh_site = installed.tmp, installed.python, installed.site
    name = jvm_writer.JAR.relative_to(ROOT).as_posix()
    with zipfile.ZipFile(installed.wheel) as wheel:
        assert name in wheel.namelist(), ("the wheel holds no jar", installed.jar_step)
        with zipfile.ZipFile(wheel.open(name)) as jar:
            manifest = jar.read("META-INF/MANIFEST.MF").decode()
            assert "avro_registry_sink/TransactionalSliceWriter.class" in jar.namelist()
    assert f"Avro-Sink-Source-Digest: {jvm_writer.source_digest()}" in manifest.splitlines()

    tools = tmp_path / "java-bin"  # java and what Spark's launch scripts run (bash, dirname, head, ps): no javac
    tools.mkdir()
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    assert java, "no java"
    for tool, found in [("java", java), *((t, shutil.which(t)) for t in ("bash", "dirname", "head", "ps"))]:
        if found:
            (tools / tool).symlink_to(os.path.realpath(found))
    assert shutil.which("javac", path=str(tools)) is None
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "JAVA_HOME", "SPARK_HOME", "PYSPARK_PYTHON",
                        "PYSPARK_DRIVER_PYTHON", "AVRO_SINK_JAR_DIR")}
    env.update(PATH=str(tools), AVRO_SINK_JAVAC="", AVRO_SINK_CACHE_DIR=str(tmp_path / "jar-cache"),
               AVRO_SINK_IVY_DIR=ivy_dir(), HOME=str(tmp_path), SPARK_SUBMIT_OPTS=" ".join(JIT_OPTIONS))
    suite_archive = archive_path()
    if suite_archive is not None and suite_archive.exists():  # dumped ahead by scripts/test.sh: a faster start
        env["SPARK_SUBMIT_OPTS"] += f" -XX:SharedArchiveFile={suite_archive}"
    ran = subprocess.run([str(python), "-c", _SPARK_PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    got = json.loads(ran.stdout.strip().splitlines()[-1])
    assert got["jar"].startswith(str(fresh_site)), got  # the wheel's package, not this checkout's
    assert got["javac"] is None
    assert got["connector"], ("Spark's Kafka connector did not load", ran.stderr[-2000:])
    assert got["producer"] == "spark" and not got["in_python"], (got, ran.stderr[-2000:])  # the JVM writer
    assert got["engine"] == "packaged", (got, ran.stderr[-2000:])
    assert got["class"] == jvm_writer.CLASS and got["from"] == got["jar"], got
    assert got["columns"] == ["writer", "status", "token"]
    assert not (tmp_path / "jar-cache" / "jars").exists()  # nothing compiled at run time
