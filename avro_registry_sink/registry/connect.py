"""Open a registry client for a configuration, starting the embedded registry when no URL is given."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from avro_registry_sink.settings.config import RegistryConfig

if TYPE_CHECKING:  # pragma: no cover
    from avro_registry_sink.registry.client import RegistryClient

# Imported inside functions, for start-up: the HTTP client and the embedded server (starlette, uvicorn) load
# only for the registry the configuration names.


@contextlib.contextmanager
def connect(config: RegistryConfig) -> Iterator[RegistryClient]:
    """Yield a :class:`RegistryClient`; with no URL configured, the embedded registry is started
    in-process (SQLite file ``config.embedded_data``, or in memory) and stopped afterwards.

    >>> # with connect(RegistryConfig()) as client: client.register("t-value", '"string"')
    """
    from avro_registry_sink.registry.client import RegistryClient

    if config.is_embedded:
        from avro_registry_sink.registry.embedded import EmbeddedRegistry

        server = EmbeddedRegistry(data=config.embedded_data)
        url = server.start()
        try:
            with RegistryClient(config.model_copy(update={"urls": (url,)})) as client:
                yield client
        finally:
            server.stop()
    else:
        with RegistryClient(config) as client:
            yield client
