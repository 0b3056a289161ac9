"""What every input format offers, and the one registry of formats (one module per format, as sqlglot's dialects).

A format is an :class:`InputFormat` object that its own module builds and hands to :func:`register`;
everything else finds it by name with :func:`format_named` (the name a ``--source`` URI or a dead-letter
record's ``format`` field carries) or by a storage data file's extension with :func:`format_for_extension`,
and asks the object instead of comparing the name:

>>> from avro_registry_sink.formats import format_named
>>> fmt = format_named("canal-json")
>>> fmt.name, fmt.file_extension, fmt.carries_types, fmt.has_tombstones
('canal-json', 'json', True, False)
>>> format_for_extension("csv").name
'csv'
>>> format_named("avro")
Traceback (most recent call last):
...
avro_registry_sink.errors.ConfigError: Unknown input format 'avro': valid formats are canal-json, csv, debezium-json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from avro_registry_sink.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from avro_registry_sink.changes import ChangeEvent
    from avro_registry_sink.errors import SourceError
    from avro_registry_sink.formats.changelog_arrow import Rows, TableVersions
    from avro_registry_sink.table import TableDef

__all__ = ["FORMATS", "InputFormat", "format_for_extension", "format_for_file", "format_named", "register"]


class InputFormat:
    """One input format: how its records are peeked at and parsed, and what it can say by itself.

    Subclasses set the class attributes and override what their format supports; the defaults say
    "not this format's" (a format that is not a changelog has no :meth:`peek`).
    """

    #: The format's name, as ``--source`` URIs and dead-letter records spell it.
    name: ClassVar[str]
    #: The extension of its data files in a TiCDC storage tree (``None``: not a storage-tree format).
    file_extension: ClassVar[str | None] = None
    #: Whether it arrives as a changelog stream of messages (Kafka records, or files of messages).
    is_changelog: ClassVar[bool] = False
    #: Whether each DML message names its columns' types (canal-json's ``mysqlType``): a table definition
    #: can be inferred from a message, and a message's column set shows a change of shape.
    carries_types: ClassVar[bool] = False
    #: Whether an empty or null message is a tombstone to skip (Debezium's after a delete), not bad input.
    has_tombstones: ClassVar[bool] = False
    #: Whether each data file's layout is resolved from the file itself and the settings (CSV's header and columns).
    has_layout: ClassVar[bool] = False

    def peek(self, msg: Mapping[str, Any]) -> tuple[str, str | None, str | None, int | None]:
        """What one decoded message is: ``(kind, schema, table, commit_ts)``."""
        raise NotImplementedError(f"{self.name} is not read message by message")

    def shape(self, msg: Mapping[str, Any]) -> str | None:
        """The column set a DML message names (sorted, lower-case, comma-separated), if it names one."""
        return None

    def events(self, message: Any, *, source: str = "", table: TableDef | None = None,
               tables: Mapping[Any, TableDef] | None = None, table_version: int | None = None) -> list[Any]:
        """One message -> its events (change events, DDL events, watermarks); raises ``SourceError`` when malformed.

        A DML is read with ``table`` where the format takes the definition as given, else with the one
        ``tables`` holds under the message's ``(schema, table)``; DDLs need neither."""
        raise NotImplementedError(f"{self.name} is not read message by message")

    def derive_table(self, message: str, source: str, *, previous: TableDef | None = None) -> TableDef | None:
        """A best-effort table definition from one DML message alone (``None``: the format cannot say)."""
        return None

    def read_file(self, text: str, table: TableDef, options: Any, *, source: str, table_version: int
                  ) -> tuple[list[ChangeEvent], list[SourceError]]:
        """One storage-tree data file's text -> its change events and one error per bad record."""
        raise NotImplementedError(f"{self.name} has no storage-tree data files")

    def arrow_rows(self, messages: pa.Array, versions: TableVersions) -> Rows:
        """A batch of messages -> typed Arrow columns per table version, in one pass."""
        raise NotImplementedError(f"{self.name} has no one-pass Arrow reader")

    def summary_peek(self, texts: pa.Array, body: Any, rows: Any) -> dict[str, Any] | None:
        """The light parse of messages ``rows`` for a batch's summary (kind, schema, table, commit ts per message,
        without reading the rows; see :mod:`~avro_registry_sink.formats.changelog_arrow`); ``None``: the
        summary reads each message whole."""
        return None

    def __repr__(self) -> str:
        return f"<input format {self.name}>"


#: Every registered format by name.
FORMATS: dict[str, InputFormat] = {}


def register(fmt: InputFormat) -> InputFormat:
    """Add a format to :data:`FORMATS` (each format module registers its own object when imported)."""
    FORMATS[fmt.name] = fmt
    return fmt


def format_named(name: str) -> InputFormat:
    """The registered format called ``name``; :class:`~avro_registry_sink.errors.ConfigError` if there is none."""
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ConfigError(f"Unknown input format {name!r}: valid formats are {', '.join(sorted(FORMATS))}.")
    return fmt


def format_for_extension(extension: str) -> InputFormat:
    """The format of a storage-tree data file with this extension (``csv``, ``json``)."""
    for fmt in FORMATS.values():
        if fmt.file_extension == extension:
            return fmt
    raise ConfigError(f"No input format reads .{extension} data files.")


def format_for_file(path: str) -> InputFormat:
    """The format of a storage-tree data file by its name: ``.csv`` files are CSV, any other is read as JSON
    lines (canal-json), as the storage reader does.

    >>> format_for_file("shop/orders/449/CDC000001.csv").name, format_for_file("").name
    ('csv', 'canal-json')
    """
    for fmt in FORMATS.values():
        if fmt.file_extension and path.endswith(f".{fmt.file_extension}"):
            return fmt
    return format_for_extension("json")
