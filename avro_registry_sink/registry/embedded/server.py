"""Run the embedded registry with uvicorn: in a daemon thread (tests, notebooks) or in the foreground (CLI).

>>> from avro_registry_sink.registry.embedded import EmbeddedRegistry
>>> with EmbeddedRegistry() as registry:          # binds a free port on 127.0.0.1
...     registry.url.startswith("http://127.0.0.1:")
True

Loopback is the default bind. To expose the registry, give it users (HTTP basic auth), a certificate
(:class:`TlsFiles`, HTTPS, optionally requiring client certificates) and keep the request-size and
schema-depth limits; :func:`exposure_warning` says what is missing when binding elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.registry.embedded.app import create_app
from avro_registry_sink.registry.embedded.guard import DEFAULT_MAX_REQUEST_BYTES, BasicAuthUsers
from avro_registry_sink.registry.embedded.store import RegistryStore

__all__ = ["DEFAULT_PORT", "EmbeddedRegistry", "TlsFiles", "exposure_warning", "serve"]

log = logging.getLogger(__name__)

DEFAULT_PORT = 8081  # Confluent Schema Registry's
_START_TIMEOUT = 15.0


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for HTTPS: the server's certificate chain and key; ``client_ca`` makes client certificates
    signed by that CA required (mutual TLS). ``key_password`` decrypts an encrypted key (never shown)."""

    certfile: str
    keyfile: str
    client_ca: str | None = None
    key_password: str | None = field(default=None, repr=False)

    def check(self) -> None:
        """Load the files once, so a wrong path or key fails here with a clear error (not in the server thread)."""
        for option, path in (("--tls-cert", self.certfile), ("--tls-key", self.keyfile), ("--tls-client-ca", self.client_ca)):
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"Invalid value {path!r} for option '{option}': no such file.", option=option)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.certfile, self.keyfile, password=self.key_password)
            if self.client_ca is not None:
                context.load_verify_locations(self.client_ca)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"Cannot use the TLS files (certificate {self.certfile!r}, key {self.keyfile!r}"
                + (f", client CA {self.client_ca!r}" if self.client_ca else "")
                + f"): {getattr(exc, 'reason', None) or exc}. They must be PEM, the key must match the certificate "
                "(and its password be given when it is encrypted).",
                option="--tls-cert",
            ) from None

    def uvicorn_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "ssl_certfile": self.certfile,
            "ssl_keyfile": self.keyfile,
            "ssl_keyfile_password": self.key_password,
        }
        if self.client_ca is not None:
            options.update(ssl_ca_certs=self.client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
        return options


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, users: BasicAuthUsers | None, tls: TlsFiles | None) -> str | None:
    """What is unsafe about serving on ``host`` with these settings, or None (loopback, or auth over TLS)."""
    if is_loopback(host):
        return None
    if users is None:
        return (
            f"the registry listens on {host} without authentication: anyone who can reach it can register, change "
            "and delete schemas (give --users-file or AVRO_SINK_REGISTRY_USERS, and --tls-cert/--tls-key)"
        )
    if tls is None:
        return (
            f"the registry listens on {host} with basic auth over plain HTTP: passwords cross the network in clear "
            "text (give --tls-cert and --tls-key)"
        )
    return None


def _url(host: str, port: int, scheme: str = "http") -> str:
    try:
        is_v6 = ipaddress.ip_address(host).version == 6
    except ValueError:
        is_v6 = False
    return f"{scheme}://[{host}]:{port}" if is_v6 else f"{scheme}://{host}:{port}"


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


class _Server(uvicorn.Server):
    """uvicorn's server, stopped from another thread without uvicorn's polling delays.

    uvicorn's main loop looks at ``should_exit`` every 0.1 s, and its shutdown sleeps a fixed 0.1 s for open
    connections to close: 0.15-0.35 s at the end of every run that starts the embedded registry. Here the main
    loop also wakes at once when :meth:`exit_now` is called, and a shutdown with no connection or task left skips
    the wait (uvicorn's own shutdown runs whenever there is something to drain).
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self.ready = threading.Event()  # set when startup has ended, started or not

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)  # on_tick keeps its once-a-second work
            should_exit = await self.on_tick(counter)

    def exit_now(self) -> None:
        """Ask the server to stop, and wake its loop (thread-safe)."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(wake.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.server_state.connections or self.server_state.tasks:
            await super().shutdown(sockets)
            return
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for server in self.servers:
            await server.wait_closed()


class EmbeddedRegistry:
    """A Confluent-compatible schema registry served from a daemon thread.

    ``data`` is a SQLite file (kept across restarts) or None for memory. ``port=0`` binds a free port;
    ``start()`` returns once the server accepts connections and gives its URL. ``users`` turns on HTTP basic
    auth, ``tls`` serves HTTPS (the URL is then ``https://``), ``max_request_bytes`` bounds request bodies
    (413 beyond). Store options like ``incompatible_error_code=40901`` or ``max_schema_depth=50`` go to
    :class:`RegistryStore`.
    """

    def __init__(
        self,
        data: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_level: str = "warning",
        users: BasicAuthUsers | None = None,
        tls: TlsFiles | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        **store_options: Any,
    ) -> None:
        self.data = data
        self.host = host
        self.port = port
        self.log_level = log_level
        self.users = users
        self.tls = tls
        self.max_request_bytes = max_request_bytes
        self.store_options = store_options
        self.url: str | None = None
        self.store: RegistryStore | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def start(self) -> str:
        """Serve in a daemon thread; returns the base URL (``http://host:port``)."""
        if self._thread is not None:
            raise RuntimeError(f"the embedded registry is already running at {self.url}")
        if self.tls is not None:
            self.tls.check()
        warning = exposure_warning(self.host, self.users, self.tls)
        if warning:
            log.warning("%s", warning)
        self.store = RegistryStore.open(self.data, **self.store_options)
        try:
            self._socket = _bind(self.host, self.port)
            port = self._socket.getsockname()[1]
            app = create_app(self.store, users=self.users, max_request_bytes=self.max_request_bytes)
            tls_options = self.tls.uvicorn_options() if self.tls is not None else {}
            self._server = _Server(_uvicorn_config(app, self.log_level, **tls_options))
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
                self._server.ready.wait(0.01)
        except BaseException:
            self.stop()
            raise
        self.url = _url(self.host, port, "https" if self.tls is not None else "http")
        return self.url

    def stop(self) -> None:
        """Stop serving and close the store; safe to call twice."""
        if self._server is not None:
            self._server.exit_now()
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
    users: BasicAuthUsers | None = None,
    tls: TlsFiles | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    on_ready: Callable[[str], None] | None = None,
    **store_options: Any,
) -> None:
    """Serve the registry in the foreground until interrupted (``avro-registry-sink registry serve``).

    Options as :class:`EmbeddedRegistry` (``lock_timeout=`` among the store options: seconds to wait for another
    process's lock on the SQLite file); the caller reports :func:`exposure_warning` if it wants to.
    ``on_ready`` is called with the registry's URL once it accepts requests.
    """
    if tls is not None:
        tls.check()
    store = RegistryStore.open(data, **store_options)  # a file it cannot use: RegistryFileError, naming it
    try:
        try:  # bound here, so a taken port or unknown host is a one-line error rather than a server log
            sock = _bind(host, port)
        except OSError as exc:
            raise ConfigError(
                f"Cannot listen on {host}:{port} (options '--host', '--port'): {exc.strerror or exc}.", option="--port"
            ) from None
        app = create_app(store, users=users, max_request_bytes=max_request_bytes)
        tls_options = tls.uvicorn_options() if tls is not None else {}
        scheme = "https" if tls is not None else "http"
        url = _url(host, sock.getsockname()[1], scheme)
        log.info("embedded registry serving on %s", url)
        server = uvicorn.Server(_uvicorn_config(app, log_level, **tls_options))
        if on_ready is not None:
            def announce() -> None:
                while not server.started and not server.should_exit:
                    time.sleep(0.02)
                if server.started:
                    on_ready(url)

            threading.Thread(target=announce, name="embedded-registry-ready", daemon=True).start()
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
    finally:
        store.close()
