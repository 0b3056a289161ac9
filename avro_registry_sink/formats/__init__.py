"""Input formats, one module each: how a record is split, peeked at, parsed, and what table definition it
can say by itself.

* :mod:`.csv` - TiCDC's storage-sink CSV (:func:`~.csv.parse_csv`, :class:`~.csv.CsvOptions`).
* :mod:`.canal_json` - canal-json messages and storage-sink lines (:func:`~.canal_json.events_from_canal`,
  :func:`~.canal_json.peek`, :func:`~.canal_json.derive_table`).
* :mod:`.debezium_json` - debezium-json messages (:func:`~.debezium_json.events_from_debezium`,
  :func:`~.debezium_json.peek`, :func:`~.debezium_json.table_from_table_change`).

The dead-letter record that every format's refused input becomes is in :mod:`avro_registry_sink.model`.

Every parser returns :class:`~avro_registry_sink.changes.ChangeEvent` values in TiCDC's text forms plus a
:class:`~avro_registry_sink.errors.SourceError` per bad record (never one per file).

Each format module registers its :class:`~.base.InputFormat` object in :data:`~.base.FORMATS` when it is
imported (importing this package imports them all); find one with :func:`~.base.format_named` or
:func:`~.base.format_for_extension`.
"""

from avro_registry_sink.formats import canal_json, csv, debezium_json
from avro_registry_sink.formats.base import (
    FORMATS,
    InputFormat,
    format_for_extension,
    format_for_file,
    format_named,
    register,
)

__all__ = ["FORMATS", "InputFormat", "canal_json", "csv", "debezium_json", "format_for_extension", "format_for_file",
           "format_named", "register"]
