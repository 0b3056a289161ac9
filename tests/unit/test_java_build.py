"""The jar build's shared helpers (``spark/sinks/java_build.py``, used by ``setup.py`` and the driver): the Kafka
client a connector depends on is fetched from a Maven repository over real HTTP and checked against its ``.sha1``;
the manifest written by :func:`compile_jar` reads back."""

from __future__ import annotations

import hashlib
import shutil
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from avro_registry_sink.spark.sinks import java_build

POM = """<project><dependencies>
  <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId>
    <version>9.8.7</version></dependency>
</dependencies></project>"""


@pytest.fixture()
def repository(tmp_path, monkeypatch):
    """A Maven layout served by a real HTTP server, set as the repository the helpers read."""
    root = tmp_path / "maven"
    pom = root / "org/apache/spark/spark-sql-kafka-0-10_2.13/4.3.0/spark-sql-kafka-0-10_2.13-4.3.0.pom"
    pom.parent.mkdir(parents=True)
    pom.write_text(POM)
    jar = root / "org/apache/kafka/kafka-clients/9.8.7/kafka-clients-9.8.7.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK not really a jar, bytes to check")
    jar.with_name(jar.name + ".sha1").write_text(hashlib.sha1(jar.read_bytes()).hexdigest() + "  kafka-clients\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(java_build, "CENTRAL", f"http://127.0.0.1:{server.server_address[1]}")
    yield jar
    server.shutdown()


def test_the_connectors_kafka_client_is_fetched_once_and_checked(repository, tmp_path):
    got = java_build.fetch_kafka_clients("org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0", tmp_path / "build")
    assert got == tmp_path / "build" / "kafka-clients-9.8.7.jar" and got.read_bytes() == repository.read_bytes()
    repository.unlink()  # a second call reads only the pom: the jar is kept
    assert java_build.fetch_kafka_clients("org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0", tmp_path / "build") == got


def test_a_jar_that_does_not_match_its_sha1_is_refused(repository, tmp_path):
    repository.write_bytes(b"tampered")
    with pytest.raises(java_build.JavaBuildError, match=r"kafka-clients-9.8.7.jar does not match its .sha1"):
        java_build.fetch_kafka_clients("org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0", tmp_path / "build")
    assert not (tmp_path / "build" / "kafka-clients-9.8.7.jar").exists()


def test_an_unknown_connector_names_its_pom(repository, tmp_path):
    with pytest.raises(java_build.JavaBuildError, match=r"spark-sql-kafka-0-10_2.13-9.9.9.pom"):
        java_build.fetch_kafka_clients("org.apache.spark:spark-sql-kafka-0-10_2.13:9.9.9", tmp_path / "build")


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK's javac")
def test_a_compiled_jar_carries_its_class_and_manifest(tmp_path):
    source = tmp_path / "Hello.java"
    source.write_text("public final class Hello { public static String hi() { return \"hi\"; } }\n")
    jar = tmp_path / "out" / "hello.jar"
    java_build.compile_jar(shutil.which("javac") or "", source, [], jar,
                           {java_build.DIGEST_ATTRIBUTE: java_build.source_digest(source),
                            java_build.SPARK_ATTRIBUTE: "4.3.0", java_build.CLIENT_ATTRIBUTE: "x" * 90})
    assert java_build.read_manifest(jar) == {"Manifest-Version": "1.0",
                                            java_build.DIGEST_ATTRIBUTE: java_build.source_digest(source),
                                            java_build.SPARK_ATTRIBUTE: "4.3.0", java_build.CLIENT_ATTRIBUTE: "x" * 90}
    assert "Hello.class" in zipfile.ZipFile(jar).namelist()
    (tmp_path / "Broken.java").write_text("class Broken {")
    with pytest.raises(java_build.JavaBuildError, match=r"failed on Broken\.java"):
        java_build.compile_jar(shutil.which("javac") or "", tmp_path / "Broken.java", [], tmp_path / "b.jar")
    assert list(Path(tmp_path / "out").iterdir()) == [jar]  # nothing left behind
