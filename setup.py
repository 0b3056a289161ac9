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
  (so ``pip install --no-build-isolation``, or ``pip wheel --no-build-isolation`` in a venv that has pyspark),
  ``$SPARK_HOME/jars``;
* the Kafka client: ``AVRO_SINK_KAFKA_CLIENTS_JAR``, else the newest ``kafka-clients-<version>.jar`` of the first
  of: ``build/`` of the product's cache directory (where ``scripts/install.sh`` puts the one Spark's Kafka
  connector uses), its Ivy cache (``AVRO_SINK_IVY_DIR``, else ``ivy/jars``), ``~/.ivy2*/jars``, ``~/.m2``, the
  broker's jars that ``scripts/kafka.sh`` fetches (``.cache/kafka/*/libs``).
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any, ClassVar

from setuptools import Command, Extension, setup
from setuptools.command.build import build

ROOT = Path(__file__).resolve().parent
SOURCE = "avro_registry_sink/formats/native/debezium_scan.c"
DIGEST = hashlib.sha256((ROOT / SOURCE).read_bytes()).hexdigest()[:16]

# jvm_writer.py reads the jar by this name and these manifest attributes
JAVA_SOURCE = "avro_registry_sink/spark/sinks/java/TransactionalSliceWriter.java"
JAR = "avro_registry_sink/spark/sinks/java/avro-sink-writer.jar"
DIGEST_ATTRIBUTE = "Avro-Sink-Source-Digest"
SPARK_ATTRIBUTE = "Avro-Sink-Spark-Version"
CLIENT_ATTRIBUTE = "Avro-Sink-Kafka-Clients"


class JarUnavailable(Exception):
    """What the jar step lacks (the message says what and where it looked)."""


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


def _kafka_clients() -> Path:
    if os.environ.get("AVRO_SINK_KAFKA_CLIENTS_JAR"):
        given = Path(os.environ["AVRO_SINK_KAFKA_CLIENTS_JAR"])
        if not given.is_file():
            raise JarUnavailable(f"AVRO_SINK_KAFKA_CLIENTS_JAR={given} is no file")
        return given
    home = Path.home()
    cache = Path(os.environ.get("AVRO_SINK_CACHE_DIR")
                 or Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache", "avro-registry-sink"))
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
    raise JarUnavailable(f"no kafka-clients jar ({looked}; AVRO_SINK_KAFKA_CLIENTS_JAR)")


def build_writer_jar(jar: Path) -> None:
    """Compile ``JAVA_SOURCE`` into ``jar`` (replaced atomically); raises :class:`JarUnavailable`."""
    javac = _javac()
    spark_jars, spark_version = _spark_jars()
    client = _kafka_clients()
    source = ROOT / JAVA_SOURCE
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        classes = Path(tmp, "classes")
        # C1 only, serial GC: a one-file compile is over before C2 pays off (half the time on 2 busy cores)
        done = subprocess.run([javac, "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "--release", "17",
                               "-nowarn", "-d", str(classes), "-cp",
                               f"{spark_jars}/*{os.pathsep}{client}", str(source)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise JarUnavailable(f"{javac} failed on {source.name}: {(done.stderr or done.stdout)[-2000:]}")
        staged = Path(tmp, jar.name)
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n"
                         f"{DIGEST_ATTRIBUTE}: {digest}\r\n{SPARK_ATTRIBUTE}: {spark_version}\r\n"
                         f"{CLIENT_ATTRIBUTE}: {client.name}\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                out.write(path, path.relative_to(classes).as_posix())
        shutil.move(staged, jar.with_suffix(".tmp"))
        os.replace(jar.with_suffix(".tmp"), jar)
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
