"""Which jar the JVM slice writer is loaded from: the one built with the package when its manifest says it was
built from this source and against the session's Spark, else one compiled on the driver, else the reason."""

from __future__ import annotations

import zipfile
from types import SimpleNamespace

import pytest

from avro_registry_sink.spark.sinks import jvm_writer
from avro_registry_sink.spark.sinks.java_build import read_manifest


def _packaged(tmp_path, monkeypatch, *, digest: str | None, spark: str = "4.3.0"):
    source = tmp_path / "TransactionalSliceWriter.java"
    source.write_text("public final class TransactionalSliceWriter {}\n")
    jar = tmp_path / "avro-sink-writer.jar"
    monkeypatch.setattr(jvm_writer, "SOURCE", source)
    monkeypatch.setattr(jvm_writer, "JAR", jar)
    # as setup.py's build_jar writes it (72-byte lines: a long value continues on the next line)
    with zipfile.ZipFile(jar, "w") as out:
        out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n"
                     f"Avro-Sink-Source-Digest: {digest or jvm_writer.source_digest()}\r\n"
                     f"Avro-Sink-Spark-Version: {spark}\r\nAvro-Sink-Kafka-Clients: org.apache.kafka_kafka-cli\r\n"
                     " ents-3.9.2.jar\r\n\r\n")
    return source, jar


def test_the_packaged_jar_serves_the_source_and_spark_it_was_built_from(tmp_path, monkeypatch):
    _, jar = _packaged(tmp_path, monkeypatch, digest=None)
    assert read_manifest(jar)["Avro-Sink-Kafka-Clients"] == "org.apache.kafka_kafka-clients-3.9.2.jar"
    assert jvm_writer.packaged_problem("4.3.0") is None
    assert jvm_writer.packaged_problem("4.3.1") is None  # a patch release: the same API
    assert "compiled against Spark 4.3.0, the session runs Spark 4.2.0" in jvm_writer.packaged_problem("4.2.0")
    assert "Spark 4.3.0, the session runs Spark 5.0.0" in jvm_writer.packaged_problem("5.0.0")


def test_an_edited_source_or_a_missing_jar_is_compiled_on_the_driver(tmp_path, monkeypatch):
    source, jar = _packaged(tmp_path, monkeypatch, digest=None)
    source.write_text(source.read_text() + "// edited since the build\n")
    problem = jvm_writer.packaged_problem("4.3.0")
    assert problem is not None and "was built from another TransactionalSliceWriter.java" in problem
    assert jvm_writer.source_digest() in problem
    spark = SimpleNamespace(version="4.3.0")
    compiled = tmp_path / "compiled.jar"
    monkeypatch.setattr(jvm_writer, "build", lambda session: compiled)
    assert jvm_writer._jar(spark) == (compiled, "compiled")
    jar.unlink()
    assert "the package holds no avro-sink-writer.jar" in jvm_writer.packaged_problem("4.3.0")
    jar.write_bytes(b"not a zip")
    assert "has no readable manifest" in jvm_writer.packaged_problem("4.3.0")


def test_without_the_packaged_jar_or_javac_the_reason_names_both(tmp_path, monkeypatch):
    _packaged(tmp_path, monkeypatch, digest="0123456789abcdef")
    spark = SimpleNamespace(version="4.3.0")
    monkeypatch.setenv("AVRO_SINK_JAVAC", "")  # the only javac looked for: none (never reaches the JVM)
    monkeypatch.setattr(jvm_writer, "_location", lambda session, name: str(tmp_path / "x.jar"))
    monkeypatch.setattr(jvm_writer, "jar_dir", lambda: tmp_path / "jars")
    with pytest.raises(jvm_writer.JvmWriterUnavailable,
                       match=r"no javac: AVRO_SINK_JAVAC='' .* the jar built with the package cannot serve: .*"
                             r"source digest 0123456789abcdef"):
        jvm_writer._jar(spark)


def test_a_matching_packaged_jar_needs_no_javac(tmp_path, monkeypatch):
    _, jar = _packaged(tmp_path, monkeypatch, digest=None)
    monkeypatch.setattr(jvm_writer, "build", lambda session: pytest.fail("compiled although the jar serves"))
    assert jvm_writer._jar(SimpleNamespace(version="4.3.0")) == (jar, "packaged")
