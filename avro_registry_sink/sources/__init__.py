"""Input sources, as pure Python: TiCDC storage-sink directories (CSV, canal-json), canal-json and
debezium-json messages, and a demo data generator. The Spark job wraps these functions; everything
here takes and returns plain, picklable data.

Every reader produces :class:`~avro_registry_sink.changes.ChangeEvent` (values in TiCDC's text forms),
plus :class:`DdlEvent` and :class:`Watermark` for changelog formats that carry them. Malformed input
becomes :class:`~avro_registry_sink.errors.SourceError` naming the file (or message) and line.

* :mod:`.csv_format` - TiCDC's CSV data lines (:func:`parse_csv`, :class:`CsvOptions`).
* :mod:`.storage` - the storage-sink tree (:class:`StorageLayout`, :class:`DataFile`).
* :mod:`.canal` - canal-json messages (:func:`events_from_canal`).
* :mod:`.debezium` - debezium-json messages (:func:`events_from_debezium`).
* :mod:`.demo` - a realistic storage-sink directory with its expected contents (:func:`generate_demo`).
"""

from avro_registry_sink.sources.canal import DdlEvent, SourceEvent, Watermark, convert_canal_value, events_from_canal
from avro_registry_sink.sources.csv_format import BinaryEncodingMethod, CsvOptions, parse_csv
from avro_registry_sink.sources.debezium import convert_debezium_value, events_from_debezium
from avro_registry_sink.sources.demo import DemoManifest, generate_demo
from avro_registry_sink.sources.storage import DataFile, DateSeparator, SchemaFile, StorageLayout, read_data_file

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
