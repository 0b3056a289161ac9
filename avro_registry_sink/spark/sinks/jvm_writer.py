"""The exactly-once slice writer in the executors' JVM (``java/TransactionalSliceWriter.java``).

Exactly-once delivery writes each slice of a batch in one Kafka transaction (:mod:`avro_registry_sink.kafka.delivery`
holds the protocol). With Spark's Kafka connector on the session, the slices are written by this Java class with
the Kafka client the connector brings (the producer of ``--producer spark``), which takes about half the CPU a
row of confluent-kafka's producer in a Python worker does and needs no trip of the records through Arrow;
without it (``--producer confluent``), by :func:`~avro_registry_sink.kafka.delivery.slice_writer` in Python. Both
write the same records, tokens and transactional ids.

The class is compiled when the package is built (``setup.py``'s ``build_jar``: ``java/avro-sink-writer.jar``, in
the wheel), and that jar is added to the session with ``ADD JAR``, which ships it to the executors, when its
manifest says it was built from this source and against the session's Spark (major.minor). Otherwise (a build
without ``javac``, a source checkout edited since) it is compiled on the driver with the JDK's ``javac`` against
the running Spark's jars and the connector's Kafka client, once per source, Spark and client (cached under
``jars/`` in the product's cache directory, ``AVRO_SINK_JAR_DIR``). Neither: the Python writer, with the reason.
:func:`engine` says which jar a session's writer came from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import weakref
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from avro_registry_sink.cache_dir import cache_root
from avro_registry_sink.spark.sinks.java_build import (
    DIGEST_ATTRIBUTE,
    SPARK_ATTRIBUTE,
    JavaBuildError,
    compile_jar,
    read_manifest,
)
from avro_registry_sink.spark.sinks.java_build import source_digest as java_source_digest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CLASS", "JAR", "SOURCE", "Engine", "JvmWriterUnavailable", "engine", "jar_dir", "load", "packaged_problem",
           "source_digest", "write"]

log = logging.getLogger(__name__)

#: The Java source and the class it defines.
SOURCE = Path(__file__).with_name("java") / "TransactionalSliceWriter.java"
CLASS = "avro_registry_sink.TransactionalSliceWriter"
_KAFKA_CLIENT_CLASS = "org.apache.kafka.clients.producer.KafkaProducer"
#: The jar built with the package (``setup.py``'s ``build_jar``; its manifest says from which source and against
#: which Spark it was compiled: :mod:`.java_build`).
JAR = SOURCE.with_name("avro-sink-writer.jar")

#: Where a session's writer class came from: the jar built with the package, a jar compiled on this driver, or
#: the session's classpath as it was given (``spark.jars``).
Engine = Literal["packaged", "compiled", "classpath"]

_LOCK = threading.Lock()
#: SparkContext -> (the writer object, where its class came from)
_LOADED: weakref.WeakKeyDictionary[Any, tuple[Any, Engine]] = weakref.WeakKeyDictionary()


class JvmWriterUnavailable(RuntimeError):
    """The JVM slice writer cannot be built or loaded here (the message says why)."""


def jar_dir() -> Path:
    """Where compiled jars are kept."""
    if os.environ.get("AVRO_SINK_JAR_DIR"):
        return Path(os.environ["AVRO_SINK_JAR_DIR"])

    return cache_root() / "jars"


def _javac(spark: SparkSession) -> str:
    if "AVRO_SINK_JAVAC" in os.environ:  # the only javac looked at (empty: none)
        chosen = os.environ["AVRO_SINK_JAVAC"]
        if chosen and Path(chosen).is_file() and os.access(chosen, os.X_OK):
            return chosen
        raise JvmWriterUnavailable(f"no javac: AVRO_SINK_JAVAC={chosen!r} is no executable javac, and it is the only "
                                   "one looked for")
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    assert jvm is not None
    home = Path(str(jvm.java.lang.System.getProperty("java.home")))
    for candidate in (home / "bin" / "javac", home.parent / "bin" / "javac"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("javac")
    if found:
        return found
    raise JvmWriterUnavailable(f"no javac beside the session's Java ({home}) or on PATH: a JDK is needed to build "
                               "the JVM slice writer")


def _location(spark: SparkSession, name: str) -> str:
    """The jar (or directory) the session loads class ``name`` from."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    assert jvm is not None
    loader = spark._jsparkSession.sharedState().jarClassLoader()  # type: ignore[attr-defined]  # with ADD JAR's
    try:
        cls = jvm.java.lang.Class.forName(name, False, loader)
    except Exception as exc:  # noqa: BLE001 - py4j's ClassNotFoundException
        raise JvmWriterUnavailable(f"{name} is not on the session's classpath (Spark's Kafka connector)") from exc
    return str(jvm.java.io.File(cls.getProtectionDomain().getCodeSource().getLocation().toURI()).getPath())


def _spark_jars(spark: SparkSession) -> str:
    """The directory of the running Spark's own jars (``Dataset``, ``Row``, Jackson)."""
    return str(Path(_location(spark, "org.apache.spark.sql.Dataset")).parent)


def source_digest() -> str:
    """The digest of the Java source that a jar built from it records (as ``setup.py`` computes it)."""
    return java_source_digest(SOURCE)


def packaged_problem(spark_version: str) -> str | None:
    """Why the jar built with the package (:data:`JAR`) cannot serve a session of Spark ``spark_version``: it is
    missing, unreadable, built from another version of the source, or against another Spark major.minor (None: it
    can)."""
    if not JAR.is_file():
        return (f"the package holds no {JAR.name} (its build had no javac, Spark jars or Kafka client jar: "
                "setup.py's build_jar said which)")
    try:
        manifest = read_manifest(JAR)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        return f"{JAR} has no readable manifest ({exc})"
    built_from, source = manifest.get(DIGEST_ATTRIBUTE), source_digest()
    if built_from != source:
        return (f"{JAR} was built from another {SOURCE.name} (source digest {built_from}, this one's is {source}): "
                "the source was edited since")
    built_for = manifest.get(SPARK_ATTRIBUTE, "")
    if built_for.split(".")[:2] != spark_version.split(".")[:2]:
        return f"{JAR} was compiled against Spark {built_for or '(not recorded)'}, the session runs Spark {spark_version}"
    return None


def _jar(spark: SparkSession) -> tuple[Path, Engine]:
    """The writer's jar for this session: the packaged one when it serves, else one compiled here."""
    problem = packaged_problem(spark.version)
    if problem is None:
        return JAR, "packaged"
    log.info("Compiling the JVM slice writer on the driver: %s", problem)
    try:
        return build(spark), "compiled"
    except JvmWriterUnavailable as exc:
        raise JvmWriterUnavailable(f"{exc} (and the jar built with the package cannot serve: {problem})") from None


def build(spark: SparkSession) -> Path:
    """The writer's jar for this session's Spark and Kafka client, compiled when not cached."""
    client = _location(spark, _KAFKA_CLIENT_CLASS)
    spark_jars = _spark_jars(spark)
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source + f"\0{spark.version}\0{Path(client).name}".encode()).hexdigest()[:16]
    jar = jar_dir() / f"avro-registry-sink-slice-writer-{digest}.jar"
    if jar.is_file():
        return jar
    try:
        compile_jar(_javac(spark), SOURCE, [f"{spark_jars}/*", client], jar)
    except JavaBuildError as exc:
        raise JvmWriterUnavailable(str(exc)) from None
    log.info("Built the JVM slice writer: %s", jar)
    return jar


def load(spark: SparkSession) -> Any:
    """The writer object in the session's JVM (its jar added with ``ADD JAR`` on first use: the packaged one, else
    one compiled here; :func:`engine` says which); raises :class:`JvmWriterUnavailable` with the reason when it
    cannot be."""
    key = spark.sparkContext  # (a later context, after this one stops, loads its own)
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key][0]
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        assert jvm is not None
        loader = spark._jsparkSession.sharedState().jarClassLoader()  # type: ignore[attr-defined]
        source: Engine = "classpath"
        try:
            cls = jvm.java.lang.Class.forName(CLASS, True, loader)
        except Exception:  # noqa: BLE001 - not added yet
            jar, source = _jar(spark)
            spark.sql(f"ADD JAR '{jar.as_posix()}'")
            try:
                cls = jvm.java.lang.Class.forName(CLASS, True, loader)
            except Exception as exc:  # noqa: BLE001
                raise JvmWriterUnavailable(f"{CLASS} did not load from {jar}: {exc}") from None
        writer = cls.getDeclaredConstructor(None).newInstance(None)
        _LOADED[key] = (writer, source)
        log.info("The JVM slice writer runs from %s", {"packaged": f"the jar built with the package ({JAR})",
                                                       "compiled": "the jar compiled on this driver",
                                                       "classpath": "the session's classpath"}[source])
        return writer


def engine(spark: SparkSession) -> Engine | None:
    """Where the session's writer class came from (see :data:`Engine`); None before :func:`load` gave it one."""
    loaded = _LOADED.get(spark.sparkContext)
    return None if loaded is None else loaded[1]


def write(records: DataFrame, spec: Mapping[str, Any]) -> DataFrame:
    """Run the JVM slice writers over ``records`` (``topic, partition, key, value, headers, commit_ts,
    order_file`` and an optional ``error``, in this order): their result rows, as
    :func:`~avro_registry_sink.kafka.delivery.slice_writer` yields them. ``spec`` as for that function, with the Java
    client's settings in ``java_producer`` and ``java_consumer``."""
    from pyspark.sql import DataFrame as PyDataFrame

    spark = records.sparkSession
    writer = load(spark)
    plain = {k: v for k, v in spec.items() if k not in ("producer", "consumer")}
    jdf = writer.write(records._jdf, json.dumps(plain))
    return PyDataFrame(jdf, spark)
