"""Run the embedded registry with uvicorn: in a daemon thread (tests, notebooks) or in the foreground (CLI).

>>> from avro_registry_sink.registry.embedded import EmbeddedRegistry
>>> with EmbeddedRegistry() as registry:          # binds a free port on 127.0.0.1
...     registry.url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from typing import Any

import uvicorn

from avro_registry_sink.registry.embedded.app import create_app
from avro_registry_sink.registry.embedded.store import RegistryStore

__all__ = ["DEFAULT_PORT", "EmbeddedRegistry", "serve"]

DEFAULT_PORT = 8081  # Confluent Schema Registry's
_START_TIMEOUT = 15.0


def _url(host: str, port: int) -> str:
    try:
        is_v6 = ipaddress.ip_address(host).version == 6
    except ValueError:
        is_v6 = False
    return f"http://[{host}]:{port}" if is_v6 else f"http://{host}:{port}"


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP (not 0): asyncio sets TCP_NODELAY on accepted sockets only then, and
    # without it every response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _uvicorn_config(app: Any, log_level: str, **extra: Any) -> uvicorn.Config:
    # No lifespan and no websockets: the app needs neither, and importing a websockets implementation
    # in a test process only brings deprecation warnings.
    return uvicorn.Config(app, log_level=log_level, lifespan="off", ws="none", access_log=False, **extra)


class EmbeddedRegistry:
    """A Confluent-compatible schema registry served from a daemon thread.

    ``data`` is a SQLite file (kept across restarts) or None for memory. ``port=0`` binds a free port;
    ``start()`` returns once the server accepts connections and gives its URL. Options like
    ``incompatible_error_code=40901`` go to :class:`RegistryStore`.
    """

    def __init__(
        self,
        data: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_level: str = "warning",
        **store_options: Any,
    ) -> None:
        self.data = data
        self.host = host
        self.port = port
        self.log_level = log_level
        self.store_options = store_options
        self.url: str | None = None
        self.store: RegistryStore | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def start(self) -> str:
        """Serve in a daemon thread; returns the base URL (``http://host:port``)."""
        if self._thread is not None:
            raise RuntimeError(f"the embedded registry is already running at {self.url}")
        self.store = RegistryStore.open(self.data, **self.store_options)
        try:
            self._socket = _bind(self.host, self.port)
            port = self._socket.getsockname()[1]
            self._server = uvicorn.Server(_uvicorn_config(create_app(self.store), self.log_level))
            self._thread = threading.Thread(
                target=self._server.run,
                kwargs={"sockets": [self._socket]},
                name=f"embedded-registry-{port}",
                daemon=True,
            )
            self._thread.start()
            deadline = time.monotonic() + _START_TIMEOUT
            while not self._server.started:
                if not self._thread.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"the embedded registry did not start on {self.host}:{port}")
                time.sleep(0.01)
        except BaseException:
            self.stop()
            raise
        self.url = _url(self.host, port)
        return self.url

    def stop(self) -> None:
        """Stop serving and close the store; safe to call twice."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=_START_TIMEOUT)
        if self._socket is not None:
            self._socket.close()
        if self.store is not None:
            self.store.close()
        self._server = self._thread = self._socket = None
        self.store = None
        self.url = None

    def __enter__(self) -> EmbeddedRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.data or "memory"
        return f"EmbeddedRegistry({where!r}, url={self.url!r})"


def serve(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    data: str | None = None,
    *,
    log_level: str = "info",
    **store_options: Any,
) -> None:
    """Serve the registry in the foreground until interrupted (``avro-registry-sink registry serve``)."""
    store = RegistryStore.open(data, **store_options)
    try:
        uvicorn.Server(_uvicorn_config(create_app(store), log_level, host=host, port=port)).run()
    finally:
        store.close()
