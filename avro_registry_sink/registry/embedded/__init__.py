"""A small Confluent-compatible schema registry, for tests, demos and air-gapped runs.

>>> from avro_registry_sink.registry.embedded import EmbeddedRegistry
>>> with EmbeddedRegistry() as registry:          # in memory; EmbeddedRegistry("reg.db") persists
...     url = registry.url                         # http://127.0.0.1:<free port>

``RegistryStore`` is the state machine (in memory or SQLite), ``create_app`` the Starlette app serving
Confluent's REST API over it, ``EmbeddedRegistry``/``serve`` run that app with uvicorn.
"""

from avro_registry_sink.registry.embedded.app import create_app
from avro_registry_sink.registry.embedded.canonical import canonical_schema
from avro_registry_sink.registry.embedded.guard import DEFAULT_MAX_REQUEST_BYTES, BasicAuthUsers
from avro_registry_sink.registry.embedded.server import EmbeddedRegistry, TlsFiles, exposure_warning, serve
from avro_registry_sink.registry.embedded.store import DEFAULT_MAX_SCHEMA_DEPTH, RegistryStore

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_SCHEMA_DEPTH",
    "BasicAuthUsers",
    "EmbeddedRegistry",
    "RegistryStore",
    "TlsFiles",
    "canonical_schema",
    "create_app",
    "exposure_warning",
    "serve",
]
