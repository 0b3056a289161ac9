"""Every MySQL/TiDB column-type spelling, as one data table: ``SPELLINGS``.

A row says what a spelling (``INTEGER``, ``DOUBLE PRECISION``, ``NATIONAL VARCHAR``, ``SERIAL`` ...) is
stored as (:class:`~avro_registry_sink.table.MySQLType`), what its parenthesised argument means
(:class:`Params`) and which attributes it implies (``BOOL`` is ``TINYINT(1)``, ``SERIAL`` is
``BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE``, ``LONG VARBINARY`` is a binary-charset
``MEDIUMBLOB``). The DDL parser, the storage-sink schema-file reader (``ColumnType`` such as
``BIGINT UNSIGNED`` or ``VAR_STRING``) and the canal-json reader (``mysqlType`` such as
``bigint unsigned``) all look spellings up here; nothing else switches on type names.

Two small per-type tables complete it: ``DISPLAY_LENGTHS`` (TiDB's default field length, what
TiCDC writes as ``ColumnPrecision`` when a column declares none) and ``BINARY_COUNTERPART`` (the type a
text type becomes with ``CHARACTER SET binary``: ``VARCHAR`` -> ``VARBINARY``, as TiDB stores it).

>>> SPELLINGS["INT8"].type, SPELLINGS["BOOLEAN"].length
(<MySQLType.BIGINT: 'BIGINT'>, 1)
>>> closest_spelling("VARCHR")
'VARCHAR'
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import Enum

from avro_registry_sink.errors import UnsupportedColumnType
from avro_registry_sink.table import MySQLType

__all__ = [
    "BINARY_COUNTERPART",
    "CHARSET_TYPES",
    "DISPLAY_LENGTHS",
    "MAX_SPELLING_WORDS",
    "NUMERIC_TYPES",
    "SPATIAL_TYPES",
    "SPELLINGS",
    "Params",
    "Spelling",
    "closest_spelling",
    "default_display_length",
    "unsupported_type",
]


class Params(str, Enum):
    """What the parenthesised argument after a type name means."""

    NONE = "none"  # no argument allowed: DATE, JSON, TINYTEXT ...
    LENGTH = "length"  # (M): display width, character/byte length, BIT width, YEAR width, VECTOR dimension
    FLOAT = "float"  # FLOAT(p) (p > 24 makes it DOUBLE) or FLOAT(M,D)
    REAL = "real"  # DOUBLE(M,D) / REAL(M,D)
    DECIMAL = "decimal"  # DECIMAL(M[,D]); precision 10, scale 0 when not given
    FSP = "fsp"  # fractional seconds precision 0..6
    ELEMENTS = "elements"  # ENUM/SET member list


@dataclass(frozen=True)
class Spelling:
    """One row: a type spelling and what it implies."""

    type: MySQLType
    params: Params
    length: int | None = None  # width implied by the spelling (BOOL -> 1)
    unsigned: bool = False
    binary: bool = False  # charset binary implied (LONG VARBINARY)
    serial: bool = False  # SERIAL: NOT NULL AUTO_INCREMENT UNIQUE as well


T = MySQLType
P = Params

#: Every accepted spelling (upper case, words separated by one space) -> what it is stored as.
#: Aliases follow MySQL 8 / TiDB (REAL is DOUBLE, i.e. REAL_AS_FLOAT off; INT8 is BIGINT;
#: LONG / LONG VARCHAR are MEDIUMTEXT). ``VAR_STRING`` is how TiCDC's storage sink may name a VARCHAR.
SPELLINGS: dict[str, Spelling] = {
    # integers
    "TINYINT": Spelling(T.TINYINT, P.LENGTH),
    "INT1": Spelling(T.TINYINT, P.LENGTH),
    "BOOL": Spelling(T.TINYINT, P.NONE, length=1),
    "BOOLEAN": Spelling(T.TINYINT, P.NONE, length=1),
    "SMALLINT": Spelling(T.SMALLINT, P.LENGTH),
    "INT2": Spelling(T.SMALLINT, P.LENGTH),
    "MEDIUMINT": Spelling(T.MEDIUMINT, P.LENGTH),
    "MIDDLEINT": Spelling(T.MEDIUMINT, P.LENGTH),
    "INT3": Spelling(T.MEDIUMINT, P.LENGTH),
    "INT": Spelling(T.INT, P.LENGTH),
    "INTEGER": Spelling(T.INT, P.LENGTH),
    "INT4": Spelling(T.INT, P.LENGTH),
    "BIGINT": Spelling(T.BIGINT, P.LENGTH),
    "INT8": Spelling(T.BIGINT, P.LENGTH),
    "SERIAL": Spelling(T.BIGINT, P.NONE, unsigned=True, serial=True),
    # floating point and fixed point
    "FLOAT": Spelling(T.FLOAT, P.FLOAT),
    "FLOAT4": Spelling(T.FLOAT, P.FLOAT),
    "DOUBLE": Spelling(T.DOUBLE, P.REAL),
    "DOUBLE PRECISION": Spelling(T.DOUBLE, P.REAL),
    "REAL": Spelling(T.DOUBLE, P.REAL),
    "FLOAT8": Spelling(T.DOUBLE, P.REAL),
    "DECIMAL": Spelling(T.DECIMAL, P.DECIMAL),
    "DEC": Spelling(T.DECIMAL, P.DECIMAL),
    "NUMERIC": Spelling(T.DECIMAL, P.DECIMAL),
    "FIXED": Spelling(T.DECIMAL, P.DECIMAL),
    "BIT": Spelling(T.BIT, P.LENGTH),
    # character strings (CHARACTER SET binary / BYTE turn them into the binary counterpart)
    "CHAR": Spelling(T.CHAR, P.LENGTH),
    "CHARACTER": Spelling(T.CHAR, P.LENGTH),
    "NCHAR": Spelling(T.CHAR, P.LENGTH),
    "NATIONAL CHAR": Spelling(T.CHAR, P.LENGTH),
    "NATIONAL CHARACTER": Spelling(T.CHAR, P.LENGTH),
    "VARCHAR": Spelling(T.VARCHAR, P.LENGTH),
    "VARCHARACTER": Spelling(T.VARCHAR, P.LENGTH),
    "VAR_STRING": Spelling(T.VARCHAR, P.LENGTH),
    "NVARCHAR": Spelling(T.VARCHAR, P.LENGTH),
    "CHAR VARYING": Spelling(T.VARCHAR, P.LENGTH),
    "CHARACTER VARYING": Spelling(T.VARCHAR, P.LENGTH),
    "NCHAR VARCHAR": Spelling(T.VARCHAR, P.LENGTH),
    "NCHAR VARYING": Spelling(T.VARCHAR, P.LENGTH),
    "NATIONAL VARCHAR": Spelling(T.VARCHAR, P.LENGTH),
    "NATIONAL CHAR VARYING": Spelling(T.VARCHAR, P.LENGTH),
    "NATIONAL CHARACTER VARYING": Spelling(T.VARCHAR, P.LENGTH),
    "TINYTEXT": Spelling(T.TINYTEXT, P.NONE),
    "TEXT": Spelling(T.TEXT, P.LENGTH),
    "MEDIUMTEXT": Spelling(T.MEDIUMTEXT, P.NONE),
    "LONG": Spelling(T.MEDIUMTEXT, P.NONE),
    "LONG VARCHAR": Spelling(T.MEDIUMTEXT, P.NONE),
    "LONG CHAR VARYING": Spelling(T.MEDIUMTEXT, P.NONE),
    "LONGTEXT": Spelling(T.LONGTEXT, P.NONE),
    # binary strings (charset binary)
    "BINARY": Spelling(T.BINARY, P.LENGTH, binary=True),
    "VARBINARY": Spelling(T.VARBINARY, P.LENGTH, binary=True),
    "TINYBLOB": Spelling(T.TINYBLOB, P.NONE, binary=True),
    "BLOB": Spelling(T.BLOB, P.LENGTH, binary=True),
    "MEDIUMBLOB": Spelling(T.MEDIUMBLOB, P.NONE, binary=True),
    "LONG VARBINARY": Spelling(T.MEDIUMBLOB, P.NONE, binary=True),
    "LONGBLOB": Spelling(T.LONGBLOB, P.NONE, binary=True),
    # the rest
    "ENUM": Spelling(T.ENUM, P.ELEMENTS),
    "SET": Spelling(T.SET, P.ELEMENTS),
    "JSON": Spelling(T.JSON, P.NONE),
    "DATE": Spelling(T.DATE, P.NONE),
    "DATETIME": Spelling(T.DATETIME, P.FSP),
    "TIMESTAMP": Spelling(T.TIMESTAMP, P.FSP),
    "TIME": Spelling(T.TIME, P.FSP),
    "YEAR": Spelling(T.YEAR, P.LENGTH),
    "VECTOR": Spelling(T.VECTOR, P.LENGTH),
}

del T, P

#: The longest spelling, in words (for longest-match lookup over tokens).
MAX_SPELLING_WORDS = max(len(s.split()) for s in SPELLINGS)

#: Types that take UNSIGNED / SIGNED / ZEROFILL.
NUMERIC_TYPES = frozenset(
    {MySQLType.TINYINT, MySQLType.SMALLINT, MySQLType.MEDIUMINT, MySQLType.INT, MySQLType.BIGINT,
     MySQLType.FLOAT, MySQLType.DOUBLE, MySQLType.DECIMAL}
)

#: Types that take CHARACTER SET / COLLATE / BINARY / ASCII / UNICODE / BYTE.
CHARSET_TYPES = frozenset(
    {MySQLType.CHAR, MySQLType.VARCHAR, MySQLType.TINYTEXT, MySQLType.TEXT, MySQLType.MEDIUMTEXT,
     MySQLType.LONGTEXT, MySQLType.ENUM, MySQLType.SET}
)

#: Text type -> the type TiDB stores when its charset is ``binary``.
BINARY_COUNTERPART: dict[MySQLType, MySQLType] = {
    MySQLType.CHAR: MySQLType.BINARY,
    MySQLType.VARCHAR: MySQLType.VARBINARY,
    MySQLType.TINYTEXT: MySQLType.TINYBLOB,
    MySQLType.TEXT: MySQLType.BLOB,
    MySQLType.MEDIUMTEXT: MySQLType.MEDIUMBLOB,
    MySQLType.LONGTEXT: MySQLType.LONGBLOB,
}

#: TiDB's field length when a column declares none (``mysql.GetDefaultFieldLengthAndDecimal``; integers
#: one less when UNSIGNED, except BIGINT): what TiCDC's storage sink writes as ``ColumnPrecision``.
#: ``(signed, unsigned)``.
DISPLAY_LENGTHS: dict[MySQLType, tuple[int, int]] = {
    MySQLType.TINYINT: (4, 3),
    MySQLType.SMALLINT: (6, 5),
    MySQLType.MEDIUMINT: (9, 8),
    MySQLType.INT: (11, 10),
    MySQLType.BIGINT: (20, 20),
    MySQLType.FLOAT: (12, 12),
    MySQLType.DOUBLE: (22, 22),
    MySQLType.DECIMAL: (10, 10),
    MySQLType.BIT: (1, 1),
    MySQLType.CHAR: (1, 1),
    MySQLType.BINARY: (1, 1),
    MySQLType.VARCHAR: (5, 5),
    MySQLType.VARBINARY: (5, 5),
    MySQLType.TINYTEXT: (255, 255),
    MySQLType.TINYBLOB: (255, 255),
    MySQLType.TEXT: (65535, 65535),
    MySQLType.BLOB: (65535, 65535),
    MySQLType.MEDIUMTEXT: (16777215, 16777215),
    MySQLType.MEDIUMBLOB: (16777215, 16777215),
    MySQLType.LONGTEXT: (4294967295, 4294967295),
    MySQLType.LONGBLOB: (4294967295, 4294967295),
    MySQLType.YEAR: (4, 4),
}


def default_display_length(type_: MySQLType, unsigned: bool = False) -> int | None:
    """TiDB's default field length of a type (``None`` for types without one).

    >>> default_display_length(MySQLType.INT, unsigned=True)
    10
    """
    lengths = DISPLAY_LENGTHS.get(type_)
    if lengths is None:
        return None
    return lengths[1] if unsigned else lengths[0]


def closest_spelling(text: str) -> str:
    """The accepted spelling closest to ``text`` (difflib), e.g. ``'MEDIUMINT'`` for ``'mediumnt'``."""
    word = text.strip().upper().split("(")[0].strip()
    match = difflib.get_close_matches(word, list(SPELLINGS), n=1, cutoff=0.0)
    return match[0] if match else "VARCHAR"


#: MySQL spatial types: TiDB has none, so TiCDC never sees them.
SPATIAL_TYPES = frozenset({"GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING",
                           "MULTIPOLYGON", "GEOMETRYCOLLECTION", "GEOMCOLLECTION"})


def unsupported_type(table: str, column: str, type_text: str, reason: str | None = None) -> UnsupportedColumnType:
    """The error for a type MySQL/TiDB does not have (or this tool cannot map), with the closest spelling.

    >>> unsupported_type("shop.orders", "qty", "mediumnt").suggestion
    'MEDIUMINT'
    """
    if type_text.strip().upper().split("(")[0].strip() in SPATIAL_TYPES:
        return UnsupportedColumnType(
            f"Column {column!r} of table {table} has the spatial type {type_text!r}, which TiDB and TiCDC's avro "
            "protocol do not support; spatial columns cannot be replicated.",
            table=table, column=column, mysql_type=type_text, suggestion=None,
        )
    suggestion = closest_spelling(type_text)
    why = reason or "which is not a MySQL/TiDB column type"
    return UnsupportedColumnType(
        f"Column {column!r} of table {table} has type {type_text!r}, {why}; did you mean {suggestion!r}?",
        table=table,
        column=column,
        mysql_type=type_text,
        suggestion=suggestion,
    )
