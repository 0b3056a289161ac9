"""TiCDC storage-sink schema files (``schema_{version}_{crc}.json``): read, written, checksummed.

The format is TiCDC's implementation (``pkg/sink/cloudstorage/table_definition.go``), which differs
from its design doc: there is no ``ColumnLength`` (string lengths are in ``ColumnPrecision``) and
``TableColumnsTotal`` is an integer. A file is Go's ``json.MarshalIndent(def, "", "    ")``: fields in
struct order, 4-space indent, ``<``/``>``/``&``/U+2028/U+2029 escaped, non-ASCII raw, no trailing
newline::

    {"Table", "Schema", "Version": 1, "TableVersion", "Query", "Type", "TableColumns": [...], "TableColumnsTotal"}
    column: {"ColumnName", "ColumnType", "ColumnDefault", "ColumnPrecision", "ColumnScale", "ColumnNullable",
             "ColumnIsPk"}   (all but name and type omitted when empty)

Reading a file into a :class:`~avro_registry_sink.table.TableDef`:

* ``ColumnType`` (``BIGINT UNSIGNED``, ``VARBINARY``, ``VAR_STRING`` ...) is looked up in
  :data:`~avro_registry_sink.tabledef.types.SPELLINGS`; BINARY/VARBINARY/BLOB types are binary-charset.
* ``ColumnPrecision`` is the display width / string length (``length``), the DECIMAL precision, or for
  FLOAT/DOUBLE the display default (12/22) unless ``ColumnScale`` is there too (``FLOAT(M,D)``). A
  length equal to TiDB's default for the type (INT 11, TEXT 65535, CHAR 1, BIT 1 ...) is read as "not
  declared" (``None``), as the DDL parser reports an undeclared width; VARCHAR/VARBINARY lengths are
  always kept.
* ``ColumnScale`` is the DECIMAL scale, ``FLOAT(M,D)``'s D, or the fsp of DATETIME/TIMESTAMP/TIME.
* ``ColumnNullable: "false"`` -> NOT NULL; ``ColumnIsPk: "true"`` -> primary-key column (in column
  order: the file does not record the key's own order).
* ``ColumnDefault`` is TiDB's stored default; for BIT and binary-charset columns its UTF-8 bytes (TiDB
  writes raw bytes as a Go string, so bytes that are not UTF-8 arrive as U+FFFD and cannot be recovered).
* ``TableVersion`` -> ``version``.

What the files do not carry (a TiCDC implementation difference from its design doc): ENUM/SET members
(``elements`` is empty, so the Avro ``allowed`` parameter cannot be derived from a schema file alone; a
storage layout takes each version's from its DDL, see
:func:`~avro_registry_sink.tabledef.catalog.complete_versions`) and
unique keys (``unique_keys`` is empty, so a table keyed only by a unique index has no handle key from a
schema file alone; TiCDC's own consumer has the same gap).

Checking a file against its name (:func:`check_schema_file_name`, done by every reader here, as TiCDC's
own consumer does): the ``<version>`` must be the file's ``TableVersion`` and the ``<crc>`` the checksum
of its content (:func:`schema_file_checksum`). A file edited after TiCDC wrote it (a column renamed in
place) fails the checksum and is refused rather than read as a second definition of the same table
version. The checksum does not cover ``Query``, ``Type`` or the column order.
"""

from __future__ import annotations

import codecs
import json
import re
import zlib
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from avro_registry_sink.errors import SourceError
from avro_registry_sink.table import BINARY_TYPES, ColumnDef, MySQLType, TableDef
from avro_registry_sink.tabledef.ddl import column_from_type
from avro_registry_sink.tabledef.types import BINARY_COUNTERPART, default_display_length

__all__ = [
    "SCHEMA_FILE_NAME",
    "check_schema_file_name",
    "check_schema_file_version",
    "is_database_schema",
    "parse_table_schema_file",
    "schema_file_checksum",
    "schema_file_name",
    "table_schema_content",
    "write_database_schema_file",
    "write_table_schema_file",
]

#: Format version TiCDC writes (``defaultTableDefinitionVersion``).
TABLE_DEFINITION_VERSION = 1

#: ``timodel.ActionType`` numbers that appear in ``Type``.
ACTION_CREATE_SCHEMA = 1
ACTION_CREATE_TABLE = 3

_INTEGER_TYPES = frozenset({MySQLType.TINYINT, MySQLType.SMALLINT, MySQLType.MEDIUMINT, MySQLType.INT,
                            MySQLType.BIGINT})
_LENGTH_TYPES = _INTEGER_TYPES | {
    MySQLType.BIT, MySQLType.CHAR, MySQLType.VARCHAR, MySQLType.BINARY, MySQLType.VARBINARY, MySQLType.TINYTEXT,
    MySQLType.TEXT, MySQLType.MEDIUMTEXT, MySQLType.LONGTEXT, MySQLType.TINYBLOB, MySQLType.BLOB,
    MySQLType.MEDIUMBLOB, MySQLType.LONGBLOB, MySQLType.YEAR,
}
_ALWAYS_KEEP_LENGTH = frozenset({MySQLType.VARCHAR, MySQLType.VARBINARY})
_FSP_TYPES = frozenset({MySQLType.DATETIME, MySQLType.TIMESTAMP, MySQLType.TIME})
#: A schema file's name: ``schema_<version>_<crc>.json``, the crc zero-padded to 10 digits.
SCHEMA_FILE_NAME = re.compile(r"schema_(?P<version>\d+)_(?P<crc>\d{10})\.json")

_COLUMN_FIELDS = ("ColumnId", "ColumnName", "ColumnType", "ColumnDefault", "ColumnPrecision", "ColumnScale",
                  "ColumnNullable", "ColumnIsPk")


# --------------------------------------------------------------------------------------------------
# Go's encoding/json


def _go_replace(exc: UnicodeError) -> tuple[str, int]:
    # Go's encoder replaces each invalid byte by U+FFFD and goes on with the next byte
    assert isinstance(exc, UnicodeDecodeError)
    return "\ufffd", exc.start + 1


codecs.register_error("avro_registry_sink.go_replace", _go_replace)


def _go_string(data: bytes) -> str:
    """The text Go's encoding/json writes for a Go string holding ``data``."""
    return data.decode("utf-8", errors="avro_registry_sink.go_replace")


def _go_float(value: float) -> str:
    """Go encoding/json's text for a float64: shortest digits, exponent form below 1e-6 and from 1e21 on."""
    if value != 0 and (abs(value) < 1e-6 or abs(value) >= 1e21):
        text = repr(value)  # Python's exponent form there too, with the same shortest digits
        return re.sub(r"e-0(\d)$", r"e-\1", text)  # Go cleans e-09 up to e-9
    text = format(Decimal(repr(value)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


_FLOAT_MARK = "\x00go-float-{}\x00"


def _marshal_indent(value: Any) -> str:
    """Go ``json.MarshalIndent(value, "", "    ")`` for the plain values a schema file holds."""
    floats: list[float] = []

    def marked(item: Any) -> Any:  # floats as Go writes them (Python's repr differs: 1e-05 vs 0.00001)
        if isinstance(item, float):
            floats.append(item)
            return _FLOAT_MARK.format(len(floats) - 1)
        if isinstance(item, Mapping):
            return {k: marked(v) for k, v in item.items()}
        if isinstance(item, list):
            return [marked(v) for v in item]
        return item

    text = json.dumps(marked(value), indent=4, ensure_ascii=False)
    for i, number in enumerate(floats):
        text = text.replace(json.dumps(_FLOAT_MARK.format(i)), _go_float(number), 1)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)  # only string contents can hold these
    return text


def _before_go_1_22(text: str) -> str:
    """``text`` as Go before 1.22 wrote it: ``\\b`` and ``\\f`` escaped as ``\\u0008`` and ``\\u000c``."""
    return re.sub(r"\\(.)", lambda m: {"b": "\\u0008", "f": "\\u000c"}.get(m.group(1), m.group(0)), text)


# --------------------------------------------------------------------------------------------------
# Writing


def _table_col(col: ColumnDef, is_pk: bool) -> dict[str, Any]:
    """TiCDC's ``TableCol.FromTiColumnInfo`` for one column."""
    type_ = BINARY_COUNTERPART.get(col.type, col.type) if col.binary else col.type
    out: dict[str, Any] = {"ColumnName": col.name, "ColumnType": type_.value + (" UNSIGNED" if col.unsigned else "")}
    if col.default is not None:
        out["ColumnDefault"] = _go_string(col.default) if isinstance(col.default, bytes) else col.default
    if type_ in (MySQLType.FLOAT, MySQLType.DOUBLE):
        out["ColumnPrecision"] = str(col.precision if col.precision is not None
                                     else default_display_length(type_))
        if col.scale not in (None, 0, -1):
            out["ColumnScale"] = str(col.scale)
    elif type_ is MySQLType.DECIMAL:
        out["ColumnPrecision"] = str(col.precision if col.precision is not None else 10)
        out["ColumnScale"] = str(col.scale if col.scale is not None else 0)
    elif type_ in _LENGTH_TYPES:
        out["ColumnPrecision"] = str(col.length if col.length is not None
                                     else default_display_length(type_, col.unsigned))
    elif type_ in _FSP_TYPES and col.fsp:
        out["ColumnScale"] = str(col.fsp)
    if not col.nullable:
        out["ColumnNullable"] = "false"
    if is_pk:
        out["ColumnIsPk"] = "true"
    return out


def table_schema_content(table: TableDef, *, query: str = "", ddl_type: int = 0) -> dict[str, Any]:
    """The JSON object TiCDC writes for ``table`` (``TableVersion`` = ``table.version``), fields in order.

    ``query``/``ddl_type`` are the DDL that produced this version (``Type`` is the ``timodel.ActionType``
    number, e.g. 3 CREATE TABLE, 5 ADD COLUMN); both empty when the DML side writes the file for a table
    that existed before the changefeed.
    """
    pk = {c.lower() for c in table.primary_key}
    columns = [_table_col(c, c.name.lower() in pk) for c in table.columns]
    return {
        "Table": table.table,
        "Schema": table.schema_name,
        "Version": TABLE_DEFINITION_VERSION,
        "TableVersion": table.version,
        "Query": query,
        "Type": ddl_type,
        "TableColumns": columns,
        "TableColumnsTotal": len(columns),
    }


def _normalized_column(column: Mapping[str, Any]) -> dict[str, Any]:
    # what Go's TableCol struct re-marshals: struct field order, empty fields omitted
    out: dict[str, Any] = {}
    for name in _COLUMN_FIELDS:
        value = column.get(name)
        if name in ("ColumnName", "ColumnType"):
            out[name] = "" if value is None else value
        elif name == "ColumnDefault":
            if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
                value = int(value)  # Go writes an integral float64 without a fraction: 12345678
            if value is not None:
                out[name] = value
        elif value not in (None, ""):
            out[name] = value
    return out


def schema_file_checksum(definition: TableDef | Mapping[str, Any]) -> int:
    """The ``<crc>`` of a schema file name: TiCDC's ``TableDefinition.Sum32``.

    CRC-32 (IEEE) of ``json.MarshalIndent`` over ``{Table, Schema, Version: 0, TableColumns (sorted by
    ColumnName, [] when none), TableColumnsTotal}`` (``Query``, ``Type`` and ``TableVersion`` do not
    count, nor does column order). ``definition`` is a table or a schema file's parsed content.

    >>> schema_file_checksum({"Table": "", "Schema": "schema1", "TableColumns": None, "TableColumnsTotal": 0})
    3233644819
    """
    return _crc(_checksum_text(definition))


def _checksum_text(definition: TableDef | Mapping[str, Any]) -> str:
    content = table_schema_content(definition) if isinstance(definition, TableDef) else definition
    columns = [_normalized_column(c) for c in content.get("TableColumns") or []]
    columns.sort(key=lambda c: c["ColumnName"])
    without_query = {
        "Table": content.get("Table") or "",
        "Schema": content.get("Schema") or "",
        "Version": 0,  # TiCDC never sets it on the struct it hashes
        "TableColumns": columns,
        "TableColumnsTotal": int(content.get("TableColumnsTotal") or 0),
    }
    return _marshal_indent(without_query)


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))  # a lone surrogate (JSON "\\ud800") cannot match


def _accepted_checksums(content: Mapping[str, Any]) -> tuple[int, ...]:
    """The checksums TiCDC may have named a file with this content: the one of :func:`schema_file_checksum`,
    and for a string holding a backspace or form feed also the one of a TiCDC built with Go < 1.22."""
    text = _checksum_text(content)
    older = _before_go_1_22(text)
    return (_crc(text),) if older == text else (_crc(text), _crc(older))


def check_schema_file_name(name: str, content: Mapping[str, Any], *, where: str | None = None) -> None:
    """Check a schema file's content against its name ``schema_<version>_<crc>.json``, as TiCDC's consumer does.

    ``<version>`` must be the content's ``TableVersion`` and ``<crc>`` its checksum
    (:func:`schema_file_checksum`; TiCDC writes nothing else, whatever its release). Raises
    :class:`~avro_registry_sink.errors.SourceError` (``reason`` ``"version mismatch"`` or ``"checksum
    mismatch"``) naming ``where`` (default: ``name``), both checksums and the file's correct name. A name
    that is not a schema file name is not checked.

    >>> check_schema_file_name("schema_100_3233644819.json", {"Table": "", "Schema": "schema1",
    ...     "TableVersion": 100, "TableColumns": None, "TableColumnsTotal": 0})
    """
    m = SCHEMA_FILE_NAME.fullmatch(name.rsplit("/", 1)[-1])
    if m is None:
        return
    where = where or name
    version, crc = int(m.group("version")), int(m.group("crc"))
    check_schema_file_version(version, content, where=where)
    try:
        accepted = _accepted_checksums(content)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"{where}: not a TiCDC schema file ({type(exc).__name__}: {exc}).", source=where,
                          reason="malformed") from None
    if crc in accepted:
        return
    actual = accepted[0]
    raise SourceError(
        f"{where}: refused: the checksum in its name is {crc:010d} but its content's checksum is {actual:010d}: "
        "the content was changed after TiCDC wrote it, or the file was not written by TiCDC. Restore the file "
        "TiCDC wrote; or, if the change is intended, write it under its correct name "
        f"schema_{version}_{actual:010d}.json (in place of this one).",
        source=where, reason="checksum mismatch", name_checksum=crc, content_checksum=actual,
        correct_name=f"schema_{version}_{actual:010d}.json",
    )


def check_schema_file_version(version: int, content: Mapping[str, Any], *, where: str) -> None:
    """The ``TableVersion`` of a schema file must be the version in its name (:class:`SourceError` if not)."""
    content_version = content.get("TableVersion")
    if isinstance(content_version, bool) or content_version != version:
        raise SourceError(
            f"{where}: the file name says table version {version} but its TableVersion is "
            f"{content_version!r}; the file is corrupt or was renamed. Restore the file TiCDC wrote.",
            source=where, reason="version mismatch",
        )


def schema_file_name(table: TableDef) -> str:
    """``schema_{version}_{crc:010d}.json`` for ``table``.

    >>> from avro_registry_sink.tabledef.ddl import parse_ddl
    >>> schema_file_name(parse_ddl("CREATE TABLE test.table1 (col1 INT, col2 VARCHAR(5))")[0].model_copy(
    ...     update={"version": 100}))
    'schema_100_4192708364.json'
    """
    return f"schema_{table.version}_{schema_file_checksum(table):010d}.json"


def write_table_schema_file(table: TableDef, root: Path | str, *, query: str = "", ddl_type: int = 0) -> Path:
    """Write ``table``'s schema file under a storage-sink root, exactly as TiCDC would; returns its path.

    The path is ``root/<schema>/<table>/meta/schema_<version>_<crc>.json`` (``version`` =
    ``table.version``, the table version directory). ``query``/``ddl_type``: see
    :func:`table_schema_content`.
    """
    content = table_schema_content(table, query=query, ddl_type=ddl_type)
    directory = Path(root) / table.schema_name / table.table / "meta"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"schema_{table.version}_{schema_file_checksum(content):010d}.json"
    path.write_bytes(_marshal_indent(content).encode("utf-8"))
    return path


def write_database_schema_file(schema_name: str, version: int, root: Path | str, *, query: str | None = None) -> Path:
    """Write the database schema file TiCDC writes for ``CREATE DATABASE`` (``root/<schema>/meta/...``)."""
    content = {
        "Table": "",
        "Schema": schema_name,
        "Version": TABLE_DEFINITION_VERSION,
        "TableVersion": version,
        "Query": f"CREATE DATABASE `{schema_name}`" if query is None else query,
        "Type": ACTION_CREATE_SCHEMA,
        "TableColumns": None,
        "TableColumnsTotal": 0,
    }
    directory = Path(root) / schema_name / "meta"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"schema_{version}_{schema_file_checksum(content):010d}.json"
    path.write_bytes(_marshal_indent(content).encode("utf-8"))
    return path


# --------------------------------------------------------------------------------------------------
# Reading


def _is_path(source: str | bytes | Path | Mapping[str, Any]) -> bool:
    return isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith(("{", "[")))


def _load(source: str | bytes | Path | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """(content, where) from a path, JSON text/bytes, or already parsed content."""
    if isinstance(source, Mapping):
        return dict(source), "schema file"
    where = "schema file"
    if _is_path(source):
        where = str(source)
        try:
            source = Path(source).read_bytes()  # type: ignore[arg-type]  # _is_path: a str or a Path
        except OSError as exc:
            raise SourceError(f"{where}: cannot read the schema file ({exc.strerror}).", source=where,
                              reason="unreadable") from None
    try:
        content = json.loads(source)  # type: ignore[arg-type]  # read above when it was a path
    except ValueError as exc:
        raise SourceError(f"{where}: not a JSON schema file ({exc}).", source=where, reason="bad JSON") from None
    if not isinstance(content, dict):
        raise SourceError(f"{where}: a schema file holds a JSON object.", source=where, reason="not an object")
    return content, where


def is_database_schema(source: str | bytes | Path | Mapping[str, Any]) -> bool:
    """Whether a schema file is a database one (``"Table": ""``, written for ``CREATE DATABASE``)."""
    content, _ = _load(source)
    return not content.get("Table")


def _int_field(column: Mapping[str, Any], key: str, where: str) -> int | None:
    value = column.get(key)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise SourceError(f"{where}: {key} {value!r} of column {column.get('ColumnName')!r} is not an integer.",
                          source=where, reason=f"bad {key}") from None


def _default_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _column(raw: Any, qualified: str, where: str) -> tuple[ColumnDef, bool]:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("ColumnName"), str) \
            or not isinstance(raw.get("ColumnType"), str):
        raise SourceError(f"{where}: every column of {qualified} needs a string ColumnName and ColumnType.",
                          source=where, reason="bad column")
    name = raw["ColumnName"]
    col = column_from_type(name, raw["ColumnType"], table=qualified)
    update: dict[str, Any] = {}
    precision = _int_field(raw, "ColumnPrecision", where)
    if precision is None:  # the design doc's ColumnLength, should a file use it
        precision = _int_field(raw, "ColumnLength", where)
    scale = _int_field(raw, "ColumnScale", where)
    t = col.type
    if t is MySQLType.DECIMAL:
        update["precision"] = precision if precision is not None else 10
        update["scale"] = scale if scale is not None else 0
    elif t in (MySQLType.FLOAT, MySQLType.DOUBLE):
        if scale is not None:  # FLOAT(M,D); a lone precision is the display default or FLOAT(p)
            update["precision"], update["scale"] = precision, scale
    elif t in _FSP_TYPES:
        update["fsp"] = scale
    elif t in _LENGTH_TYPES and precision is not None:
        default = default_display_length(t, col.unsigned)
        update["length"] = None if precision == default and t not in _ALWAYS_KEEP_LENGTH else precision
    nullable = raw.get("ColumnNullable")
    update["nullable"] = not (nullable is False or str(nullable).lower() == "false")
    default = raw.get("ColumnDefault")
    if default is not None:
        text = _default_text(default)
        update["default"] = text.encode("utf-8") if (t is MySQLType.BIT or col.binary or t in BINARY_TYPES) else text
    is_pk = raw.get("ColumnIsPk")
    is_pk = is_pk is True or str(is_pk).lower() == "true"
    if is_pk:
        update["nullable"] = False  # primary-key columns are NOT NULL
    return col.model_copy(update=update), is_pk


def parse_table_schema_file(path_or_text: str | bytes | Path | Mapping[str, Any]) -> TableDef:
    """The table a TiCDC table schema file describes (``version`` = its ``TableVersion``).

    ``path_or_text`` is a path, the file's JSON text (or bytes), or its parsed content. Raises
    :class:`~avro_registry_sink.errors.SourceError` for a malformed file, a database schema file
    (see :func:`is_database_schema`), or a file read from a path named ``schema_<version>_<crc>.json``
    whose content does not match its name (:func:`check_schema_file_name`), and :class:`~avro_registry_sink.errors.UnsupportedColumnType` for
    an unknown ``ColumnType``.

    >>> t = parse_table_schema_file('{"Table": "t", "Schema": "s", "TableVersion": 7, "TableColumns": '
    ...     '[{"ColumnName": "id", "ColumnType": "BIGINT UNSIGNED", "ColumnPrecision": "20", '
    ...     '"ColumnNullable": "false", "ColumnIsPk": "true"}], "TableColumnsTotal": 1}')
    >>> t.version, t.primary_key, t.columns[0].unsigned
    (7, ('id',), True)
    """
    content, where = _load(path_or_text)
    table_def = _table_from_content(content, where)
    if _is_path(path_or_text):  # read from a file: its name must agree with its content
        check_schema_file_name(where, content)
    return table_def


def _table_from_content(content: Mapping[str, Any], where: str) -> TableDef:
    schema, table = content.get("Schema"), content.get("Table")
    if not isinstance(schema, str) or not isinstance(table, str):
        raise SourceError(f"{where}: a schema file needs string Schema and Table fields.", source=where,
                          reason="no Schema/Table")
    if not table:
        raise SourceError(
            f"{where}: this is the database schema file of {schema!r} (Table is empty), not a table schema "
            "file; check is_database_schema() first.",
            source=where, reason="database schema file",
        )
    qualified = f"{schema}.{table}"
    raw_columns = content.get("TableColumns")
    if not isinstance(raw_columns, list) or not raw_columns:
        raise SourceError(f"{where}: table {qualified} has no TableColumns.", source=where, reason="no columns")
    total = _int_field(content, "TableColumnsTotal", where)
    if total is not None and total != len(raw_columns):
        raise SourceError(
            f"{where}: TableColumnsTotal of {qualified} is {total} but TableColumns holds {len(raw_columns)} "
            "columns; the file is corrupt.",
            source=where, reason="column count mismatch",
        )
    version = _int_field(content, "TableVersion", where) or 0
    columns: list[ColumnDef] = []
    pk: list[str] = []
    for raw in raw_columns:
        col, is_pk = _column(raw, qualified, where)
        columns.append(col)
        if is_pk:
            pk.append(col.name)
    return TableDef(schema_name=schema, table=table, columns=tuple(columns), primary_key=tuple(pk), version=version)
