"""Input sources, as pure Python: TiCDC storage-sink directories (CSV, canal-json), canal-json and
debezium-json messages, and a demo data generator. The Spark job wraps these functions; everything
here takes and returns plain, picklable data.

Every reader produces :class:`~avro_registry_sink.changes.ChangeEvent` (values in TiCDC's text forms),
plus :class:`DdlEvent` and :class:`Watermark` for changelog formats that carry them. Malformed input
becomes :class:`~avro_registry_sink.errors.SourceError` naming the file (or message) and line.

* :mod:`.storage` - the storage-sink tree (:class:`StorageLayout`, :class:`DataFile`).
* :mod:`.demo` - a realistic storage-sink directory with its expected contents (:func:`generate_demo`).

The input formats themselves live in :mod:`avro_registry_sink.formats` (one module per format); their
main names are re-exported here.
"""

from typing import TYPE_CHECKING

from avro_registry_sink.lazy_names import lazy_exports

if TYPE_CHECKING:  # pragma: no cover
    from avro_registry_sink.formats.canal_json import (
        DdlEvent,
        SourceEvent,
        Watermark,
        convert_canal_value,
        events_from_canal,
    )
    from avro_registry_sink.formats.csv import BinaryEncodingMethod, CsvOptions, parse_csv
    from avro_registry_sink.formats.debezium_json import convert_debezium_value, events_from_debezium
    from avro_registry_sink.sources.demo import DemoManifest, generate_demo
    from avro_registry_sink.sources.storage import DataFile, DateSeparator, SchemaFile, StorageLayout, read_data_file

# The names below are imported when first asked for (PEP 562): Spark's planning process of the storage source
# imports this package for :mod:`.storage` alone, and must not pay for every format and the demo generator.
_HOMES = {
    "avro_registry_sink.formats.canal_json": ("DdlEvent", "SourceEvent", "Watermark", "convert_canal_value",
                                              "events_from_canal"),
    "avro_registry_sink.formats.csv": ("BinaryEncodingMethod", "CsvOptions", "parse_csv"),
    "avro_registry_sink.formats.debezium_json": ("convert_debezium_value", "events_from_debezium"),
    "avro_registry_sink.sources.demo": ("DemoManifest", "generate_demo"),
    "avro_registry_sink.sources.storage": ("DataFile", "DateSeparator", "SchemaFile", "StorageLayout",
                                           "read_data_file"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


__getattr__, __dir__ = lazy_exports(__name__, _HOME_OF, globals())


__all__ = [
    "BinaryEncodingMethod",
    "CsvOptions",
    "DataFile",
    "DateSeparator",
    "DdlEvent",
    "DemoManifest",
    "SchemaFile",
    "SourceEvent",
    "StorageLayout",
    "Watermark",
    "convert_canal_value",
    "convert_debezium_value",
    "events_from_canal",
    "events_from_debezium",
    "generate_demo",
    "parse_csv",
    "read_data_file",
]
