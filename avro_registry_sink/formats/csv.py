"""TiCDC's CSV data files (storage sink ``protocol=csv``) -> :class:`ChangeEvent`.

The layout of a row (tiflow ``pkg/sink/codec/csv/csv_message.go``)::

    op, table, schema, [commit-ts], [is-update], [handle-key], <every column in table order>

* **Quote mode** (``quote`` set, default ``"``): string fields are wrapped in the quote character with
  embedded quotes doubled; delimiters, ``\\r``, ``\\n`` and backslashes stay raw inside the quotes
  (RFC 4180), so a file is parsed as a whole, not line by line. Integers, floats, BIT, YEAR, the
  commit ts and the ``true``/``false`` is-update flag are bare. NULL is the bare null string
  (``\\N``); a quoted ``"\\N"`` is the two-character string, an empty string is ``""``.
* **Escape mode** (``quote = ""``): every field is bare; in strings ``\\`` is written ``\\\\``, CR and LF
  as ``\\r`` and ``\\n``, and each character of the delimiter is preceded by a backslash. The raw
  field equal to the null string is NULL (a string ``\\N`` would be written ``\\\\N``).
* **Header** (``output-field-header``): ``ticdc-meta$operation``, ``ticdc-meta$table``,
  ``ticdc-meta$schema``, [``ticdc-meta$commit-ts``], [``ticdc-meta$is-update``], column names, never
  quoted, once at the top of each file. A first record that starts with ``ticdc-meta$operation`` is
  taken as the header whatever the option says.
* **UPDATE**: without ``output-old-value`` one ``U`` row with the new values (no before image). With
  it, an ``is-update`` column is added and an UPDATE is a ``D`` row (old values) immediately followed
  by an ``I`` row (new values), both flagged ``true``; the pair becomes one update event with
  ``before`` and ``after`` whose ``source`` is the ``D`` row's line.
* Records end at the configured ``terminator`` (default ``\\r\\n``); a bare ``\\n`` or ``\\r\\n`` is
  accepted as a record end too, so files edited by hand still parse.

Values come back in TiCDC's text forms (see :mod:`avro_registry_sink.changes`): TINYINT..BIGINT, YEAR
and BIT as ``int`` (BIT is written as its unsigned integer value), FLOAT/DOUBLE as ``float`` (Go's ``%v``
text, exponent form included), binary-charset strings as ``bytes`` (decoded from base64 or hex),
DECIMAL, temporal types, JSON, ENUM/SET member names and other strings as ``str``, NULL as ``None``.

Without ``include-commit-ts`` a CSV row carries no commit ts at all; events then get
``commit_ts=0`` (TiCDC's own decoder does the same) and ``extra={"commit_ts_exact": False}``, the
flag every source sets when the commit ts is not the real TSO.
With ``output-handle-key`` the handle key text is kept in ``extra["handle_key"]``.

Errors never stop the file: every malformed record becomes a :class:`SourceError` naming the file,
the line where the record starts, the column and the reason, and the other records are still parsed.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from avro_registry_sink.changes import ChangeEvent
from avro_registry_sink.errors import SourceError
from avro_registry_sink.formats.base import InputFormat, register
from avro_registry_sink.model import Op, RefusalReason
from avro_registry_sink.table import BINARY_TYPES, ColumnDef, MySQLType, TableDef
from avro_registry_sink.typemap.mysql import FLOAT_TYPES, INT_TYPES

# Imported inside functions, for start-up: the columnar encoder loads only where a batch is encoded (the
# formats are imported by every Spark Python worker and by the CLI).

__all__ = [
    "CSV",
    "DEFAULT_CSV_OPTIONS",
    "HEADER_PREFIX",
    "LAYOUT_SETTINGS",
    "BinaryEncodingMethod",
    "Csv",
    "CsvColumns",
    "CsvField",
    "CsvOptions",
    "CsvRecord",
    "CsvSettingsError",
    "decode_text",
    "decode_value",
    "is_binary_column",
    "iter_records",
    "parse_csv",
    "read_columns",
    "resolve_layout",
]

#: The first field of a header record.
HEADER_PREFIX = "ticdc-meta$"


class BinaryEncodingMethod(str, Enum):
    """``binary-encoding-method``: how binary-charset strings are written in CSV."""

    BASE64 = "base64"
    HEX = "hex"


class CsvOptions(BaseModel):
    """TiCDC's ``[sink.csv]`` settings plus the sink ``terminator``, under TiCDC's option names.

    Both spellings are accepted: ``CsvOptions(**{"include-commit-ts": True})`` or
    ``CsvOptions(include_commit_ts=True)``.

    >>> CsvOptions(**{"delimiter": "|", "quote": "", "include-commit-ts": True}).include_commit_ts
    True
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)

    delimiter: str = ","
    quote: str = '"'
    null: str = "\\N"
    include_commit_ts: bool = Field(default=False, alias="include-commit-ts")
    binary_encoding_method: BinaryEncodingMethod = Field(
        default=BinaryEncodingMethod.BASE64, alias="binary-encoding-method"
    )
    output_old_value: bool = Field(default=False, alias="output-old-value")
    output_handle_key: bool = Field(default=False, alias="output-handle-key")
    output_field_header: bool = Field(default=False, alias="output-field-header")
    terminator: str = "\r\n"

    @field_validator("delimiter")
    @classmethod
    def _check_delimiter(cls, value: str) -> str:
        if not 1 <= len(value) <= 3:
            raise ValueError(f"delimiter must be 1 to 3 characters (TiCDC's limit), got {value!r}")
        if "\r" in value or "\n" in value:
            raise ValueError("delimiter must not contain CR or LF")
        return value

    @field_validator("quote")
    @classmethod
    def _check_quote(cls, value: str) -> str:
        if len(value) > 1:
            raise ValueError(f"quote must be empty (escape mode) or one character, got {value!r}")
        if value in ("\r", "\n"):
            raise ValueError("quote must not be CR or LF")
        return value

    @field_validator("null", "terminator")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value:
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _quote_not_in_delimiter(self) -> CsvOptions:
        if self.quote and self.quote in self.delimiter:
            raise ValueError(f"delimiter {self.delimiter!r} must not contain the quote character {self.quote!r}")
        return self

    @property
    def meta_columns(self) -> int:
        """How many fields precede the table's columns in a row."""
        return 3 + self.include_commit_ts + self.output_old_value + self.output_handle_key

    def header(self, columns: list[str] | tuple[str, ...]) -> list[str]:
        """The header fields TiCDC writes for these column names (``output-field-header``)."""
        names = [f"{HEADER_PREFIX}operation", f"{HEADER_PREFIX}table", f"{HEADER_PREFIX}schema"]
        if self.include_commit_ts:
            names.append(f"{HEADER_PREFIX}commit-ts")
        if self.output_old_value:
            names.append(f"{HEADER_PREFIX}is-update")
        return names + list(columns)


DEFAULT_CSV_OPTIONS = CsvOptions()


# --------------------------------------------------------------------------------------------------
# Records: the CSV syntax, no table knowledge


class CsvField(NamedTuple):
    """One field as written: its text (unquoted / unescaped) and whether it was quoted."""

    text: str
    quoted: bool
    raw: str  # as written, before unescaping (escape mode compares NULL on this)


@dataclass(frozen=True)
class CsvRecord:
    """One record: the line it starts on (1-based), its fields, a syntax error if any, and where it sits
    in the text (``start``/``end`` character offsets, terminator excluded)."""

    line: int
    fields: tuple[CsvField, ...]
    error: str | None = None
    start: int = 0
    end: int = 0


_ESCAPES = {"n": "\n", "r": "\r"}
_UNESCAPE = re.compile(r"\\(.)", re.S)


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    return _UNESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), raw)


def _record_ends(options: CsvOptions) -> tuple[str, ...]:
    ends = [options.terminator, "\r\n", "\n"]
    return tuple(sorted(dict.fromkeys(ends), key=len, reverse=True))  # longest first


def iter_records(text: str, options: CsvOptions = DEFAULT_CSV_OPTIONS) -> Iterator[CsvRecord]:
    """Split a whole CSV file into records, honouring quotes (newlines may sit inside them).

    Blank lines are skipped. A syntax error (unterminated quote, text after a closing quote) is
    reported on its record, which then covers only its first physical line: parsing resumes on the next
    line, so a truncated line never swallows the record after it.

    >>> [r.fields[1].text for r in iter_records('"I","a\\r\\nb",1\\r\\n"I","c""d",2\\r\\n')]
    ['a\\r\\nb', 'c"d']
    """
    delim = options.delimiter
    quote = options.quote
    ends = _record_ends(options)
    alternatives = "|".join(re.escape(s) for s in (delim, *ends))
    if quote:
        stop = re.compile(alternatives)
    else:
        stop = re.compile(r"(\\.)|" + alternatives, re.S)  # skip escaped characters
    end_re = re.compile("|".join(re.escape(s) for s in ends))
    n = len(text)
    pos = 0
    line = 1
    while pos < n:
        start = pos
        fields: list[CsvField] = []
        error: str | None = None
        rec_end: int | None = None
        while True:
            if quote and text.startswith(quote, pos):
                i = pos + 1
                parts: list[str] = []
                while True:
                    j = text.find(quote, i)
                    if j < 0:
                        parts.append(text[i:])
                        error = "unterminated quoted field (no closing quote before the end of the file)"
                        pos = n
                        break
                    parts.append(text[i:j])
                    if text.startswith(quote, j + 1):
                        parts.append(quote)
                        i = j + 2
                        continue
                    pos = j + 1
                    break
                value = "".join(parts)
                fields.append(CsvField(value, True, text[start:pos]))
                if error:
                    break
            else:
                j = n
                for m in stop.finditer(text, pos):
                    if quote or m.group(1) is None:
                        j = m.start()
                        break
                raw = text[pos:j]
                fields.append(CsvField(raw if quote else _unescape(raw), False, raw))
                pos = j
            if pos >= n:
                break
            if text.startswith(delim, pos):
                pos += len(delim)
                if pos >= n:  # a trailing delimiter at the very end: one more empty field
                    fields.append(CsvField("", False, ""))
                    break
                continue
            ending = end_re.match(text, pos)
            if ending:
                rec_end = pos
                pos = ending.end()
                break
            error = f"unexpected {text[pos]!r} after a closing quote (expected the delimiter or the end of the record)"
            ending = end_re.search(text, pos)
            pos = ending.end() if ending else n
            break
        end = pos if rec_end is None else rec_end
        if error:
            first_end = end_re.search(text, start)
            if first_end is not None and first_end.end() <= pos:
                end, pos = first_end.start(), first_end.end()
            else:
                end = pos
        record_line = line
        line += text.count("\n", start, pos)
        if not error and len(fields) == 1 and not fields[0].quoted and fields[0].raw == "":
            continue  # blank line
        yield CsvRecord(record_line, tuple(fields), error, start, end)


# --------------------------------------------------------------------------------------------------
# Values: one field -> a TiCDC text form, by column type

_INT_TEXT = re.compile(r"-?[0-9]+")
_FLOAT_TEXT = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN")


def is_binary_column(col: ColumnDef) -> bool:
    """Whether TiCDC treats the column as binary (charset ``binary``: BINARY, VARBINARY, *BLOB)."""
    return col.binary or col.type in BINARY_TYPES


def decode_value(col: ColumnDef, text: str, options: CsvOptions = DEFAULT_CSV_OPTIONS) -> Any:
    """One non-NULL CSV field -> the value in TiCDC's text forms; raises ``ValueError`` with the reason.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType
    >>> decode_value(ColumnDef(name="b", type=MySQLType.VARBINARY), "6Zi/5pav")
    b'\\xe9\\x98\\xbf\\xe6\\x96\\xaf'
    """
    if col.type in INT_TYPES:
        if not _INT_TEXT.fullmatch(text):
            raise ValueError(f"expected an integer, got {_short(text)}")
        number = int(text)
        if number < 0 and (col.unsigned or col.type is MySQLType.BIT):
            raise ValueError(f"negative value {text} in an unsigned column")
        return number
    if col.type in FLOAT_TYPES:
        if not _FLOAT_TEXT.fullmatch(text):
            raise ValueError(f"expected a floating-point number, got {_short(text)}")
        return float(text.replace("Inf", "inf"))
    if is_binary_column(col):
        try:
            if options.binary_encoding_method is BinaryEncodingMethod.HEX:
                return bytes.fromhex(text)
            return base64.b64decode(text, validate=True)
        except (ValueError, binascii.Error) as exc:
            raise ValueError(
                f"binary column value is not valid {options.binary_encoding_method.value} ({exc}): {_short(text)}"
            ) from None
    return text


def _short(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 60 else shown[:57] + "..."


# --------------------------------------------------------------------------------------------------
# Layout: which optional meta fields and which binary encoding a file was written with

#: The settings that add a meta field to every row, in the order the fields appear.
LAYOUT_SETTINGS = ("include-commit-ts", "output-old-value", "output-handle-key")


class CsvSettingsError(SourceError):
    """A file's rows all disagree with explicitly given CSV settings: misconfiguration, not bad data."""


def _flags(options: CsvOptions) -> tuple[bool, bool, bool]:
    return (options.include_commit_ts, options.output_old_value, options.output_handle_key)


def _meta_matches(flags: tuple[bool, bool, bool], meta: tuple[CsvField, ...]) -> bool:
    """Whether the optional meta fields look like what ``flags`` says they are."""
    i = 0
    if flags[0]:
        if meta[i].quoted or not meta[i].text.isdigit():
            return False
        i += 1
    if flags[1]:
        if meta[i].quoted or meta[i].text not in ("true", "false"):
            return False
        i += 1
    return True


def _detect_flags(records: list[CsvRecord], table: TableDef, options: CsvOptions) -> tuple[bool, bool, bool] | None:
    """The layout most of the first records fit, or ``None`` when none fits them (bad rows, not settings)."""
    columns = len(table.columns)
    counts: dict[int, int] = {}
    for record in records:
        counts[len(record.fields)] = counts.get(len(record.fields), 0) + 1
    width = max(counts, key=lambda k: counts[k])
    extras = width - 3 - columns
    if not 0 <= extras <= 3:
        return None
    sample = [r for r in records if len(r.fields) == width]
    current = _flags(options)
    candidates = [current] + [(a, b, c) for a in (True, False) for b in (True, False) for c in (True, False)]
    for flags in candidates:
        if sum(flags) == extras and all(_meta_matches(flags, r.fields[3:3 + extras]) for r in sample):
            return flags
    return None


def _decodes(texts: list[str], method: BinaryEncodingMethod) -> bool:
    try:
        for text in texts:
            if method is BinaryEncodingMethod.HEX:
                bytes.fromhex(text)
            else:
                base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        return False
    return True


def resolve_layout(
    text: str, table: TableDef, options: CsvOptions = DEFAULT_CSV_OPTIONS, *, explicit: frozenset[str] = frozenset(),
    source: str = "<csv>", sample: int = 50,
) -> tuple[CsvOptions, str | None]:
    """The settings a file was written with, from its first records: ``(options, note)``.

    The optional meta fields (commit ts, is-update flag, handle key) are detected from the field count
    against the table's columns and from what the fields hold (a bare integer, ``true``/``false``); a
    header line names them; the binary encoding is the one the binary columns' values decode with.
    Settings named in ``explicit`` (TiCDC's names: ``include-commit-ts``, ``binary-encoding-method``...)
    win, but a file whose rows all contradict them raises :class:`CsvSettingsError` naming the setting
    to change: rerunning with the right settings then reads every row. Settings not given are taken
    from the data, and ``note`` says what was detected.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
    >>> t = TableDef(schema_name="s", table="t", primary_key=("id",), columns=(ColumnDef(name="id", type=MySQLType.INT),))
    >>> opts, note = resolve_layout('"I","t","s",449,1\\r\\n', t)
    >>> opts.include_commit_ts, note
    (True, 'detected include-commit-ts=true from the data')
    """
    records: list[CsvRecord] = []
    header: CsvRecord | None = None
    for record in iter_records(text, options):
        if record.error:
            continue
        if not records and header is None and not record.fields[0].quoted \
                and record.fields[0].text.startswith(HEADER_PREFIX):
            header = record
            continue
        records.append(record)
        if len(records) >= sample:
            break
    changes: dict[str, Any] = {}
    if header is not None:
        names = {f.text for f in header.fields}
        detected: tuple[bool, bool, bool] | None = (f"{HEADER_PREFIX}commit-ts" in names,
                                                    f"{HEADER_PREFIX}is-update" in names, options.output_handle_key)
    else:
        detected = _detect_flags(records, table, options) if records else None
    if detected is not None:
        for name, field, want, have in zip(LAYOUT_SETTINGS, ("include_commit_ts", "output_old_value",
                                                             "output_handle_key"), detected, _flags(options), strict=True):
            if want != have:
                changes[name] = (field, want)
    binary = [i for i, c in enumerate(table.columns) if is_binary_column(c)]
    if binary and records:
        meta = 3 + sum(detected if detected is not None else _flags(options))
        texts = [r.fields[meta + i].text for r in records if len(r.fields) == meta + len(table.columns)
                 for i in binary if r.fields[meta + i].quoted or r.fields[meta + i].raw != options.null]
        current = options.binary_encoding_method
        other = BinaryEncodingMethod.HEX if current is BinaryEncodingMethod.BASE64 else BinaryEncodingMethod.BASE64
        if texts and not _decodes(texts, current) and _decodes(texts, other):
            changes["binary-encoding-method"] = ("binary_encoding_method", other)
    if not changes:
        return options, None
    wrong = [name for name in changes if name in explicit]
    if wrong:
        fix = " ".join(f"--csv {name}={_setting_text(changes[name][1])}" for name in wrong)
        given = ", ".join(f"{name}={_setting_text(getattr(options, changes[name][0]))}" for name in wrong)
        raise CsvSettingsError(
            f"{source}: the rows do not match the CSV settings given ({given}): the file was written with "
            + ", ".join(f"{name}={_setting_text(changes[name][1])}" for name in wrong)
            + f" (detected from {'its header' if header is not None else 'its first rows'}). Change the setting "
            f"({fix}, or [sink.csv] in the settings file) and rerun: nothing of this batch was committed.",
            source=source, line=records[0].line if records else 1, reason=RefusalReason.MISCONFIGURATION,
            setting=wrong[0],
        )
    resolved = options.model_copy(update={field: value for field, value in changes.values()})
    note = "detected " + ", ".join(f"{name}={_setting_text(value)}" for name, (_, value) in changes.items()) + \
        " from the data"
    return resolved, note


def _setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value.value if isinstance(value, Enum) else str(value)


# --------------------------------------------------------------------------------------------------
# Rows -> events


@dataclass
class _Row:
    line: int
    op: str
    commit_ts: int
    is_update: bool
    values: dict[str, Any]
    handle_key: str | None
    raw: str = ""


def _record_error(source: str, line: int, reason: str, column: str | None = None,
                  raw: str | None = None) -> SourceError:
    where = f"{source}:{line}"
    what = f"column {column!r}: " if column else ""
    context: dict[str, Any] = {"source": source, "line": line, "column": column, "reason": reason}
    if raw is not None:
        context["raw"] = raw.encode("utf-8", "surrogateescape")
    return SourceError(f"{where}: {what}{reason}.", **context)


def decode_text(data: bytes) -> str:
    """A data file's bytes as text: UTF-8, with invalid bytes kept as lone surrogates (``surrogateescape``)
    so that only the records holding them are refused (see :func:`parse_csv`)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


_SURROGATE = re.compile("[\udc80-\udcff]")


def parse_csv(
    text: str,
    table: TableDef,
    options: CsvOptions = DEFAULT_CSV_OPTIONS,
    *,
    source: str = "<csv>",
    table_version: int | None = None,
) -> tuple[list[ChangeEvent], list[SourceError]]:
    """Parse one TiCDC CSV data file of ``table`` into change events plus the errors of bad records.

    ``source`` names the file in errors and in each event's ``source`` (``"<source>:<line>"``);
    ``table_version`` defaults to ``table.version``.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
    >>> t = TableDef(schema_name="test", table="table1", primary_key=("id",), columns=(
    ...     ColumnDef(name="id", type=MySQLType.INT), ColumnDef(name="s", type=MySQLType.VARCHAR)))
    >>> events, errors = parse_csv('"I","table1","test",435661838416609281,123,"hello,world"\\n', t,
    ...                            CsvOptions(include_commit_ts=True))
    >>> events[0].after, events[0].commit_ts, errors
    ({'id': 123, 's': 'hello,world'}, 435661838416609281, [])
    """
    version = table.version if table_version is None else table_version
    errors: list[SourceError] = []
    rows: list[_Row] = []
    names = [c.name for c in table.columns]
    expected = options.meta_columns + len(table.columns)
    first = True
    check_utf8 = _SURROGATE.search(text) is not None
    for record in iter_records(text, options):
        raw = text[record.start:record.end]
        if record.error:
            errors.append(_record_error(source, record.line, record.error, raw=raw))
            first = False
            continue
        if check_utf8 and _SURROGATE.search(raw):
            errors.append(_record_error(source, record.line, "invalid UTF-8 bytes in the record", raw=raw))
            first = False
            continue
        fields = record.fields
        if first:
            first = False
            if not fields[0].quoted and fields[0].text.startswith(HEADER_PREFIX):
                want = options.header(names)
                got = [f.text for f in fields]
                if got != want:
                    errors.append(_record_error(
                        source, record.line,
                        f"header {got} does not match the table definition and options (expected {want})",
                        raw=raw,
                    ))
                continue
        row = _parse_row(record, table, options, expected, source, errors, raw)
        if row is not None:
            rows.append(row)
    events = _rows_to_events(rows, table, options, version, source, errors)
    errors.sort(key=lambda e: e.line)
    return events, errors


_META_SETTINGS = ("include-commit-ts", "output-old-value", "output-handle-key")


def _meta_hint(options: CsvOptions, surplus: int) -> str:
    """Which sink.csv settings would explain ``surplus`` extra (or, negative, missing) fields."""
    current = {"include-commit-ts": options.include_commit_ts, "output-old-value": options.output_old_value,
               "output-handle-key": options.output_handle_key}
    if surplus > 0:
        off = [name for name in _META_SETTINGS if not current[name]]
        if off and surplus <= len(off):
            return ("; do the changefeed's sink.csv settings differ? The files may have been written with "
                    + " or ".join(f"{name}=true" for name in off) + f" ({surplus} more meta field(s))")
    elif surplus < 0:
        on = [name for name in _META_SETTINGS if current[name]]
        if on and -surplus <= len(on):
            return ("; do the changefeed's sink.csv settings differ? The files may have been written without "
                    + " or ".join(on) + f" ({-surplus} fewer meta field(s)), or the table changed without a schema file")
    return ""


def _parse_row(
    record: CsvRecord, table: TableDef, options: CsvOptions, expected: int, source: str, errors: list[SourceError],
    raw: str,
) -> _Row | None:
    fields = record.fields
    line = record.line

    def _error(source: str, line: int, reason: str, column: str | None = None) -> SourceError:
        return _record_error(source, line, reason, column, raw)
    if len(fields) != expected:
        errors.append(_error(
            source, line,
            f"expected {expected} fields ({options.meta_columns} TiCDC meta fields + {len(table.columns)} columns "
            f"of {table.qualified_name}), got {len(fields)}" + _meta_hint(options, len(fields) - expected),
        ))
        return None
    op = fields[0].text
    if op not in ("I", "U", "D"):
        errors.append(_error(source, line, f"unknown operation {op!r}; valid operations are I, U, D", "op"))
        return None
    table_name, schema_name = fields[1].text, fields[2].text
    if (schema_name, table_name) != (table.schema_name, table.table):
        errors.append(_error(
            source, line, f"row belongs to {schema_name}.{table_name}, but this file holds {table.qualified_name}",
            "table",
        ))
        return None
    i = 3
    commit_ts = 0
    if options.include_commit_ts:
        ts_text = fields[i].text
        if not ts_text.isdigit():
            errors.append(_error(source, line, f"commit-ts must be an unsigned integer, got {_short(ts_text)}",
                                 "commit-ts"))
            return None
        commit_ts = int(ts_text)
        i += 1
    is_update = False
    if options.output_old_value:
        flag = fields[i].text
        if flag not in ("true", "false"):
            errors.append(_error(source, line, f"is-update must be true or false, got {_short(flag)}", "is-update"))
            return None
        is_update = flag == "true"
        i += 1
    handle_key = None
    if options.output_handle_key:
        handle_key = fields[i].text
        i += 1
    values: dict[str, Any] = {}
    bad = False
    for col, field in zip(table.columns, fields[i:], strict=False):
        if not field.quoted and field.raw == options.null:
            values[col.name] = None
            continue
        if not field.quoted and field.raw == "" and not _is_text_column(col):
            errors.append(_error(source, line, f"empty value for a {col.sql_type()} column", col.name))
            bad = True
            continue
        try:
            values[col.name] = decode_value(col, field.text, options)
        except ValueError as exc:
            errors.append(_error(source, line, f"{exc} ({col.sql_type()})", col.name))
            bad = True
    if bad:
        return None
    return _Row(line, op, commit_ts, is_update, values, handle_key, raw)


def _is_text_column(col: ColumnDef) -> bool:
    return col.type not in INT_TYPES and col.type not in FLOAT_TYPES


def _rows_to_events(
    rows: list[_Row], table: TableDef, options: CsvOptions, version: int, source: str, errors: list[SourceError]
) -> list[ChangeEvent]:
    events: list[ChangeEvent] = []

    def event(row: _Row, op: Op, after: dict[str, Any] | None, before: dict[str, Any] | None) -> ChangeEvent:
        extra: dict[str, Any] = {}
        if not options.include_commit_ts:
            extra["commit_ts_exact"] = False
        if row.handle_key is not None:
            extra["handle_key"] = row.handle_key
        return ChangeEvent(
            schema=table.schema_name, table=table.table, op=op, commit_ts=row.commit_ts, after=after,
            before=before, table_version=version, source=f"{source}:{row.line}", extra=extra,
        )

    i = 0
    while i < len(rows):
        row = rows[i]
        i += 1
        if row.is_update and row.op == "D":
            nxt = rows[i] if i < len(rows) else None
            if nxt is None or not (nxt.is_update and nxt.op == "I"):
                errors.append(_record_error(
                    source, row.line,
                    "the old-value row of an UPDATE (D, is-update=true) is not followed by its new-value row "
                    "(I, is-update=true)", raw=row.raw,
                ))
                continue
            i += 1
            if nxt.commit_ts != row.commit_ts:
                for half in (row, nxt):  # both rows are reported: each input row is accounted for
                    errors.append(_record_error(
                        source, half.line,
                        f"the two rows of an UPDATE have different commit ts ({row.commit_ts} and {nxt.commit_ts})",
                        raw=half.raw,
                    ))
                continue
            events.append(event(row, Op.UPDATE, nxt.values, row.values))
        elif row.is_update and row.op == "I":
            errors.append(_record_error(
                source, row.line,
                "the new-value row of an UPDATE (I, is-update=true) has no old-value row (D, is-update=true) before it",
                raw=row.raw,
            ))
        elif row.op == "I":
            events.append(event(row, Op.INSERT, row.values, None))
        elif row.op == "U":
            events.append(event(row, Op.UPDATE, row.values, None))
        else:
            events.append(event(row, Op.DELETE, None, row.values))
    return events


# --------------------------------------------------------------------------------------------------
# Whole files, vectorized: pyarrow.csv -> typed Arrow columns


@dataclass(frozen=True)
class CsvColumns:
    """A CSV file parsed into columns: the table's values (text, binary decoded), one row per change.

    ``op_codes`` are 0 insert / 1 update / 2 delete; ``lines`` the line each change's record starts on
    (exact when no quoted value spans lines, else the record's position, which keeps file order).
    """

    values: Any  # pyarrow.RecordBatch of the table's columns
    op_codes: Any  # numpy uint8
    commit_ts: Any  # numpy int64
    lines: Any  # numpy int64
    exact_lines: bool


def _fits_arrow(options: CsvOptions) -> bool:
    """What pyarrow.csv can read exactly as TiCDC writes it: quote mode, a one-character delimiter,
    CRLF or LF records. Escape mode (backslash escapes ``\\n``, ``\\r`` and the delimiter, which Arrow's
    escape character would turn into the bare letter) and multi-character delimiters are not."""
    return (len(options.delimiter) == 1 and len(options.quote) == 1 and options.terminator in ("\r\n", "\n")
            and not options.output_handle_key)


def read_columns(data: bytes, table: TableDef, options: CsvOptions = DEFAULT_CSV_OPTIONS) -> CsvColumns | None:
    """Parse a whole CSV data file with ``pyarrow.csv`` into typed columns, without a Python object per value.

    Returns ``None`` when the file needs :func:`parse_csv` (the reference, record by record): settings
    Arrow cannot express (see :func:`_fits_arrow`), a header line, invalid UTF-8, a record of the wrong
    width, or any value the reference would refuse (an op other than I/U/D, a row of another table, an
    integer or float that is not TiCDC's text, binary text that is not base64, an UPDATE pair that does not
    pair up). The reference then reports each bad record on its own; a file that parses here gives the very
    values the reference gives (see ``tests/unit/test_format_csv_columns.py``).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pv

    if not _fits_arrow(options) or data.startswith(HEADER_PREFIX.encode()):
        return None
    meta = options.meta_columns
    names = [f"f{i}" for i in range(meta + len(table.columns))]
    invalid: list[Any] = []

    def skip(row: Any) -> str:
        invalid.append(row)
        return "skip"

    try:
        parsed = pv.read_csv(
            pa.py_buffer(data),
            read_options=pv.ReadOptions(column_names=names, use_threads=False, block_size=max(1 << 20, len(data) + 1)),
            parse_options=pv.ParseOptions(delimiter=options.delimiter, quote_char=options.quote, double_quote=True,
                                          escape_char=False, newlines_in_values=True, ignore_empty_lines=True,
                                          invalid_row_handler=skip),
            # string columns: Arrow checks the UTF-8 (invalid bytes raise, and the reference path takes the file)
            convert_options=pv.ConvertOptions(column_types={n: pa.string() for n in names}, check_utf8=True,
                                              null_values=[options.null], strings_can_be_null=True,
                                              quoted_strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if invalid:
        return None
    n = parsed.num_rows
    column = [c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in parsed.columns]
    op = column[0]
    if op.null_count or not pc.all(pc.is_in(op, pa.array(["I", "U", "D"]))).as_py() if n else False:
        return None
    if n and (column[1].null_count or column[2].null_count
              or not pc.all(pc.equal(column[1], table.table)).as_py()
              or not pc.all(pc.equal(column[2], table.schema_name)).as_py()):
        return None
    i = 3
    ts = np.zeros(n, np.int64)
    if options.include_commit_ts:
        text = column[i]
        if n and (text.null_count or not pc.all(pc.match_substring_regex(text, r"^[0-9]+$")).as_py()):
            return None
        try:
            ts = text.cast(pa.uint64()).cast(pa.int64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        i += 1
    is_update = np.zeros(n, bool)
    if options.output_old_value:
        flag = column[i]
        if n and (flag.null_count or not pc.all(pc.is_in(flag, pa.array(["true", "false"]))).as_py()):
            return None
        is_update = pc.equal(flag, "true").to_numpy(zero_copy_only=False)
        i += 1
    values = []
    for col, arr in zip(table.columns, column[i:], strict=False):
        arr = _typed_column(col, arr, options)
        if arr is None:
            return None
        values.append(arr)
    codes = np.select([pc.equal(op, "U").to_numpy(zero_copy_only=False),
                       pc.equal(op, "D").to_numpy(zero_copy_only=False)], [1, 2], 0).astype(np.uint8) if n \
        else np.zeros(0, np.uint8)
    exact = data.count(b"\n") + (0 if data.endswith(b"\n") else 1) == n
    lines = np.arange(1, n + 1, dtype=np.int64)
    batch = pa.RecordBatch.from_arrays(values, names=[c.name for c in table.columns])
    if is_update.any():
        paired = _pair_updates(batch, codes, ts, is_update, table)
        if paired is None:
            return None
        batch, codes, ts, lines = paired
    return CsvColumns(batch, codes, ts, lines, exact)


def _typed_column(col: ColumnDef, arr: Any, options: CsvOptions) -> Any:
    """One column's text as the encoder takes it, checked as :func:`decode_value` checks it; ``None``
    when some value needs the reference's per-record error."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if col.type in INT_TYPES:
        pattern = r"^[0-9]+$" if col.unsigned or col.type is MySQLType.BIT else r"^-?[0-9]+$"
        if arr.null_count < len(arr) and not pc.all(pc.match_substring_regex(arr, pattern)).as_py():
            return None
        return arr
    if col.type in FLOAT_TYPES:
        if arr.null_count < len(arr) and not pc.all(pc.match_substring_regex(arr, "^" + _FLOAT_TEXT.pattern + "$")).as_py():
            return None
        try:
            return arr.cast(pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    if is_binary_column(col):
        if options.binary_encoding_method is not BinaryEncodingMethod.BASE64:
            return None
        from avro_registry_sink.encoding.columnar import decode_base64

        return decode_base64(arr)
    return arr


def _pair_updates(batch: Any, codes: Any, ts: Any, is_update: Any, table: TableDef) -> tuple[Any, ...] | None:
    """``output-old-value``: each UPDATE is a ``D`` row (old values) then an ``I`` row (new values), both
    flagged. The pair becomes one UPDATE (the ``I`` row), or a DELETE of the old key and an INSERT when the
    handle key changed (as TiCDC's MQ sinks split it); ``None`` when the rows do not pair up."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(codes)
    old = np.flatnonzero(is_update & (codes == 2))
    new = old + 1
    if (new >= n).any() or not (is_update[new[new < n]] & (codes[new[new < n]] == 0)).all():
        return None
    if int(is_update.sum()) != 2 * old.size or (ts[old] != ts[new]).any():
        return None
    same_key = np.ones(old.size, bool)
    for name in table.handle_key_names() or ():
        arr = batch.column(name)
        a, b = arr.take(pa.array(old)), arr.take(pa.array(new))
        equal = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
        both_null = (pc.is_null(a).to_numpy(zero_copy_only=False) & pc.is_null(b).to_numpy(zero_copy_only=False))
        same_key &= equal | both_null
    codes = codes.copy()
    codes[new[same_key]] = 1  # the new-value row is the UPDATE
    keep = np.ones(n, bool)
    keep[old[same_key]] = False  # its old-value row goes (a changed key keeps it: the DELETE of the old key)
    rows = np.flatnonzero(keep)
    lines = np.arange(1, n + 1, dtype=np.int64)
    lines[new] = lines[old]  # the change is located at its first row, as the reference does
    return batch.take(pa.array(rows)), codes[rows], ts[rows], lines[rows]


class Csv(InputFormat):
    """csv: TiCDC's storage-sink CSV data files (``.csv`` files of a storage tree)."""

    name = "csv"
    file_extension = "csv"
    has_layout = True

    def read_file(self, text: str, table: TableDef, options: CsvOptions | None, *, source: str,
                  table_version: int) -> tuple[list[ChangeEvent], list[SourceError]]:
        return parse_csv(text, table, options or DEFAULT_CSV_OPTIONS, source=source, table_version=table_version)


#: The CSV format object (see :mod:`avro_registry_sink.formats.base`).
CSV = register(Csv())
