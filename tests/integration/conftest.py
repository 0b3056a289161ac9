"""Integration fixtures: a schema registry over real HTTP.

``registry_url`` is ``AVRO_SINK_TEST_REGISTRY_URL`` when set (a real Confluent registry, or Apicurio's
``.../apis/ccompat/v7``), else the embedded registry (in memory) served from a thread for the session.
Tests register under unique subject names from ``subject``/``new_subject`` and clean up after
themselves (soft + permanent delete, subject config removed), so the suite can run against a shared
registry. Tests must not change global config or mode of ``registry_url``; the embedded-only tests
start their own registries for that.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from avro_registry_sink.registry.embedded import EmbeddedRegistry

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
REGISTRY_URL_ENV = "AVRO_SINK_TEST_REGISTRY_URL"


def record(name: str, *fields: dict[str, Any], namespace: str | None = None) -> str:
    """An Avro record schema as text."""
    schema: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        schema["namespace"] = namespace
    schema["fields"] = list(fields)
    return json.dumps(schema)


class RegistryHttp:
    """Thin helpers over ``httpx.Client`` that speak Confluent paths; every call returns the response."""

    def __init__(self, client: httpx.Client, registry: EmbeddedRegistry | None = None) -> None:
        self.client = client
        self.registry = registry  # set when the test started this registry itself

    def stop(self) -> None:
        """Close the client and stop the registry this test started (e.g. to restart on the same file)."""
        self.client.close()
        if self.registry is not None:
            self.registry.stop()

    @staticmethod
    def s(subject: str) -> str:
        return quote(subject, safe="")

    def register(self, subject: str, schema: str, **params: Any) -> httpx.Response:
        return self.client.post(f"/subjects/{self.s(subject)}/versions", json={"schema": schema}, params=params)

    def register_id(self, subject: str, schema: str) -> int:
        response = self.register(subject, schema)
        assert response.status_code == 200, response.text
        return int(response.json()["id"])

    def lookup(self, subject: str, schema: str, **params: Any) -> httpx.Response:
        return self.client.post(f"/subjects/{self.s(subject)}", json={"schema": schema}, params=params)

    def versions(self, subject: str, **params: Any) -> httpx.Response:
        return self.client.get(f"/subjects/{self.s(subject)}/versions", params=params)

    def version(self, subject: str, version: int | str, **params: Any) -> httpx.Response:
        return self.client.get(f"/subjects/{self.s(subject)}/versions/{version}", params=params)

    def schema_by_id(self, schema_id: int, suffix: str = "", **params: Any) -> httpx.Response:
        return self.client.get(f"/schemas/ids/{schema_id}{suffix}", params=params)

    def subjects(self, **params: Any) -> httpx.Response:
        return self.client.get("/subjects", params=params)

    def delete_subject(self, subject: str, permanent: bool = False) -> httpx.Response:
        params = {"permanent": "true"} if permanent else {}
        return self.client.delete(f"/subjects/{self.s(subject)}", params=params)

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> httpx.Response:
        params = {"permanent": "true"} if permanent else {}
        return self.client.delete(f"/subjects/{self.s(subject)}/versions/{version}", params=params)

    def compatibility(
        self, subject: str, schema: str, version: int | str | None = None, **params: Any
    ) -> httpx.Response:
        path = f"/compatibility/subjects/{self.s(subject)}/versions"
        if version is not None:
            path += f"/{version}"
        return self.client.post(path, json={"schema": schema}, params=params)

    def get_config(self, subject: str | None = None, **params: Any) -> httpx.Response:
        path = "/config" if subject is None else f"/config/{self.s(subject)}"
        return self.client.get(path, params=params)

    def put_config(self, subject: str | None, level: str) -> httpx.Response:
        path = "/config" if subject is None else f"/config/{self.s(subject)}"
        return self.client.put(path, json={"compatibility": level})

    def delete_config(self, subject: str | None = None) -> httpx.Response:
        path = "/config" if subject is None else f"/config/{self.s(subject)}"
        return self.client.delete(path)


def registry_client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30.0, headers={"Content-Type": MEDIA_TYPE, "Accept": MEDIA_TYPE})


def cleanup_subjects(http: RegistryHttp, subjects: list[str]) -> None:
    for name in subjects:
        http.delete_subject(name)
        http.delete_subject(name, permanent=True)
        http.delete_config(name)


@pytest.fixture(scope="session")
def is_embedded() -> bool:
    """True when the suite runs against the embedded registry (not an external one)."""
    return not os.environ.get(REGISTRY_URL_ENV)


@pytest.fixture(scope="session")
def registry_url() -> Iterator[str]:
    external = os.environ.get(REGISTRY_URL_ENV)
    if external:
        yield external.rstrip("/")
        return
    with EmbeddedRegistry() as registry:
        assert registry.url is not None
        yield registry.url


@pytest.fixture
def sr(registry_url: str) -> Iterator[RegistryHttp]:
    with registry_client(registry_url) as client:
        yield RegistryHttp(client)


@pytest.fixture
def new_subject(request: pytest.FixtureRequest, sr: RegistryHttp) -> Iterator[Any]:
    """A factory of unique subject names (``<test>-<tag>-<uuid>-value``), all deleted after the test."""
    created: list[str] = []
    test = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:40]

    def make(tag: str = "s") -> str:
        name = f"it-{test}-{tag}-{uuid.uuid4().hex[:8]}-value"
        created.append(name)
        return name

    yield make
    cleanup_subjects(sr, created)


@pytest.fixture
def subject(new_subject: Any) -> str:
    """One unique subject name for the test."""
    return new_subject()


@pytest.fixture
def compat(sr: RegistryHttp) -> Iterator[Any]:
    """``compat(subject, level)`` sets a subject's compatibility; every touched subject is reset after."""
    touched: list[str] = []

    def set_level(subject: str, level: str) -> None:
        touched.append(subject)
        response = sr.put_config(subject, level)
        assert response.status_code == 200, response.text

    yield set_level
    for name in touched:
        sr.delete_config(name)


@pytest.fixture
def embedded() -> Iterator[Any]:
    """``embedded(data=None, **options) -> RegistryHttp`` on a new, private EmbeddedRegistry.

    For tests that need a fresh registry (ids from 1), global config or mode, or a restart
    (``http.stop()``); everything started is stopped after the test.
    """
    started: list[RegistryHttp] = []

    def start(data: str | None = None, **options: Any) -> RegistryHttp:
        registry = EmbeddedRegistry(data, **options)
        http = RegistryHttp(registry_client(registry.start()), registry)
        started.append(http)
        return http

    yield start
    for http in started:
        http.stop()
