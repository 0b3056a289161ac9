"""The embedded registry's own Prometheus metrics, served at ``GET /metrics`` beside Confluent's API.

Requests per operation (the handler's name: ``register``, ``lookup``, ``get_schema``, ...), those answered with
HTTP 5xx, and their time; every app has its own :class:`~prometheus_client.CollectorRegistry`. A registry run with
``--users-file`` asks for basic auth on ``/metrics`` too (Prometheus's ``basic_auth`` scrape setting gives it).

>>> metrics = RegistryMetrics()
>>> b"avro_sink_registry_server_requests_total" in metrics.exposition()
True
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["RegistryMetrics"]

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class RegistryMetrics:
    """Counts and times the app's requests by operation (see the module docs)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("avro_sink_registry_server_requests", "Requests to the embedded registry, per "
                                "operation.", ["op"], registry=self.registry)
        self.errors = Counter("avro_sink_registry_server_errors", "Requests the embedded registry answered with "
                              "HTTP 5xx, per operation.", ["op"], registry=self.registry)
        self.seconds = Histogram("avro_sink_registry_server_request_duration_seconds", "Time to answer a request, "
                                 "per operation.", ["op"], buckets=_BUCKETS, registry=self.registry)

    def wrap(self, endpoint: Callable[[Request], Awaitable[Response]],
             op: str) -> Callable[[Request], Awaitable[Response]]:
        """``endpoint`` counted and timed as operation ``op``."""

        @functools.wraps(endpoint)
        async def metered(request: Request) -> Response:
            started = time.perf_counter()
            response = await endpoint(request)
            self.requests.labels(op=op).inc()
            self.seconds.labels(op=op).observe(time.perf_counter() - started)
            if response.status_code >= 500:
                self.errors.labels(op=op).inc()
            return response

        return metered

    def exposition(self) -> bytes:
        """The metrics in Prometheus's text format."""
        return generate_latest(self.registry)

    async def endpoint(self, request: Request) -> Response:
        """``GET /metrics``."""
        return Response(self.exposition(), media_type=CONTENT_TYPE_LATEST)
