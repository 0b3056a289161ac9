"""Table definitions from three sources: MySQL/TiDB DDL, TiCDC storage-sink schema files, canal-json.

* :func:`parse_ddl` / :func:`apply_ddl` (:mod:`.ddl`): DDL text -> :class:`~avro_registry_sink.table.TableDef`,
  and DDL events applied to a table.
* :func:`parse_table_schema_file` / :func:`write_table_schema_file` (:mod:`.storage`): TiCDC's
  ``schema_{version}_{crc}.json`` files, read and written byte-for-byte as TiCDC does; a file's content
  is checked against the version and checksum in its name (:func:`check_schema_file_name`).
* :func:`table_from_canal` (:mod:`.canal`): a best-effort definition from a canal-json DML message.

Type spellings live in one table, :data:`.types.SPELLINGS`; the DDL reader's tokens in :mod:`.lexer`, its
``DEFAULT`` evaluation in :mod:`.defaults`.
"""

from avro_registry_sink.tabledef.canal import table_from_canal
from avro_registry_sink.tabledef.ddl import apply_ddl, column_from_type, parse_ddl
from avro_registry_sink.tabledef.storage import (
    check_schema_file_name,
    is_database_schema,
    parse_table_schema_file,
    schema_file_checksum,
    schema_file_name,
    table_schema_content,
    write_database_schema_file,
    write_table_schema_file,
)
from avro_registry_sink.tabledef.types import SPELLINGS

__all__ = [
    "SPELLINGS",
    "apply_ddl",
    "check_schema_file_name",
    "column_from_type",
    "is_database_schema",
    "parse_ddl",
    "parse_table_schema_file",
    "schema_file_checksum",
    "schema_file_name",
    "table_from_canal",
    "table_schema_content",
    "write_database_schema_file",
    "write_table_schema_file",
]
