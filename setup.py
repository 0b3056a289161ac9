"""The package's compiled parts, built by setuptools with the rest of the package (``pip install``, ``pip wheel``,
``pip install -e``; the metadata is in ``pyproject.toml``).

``formats/native/debezium_scan.c``, the debezium-json payload scanner, becomes the shared library
``avro_registry_sink/formats/_debezium_scan*.so``, which ``formats/native_scan.py`` loads with :mod:`ctypes` (it
is a plain C library, not a Python extension module: no ``PyInit`` and no Python headers). The digest of the
source is compiled in, so that the loader can tell a library built from another version of the source (a
source checkout edited since it was built) and not use it.

``spark/sinks/java/TransactionalSliceWriter.java``, the exactly-once slice writer of the executors' JVM, becomes
``avro_registry_sink/spark/sinks/java/avro-sink-writer.jar`` (the ``build_jar`` step of ``build``), compiled with
``javac --release 17`` against Spark's jars and a Kafka client jar; its manifest records the digest of the source
and the Spark it was compiled against, which ``spark/sinks/jvm_writer.py`` checks before using it. Like the C
library it is optional: without ``javac``, Spark's jars or a Kafka client jar the build says so on stderr and goes
on (the driver then compiles the writer at run time where it has ``javac``, else the Python writer runs).

Where the jar step finds what it needs (each the first found):

* ``javac``: ``AVRO_SINK_JAVAC`` (only that one: empty looks for none), ``$JAVA_HOME/bin/javac``, ``PATH``;
* Spark's jars: ``AVRO_SINK_SPARK_JARS`` (a directory), the ``jars/`` of the build environment's pyspark
  (``pyproject.toml`` lists pyspark among the build requirements, so pip's isolated build has it; without build
  isolation, the venv's), ``$SPARK_HOME/jars``;
* the Kafka client: ``AVRO_SINK_KAFKA_CLIENTS_JAR``, else the newest ``kafka-clients-<version>.jar`` of the first
  of: ``build/`` of the product's cache directory, its Ivy cache (``AVRO_SINK_IVY_DIR``, else ``ivy/jars``),
  ``~/.ivy2*/jars``, ``~/.m2``, the broker's jars that ``scripts/kafka.sh`` fetches (``.cache/kafka/*/libs``);
  else the one Spark's Kafka connector for that Spark depends on is fetched from Maven Central into ``build/`` of
  the cache directory (``java_build.fetch_kafka_clients``; ``AVRO_SINK_OFFLINE=1`` forbids it).

A jar already built from this source against this Spark is kept (an editable install rebuilds nothing).
"""

import hashlib
import os
import re
import shutil
import sys
import zipfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any, ClassVar

from setuptools import Command, Extension, setup
from setuptools.command.build import build

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
# the package's modules below use the standard library only (and its __init__ imports nothing eagerly)
from avro_registry_sink.cache_dir import cache_root  # noqa: E402
from avro_registry_sink.spark.runtime.packages import kafka_package  # noqa: E402
from avro_registry_sink.spark.sinks import java_build  # noqa: E402

SOURCE = "avro_registry_sink/formats/native/debezium_scan.c"
DIGEST = hashlib.sha256((ROOT / SOURCE).read_bytes()).hexdigest()[:16]

# jvm_writer.py reads the jar by this name and these manifest attributes
JAVA_SOURCE = "avro_registry_sink/spark/sinks/java/TransactionalSliceWriter.java"
JAR = "avro_registry_sink/spark/sinks/java/avro-sink-writer.jar"
JarUnavailable = java_build.JavaBuildError


def _version(jar: Path) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", jar.name.rsplit("-", 1)[-1]))


def _javac() -> str:
    if "AVRO_SINK_JAVAC" in os.environ:
        chosen = os.environ["AVRO_SINK_JAVAC"]
        if chosen and os.path.isfile(chosen) and os.access(chosen, os.X_OK):
            return chosen
        raise JarUnavailable(f"AVRO_SINK_JAVAC={chosen!r} is no executable javac")
    if os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"], "bin", "javac")
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("javac")
    if found is None:
        raise JarUnavailable("no javac ($JAVA_HOME/bin, PATH; AVRO_SINK_JAVAC): a JDK is needed")
    return found


def _spark_jars() -> tuple[Path, str]:
    """Spark's jars directory and its Spark version (from ``spark-core_<scala>-<version>.jar``)."""
    places: list[Path] = []
    if os.environ.get("AVRO_SINK_SPARK_JARS"):
        places.append(Path(os.environ["AVRO_SINK_SPARK_JARS"]))
    else:
        spec = find_spec("pyspark")
        if spec is not None and spec.submodule_search_locations:
            places.append(Path(next(iter(spec.submodule_search_locations)), "jars"))
        if os.environ.get("SPARK_HOME"):
            places.append(Path(os.environ["SPARK_HOME"], "jars"))
    for place in places:
        versions = sorted(m.group(1) for j in place.glob("spark-core_*.jar")
                          if (m := re.fullmatch(r"spark-core_[\d.]+-(.+)\.jar", j.name)))
        if versions:
            return place, versions[0]
    looked = ", ".join(map(str, places)) or "no pyspark in the build environment, no SPARK_HOME"
    raise JarUnavailable(f"no Spark jars (spark-core_*.jar) to compile against ({looked}; AVRO_SINK_SPARK_JARS)")


def _kafka_clients(spark_version: str) -> Path:
    if os.environ.get("AVRO_SINK_KAFKA_CLIENTS_JAR"):
        given = Path(os.environ["AVRO_SINK_KAFKA_CLIENTS_JAR"])
        if not given.is_file():
            raise JarUnavailable(f"AVRO_SINK_KAFKA_CLIENTS_JAR={given} is no file")
        return given
    home = Path.home()
    cache = cache_root()
    ivy = Path(os.environ.get("AVRO_SINK_IVY_DIR") or cache / "ivy")
    places = [(cache / "build", "kafka-clients-*.jar"), (ivy / "jars", "*kafka-clients-*.jar"),
              *((d / "jars", "*kafka-clients-*.jar") for d in sorted(home.glob(".ivy2*"))),
              (home / ".m2" / "repository" / "org" / "apache" / "kafka" / "kafka-clients", "*/kafka-clients-*.jar"),
              (ROOT / ".cache" / "kafka", "*/libs/kafka-clients-*.jar")]
    for place, pattern in places:
        found = [j for j in place.glob(pattern) if re.search(r"kafka-clients-[\d.]+\.jar$", j.name)]
        if found:
            return max(found, key=_version)
    looked = ", ".join(str(place) for place, _ in places)
    if os.environ.get("AVRO_SINK_OFFLINE"):
        raise JarUnavailable(f"no kafka-clients jar ({looked}; AVRO_SINK_KAFKA_CLIENTS_JAR), and AVRO_SINK_OFFLINE "
                             "forbids fetching it")
    try:
        return java_build.fetch_kafka_clients(kafka_package(spark_version), cache / "build")
    except JarUnavailable as exc:
        raise JarUnavailable(f"no kafka-clients jar ({looked}; AVRO_SINK_KAFKA_CLIENTS_JAR), and {exc}") from None


def build_writer_jar(jar: Path) -> None:
    """Compile ``JAVA_SOURCE`` into ``jar`` (replaced atomically) unless ``jar`` was built from this source against
    this Spark already; raises :class:`JarUnavailable`."""
    source = ROOT / JAVA_SOURCE
    digest = java_build.source_digest(source)
    spark_jars, spark_version = _spark_jars()
    if jar.is_file():
        try:
            built = java_build.read_manifest(jar)
        except (OSError, KeyError, zipfile.BadZipFile):
            built = {}
        if (built.get(java_build.DIGEST_ATTRIBUTE), built.get(java_build.SPARK_ATTRIBUTE)) == (digest, spark_version):
            print(f"build_jar: {jar} is built from this source against Spark {spark_version} already", file=sys.stderr)
            return
    javac = _javac()
    client = _kafka_clients(spark_version)
    java_build.compile_jar(javac, source, [f"{spark_jars}/*", str(client)], jar, {
        java_build.DIGEST_ATTRIBUTE: digest, java_build.SPARK_ATTRIBUTE: spark_version,
        java_build.CLIENT_ATTRIBUTE: client.name})
    print(f"build_jar: built {jar} from {source.name} (Spark {spark_version} jars in {spark_jars}, {client})",
          file=sys.stderr)


class build_jar(Command):
    """Compile the JVM slice writer into its jar, beside its source in the build (in the source tree with
    ``--inplace`` and for ``pip install -e``); optional: what is missing is said on stderr."""

    description = "compile the exactly-once JVM slice writer into avro-sink-writer.jar (optional)"
    user_options: ClassVar[list[tuple[str, str | None, str]]] = [("inplace", "i", "put the jar in the source tree")]
    boolean_options: ClassVar[list[str]] = ["inplace"]

    def initialize_options(self) -> None:
        self.build_lib: str | None = None
        self.inplace = False
        self.editable_mode = False  # set by setuptools' editable_wheel
        self._outputs: list[str] = []

    def finalize_options(self) -> None:
        self.set_undefined_options("build", ("build_lib", "build_lib"))

    def run(self) -> None:
        base = ROOT if self.inplace or self.editable_mode else Path(self.build_lib or "build")
        try:
            build_writer_jar(base / JAR)
        except JarUnavailable as exc:
            print(f"build_jar: the JVM slice writer's jar is not built ({exc}); the driver compiles it at run time "
                  "where it has javac, else exactly-once slices are written in Python", file=sys.stderr)
            return
        self._outputs = [str(base / JAR)]

    def get_outputs(self) -> list[str]:
        return self._outputs

    def get_output_mapping(self) -> dict[str, str]:
        return {}


class build_with_jar(build):
    sub_commands: ClassVar[list[tuple[str, Any]]] = [*build.sub_commands, ("build_jar", None)]


setup(cmdclass={"build": build_with_jar, "build_jar": build_jar}, ext_modules=[Extension(
    "avro_registry_sink.formats._debezium_scan",
    sources=[SOURCE],
    define_macros=[("DEBEZIUM_SCAN_DIGEST", f'"{DIGEST}"')],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-pthread"],
    extra_link_args=["-pthread"],
    optional=True,
)])
