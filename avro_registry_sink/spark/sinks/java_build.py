"""How the JVM slice writer's jar is built: one compile and one manifest, for ``setup.py``'s ``build_jar`` step (the jar
in the wheel) and for the driver's fallback (:func:`~avro_registry_sink.spark.sinks.jvm_writer.build`).

Standard library only: ``setup.py`` imports this module before any of the package's dependencies is installed.
The Kafka client jar the writer compiles against is the one Spark's Kafka connector depends on; where no local copy
is found, :func:`fetch_kafka_clients` reads its version from the connector's pom on Maven Central and fetches it,
checked against Central's ``.sha1``.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
import urllib.request
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["CENTRAL", "CLIENT_ATTRIBUTE", "DIGEST_ATTRIBUTE", "SPARK_ATTRIBUTE", "JavaBuildError", "compile_jar",
           "fetch_kafka_clients", "read_manifest", "source_digest"]

CENTRAL = "https://repo1.maven.org/maven2"
#: The manifest attributes of a jar built with the package: the digest of the source, the Spark it was compiled
#: against and the Kafka client jar's name (``jvm_writer.packaged_problem`` reads the first two).
DIGEST_ATTRIBUTE = "Avro-Sink-Source-Digest"
SPARK_ATTRIBUTE = "Avro-Sink-Spark-Version"
CLIENT_ATTRIBUTE = "Avro-Sink-Kafka-Clients"


class JavaBuildError(Exception):
    """The jar cannot be built here (the message says what is missing or what failed)."""


def source_digest(source: Path) -> str:
    """The digest of a Java source that a jar built from it records."""
    return hashlib.sha256(source.read_bytes()).hexdigest()[:16]


def compile_jar(javac: str, source: Path, classpath: Sequence[str], jar: Path,
                attributes: Mapping[str, str] | None = None) -> None:
    """Compile ``source`` (``--release 17``) against ``classpath`` into ``jar``, its manifest holding ``attributes``;
    the jar is replaced atomically (a concurrent build writes the same bytes)."""
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as tmp:
        classes = Path(tmp, "classes")
        classes.mkdir()
        # C1 only, serial GC: a one-file compile is over before C2 pays off (half the time on 2 busy cores)
        done = subprocess.run([javac, "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "--release", "17",
                               "-nowarn", "-d", str(classes), "-cp", os.pathsep.join(classpath), str(source)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise JavaBuildError(f"{javac} failed on {source.name}: {(done.stderr or done.stdout)[-2000:]}")
        staged = Path(tmp, jar.name)
        manifest = "".join(f"{name}: {value}\r\n" for name, value in (attributes or {}).items())
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\r\n{manifest}\r\n")
            for path in sorted(classes.rglob("*.class")):
                out.write(path, path.relative_to(classes).as_posix())
        os.replace(staged, jar)


def read_manifest(jar: Path) -> dict[str, str]:
    """A jar's manifest attributes (continuation lines joined)."""
    with zipfile.ZipFile(jar) as archive:
        text = archive.read("META-INF/MANIFEST.MF").decode()
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(" ") and lines:  # a continuation of the line before (lines are at most 72 bytes)
            lines[-1] += line[1:]
        elif line:
            lines.append(line)
    return dict(line.split(": ", 1) for line in lines if ": " in line)


def _get(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        data: bytes = answer.read()
    return data


def fetch_kafka_clients(connector: str, directory: Path) -> Path:
    """The ``kafka-clients`` jar that Spark's Kafka connector ``connector`` (``group:artifact:version``) depends
    on, fetched from Maven Central into ``directory`` once (checked against its ``.sha1``)."""
    group, artifact, version = connector.split(":")
    pom_url = f"{CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.pom"
    try:
        pom = _get(pom_url, 60).decode()
    except OSError as exc:
        raise JavaBuildError(f"the Kafka connector's pom is not readable from Maven Central ({pom_url}: {exc})") from None
    found = re.search(r"<artifactId>kafka-clients</artifactId>\s*<version>([^<$]+)</version>", pom)
    if found is None:
        raise JavaBuildError(f"no kafka-clients version in {pom_url}")
    client = found.group(1)
    jar = directory / f"kafka-clients-{client}.jar"
    if jar.is_file():
        return jar
    url = f"{CENTRAL}/org/apache/kafka/kafka-clients/{client}/kafka-clients-{client}.jar"
    try:
        data, sha1 = _get(url, 300), _get(url + ".sha1", 60).decode().split()[0]
    except OSError as exc:
        raise JavaBuildError(f"{url} is not readable: {exc}") from None
    if hashlib.sha1(data).hexdigest() != sha1:
        raise JavaBuildError(f"{url} does not match its .sha1")
    directory.mkdir(parents=True, exist_ok=True)
    part = jar.with_suffix(".part")
    part.write_bytes(data)
    part.replace(jar)
    return jar
