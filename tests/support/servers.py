"""Real servers for the tests: a Kafka broker and an Apicurio registry, started by the repo's scripts.

``scripts/kafka.sh`` and ``scripts/apicurio.sh`` fetch their server from Maven Central on first use
(cached in ``.cache/``), start it on loopback and print its address as the last line of stdout; both
are idempotent, so a server that is already running is reused. Set ``KAFKA_BOOTSTRAP`` (or
``APICURIO_URL``) to use a server you run yourself: then nothing is started or stopped.

A server that these helpers started (it was not running before) is stopped when the Python process
exits, unless ``stop_at_exit=False``.

When a server cannot be had on this machine at all (no Java 21+ for Apicurio, no Maven, the download from
Maven Central failed) ``ServerUnavailable`` is raised, so a caller can skip rather than fail; any other
failure to start (port taken, crash or timeout during startup) is a ``RuntimeError``.
``start_apicurio_in_background()`` launches the start early; ``ensure_apicurio()`` then waits for it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
START_TIMEOUT = 900.0  # seconds; the first start downloads the server (tens of MB from Maven Central)

_stop_registered: set[str] = set()

# What scripts/apicurio.sh prints to stderr (via `die`) when the registry cannot be had on this machine.
APICURIO_UNAVAILABLE = (
    "needs Java 21+",  # no suitable JDK
    "is needed to fetch Apicurio",  # no mvn
    "could not fetch Apicurio Registry",  # Maven Central download failed (after retries)
    "missing from the Apicurio distribution",  # the download is not a usable distribution
)


class ServerUnavailable(RuntimeError):
    """The server cannot run here (a missing prerequisite or a failed download), as opposed to a broken start."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the OS picks it; another process may take it later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(host: str, port: int, timeout: float = 60.0) -> None:
    """Block until ``host:port`` accepts a TCP connection; ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{host}:{port} did not accept connections within {timeout}s") from exc
            time.sleep(0.2)


def wait_for_answer(client: Any, process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Block until the server ``process`` (e.g. ``registry serve``) answers ``GET /`` through the httpx
    ``client``; ``RuntimeError`` when the process exits first, ``TimeoutError`` after ``timeout`` seconds."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            client.get("/")
            return
        except httpx.TransportError:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited with status {process.returncode} before answering") from None
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the server did not answer within {timeout}s") from None
            time.sleep(0.2)


def _script(name: str, action: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPTS / name), action],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class _Starting:
    """A ``scripts/<name> start`` running in the background, its output going to temporary files."""

    process: subprocess.Popen[str]
    stdout: IO[str]
    stderr: IO[str]


_starting: dict[str, _Starting] = {}


def _begin(name: str, stop_at_exit: bool, env: dict[str, str] | None = None) -> None:
    """Launch ``scripts/<name> start`` without waiting (unless already launched); arrange the stop at exit.

    The stop is registered now, before the start is done, so an interrupted session stops the server too
    (the scripts serialise start and stop on a lock, so the stop waits for the start to finish).
    """
    if name in _starting:
        return
    was_running = _script(name, "status", timeout=30).returncode == 0
    stdout = tempfile.TemporaryFile("w+")  # noqa: SIM115  closed by _finish or _stop_at_exit
    stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115
    process = subprocess.Popen(
        ["bash", str(SCRIPTS / name), "start"],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        text=True,
        env={**os.environ, **(env or {})},
    )
    _starting[name] = _Starting(process, stdout, stderr)
    if not was_running and stop_at_exit and name not in _stop_registered:
        _stop_registered.add(name)
        atexit.register(_stop_at_exit, name)


def _stop_at_exit(name: str) -> None:
    """Stop the server at exit, after its start if that was never waited for (an interrupted session)."""
    starting = _starting.pop(name, None)
    if starting is not None:
        try:
            starting.process.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            starting.process.kill()
            starting.process.wait()
        starting.stdout.close()
        starting.stderr.close()
    _script(name, "stop", timeout=120)


def stop_started_servers() -> None:
    """Stop, now, every server this process started (the stops :func:`_begin` registered for exit).

    A pytest-xdist worker ends without running exit handlers, so ``tests/conftest.py`` calls this at the end of
    each worker's (and a serial run's) session."""
    for name in sorted(_stop_registered):
        _stop_at_exit(name)
    _stop_registered.clear()
    atexit.unregister(_stop_at_exit)


def _finish(name: str, unavailable: tuple[str, ...] = ()) -> str:
    """Wait for the start that ``_begin`` launched and return the address it printed.

    A failure whose stderr contains one of ``unavailable`` raises ``ServerUnavailable``.
    """
    starting = _starting[name]
    try:
        returncode = starting.process.wait(timeout=START_TIMEOUT)
    except subprocess.TimeoutExpired:
        starting.process.kill()
        starting.process.wait()
        returncode = None
    del _starting[name]  # not on an interrupt: _stop_at_exit then waits for the start before the stop
    outputs = []
    for stream in (starting.stdout, starting.stderr):
        stream.seek(0)
        outputs.append(stream.read())
        stream.close()
    stdout, stderr = outputs
    if returncode is None:
        raise RuntimeError(f"scripts/{name} start did not finish within {START_TIMEOUT}s:\n{stderr[-4000:]}")
    if returncode != 0:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", stderr)  # Maven's colour codes, even with -q
        reasons = [line.split(f"{name}: ")[-1].strip() for line in plain.splitlines()
                   if any(m in line for m in unavailable)]
        if reasons:
            raise ServerUnavailable(f"scripts/{name}: {reasons[-1]}")
        raise RuntimeError(f"scripts/{name} start failed (exit {returncode}):\n{stderr[-4000:]}")
    lines = stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"scripts/{name} start printed no address:\n{stderr[-4000:]}")
    return lines[-1].strip()


def _start(name: str, stop_at_exit: bool, unavailable: tuple[str, ...] = (),
           env: dict[str, str] | None = None) -> str:
    """Run ``scripts/<name> start`` (or wait for the one launched before) and return the address it prints."""
    _begin(name, stop_at_exit, env)
    return _finish(name, unavailable)


def ensure_kafka(stop_at_exit: bool = True) -> str:
    """Bootstrap servers of a running broker: ``KAFKA_BOOTSTRAP`` if set, else ``scripts/kafka.sh start``.

    The broker listens on ``KAFKA_PORT`` (default 19092) and creates topics on first use with 3 partitions.
    """
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP", "").strip()
    if bootstrap:
        return bootstrap
    return _start("kafka.sh", stop_at_exit)


def stop_kafka() -> None:
    """Stop the broker that ``scripts/kafka.sh`` started (a no-op if none runs)."""
    done = _script("kafka.sh", "stop", timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/kafka.sh stop failed:\n{done.stderr[-4000:]}")


def ensure_apicurio(stop_at_exit: bool = True) -> str:
    """Confluent-compatible base URL (``http://127.0.0.1:<port>/apis/ccompat/v7``) of an Apicurio registry.

    ``APICURIO_URL`` if set, else ``scripts/apicurio.sh start`` (in-memory storage, port ``APICURIO_PORT``,
    default 18081). ``ServerUnavailable`` when there is no Java 21+ or Maven, or the download failed.
    """
    url = os.environ.get("APICURIO_URL", "").strip()
    if url:
        return url.rstrip("/")
    return _start("apicurio.sh", stop_at_exit, APICURIO_UNAVAILABLE)


def start_apicurio_in_background(stop_at_exit: bool = True) -> None:
    """Launch ``scripts/apicurio.sh start`` without waiting, so the JVM boots while other work goes on.

    The next ``ensure_apicurio()`` waits for that start and reports its outcome (if the launch itself fails,
    it starts again and reports that). A no-op with ``APICURIO_URL``.
    """
    if os.environ.get("APICURIO_URL", "").strip():
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        _begin("apicurio.sh", stop_at_exit)


def stop_apicurio() -> None:
    """Stop the registry that ``scripts/apicurio.sh`` started (a no-op if none runs)."""
    done = _script("apicurio.sh", "stop", timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/apicurio.sh stop failed:\n{done.stderr[-4000:]}")


@dataclass(frozen=True)
class SecureListeners:
    """The broker's TLS and SASL listeners (``scripts/kafka.sh`` writes them to ``run/listeners.json``)."""

    plaintext: str
    tls: str
    sasl: str
    ca: str
    cert: str
    key: str
    key_encrypted: str
    key_password: str
    sasl_user: str
    sasl_password: str


def ensure_kafka_listeners(stop_at_exit: bool = True) -> SecureListeners:
    """The secure listeners of the broker :func:`ensure_kafka` gives (``KAFKA_LISTENERS_FILE`` names another
    ``listeners.json``, for a broker started with another ``KAFKA_CACHE``)."""
    import json

    ensure_kafka(stop_at_exit)
    path = Path(os.environ.get("KAFKA_LISTENERS_FILE") or REPO / ".cache" / "kafka" / "run" / "listeners.json")
    if not path.is_file():
        raise RuntimeError(f"{path} does not exist: the broker was not started by scripts/kafka.sh (set "
                           "KAFKA_LISTENERS_FILE, or unset KAFKA_BOOTSTRAP so the tests start it)")
    return SecureListeners(**json.loads(path.read_text(encoding="utf-8")))


def ensure_connect(bootstrap: str, stop_at_exit: bool = True) -> str:
    """REST URL (``http://127.0.0.1:<port>``) of a Kafka Connect standalone worker reading from ``bootstrap``.

    ``CONNECT_URL`` if set, else ``scripts/connect.sh start`` (port ``CONNECT_PORT``, default 18083): Apicurio's
    Avro converter and Debezium's JDBC sink are installed as plugins; connectors are added through the REST API.
    """
    url = os.environ.get("CONNECT_URL", "").strip()
    if url:
        return url.rstrip("/")
    return _start("connect.sh", stop_at_exit, env={"KAFKA_BOOTSTRAP": bootstrap})


def start_in_background(name: str, env: dict[str, str] | None = None) -> None:
    """Launch ``scripts/<name> start`` without waiting; the next ``ensure_*`` of that server waits for it."""
    _begin(name, True, env)


def ensure_postgres(stop_at_exit: bool = True) -> str:
    """``postgresql://postgres@127.0.0.1:<port>/postgres`` of a local PostgreSQL: ``POSTGRES_URL`` if set, else
    ``scripts/postgres.sh start`` (Debian's package, installed when missing; port ``POSTGRES_PORT``, default 15432)."""
    url = os.environ.get("POSTGRES_URL", "").strip()
    return url or _start("postgres.sh", stop_at_exit)


def ensure_mariadb(stop_at_exit: bool = True) -> str:
    """``mariadb://sink:sink@127.0.0.1:<port>/downstream`` of a local MariaDB: ``MARIADB_URL`` if set, else
    ``scripts/mariadb.sh start`` (Debian's package, installed when missing; port ``MARIADB_PORT``, default 13306)."""
    url = os.environ.get("MARIADB_URL", "").strip()
    return url or _start("mariadb.sh", stop_at_exit)


@dataclass(frozen=True)
class S3Store:
    """The S3Proxy server of ``scripts/s3proxy.sh``: its endpoint and the test identity it accepts."""

    endpoint: str
    access_key: str
    secret_key: str

    def uri(self, bucket: str, prefix: str = "", **params: str) -> str:
        """TiCDC's storage URI of ``s3://bucket/prefix`` on this store (credentials in the query, as TiCDC takes them)."""
        query = f"endpoint={self.endpoint}&access-key={self.access_key}&secret-access-key={self.secret_key}"
        query += "".join(f"&{k}={v}" for k, v in params.items())
        return f"s3://{bucket}/{prefix}?{query}" if prefix else f"s3://{bucket}?{query}"

    def create_bucket(self, bucket: str) -> None:
        from urllib.parse import urlsplit

        from pyarrow import fs

        split = urlsplit(self.endpoint)
        s3 = fs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key, endpoint_override=split.netloc,
                             scheme=split.scheme, region="us-east-1", allow_bucket_creation=True)
        s3.create_dir(bucket)


def ensure_s3proxy(stop_at_exit: bool = True) -> S3Store:
    """A running S3Proxy (``scripts/s3proxy.sh start``: port ``S3PROXY_PORT``, default 18090, empty store)."""
    endpoint = _start("s3proxy.sh", stop_at_exit)
    return S3Store(endpoint=endpoint, access_key=os.environ.get("S3PROXY_IDENTITY", "avro-sink-test"),
                   secret_key=os.environ.get("S3PROXY_CREDENTIAL", "avro-sink-test-secret"))


@dataclass(frozen=True)
class SparkCluster:
    """The standalone cluster of ``scripts/spark-cluster.sh``: master URL and web UI (``/json`` lists apps)."""

    master: str
    ui: str


def ensure_spark_cluster(stop_at_exit: bool = True) -> SparkCluster:
    """A running standalone Spark cluster (master + 2 workers of 1 core, port ``SPARK_CLUSTER_PORT``)."""
    master, ui = _start("spark-cluster.sh", stop_at_exit).split()
    return SparkCluster(master=master, ui=ui)
