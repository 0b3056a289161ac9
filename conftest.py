"""Doctest fixtures for the package's docstrings (tests/ has its own conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _pytest.doctest import DoctestItem


@pytest.fixture(autouse=True)
def _registry_for_client_doctests(request: pytest.FixtureRequest) -> Iterator[None]:
    """``client`` and ``url`` for registry/client.py's examples: a fresh embedded registry per docstring.

    It holds ``orders-value`` v1 ``"string"`` (id 1), ``orders-key`` v1 ``"long"`` (id 2) and
    ``orders-value`` v2 ``"bytes"`` (id 3), as the examples say.
    """
    if not isinstance(request.node, DoctestItem) or not str(request.node.path).endswith("registry/client.py"):
        yield
        return
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from avro_registry_sink.settings.config import RegistryConfig

    namespace = request.getfixturevalue("doctest_namespace")
    with EmbeddedRegistry() as registry:
        config = RegistryConfig(urls=(registry.url,))
        with RegistryClient(config) as seed:
            seed.register("orders-value", '"string"')
            seed.register("orders-key", '"long"')
            seed.register("orders-value", '"bytes"')
        with RegistryClient(config) as client:
            namespace.update(client=client, url=registry.url)
            yield
