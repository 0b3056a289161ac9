"""avro-registry-sink: MySQL/TiDB change events -> Confluent-framed flat Avro, as TiCDC's avro protocol.

The data flows one way: table definition (:mod:`.table`, :mod:`.tabledef`) -> type mapping
(:mod:`.typemap`) -> schemas (:mod:`.schema`) -> registry (:mod:`.registry`) -> schema manager
(:mod:`.manager`) -> encoder (:mod:`.encoding.columnar`, its plan and frame in :mod:`.encoding.plan`) -> Spark stage
(:mod:`.spark.stages.stage`) -> job and CLI (:mod:`.spark.driver.job`, :mod:`.cli`).

The names below are imported on first use (PEP 562): importing one module of the package (as Spark's Python
workers do, for a data source or an encode stage) costs only what that module needs, not the whole API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from avro_registry_sink.lazy_names import lazy_exports

if TYPE_CHECKING:  # pragma: no cover
    from avro_registry_sink.changes import ChangeEvent
    from avro_registry_sink.encoding.columnar import ColumnarEncoder
    from avro_registry_sink.encoding.plan import EncodingPlan, frame, unframe
    from avro_registry_sink.errors import (
        AvroSinkError,
        CheckpointError,
        ConfigError,
        EncodingError,
        IncompatibleSchema,
        NoHandleKey,
        RegistryError,
        RegistryFileError,
        RegistryUnavailable,
        RoutingError,
        SourceError,
        StateError,
        TableDefinitionError,
        UnsupportedColumnType,
    )
    from avro_registry_sink.manager import SchemaEvolutionError, SchemaManager, TablePlan
    from avro_registry_sink.model import Op
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from avro_registry_sink.routing.rules import Route, TopicRouter, subject_for
    from avro_registry_sink.schema.builder import TableSchemas, derive_key_schema, derive_schemas, derive_value_schema
    from avro_registry_sink.settings.config import (
        BigintUnsignedMode,
        DecimalMode,
        DispatchRule,
        EncodingOptions,
        PartitionStrategy,
        RegistryConfig,
        SinkConfig,
        SubjectNaming,
        load_config,
        parse_sink_uri,
    )
    from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
    from avro_registry_sink.tabledef import parse_ddl

#: Each public name's module (the same names as the ``TYPE_CHECKING`` imports above and ``__all__`` below).
_MODULES = {
    "avro_registry_sink.changes": ("ChangeEvent",),
    "avro_registry_sink.encoding.columnar": ("ColumnarEncoder",),
    "avro_registry_sink.settings.config": (
        "BigintUnsignedMode", "DecimalMode", "DispatchRule", "EncodingOptions", "PartitionStrategy",
        "RegistryConfig", "SinkConfig", "SubjectNaming", "load_config", "parse_sink_uri",
    ),
    "avro_registry_sink.encoding.plan": ("EncodingPlan", "frame", "unframe"),
    "avro_registry_sink.errors": (
        "AvroSinkError", "CheckpointError", "ConfigError", "EncodingError", "IncompatibleSchema", "NoHandleKey",
        "RegistryError", "RegistryFileError", "RegistryUnavailable", "RoutingError", "SourceError", "StateError",
        "TableDefinitionError", "UnsupportedColumnType",
    ),
    "avro_registry_sink.manager": ("SchemaEvolutionError", "SchemaManager", "TablePlan"),
    "avro_registry_sink.model": ("Op",),
    "avro_registry_sink.registry.client": ("RegistryClient",),
    "avro_registry_sink.registry.embedded": ("EmbeddedRegistry",),
    "avro_registry_sink.routing.rules": ("Route", "TopicRouter", "subject_for"),
    "avro_registry_sink.schema.builder": ("TableSchemas", "derive_key_schema", "derive_schemas", "derive_value_schema"),
    "avro_registry_sink.table": ("ColumnDef", "MySQLType", "TableDef"),
    "avro_registry_sink.tabledef": ("parse_ddl",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


__version__ = "0.1.0"

__all__ = [
    "AvroSinkError",
    "BigintUnsignedMode",
    "ChangeEvent",
    "CheckpointError",
    "ColumnDef",
    "ColumnarEncoder",
    "ConfigError",
    "DecimalMode",
    "DispatchRule",
    "EmbeddedRegistry",
    "EncodingError",
    "EncodingOptions",
    "EncodingPlan",
    "IncompatibleSchema",
    "MySQLType",
    "NoHandleKey",
    "Op",
    "PartitionStrategy",
    "RegistryClient",
    "RegistryConfig",
    "RegistryError",
    "RegistryFileError",
    "RegistryUnavailable",
    "Route",
    "RoutingError",
    "SchemaEvolutionError",
    "SchemaManager",
    "SinkConfig",
    "SourceError",
    "StateError",
    "SubjectNaming",
    "TableDef",
    "TableDefinitionError",
    "TablePlan",
    "TableSchemas",
    "TopicRouter",
    "UnsupportedColumnType",
    "derive_key_schema",
    "derive_schemas",
    "derive_value_schema",
    "frame",
    "load_config",
    "parse_ddl",
    "parse_sink_uri",
    "subject_for",
    "unframe",
]
