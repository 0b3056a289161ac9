"""Real servers for the tests: a Kafka broker and an Apicurio registry, started by the repo's scripts.

``scripts/kafka.sh`` and ``scripts/apicurio.sh`` fetch their server from Maven Central on first use
(cached in ``.cache/``), start it on loopback and print its address as the last line of stdout; both
are idempotent, so a server that is already running is reused. Set ``KAFKA_BOOTSTRAP`` (or
``APICURIO_URL``) to use a server you run yourself: then nothing is started or stopped.

A server that these helpers started (it was not running before) is stopped when the Python process
exits, unless ``stop_at_exit=False``.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"
START_TIMEOUT = 900.0  # seconds; the first start downloads the server (tens of MB from Maven Central)

_stop_registered: set[str] = set()


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


def _script(name: str, action: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPTS / name), action],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _start(name: str, stop_at_exit: bool) -> str:
    """Run ``scripts/<name> start`` and return the address it prints; arrange the stop at exit."""
    was_running = _script(name, "status", timeout=30).returncode == 0
    done = _script(name, "start")
    if done.returncode != 0:
        raise RuntimeError(f"scripts/{name} start failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"scripts/{name} start printed no address:\n{done.stderr[-4000:]}")
    if not was_running and stop_at_exit and name not in _stop_registered:
        _stop_registered.add(name)
        atexit.register(_script, name, "stop", 120)
    return lines[-1].strip()


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
    default 18081).
    """
    url = os.environ.get("APICURIO_URL", "").strip()
    if url:
        return url.rstrip("/")
    return _start("apicurio.sh", stop_at_exit)


def stop_apicurio() -> None:
    """Stop the registry that ``scripts/apicurio.sh`` started (a no-op if none runs)."""
    done = _script("apicurio.sh", "stop", timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/apicurio.sh stop failed:\n{done.stderr[-4000:]}")
