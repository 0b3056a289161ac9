"""avro-registry-sink: MySQL/TiDB change events -> Confluent-framed flat Avro, as TiCDC's avro protocol.

The data flows one way: table definition (:mod:`.table`, :mod:`.tabledef`) -> type mapping
(:mod:`.typemap`) -> schemas (:mod:`.schema`) -> registry (:mod:`.registry`) -> schema manager
(:mod:`.manager`) -> encoders (:mod:`.encoder`, :mod:`.columnar`) -> Spark stage (:mod:`.spark.stage`)
-> job and CLI (:mod:`.spark.job`, :mod:`.cli`).
"""

from avro_registry_sink.changes import ChangeEvent
from avro_registry_sink.columnar import ColumnarEncoder
from avro_registry_sink.config import (
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
from avro_registry_sink.encoder import EncodingPlan, RowEncoder, frame, unframe
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
from avro_registry_sink.routing import Route, TopicRouter, subject_for
from avro_registry_sink.schema.builder import TableSchemas, derive_key_schema, derive_schemas, derive_value_schema
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
from avro_registry_sink.tabledef import parse_ddl

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
    "RowEncoder",
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
