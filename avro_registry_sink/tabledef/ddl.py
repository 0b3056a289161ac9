"""MySQL/TiDB DDL text -> :class:`~avro_registry_sink.table.TableDef`, and DDL events applied to a table.

How the text is read
--------------------
sqlglot (MySQL dialect) does the lexing: quoting, backquoted names (```a``b``` -> ``a`b``), ``--``/``#``/
``/* */`` comments (MySQL ``/*! ... */`` and TiDB ``/*T! ... */`` comments are dropped as comments),
hex/bit literals and statement boundaries. Its parser is used for the statements it models exactly
(``USE``, ``CREATE DATABASE``, ``DROP TABLE``/``DATABASE``, ``TRUNCATE``) and for ``DEFAULT``
expressions (``CURRENT_TIMESTAMP(3)``, ``NOW()``, ``-1.5``, ``b'101'``, ``_binary'..'`` ...).

Tokens and statements come from :mod:`.lexer`; ``DEFAULT`` values are evaluated by :mod:`.defaults`.
Column definitions are read by a small recursive-descent reader over sqlglot's tokens, because
sqlglot's AST loses what a table definition needs (checked with sqlglot 30): ``INT8`` becomes
TINYINT, ``LONG`` BIGINT and ``REAL`` FLOAT; ``INT3``, ``MIDDLEINT``, ``NATIONAL CHAR``,
``VARCHARACTER``, ``LONG VARCHAR``, ``LONG VARBINARY``, ``CHAR BYTE`` and ``NCHAR VARCHAR`` do not
parse at all; ``SIGNED`` is dropped; ``TIMESTAMP`` becomes ``TIMESTAMPTZ``; and its string literals lose
MySQL escapes (``'\\n'`` -> ``n``, ``'\\%'`` -> ``%``). String tokens are therefore re-read from the
source with MySQL's rules before anything (sqlglot's parser included) sees them, and the rest of a
statement sqlglot lexes as one "command" string (``RENAME TABLE ...``, ``LOCK TABLES ...``) is lexed
again. Type spellings come from the one table in :mod:`avro_registry_sink.tabledef.types`.

What a column becomes
---------------------
* ``length``: the declared width/length (``INT(11)`` -> 11, ``VARCHAR(64)`` -> 64, ``BIT(10)`` -> 10,
  ``VECTOR(3)`` -> 3); ``None`` when not given (``BOOL`` is ``TINYINT(1)``).
* ``precision``/``scale``: DECIMAL (10 and 0 when not given, ``DECIMAL(M)`` has scale 0) and
  ``FLOAT(M,D)``/``DOUBLE(M,D)``. ``FLOAT(p)`` is FLOAT for p <= 24 and DOUBLE for 25..53.
* ``fsp``: as declared for DATETIME/TIMESTAMP/TIME, ``None`` when not given.
* ``elements``: ENUM/SET members unescaped as MySQL stores them (``'a''b'`` -> ``a'b``, ``'x\\,y'`` ->
  ``x,y``, ``'\\%'`` stays ``\\%``), trailing spaces removed as MySQL does.
* ``binary``: the charset is ``binary``: BINARY/VARBINARY/BLOB types, ``CHARACTER SET binary``,
  ``BYTE``, ``COLLATE binary`` or a table ``CHARSET=binary``; a text type with charset binary becomes its
  binary counterpart (``VARCHAR(10) CHARACTER SET binary`` is ``VARBINARY(10)``, as TiDB stores it).
  ``VARCHAR(10) BINARY`` only picks a ``_bin`` collation and stays text.
* ``unsigned``: ``UNSIGNED``, ``ZEROFILL`` (implies unsigned), ``SERIAL``.
* ``nullable``: False for ``NOT NULL``, PRIMARY KEY and SERIAL columns.
* ``default``: what TiDB stores (``ColumnInfo.GetDefaultValue()``), see :func:`default_value`.
* Generated columns: ``STORED`` ones are kept; ``VIRTUAL`` ones (the default) are dropped, with any
  unique key over them, because TiCDC never sees virtual generated columns (rows, schemas and handle
  keys all leave them out).

Keys: the primary key (inline or table level); unique keys (``UNIQUE [KEY|INDEX]``,
``CONSTRAINT x UNIQUE``, ``SERIAL``) in TiDB's creation order, i.e. table-level keys first, in
order, then inline ``UNIQUE`` column options in column order (TiDB appends column constraints
after the table constraints). Prefix parts ``(col(10))`` are accepted; keys with expression parts
``((lower(x)))`` are left out (they cannot be a handle key).

Time zone: TIMESTAMP string defaults are taken as UTC (TiDB stores them converted from the session
time zone to UTC; a DDL file does not say which session time zone it ran in).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

from avro_registry_sink.errors import TableDefinitionError
from avro_registry_sink.table import BINARY_TYPES, ColumnDef, MySQLType, TableDef
from avro_registry_sink.tabledef.defaults import default_value, evaluate_default
from avro_registry_sink.tabledef.lexer import (
    DIALECT,
    Statement,
    Tok,
    TokenStream,
    lex,
    split_statements,
)
from avro_registry_sink.tabledef.types import (
    BINARY_COUNTERPART,
    CHARSET_TYPES,
    MAX_SPELLING_WORDS,
    NUMERIC_TYPES,
    SPELLINGS,
    Params,
    unsupported_type,
)

__all__ = ["apply_ddl", "column_from_type", "default_value", "parse_ddl"]

# --------------------------------------------------------------------------------------------------
# Column types


@dataclass
class _TypeSpec:
    type: MySQLType
    text: str
    unsigned: bool = False
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None
    elements: tuple[str, ...] = ()
    binary: bool = False  # charset binary implied by the spelling
    charset: str | None = None
    collation: str | None = None
    serial: bool = False


def _type_text(s: TokenStream, start: int) -> str:
    end = s.toks[max(s.pos - 1, start)]
    return s.text[s.toks[start].start : end.end + 1]


def _parse_type(s: TokenStream, table: str, column: str) -> _TypeSpec:
    start = s.pos
    if s.word() is None:
        raise s.error(f"expected the type of column {column!r}")
    spelling = None
    for n in range(MAX_SPELLING_WORDS, 0, -1):
        words = [s.word(i) for i in range(n)]
        if None not in words and " ".join(words) in SPELLINGS:  # type: ignore[arg-type]
            spelling = SPELLINGS[" ".join(words)]  # type: ignore[arg-type]
            s.pos += n
            break
    if spelling is None:
        s.pos += 1
        if s.at_kind(TokenType.L_PAREN):
            s.skip_balanced()
        raise unsupported_type(table, column, _type_text(s, start) if s.toks[start:] else "")
    spec = _TypeSpec(type=spelling.type, text="", unsigned=spelling.unsigned, length=spelling.length,
                     binary=spelling.binary, serial=spelling.serial)
    if spelling.type is MySQLType.VECTOR and s.at_kind(TokenType.LT):  # TiDB VECTOR<FLOAT>(n)
        s.pos += 1
        s.expect("FLOAT")
        s.expect_kind(TokenType.GT, ">")
    if s.at_kind(TokenType.L_PAREN):
        _parse_type_args(s, spec, spelling.params, table, column, start)
    if spec.type is MySQLType.DECIMAL:
        spec.precision = 10 if spec.precision is None else spec.precision
        spec.scale = 0 if spec.scale is None else spec.scale
    while True:  # type modifiers, in any order
        if spec.type in NUMERIC_TYPES and s.accept("UNSIGNED"):
            spec.unsigned = True
        elif spec.type in NUMERIC_TYPES and s.accept("SIGNED"):
            pass
        elif spec.type in NUMERIC_TYPES and s.accept("ZEROFILL"):
            spec.unsigned = True
        elif spec.type in CHARSET_TYPES and _parse_charset_option(s, spec):
            pass
        else:
            break
    spec.text = _type_text(s, start)
    return spec


def _parse_type_args(s: TokenStream, spec: _TypeSpec, params: Params, table: str, column: str, start: int) -> None:
    if params is Params.NONE:
        s.skip_balanced()
        raise unsupported_type(table, column, _type_text(s, start), "which takes no length or arguments")
    s.expect_kind(TokenType.L_PAREN, "(")
    if params is Params.ELEMENTS:
        members = []
        while True:
            tok = s.accept_kind(TokenType.STRING) or s.accept_kind(TokenType.NATIONAL_STRING)
            if tok is None:
                raise s.error(f"expected a quoted member of the {spec.type.value} of column {column!r}")
            members.append(tok.text.rstrip(" "))  # MySQL drops trailing spaces of members
            if not s.accept_kind(TokenType.COMMA):
                break
        spec.elements = tuple(members)
    else:
        first = s.number(f"the length of column {column!r}")
        second = s.number(f"the scale of column {column!r}") if s.accept_kind(TokenType.COMMA) else None
        if params is Params.LENGTH or params is Params.FSP:
            if second is not None:
                raise s.error(f"{spec.type.value} of column {column!r} takes one number")
            if params is Params.FSP:
                if first > 6:
                    raise s.error(f"fractional seconds precision of column {column!r} is {first}, at most 6")
                spec.fsp = first
            else:
                spec.length = first
        elif params is Params.DECIMAL:
            spec.precision, spec.scale = first, (second if second is not None else 0)
        elif params is Params.FLOAT and second is None:  # FLOAT(p): precision in bits picks the type
            if first > 53:
                raise s.error(f"FLOAT({first}) of column {column!r}: the precision is at most 53")
            spec.type = MySQLType.FLOAT if first <= 24 else MySQLType.DOUBLE
        else:  # FLOAT(M,D) / DOUBLE(M,D)
            if second is None:
                raise s.error(f"{spec.type.value} of column {column!r} takes (M,D)")
            spec.precision, spec.scale = first, second
    s.expect_kind(TokenType.R_PAREN, ")")


def _charset_name(s: TokenStream) -> str:
    s.accept_kind(TokenType.EQ)
    tok = s.peek()
    if tok is None or (tok.word is None and tok.kind not in (TokenType.STRING, TokenType.IDENTIFIER)):
        raise s.error("expected a character set or collation name")
    s.pos += 1
    return tok.text.lower()


def _parse_charset_option(s: TokenStream, spec: _TypeSpec) -> bool:
    if s.accept("CHARACTER", "SET") or s.accept("CHARSET") or s.accept("CHAR", "SET"):
        spec.charset = _charset_name(s)
    elif s.accept("COLLATE"):
        spec.collation = _charset_name(s)
    elif s.accept("BYTE"):
        spec.charset = "binary"
    elif s.accept("ASCII"):
        spec.charset = "latin1"
    elif s.accept("UNICODE"):
        spec.charset = "ucs2"
    elif s.accept("BINARY"):  # a _bin collation, not the binary charset
        spec.collation = spec.collation or "_bin"
    else:
        return False
    return True


# --------------------------------------------------------------------------------------------------
# Column definitions


@dataclass
class _ColSpec:
    name: str
    type: _TypeSpec
    nullable: bool | None = None
    default: list[Tok] | None = None  # tokens of the DEFAULT expression
    primary: bool = False
    unique: bool = False
    virtual: bool = False
    auto_increment: bool = False


_REF_ACTIONS = (("RESTRICT",), ("CASCADE",), ("SET", "NULL"), ("NO", "ACTION"), ("SET", "DEFAULT"))


def _skip_references(s: TokenStream) -> None:
    s.table_name()
    if s.at_kind(TokenType.L_PAREN):
        s.skip_balanced()
    while True:
        if s.accept("MATCH"):
            s.name("FULL, PARTIAL or SIMPLE")
        elif s.at("ON", "DELETE") or s.at("ON", "UPDATE"):
            s.pos += 2
            if not any(s.accept(*action) for action in _REF_ACTIONS):
                raise s.error("expected a referential action")
        else:
            return


def _default_tokens(s: TokenStream) -> list[Tok]:
    start = s.pos
    while s.at_kind(TokenType.DASH) or s.at_kind(TokenType.PLUS):
        s.pos += 1
    tok = s.peek()
    if tok is None:
        raise s.error("expected a DEFAULT value")
    if tok.kind is TokenType.L_PAREN:
        s.skip_balanced()
    elif tok.kind in (TokenType.STRING, TokenType.NATIONAL_STRING):
        s.pos += 1
        while s.at_kind(TokenType.STRING):  # 'a' 'b' is 'ab'
            s.pos += 1
    elif tok.kind is TokenType.INTRODUCER:
        s.pos += 2
    elif tok.kind in (TokenType.NUMBER, TokenType.HEX_STRING, TokenType.BIT_STRING):
        s.pos += 1
    elif tok.kind is TokenType.DOT and s.at_kind(TokenType.NUMBER, 1):  # .5
        s.pos += 2
    elif tok.word is not None:
        s.pos += 1
        if s.at_kind(TokenType.L_PAREN):
            s.skip_balanced()
    else:
        raise s.error("expected a DEFAULT value")
    return s.toks[start : s.pos]


def _parse_column(s: TokenStream, table: str) -> _ColSpec:
    name = s.name("a column name")
    col = _ColSpec(name=name, type=_parse_type(s, table, name))
    if col.type.serial:
        col.nullable, col.unique, col.auto_increment = False, True, True
    while not s.at_element_end() and not s.at("FIRST") and not s.at("AFTER"):
        if s.accept("NOT", "NULL"):
            col.nullable = False
        elif s.accept("NULL"):
            col.nullable = True
        elif s.accept("DEFAULT"):
            col.default = _default_tokens(s)
        elif s.accept("AUTO_INCREMENT"):
            col.auto_increment = True
        elif s.accept("AUTO_RANDOM"):  # TiDB
            if s.at_kind(TokenType.L_PAREN):
                s.skip_balanced()
        elif s.accept("SERIAL", "DEFAULT", "VALUE"):
            col.nullable, col.unique, col.auto_increment = False, True, True
        elif s.accept("UNIQUE"):
            s.accept("KEY") or s.accept("INDEX")
            col.unique = True
        elif s.accept("PRIMARY", "KEY") or s.accept("KEY"):
            col.primary = True
        elif s.accept("COMMENT"):
            s.expect_kind(TokenType.STRING, "a quoted comment")
        elif _parse_charset_option(s, col.type):
            pass
        elif s.accept("COLUMN_FORMAT") or s.accept("STORAGE") or s.accept("SRID"):
            s.pos += 1
        elif s.accept("ENGINE_ATTRIBUTE") or s.accept("SECONDARY_ENGINE_ATTRIBUTE"):
            s.accept_kind(TokenType.EQ)
            s.expect_kind(TokenType.STRING, "a quoted attribute")
        elif s.accept("ON", "UPDATE"):
            s.name("CURRENT_TIMESTAMP")
            if s.at_kind(TokenType.L_PAREN):
                s.skip_balanced()
        elif s.at("GENERATED") or s.at("AS"):
            s.accept("GENERATED", "ALWAYS")
            s.expect("AS")
            s.skip_balanced()
            col.virtual = True  # VIRTUAL is the default
            if s.accept("STORED") or s.accept("PERSISTENT"):
                col.virtual = False
            else:
                s.accept("VIRTUAL")
        elif s.accept("REFERENCES"):
            _skip_references(s)
        elif s.at("CONSTRAINT") or s.at("CHECK"):
            if s.accept("CONSTRAINT") and not s.at("CHECK"):
                s.name("a constraint name")
            s.expect("CHECK")
            s.skip_balanced()
        elif s.accept("NOT", "ENFORCED") or s.accept("ENFORCED") or s.accept("VISIBLE") or s.accept("INVISIBLE"):
            pass
        else:
            unexpected = s.peek().text  # type: ignore[union-attr]
            raise s.error(f"unexpected {unexpected!r} in the definition of column {name!r}")
    return col


def _is_binary_charset(spec: _TypeSpec, table_binary: bool) -> bool:
    if spec.binary or spec.charset == "binary" or spec.collation == "binary":
        return True
    return table_binary and spec.charset is None and spec.collation is None


def _finish_column(col: _ColSpec, stmt: Statement, table: str, *, table_binary: bool = False,
                   force_not_null: bool = False) -> ColumnDef:
    spec = col.type
    type_ = spec.type
    binary = False
    if type_ in BINARY_TYPES:
        binary = True
    elif type_ in CHARSET_TYPES and _is_binary_charset(spec, table_binary):
        binary = True
        type_ = BINARY_COUNTERPART.get(type_, type_)
    nullable = col.nullable if col.nullable is not None else True
    if col.primary or force_not_null:
        nullable = False
    column = ColumnDef(
        name=col.name, type=type_, unsigned=spec.unsigned, length=spec.length, precision=spec.precision,
        scale=spec.scale, fsp=spec.fsp, elements=spec.elements, nullable=nullable, binary=binary,
    )
    if col.default is not None:
        column = column.model_copy(update={"default": evaluate_default(col.default, stmt, column, table)})
    return column


# --------------------------------------------------------------------------------------------------
# Keys


@dataclass
class _KeySpec:
    primary: bool
    name: str | None
    columns: list[str] | None  # None: a key with expression parts (not usable as a handle key)


def _parse_key_parts(s: TokenStream) -> list[str] | None:
    s.expect_kind(TokenType.L_PAREN, "( before the key columns")
    columns: list[str] | None = []
    while True:
        if s.at_kind(TokenType.L_PAREN):  # functional key part
            s.skip_balanced()
            columns = None
        else:
            name = s.name("a key column")
            if columns is not None:
                columns.append(name)
            if s.at_kind(TokenType.L_PAREN):  # prefix length col(10)
                s.skip_balanced()
        s.accept("ASC") or s.accept("DESC")
        if not s.accept_kind(TokenType.COMMA):
            break
    s.expect_kind(TokenType.R_PAREN, ") after the key columns")
    return columns


def _parse_key_after_kind(s: TokenStream, primary: bool) -> _KeySpec:
    """After ``PRIMARY KEY`` / ``UNIQUE [KEY|INDEX]``: ``[IF NOT EXISTS] [name] [USING x] (parts) [options]``."""
    s.accept("IF", "NOT", "EXISTS")
    name = None
    if not s.at_kind(TokenType.L_PAREN) and not s.at("USING"):
        name = s.name("an index name")
    if s.accept("USING"):
        s.name("an index type")
    columns = _parse_key_parts(s)
    s.skip_element()  # index options: COMMENT, USING, KEY_BLOCK_SIZE, VISIBLE, CLUSTERED ...
    return _KeySpec(primary=primary, name=name, columns=columns)


_CONSTRAINT_WORDS = frozenset({"CONSTRAINT", "PRIMARY", "UNIQUE", "KEY", "INDEX", "FULLTEXT", "SPATIAL", "FOREIGN",
                               "CHECK"})


def _parse_constraint(s: TokenStream) -> _KeySpec | None:
    """A table-level constraint or index; a key spec for PRIMARY KEY / UNIQUE, else None (skipped)."""
    if s.accept("CONSTRAINT") and not (s.at("PRIMARY") or s.at("UNIQUE") or s.at("FOREIGN") or s.at("CHECK")):
        s.name("a constraint name")
    if s.accept("PRIMARY", "KEY"):
        return _parse_key_after_kind(s, primary=True)
    if s.accept("UNIQUE"):
        s.accept("KEY") or s.accept("INDEX")
        return _parse_key_after_kind(s, primary=False)
    if s.word() in ("KEY", "INDEX", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK"):
        s.skip_element()
        return None
    raise s.error("expected PRIMARY KEY, UNIQUE, INDEX, KEY, FOREIGN KEY or CHECK")


# --------------------------------------------------------------------------------------------------
# A table being changed


def _default_key_name(columns: list[str], taken: Iterable[str]) -> str:
    used = {n.lower() for n in taken}
    base = columns[0] if columns else "key"
    name, n = base, 2
    while name.lower() in used or name.lower() == "primary":
        name, n = f"{base}_{n}", n + 1
    return name


@dataclass
class _Draft:
    """A mutable table: columns, keys with their index names, and where it lives."""

    schema: str
    name: str
    columns: list[ColumnDef]
    primary_key: list[str] = field(default_factory=list)
    unique_keys: list[list[str]] = field(default_factory=list)
    key_names: list[str] = field(default_factory=list)
    version: int = 0

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @classmethod
    def of(cls, table: TableDef, key_names: list[str] | None = None) -> _Draft:
        draft = cls(table.schema_name, table.table, list(table.columns), list(table.primary_key),
                    [list(k) for k in table.unique_keys], [], table.version)
        if key_names is not None and len(key_names) == len(table.unique_keys):
            draft.key_names = list(key_names)
        else:  # names are not part of TableDef: MySQL's generated names are the best guess
            for key in draft.unique_keys:
                draft.key_names.append(_default_key_name(key, draft.key_names))
        return draft

    def find(self, name: str) -> int | None:
        lowered = name.lower()
        for i, col in enumerate(self.columns):
            if col.name.lower() == lowered:
                return i
        return None

    def resolve(self, names: list[str], what: str) -> list[str]:
        out = []
        for n in names:
            i = self.find(n)
            if i is None:
                raise TableDefinitionError(
                    f"Table {self.qualified}: {what} names column {n!r}, which the table does not have; its "
                    "columns are: " + ", ".join(c.name for c in self.columns),
                    table=self.qualified, column=n,
                )
            if self.columns[i].name in out:
                raise TableDefinitionError(f"Table {self.qualified}: {what} names column {n!r} twice.",
                                           table=self.qualified, column=n)
            out.append(self.columns[i].name)
        return out

    def add_key(self, key: _KeySpec, virtual: set[str], *, lenient: bool = False) -> None:
        """Add a key; ``lenient`` (ALTER): a unique key over a column the table does not hold is
        taken to be over a virtual generated column and left out."""
        if key.columns is None:
            return
        if lenient and not key.primary and any(self.find(c) is None for c in key.columns):
            return
        if any(c.lower() in virtual for c in key.columns):
            if key.primary:
                raise TableDefinitionError(
                    f"Table {self.qualified}: the primary key cannot include a virtual generated column.",
                    table=self.qualified)
            return  # TiCDC ignores indexes over virtual generated columns
        columns = self.resolve(key.columns, "the primary key" if key.primary else "a unique key")
        if key.primary:
            if self.primary_key:
                raise TableDefinitionError(f"Table {self.qualified} defines more than one primary key.",
                                           table=self.qualified)
            self.primary_key = columns
            for c in columns:
                i = self.find(c)
                self.columns[i] = self.columns[i].model_copy(update={"nullable": False})  # type: ignore[index]
        else:
            self.key_names.append(key.name or _default_key_name(columns, self.key_names))
            self.unique_keys.append(columns)

    def drop_index(self, name: str) -> None:
        if name.lower() == "primary":
            self.primary_key = []
            return
        for i, key_name in enumerate(self.key_names):
            if key_name.lower() == name.lower():
                del self.key_names[i]
                del self.unique_keys[i]
                return
        # not a unique key we know by this name: a plain index, which does not change the definition

    def rename_column(self, old: str, new: str) -> None:
        def swap(names: list[str]) -> list[str]:
            return [new if n.lower() == old.lower() else n for n in names]

        self.primary_key = swap(self.primary_key)
        self.unique_keys = [swap(k) for k in self.unique_keys]

    def drop_column(self, name: str) -> None:
        i = self.find(name)
        if i is None:
            return  # e.g. a virtual generated column, which TableDef does not hold
        actual = self.columns.pop(i).name
        self.primary_key = [c for c in self.primary_key if c != actual]
        kept = [(k, n) for k, n in zip(self.unique_keys, self.key_names, strict=False) if k != [actual]]
        self.unique_keys = [[c for c in k if c != actual] for k, _ in kept]
        self.key_names = [n for _, n in kept]

    def to_table(self) -> TableDef:
        pk = {c.lower() for c in self.primary_key}
        columns = tuple(c.model_copy(update={"nullable": False}) if c.name.lower() in pk and c.nullable else c
                        for c in self.columns)
        if not columns:
            raise TableDefinitionError(f"Table {self.qualified} has no columns.", table=self.qualified)
        return TableDef(schema_name=self.schema, table=self.name, columns=columns,
                        primary_key=tuple(self.primary_key),
                        unique_keys=tuple(tuple(k) for k in self.unique_keys if k), version=self.version)


# --------------------------------------------------------------------------------------------------
# Statements


def _table_charset_binary(s: TokenStream) -> bool:
    """Scan table options for ``[DEFAULT] CHARSET|CHARACTER SET [=] x`` / ``COLLATE [=] x``."""
    binary = False
    while not s.at_end():
        if s.accept("CHARACTER", "SET") or s.accept("CHARSET"):
            binary = _charset_name(s) == "binary"
        elif s.accept("COLLATE"):
            binary = binary or _charset_name(s) == "binary"
        elif s.at_kind(TokenType.L_PAREN):
            s.skip_balanced()
        else:
            s.pos += 1
    return binary


def _parse_create_table(stmt: Statement, s: TokenStream, schema: str,
                        known: dict[tuple[str, str], tuple[TableDef, list[str]]]) -> tuple[_Draft, bool]:
    """After ``CREATE TABLE``: the new table and whether it had ``IF NOT EXISTS``."""
    if_not_exists = s.accept("IF", "NOT", "EXISTS")
    db, name = s.table_name()
    db = db or schema
    s.table = f"{db}.{name}"
    if s.at("LIKE") or (s.at_kind(TokenType.L_PAREN) and s.word(1) == "LIKE"):
        paren = bool(s.accept_kind(TokenType.L_PAREN))
        s.expect("LIKE")
        src_db, src_name = s.table_name()
        if paren:
            s.expect_kind(TokenType.R_PAREN, ")")
        source = known.get(((src_db or schema).lower(), src_name.lower()))
        if source is None:
            raise s.error(f"CREATE TABLE ... LIKE {(src_db or schema)}.{src_name}: that table is not defined earlier")
        draft = _Draft.of(source[0], source[1])
        draft.schema, draft.name, draft.version = db, name, 0
        return draft, if_not_exists
    if not s.accept_kind(TokenType.L_PAREN):
        raise s.error("expected ( and the column definitions (CREATE TABLE ... AS SELECT is not supported)")
    specs: list[_ColSpec] = []
    keys: list[_KeySpec] = []
    while True:
        if s.word() in _CONSTRAINT_WORDS:
            key = _parse_constraint(s)
            if key is not None:
                keys.append(key)
        else:
            specs.append(_parse_column(s, s.table))
        if not s.accept_kind(TokenType.COMMA):
            break
    s.expect_kind(TokenType.R_PAREN, ", or ) after a column definition")
    table_binary = _table_charset_binary(s)
    return _build_draft(stmt, db, name, specs, keys, table_binary), if_not_exists


def _build_draft(stmt: Statement, db: str, name: str, specs: list[_ColSpec], keys: list[_KeySpec],
                 table_binary: bool) -> _Draft:
    qualified = f"{db}.{name}"
    seen: set[str] = set()
    for spec in specs:
        if spec.name.lower() in seen:
            raise TableDefinitionError(f"Table {qualified} defines column {spec.name!r} twice.",
                                       table=qualified, column=spec.name)
        seen.add(spec.name.lower())
    virtual = {c.name.lower() for c in specs if c.virtual}
    draft = _Draft(db, name, [_finish_column(c, stmt, qualified, table_binary=table_binary)
                              for c in specs if not c.virtual])
    # TiDB's index order: table-level constraints first, then column options in column order
    ordered = list(keys)
    for c in specs:
        if c.primary:
            ordered.append(_KeySpec(primary=True, name=None, columns=[c.name]))
        if c.unique:
            ordered.append(_KeySpec(primary=False, name=None, columns=[c.name]))
    for key in ordered:
        draft.add_key(key, virtual)
    return draft


class _Catalog:
    """Tables by (schema, table), changed statement by statement; ``strict`` is apply_ddl's one-table mode."""

    def __init__(self, schema: str, strict: bool = False) -> None:
        self.schema = schema
        self.strict = strict
        self.tables: dict[tuple[str, str], tuple[TableDef, list[str]]] = {}
        self.created = 0

    @staticmethod
    def key(schema: str, name: str) -> tuple[str, str]:
        return schema.lower(), name.lower()

    def put(self, draft: _Draft) -> None:
        self.tables[self.key(draft.schema, draft.name)] = (draft.to_table(), draft.key_names)

    def get(self, s: TokenStream, db: str | None, name: str) -> tuple[tuple[str, str], _Draft]:
        key = self.key(db or self.schema, name)
        entry = self.tables.get(key)
        if entry is None:
            known = ", ".join(f"{t.qualified_name}" for t, _ in self.tables.values()) or "none"
            s.table = f"{db or self.schema}.{name}"
            raise s.error("the statement is about a table that is not "
                          + ("the one given" if self.strict else "defined earlier in the text")
                          + f" (known: {known})")
        return key, _Draft.of(entry[0], entry[1])

    def execute(self, stmt: Statement) -> None:
        s = TokenStream(stmt)
        first = s.word()
        if first == "USE":
            self._use(stmt)
        elif first == "CREATE":
            self._create(stmt, s)
        elif first == "ALTER" and s.word(1) == "TABLE":
            s.pos += 2
            self._alter(stmt, s)
        elif first == "DROP":
            self._drop(stmt, s)
        elif first == "RENAME" and s.word(1) == "TABLE":
            s.pos += 2
            self._rename(s)
        # TRUNCATE, INSERT, SET, LOCK ... do not change table definitions

    # -- sqlglot for the statements it models exactly

    def _ast(self, stmt: Statement) -> exp.Expression | None:
        tokens: list[Token] = []
        for tok in stmt.toks:
            if not tokens or tokens[-1] is not tok.src:
                tokens.append(tok.src)
        try:
            parsed = DIALECT.parser().parse(tokens, stmt.text)
        except ParseError as exc:
            raise TokenStream(stmt).error(f"cannot parse {stmt.source[:60]!r} ({exc})") from None
        return parsed[0] if parsed else None  # type: ignore[return-value]  # sqlglot's Expr is its Expression

    def _use(self, stmt: Statement) -> None:
        node = self._ast(stmt)
        if isinstance(node, exp.Use) and node.this is not None:
            self.schema = node.this.name or node.this.db

    def _create(self, stmt: Statement, s: TokenStream) -> None:
        s.pos = 1
        s.accept("OR", "REPLACE")
        if s.accept("TEMPORARY") or s.at("GLOBAL", "TEMPORARY"):
            return  # temporary tables are not replicated
        if s.word() in ("DATABASE", "SCHEMA"):
            node = self._ast(stmt)
            if isinstance(node, exp.Create) and isinstance(node.this, exp.Table) and not self.strict:
                self.schema = node.this.name or node.this.db  # following tables go there (dump convention)
            return
        if s.accept("TABLE"):
            draft, if_not_exists = _parse_create_table(stmt, s, self.schema, self.tables)
            key = self.key(draft.schema, draft.name)
            self.created += 1
            if self.strict and key not in self.tables and self.tables:
                existing = next(iter(self.tables.values()))[0]
                raise s.error(f"CREATE TABLE {draft.qualified} is not about {existing.qualified_name}")
            if key in self.tables:
                if if_not_exists:
                    return
                if self.strict:
                    self.put(draft)
                    return
                raise TableDefinitionError(f"Table {draft.qualified} is created twice in the DDL text.",
                                           table=draft.qualified)
            self.put(draft)
            return
        unique = s.accept("UNIQUE")
        s.accept("FULLTEXT") or s.accept("SPATIAL")
        if s.accept("INDEX"):
            index_name = s.name("an index name")
            if s.accept("USING"):
                s.name("an index type")
            s.expect("ON")
            db, name = s.table_name()
            key, draft = self.get(s, db, name)
            if unique:
                columns = _parse_key_parts(s)
                draft.add_key(_KeySpec(primary=False, name=index_name, columns=columns), set(), lenient=True)
                self.tables[key] = (draft.to_table(), draft.key_names)

    def _drop(self, stmt: Statement, s: TokenStream) -> None:
        if s.word(1) == "INDEX":
            s.pos = 2
            s.accept("IF", "EXISTS")
            index_name = s.name("an index name")
            s.expect("ON")
            db, name = s.table_name()
            key, draft = self.get(s, db, name)
            draft.drop_index(index_name)
            self.tables[key] = (draft.to_table(), draft.key_names)
            return
        if s.word(1) not in ("TABLE", "TABLES", "DATABASE", "SCHEMA") and not s.at("DROP", "TEMPORARY", "TABLE"):
            return
        node = self._ast(stmt)
        if not isinstance(node, exp.Drop):
            return
        kind = str(node.args.get("kind") or "").upper()
        targets = node.args.get("tables") or ([node.this] if node.this is not None else [])
        if kind in ("DATABASE", "SCHEMA"):
            names = {(t.name or t.db).lower() for t in targets}
            for key in [k for k in self.tables if k[0] in names]:
                del self.tables[key]
            return
        found = False
        for t in targets:
            key = self.key(t.db or self.schema, t.name)
            if key in self.tables:
                del self.tables[key]
                found = True
        if self.strict and not found and targets and not node.args.get("exists"):
            self.get(s, targets[0].db or None, targets[0].name)  # raises: the statement is about another table

    def _rename(self, s: TokenStream) -> None:
        s.table = ""
        matched = False
        while True:
            db, name = s.table_name()
            s.expect("TO")
            new_db, new_name = s.table_name()
            key = self.key(db or self.schema, name)
            if key in self.tables:
                matched = True
                table, names = self.tables.pop(key)
                renamed = table.model_copy(update={"schema_name": new_db or table.schema_name, "table": new_name})
                self.tables[self.key(renamed.schema_name, new_name)] = (renamed, names)
            if not s.accept_kind(TokenType.COMMA):
                break
        if not matched:
            self.get(s, db, name)  # raises: none of the renamed tables is known

    def _alter(self, stmt: Statement, s: TokenStream) -> None:
        s.accept("IGNORE")
        db, name = s.table_name()
        key, draft = self.get(s, db, name)
        s.table = draft.qualified
        while not s.at_end():
            self._alter_spec(stmt, s, draft)
            s.skip_element()  # what a spec leaves: index options, ALGORITHM=..., LOCK=...
            if not s.accept_kind(TokenType.COMMA) and not s.at_end():
                raise s.error("unexpected text in ALTER TABLE")
        del self.tables[key]
        self.tables[self.key(draft.schema, draft.name)] = (draft.to_table(), draft.key_names)

    def _alter_spec(self, stmt: Statement, s: TokenStream, draft: _Draft) -> None:
        if s.accept("ADD"):
            if s.word() in _CONSTRAINT_WORDS:
                key = _parse_constraint(s)
                if key is not None:
                    draft.add_key(key, set(), lenient=True)
                return
            if s.at("PARTITION"):
                s.skip_element()
                return
            s.accept("COLUMN")
            s.accept("IF", "NOT", "EXISTS")
            if s.accept_kind(TokenType.L_PAREN):
                while True:
                    self._add_column(stmt, s, draft, _parse_column(s, draft.qualified), positioned=False)
                    if not s.accept_kind(TokenType.COMMA):
                        break
                s.expect_kind(TokenType.R_PAREN, ")")
            else:
                self._add_column(stmt, s, draft, _parse_column(s, draft.qualified), positioned=True)
        elif s.accept("DROP"):
            if s.accept("PRIMARY", "KEY"):
                draft.primary_key = []
            elif s.accept("INDEX") or s.accept("KEY") or s.accept("CONSTRAINT") or s.accept("UNIQUE"):
                s.accept("IF", "EXISTS")
                draft.drop_index(s.name("an index name"))
            elif s.at("FOREIGN") or s.at("CHECK") or s.at("PARTITION"):
                s.skip_element()
            else:
                s.accept("COLUMN")
                s.accept("IF", "EXISTS")
                draft.drop_column(s.name("a column name"))
        elif s.accept("MODIFY"):
            s.accept("COLUMN")
            s.accept("IF", "EXISTS")
            spec = _parse_column(s, draft.qualified)
            self._replace_column(stmt, s, draft, spec.name, spec)
        elif s.accept("CHANGE"):
            s.accept("COLUMN")
            s.accept("IF", "EXISTS")
            old = s.name("a column name")
            spec = _parse_column(s, draft.qualified)
            self._replace_column(stmt, s, draft, old, spec)
        elif s.accept("RENAME"):
            if s.accept("COLUMN"):
                old = s.name("a column name")
                s.expect("TO")
                new = s.name("a column name")
                i = draft.find(old)
                if i is not None:
                    if draft.find(new) not in (None, i):
                        raise s.error(f"column {new!r} exists already")
                    draft.columns[i] = draft.columns[i].model_copy(update={"name": new})
                    draft.rename_column(old, new)
            elif s.accept("INDEX") or s.accept("KEY"):
                old = s.name("an index name")
                s.expect("TO")
                new = s.name("an index name")
                draft.key_names = [new if n.lower() == old.lower() else n for n in draft.key_names]
            else:
                s.accept("TO") or s.accept("AS")
                new_db, new_name = s.table_name()
                draft.schema, draft.name = new_db or draft.schema, new_name
        elif s.accept("ALTER"):
            if s.accept("INDEX") or s.accept("CONSTRAINT") or s.accept("CHECK"):
                s.skip_element()
                return
            s.accept("COLUMN")
            name = s.name("a column name")
            i = draft.find(name)
            if s.accept("SET", "DEFAULT"):
                toks = _default_tokens(s)
                if i is not None:
                    col = draft.columns[i]
                    draft.columns[i] = col.model_copy(
                        update={"default": evaluate_default(toks, stmt, col, draft.qualified)})
            elif s.accept("DROP", "DEFAULT"):
                if i is not None:
                    draft.columns[i] = draft.columns[i].model_copy(update={"default": None})
            else:
                s.skip_element()
        elif s.accept("CONVERT", "TO"):
            s.accept("CHARACTER", "SET") or s.accept("CHARSET")
            if _charset_name(s) == "binary":
                draft.columns = [
                    c.model_copy(update={"type": BINARY_COUNTERPART[c.type], "binary": True})
                    if c.type in BINARY_COUNTERPART else c for c in draft.columns
                ]
            s.skip_element()
        else:
            s.skip_element()  # table options, ALGORITHM, LOCK, ORDER BY, partitions, TiFlash replicas ...

    def _position(self, s: TokenStream, draft: _Draft) -> int | None:
        if s.accept("FIRST"):
            return 0
        if s.accept("AFTER"):
            after = s.name("a column name")
            i = draft.find(after)
            if i is None:
                raise s.error(f"AFTER {after!r}: the table has no such column (virtual generated columns are "
                              "not tracked)")
            return i + 1
        return None

    def _add_column(self, stmt: Statement, s: TokenStream, draft: _Draft, spec: _ColSpec, *, positioned: bool) -> None:
        position = self._position(s, draft) if positioned else None
        if spec.virtual:
            return
        if draft.find(spec.name) is not None:
            raise s.error(f"column {spec.name!r} exists already")
        col = _finish_column(spec, stmt, draft.qualified)
        draft.columns.insert(len(draft.columns) if position is None else position, col)
        self._inline_keys(draft, spec)

    def _replace_column(self, stmt: Statement, s: TokenStream, draft: _Draft, old: str, spec: _ColSpec) -> None:
        i = draft.find(old)
        if i is None:
            if spec.virtual:
                self._position(s, draft)
                return
            raise s.error(f"column {old!r} does not exist")
        if spec.name.lower() != old.lower() and draft.find(spec.name) is not None:
            raise s.error(f"column {spec.name!r} exists already")
        in_pk = any(c.lower() == old.lower() for c in draft.primary_key)
        col = _finish_column(spec, stmt, draft.qualified, force_not_null=in_pk)
        draft.columns.pop(i)
        position = self._position(s, draft)
        draft.columns.insert(i if position is None else position, col)
        draft.rename_column(old, col.name)
        self._inline_keys(draft, spec)

    @staticmethod
    def _inline_keys(draft: _Draft, spec: _ColSpec) -> None:
        if spec.primary:
            draft.add_key(_KeySpec(primary=True, name=None, columns=[spec.name]), set())
        if spec.unique:
            draft.add_key(_KeySpec(primary=False, name=None, columns=[spec.name]), set(), lenient=True)


# --------------------------------------------------------------------------------------------------
# Public API


def parse_ddl(text: str, *, default_schema: str = "default") -> list[TableDef]:
    """Every table a DDL text defines, in creation order (``version`` 0).

    The text may hold several statements: ``USE db`` and ``CREATE DATABASE db`` set the schema of the
    tables that follow; ``CREATE TABLE db.t`` names it explicitly. ``ALTER TABLE``, ``RENAME TABLE``,
    ``CREATE/DROP INDEX`` and ``DROP TABLE`` later in the text are applied; other statements (``SET``,
    ``INSERT``, ``LOCK TABLES`` ...) are ignored. Raises :class:`TableDefinitionError` (with the line)
    for text that cannot be read or that defines no table, and
    :class:`~avro_registry_sink.errors.UnsupportedColumnType` for an unknown type.

    >>> [t] = parse_ddl("CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, note VARCHAR(64) DEFAULT 'x')")
    >>> t.qualified_name, t.primary_key, t.column("note").default
    ('shop.orders', ('id',), 'x')
    """
    catalog = _Catalog(default_schema)
    for stmt in split_statements(text):
        catalog.execute(stmt)
    if not catalog.created:
        raise TableDefinitionError(
            "The DDL text contains no CREATE TABLE statement, so it defines no table; give the "
            "CREATE TABLE statements (for example the output of SHOW CREATE TABLE).",
            reason="no CREATE TABLE",
        )
    return [table for table, _ in catalog.tables.values()]


def apply_ddl(table: TableDef, statement: str) -> TableDef | None:
    """The table after a DDL event from a change stream, or ``None`` when the DDL drops it.

    Handles ``ALTER TABLE`` (ADD [COLUMN] ... [FIRST|AFTER c], ADD COLUMN (...), DROP COLUMN,
    MODIFY/CHANGE COLUMN, RENAME COLUMN, ALTER COLUMN SET/DROP DEFAULT, ADD PRIMARY KEY/UNIQUE,
    DROP INDEX/KEY/PRIMARY KEY, RENAME [TO], CONVERT TO CHARACTER SET binary), ``CREATE [UNIQUE] INDEX``,
    ``DROP INDEX ... ON``, ``RENAME TABLE``, ``TRUNCATE`` (no change), ``DROP TABLE`` / ``DROP DATABASE``
    (``None``) and ``CREATE TABLE`` (replaces the definition). Other statements (table options,
    partitions, non-unique indexes, ``CREATE DATABASE`` ...) leave the table unchanged. A statement about
    another table raises :class:`TableDefinitionError`. Unqualified names are in ``table.schema_name``.
    The result keeps ``table.version``; the caller sets the new one.

    ``TableDef`` keeps no index names, so ``DROP INDEX name`` finds a unique key by MySQL's generated
    name (its first column, ``col_2`` ...); a unique key created with another name is not found and
    stays (within one :func:`parse_ddl` text names are exact).

    >>> t = parse_ddl("CREATE TABLE s.t (id INT PRIMARY KEY)")[0]
    >>> [c.name for c in apply_ddl(t, "ALTER TABLE t ADD COLUMN note TEXT FIRST").columns]
    ['note', 'id']
    """
    catalog = _Catalog(table.schema_name, strict=True)
    catalog.tables[catalog.key(table.schema_name, table.table)] = (table, _Draft.of(table).key_names)
    for stmt in split_statements(statement):
        catalog.execute(stmt)
    if not catalog.tables:
        return None
    result = next(iter(catalog.tables.values()))[0]
    return result if result == table else result.model_copy(update={"version": table.version})


def column_from_type(name: str, type_text: str, *, table: str = "?") -> ColumnDef:
    """A nullable column of the given SQL type text, e.g. ``bigint unsigned`` or ``enum('a','b')``.

    Used for the type names of TiCDC's storage-sink schema files and canal-json ``mysqlType``. Raises
    :class:`~avro_registry_sink.errors.UnsupportedColumnType` for an unknown type.

    >>> column_from_type("c", "varchar(255) CHARACTER SET binary").type
    <MySQLType.VARBINARY: 'VARBINARY'>
    """
    stmt = Statement(lex(type_text), type_text)
    s = TokenStream(stmt, table)
    if s.at_end():
        raise unsupported_type(table, name, type_text, "which is empty")
    spec = _parse_type(s, table, name)
    if not s.at_end():
        raise unsupported_type(table, name, type_text, "which has unexpected text after the type")
    return _finish_column(_ColSpec(name=name, type=spec), stmt, table)



@dataclass(frozen=True)
class ColumnLineage:
    """What DDL statements say about a table's columns between two of its versions, beyond the definitions.

    ``renamed`` maps a column's name after the statements to its name before them (``ALTER TABLE ... RENAME
    COLUMN a TO b``, ``CHANGE a b ...``, chains composed); ``fresh`` names the columns added by the statements
    (``ADD [COLUMN]``), whose values owe nothing to a column of the same name before them (dropped and
    re-added); ``recreated`` says a ``CREATE TABLE`` replaced the table. Names are as the DDL spells them;
    compare them case-insensitively (MySQL does).
    """

    renamed: tuple[tuple[str, str], ...] = ()
    fresh: tuple[str, ...] = ()
    recreated: bool = False

    def origin(self, column: str) -> str | None:
        """The name ``column`` had before the statements; ``None`` for a column they added."""
        lowered = column.lower()
        if any(f.lower() == lowered for f in self.fresh):
            return None
        for new, old in self.renamed:
            if new.lower() == lowered:
                return old
        return column


def column_lineage(statements: Iterable[str], *, table: str | None = None) -> ColumnLineage:
    """Renamed, added and dropped columns of the DDL ``statements`` (in order), read from their text alone.

    Only column-level facts are taken (``ALTER TABLE`` specs ``RENAME COLUMN``, ``CHANGE``, ``ADD``, ``DROP``, and
    ``CREATE TABLE``); the definitions themselves come from schema files or :func:`apply_ddl`. A statement that
    cannot be read adds nothing (the columns are then matched by name). ``table``: only statements about a table
    of that name count (a DDL file with several tables).

    >>> column_lineage(["ALTER TABLE t RENAME COLUMN a TO b", "ALTER TABLE t CHANGE b c INT NOT NULL"]).renamed
    (('c', 'a'),)
    >>> column_lineage(["ALTER TABLE t DROP COLUMN x, ADD COLUMN x VARCHAR(8) NOT NULL"]).fresh
    ('x',)
    """
    origin: dict[str, str | None] = {}  # current name (lower) -> name before all statements, None: added
    spelled: dict[str, str] = {}  # current name (lower) -> as the DDL spells it
    recreated = False

    pairs: list[tuple[str, str]] = []  # the renames of one statement, applied together (MySQL allows swaps)

    def rename(old: str, new: str) -> None:
        pairs.append((old, new))

    def apply_renames() -> None:
        sources = {new.lower(): (origin.get(old.lower(), old) if old.lower() in origin else old, new)
                   for old, new in pairs}
        for old, _ in pairs:
            origin.pop(old.lower(), None)
            spelled.pop(old.lower(), None)
        for key, (source, new) in sources.items():
            origin[key] = source
            spelled[key] = new
        pairs.clear()

    for text in statements:
        try:
            for stmt in split_statements(text):
                apply_renames()
                s = TokenStream(stmt)
                if s.word() == "CREATE" and (s.word(1) == "TABLE" or s.at("CREATE", "OR", "REPLACE", "TABLE")):
                    s.pos = 2
                    s.accept("IF", "NOT", "EXISTS")
                    named = s.table_name()[1]
                    recreated = recreated or table is None or named.lower() == table.lower()
                    continue
                if not (s.word() == "ALTER" and s.word(1) == "TABLE"):
                    continue
                s.pos = 2
                s.accept("IGNORE")
                named = s.table_name()[1]
                if table is not None and named.lower() != table.lower():
                    continue
                while not s.at_end():
                    _lineage_spec(s, rename, origin, spelled)
                    s.skip_element()
                    if not s.accept_kind(TokenType.COMMA):
                        break
        except (TableDefinitionError, IndexError, AttributeError):
            pairs.clear()
            continue
        apply_renames()
    renamed = tuple((spelled.get(new, new), old) for new, old in origin.items()
                    if old is not None and old != _DROPPED and old.lower() != new)
    fresh = tuple(spelled.get(new, new) for new, old in origin.items() if old is None)
    return ColumnLineage(renamed=renamed, fresh=fresh, recreated=recreated)


_DROPPED = "\x00dropped"


def _lineage_spec(s: TokenStream, rename: Any, origin: dict[str, str | None], spelled: dict[str, str]) -> None:
    if s.accept("RENAME"):
        if s.accept("COLUMN"):
            old = s.name("a column name")
            s.expect("TO")
            rename(old, s.name("a column name"))
    elif s.accept("CHANGE"):
        s.accept("COLUMN")
        s.accept("IF", "EXISTS")
        old = s.name("a column name")
        new = s.name("a column name")
        if old.lower() != new.lower():
            rename(old, new)
    elif s.accept("DROP"):
        if s.word() in _CONSTRAINT_WORDS or s.word() in ("FOREIGN", "CHECK", "PARTITION"):
            return
        s.accept("COLUMN")
        s.accept("IF", "EXISTS")
        name = s.name("a column name")
        origin[name.lower()] = _DROPPED  # gone; a later ADD of the same name is fresh
        spelled.pop(name.lower(), None)
    elif s.accept("ADD"):
        if s.word() in _CONSTRAINT_WORDS or s.word() in ("PARTITION", "CHECK", "FOREIGN"):
            return
        s.accept("COLUMN")
        s.accept("IF", "NOT", "EXISTS")
        names = []
        if s.accept_kind(TokenType.L_PAREN):
            while not s.at_end():
                names.append(s.name("a column name"))
                s.skip_element()
                if not s.accept_kind(TokenType.COMMA):
                    break
            s.accept_kind(TokenType.R_PAREN)
        else:
            names.append(s.name("a column name"))
        for name in names:
            origin[name.lower()] = None
            spelled[name.lower()] = name
