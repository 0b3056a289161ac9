"""Fixtures of the job tests: an embedded registry per test, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig


@pytest.fixture()
def registry() -> Iterator[RegistryClient]:
    """A client of a fresh in-memory embedded registry, stopped after the test."""
    with EmbeddedRegistry() as server, RegistryClient(RegistryConfig(urls=(server.url,))) as client:
        yield client
