"""The exactly-once slice writer in the executors' JVM (``java/TransactionalSliceWriter.java``).

Exactly-once delivery writes each slice of a batch in one Kafka transaction (:mod:`avro_registry_sink.kafka.delivery`
holds the protocol). With Spark's Kafka connector on the session, the slices are written by this Java class with
the Kafka client the connector brings (the producer of ``--producer spark``), which takes about half the CPU a
row of confluent-kafka's producer in a Python worker does and needs no trip of the records through Arrow;
without it (``--producer confluent``), by :func:`~avro_registry_sink.kafka.delivery.slice_writer` in Python. Both
write the same records, tokens and transactional ids.

The class ships as source: it is compiled on the driver with the JDK's ``javac`` against the running Spark's
jars and the connector's Kafka client, once per source, Spark and client (cached under
``jars/`` in the product's cache directory, ``AVRO_SINK_JAR_DIR``), and added to the session with ``ADD JAR``, which
ships it to the executors. A Java runtime without ``javac`` keeps the Python writer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avro_registry_sink.cache_dir import cache_root

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CLASS", "SOURCE", "JvmWriterUnavailable", "jar_dir", "load", "write"]

log = logging.getLogger(__name__)

#: The Java source and the class it defines.
SOURCE = Path(__file__).with_name("java") / "TransactionalSliceWriter.java"
CLASS = "avro_registry_sink.TransactionalSliceWriter"
_KAFKA_CLIENT_CLASS = "org.apache.kafka.clients.producer.KafkaProducer"
_LOCK = threading.Lock()
_LOADED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # SparkContext -> the writer object


class JvmWriterUnavailable(RuntimeError):
    """The JVM slice writer cannot be built or loaded here (the message says why)."""


def jar_dir() -> Path:
    """Where compiled jars are kept."""
    if os.environ.get("AVRO_SINK_JAR_DIR"):
        return Path(os.environ["AVRO_SINK_JAR_DIR"])

    return cache_root() / "jars"


def _javac(spark: SparkSession) -> str:
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


def build(spark: SparkSession) -> Path:
    """The writer's jar for this session's Spark and Kafka client, compiled when not cached."""
    client = _location(spark, _KAFKA_CLIENT_CLASS)
    spark_jars = _spark_jars(spark)
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source + f"\0{spark.version}\0{Path(client).name}".encode()).hexdigest()[:16]
    jar = jar_dir() / f"avro-registry-sink-slice-writer-{digest}.jar"
    if jar.is_file():
        return jar
    javac = _javac(spark)
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp",
                               f"{spark_jars}/*{os.pathsep}{client}", str(SOURCE)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise JvmWriterUnavailable(f"javac failed on {SOURCE.name}: {(done.stderr or done.stdout)[-2000:]}")
        staged = Path(tmp) / jar.name
        _zip(classes, staged)
        os.replace(staged, jar)  # atomic: a concurrent build writes the same bytes
    log.info("Built the JVM slice writer: %s", jar)
    return jar


def _zip(classes: Path, jar: Path) -> None:
    import zipfile

    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
        for path in sorted(classes.rglob("*.class")):
            out.write(path, path.relative_to(classes).as_posix())


def load(spark: SparkSession) -> Any:
    """The writer object in the session's JVM (built and added with ``ADD JAR`` on first use); raises
    :class:`JvmWriterUnavailable` with the reason when it cannot be."""
    key = spark.sparkContext  # (a later context, after this one stops, loads its own)
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        assert jvm is not None
        loader = spark._jsparkSession.sharedState().jarClassLoader()  # type: ignore[attr-defined]
        try:
            cls = jvm.java.lang.Class.forName(CLASS, True, loader)
        except Exception:  # noqa: BLE001 - not added yet
            jar = build(spark)
            spark.sql(f"ADD JAR '{jar.as_posix()}'")
            try:
                cls = jvm.java.lang.Class.forName(CLASS, True, loader)
            except Exception as exc:  # noqa: BLE001
                raise JvmWriterUnavailable(f"{CLASS} did not load from {jar}: {exc}") from None
        writer = cls.getDeclaredConstructor(None).newInstance(None)
        _LOADED[key] = writer
        return writer


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
