"""Table definitions: the input contract of the whole pipeline (no Avro here).

A :class:`TableDef` comes from MySQL DDL (:mod:`avro_registry_sink.tabledef.ddl`), a TiCDC storage-sink
schema file (:mod:`avro_registry_sink.tabledef.storage`) or a canal-json message
(:mod:`avro_registry_sink.tabledef.canal`). Everything is frozen so that it hashes and pickles to Spark
executors unchanged.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict

from avro_registry_sink.errors import NoHandleKey, TableDefinitionError


class MySQLType(str, Enum):
    """The column types MySQL and TiDB store (aliases such as INTEGER, BOOL or NUMERIC are folded in)."""

    TINYINT = "TINYINT"
    SMALLINT = "SMALLINT"
    MEDIUMINT = "MEDIUMINT"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    BIT = "BIT"
    CHAR = "CHAR"
    VARCHAR = "VARCHAR"
    BINARY = "BINARY"
    VARBINARY = "VARBINARY"
    TINYTEXT = "TINYTEXT"
    TEXT = "TEXT"
    MEDIUMTEXT = "MEDIUMTEXT"
    LONGTEXT = "LONGTEXT"
    TINYBLOB = "TINYBLOB"
    BLOB = "BLOB"
    MEDIUMBLOB = "MEDIUMBLOB"
    LONGBLOB = "LONGBLOB"
    ENUM = "ENUM"
    SET = "SET"
    JSON = "JSON"
    DATE = "DATE"
    DATETIME = "DATETIME"
    TIMESTAMP = "TIMESTAMP"
    TIME = "TIME"
    YEAR = "YEAR"
    VECTOR = "VECTOR"


#: Types whose charset is always ``binary`` (TiCDC's "binary" flag comes from the charset).
BINARY_TYPES = frozenset(
    {MySQLType.BINARY, MySQLType.VARBINARY, MySQLType.TINYBLOB, MySQLType.BLOB, MySQLType.MEDIUMBLOB, MySQLType.LONGBLOB}
)


class ColumnDef(BaseModel):
    """One column as TiDB stores it.

    ``default`` is TiDB's stored default (``ColumnInfo.GetDefaultValue()``): text for most types, raw
    bytes for BIT and binary-charset columns; ``None`` means no default (or ``DEFAULT NULL``).
    ``length`` is the declared width (display width, character length, BIT width); ``precision`` and
    ``scale`` are DECIMAL's (and FLOAT(M,D)'s); ``fsp`` is the fractional-seconds precision of
    DATETIME/TIMESTAMP/TIME; ``elements`` are ENUM/SET members, unescaped, in definition order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    type: MySQLType
    unsigned: bool = False
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None
    elements: tuple[str, ...] = ()
    nullable: bool = True
    binary: bool = False
    default: str | bytes | None = None

    def sql_type(self) -> str:
        """The column type as MySQL prints it, e.g. ``decimal(10,2) unsigned``.

        >>> ColumnDef(name="e", type=MySQLType.ENUM, elements=("it's", "b")).sql_type()
        "enum('it''s','b')"
        >>> ColumnDef(name="f", type=MySQLType.FLOAT, precision=7, scale=3).sql_type()
        'float(7,3)'
        """
        text = self.type.value.lower()
        if self.type in (MySQLType.ENUM, MySQLType.SET):
            members = ",".join("'" + e.replace("\\", "\\\\").replace("'", "''") + "'" for e in self.elements)
            text += f"({members})"
        elif self.type in (MySQLType.DECIMAL, MySQLType.FLOAT, MySQLType.DOUBLE) and self.precision is not None:
            text += f"({self.precision},{self.scale or 0})"
        elif self.length is not None:
            text += f"({self.length})"
        elif self.fsp:
            text += f"({self.fsp})"
        if self.unsigned:
            text += " unsigned"
        return text


class TableDef(BaseModel):
    """A table at one version: columns in table order, its keys and where it came from.

    >>> t = TableDef(schema_name="shop", table="orders",
    ...              columns=(ColumnDef(name="id", type=MySQLType.BIGINT, nullable=False),),
    ...              primary_key=("id",))
    >>> [c.name for c in t.handle_key_columns()]
    ['id']
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_name: str
    table: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()
    version: int = 0

    @property
    def qualified_name(self) -> str:
        """``schema.table``, the name every error message uses."""
        return f"{self.schema_name}.{self.table}"

    def column(self, name: str) -> ColumnDef:
        """The column called ``name`` (case-insensitive, as MySQL column names are)."""
        lowered = name.lower()
        for col in self.columns:
            if col.name.lower() == lowered:
                return col
        raise TableDefinitionError(
            f"Table {self.qualified_name} has no column {name!r}; its columns are: "
            + ", ".join(c.name for c in self.columns),
            table=self.qualified_name,
            column=name,
        )

    def handle_key_names(self) -> tuple[str, ...] | None:
        """Names of the handle-key columns in table column order, or ``None`` when there is none.

        The primary key if there is one; otherwise the unique index whose columns are all NOT NULL,
        the one with the fewest columns, ties going to the first created (TiCDC ``findHandleIndex``).
        """
        chosen: tuple[str, ...] | None = None
        if self.primary_key:
            chosen = self.primary_key
        else:
            candidates = [uk for uk in self.unique_keys if uk and all(not self.column(c).nullable for c in uk)]
            if candidates:
                chosen = min(candidates, key=len)  # min keeps the first of equal lengths
        if chosen is None:
            return None
        wanted = {c.lower() for c in chosen}
        return tuple(c.name for c in self.columns if c.name.lower() in wanted)

    def handle_key_columns(self) -> tuple[ColumnDef, ...]:
        """Handle-key columns in table column order; raises :class:`NoHandleKey` when there is none."""
        names = self.handle_key_names()
        if names is None:
            raise NoHandleKey(
                f"Table {self.qualified_name} has no primary key and no unique index on NOT NULL columns, "
                "so its rows have no Kafka key; add a PRIMARY KEY or a UNIQUE KEY over NOT NULL columns "
                "(TiCDC's avro protocol refuses such tables too: force-replicate must be off).",
                table=self.qualified_name,
            )
        wanted = set(names)
        return tuple(c for c in self.columns if c.name in wanted)
