"""The SQL-type mapping as one data table: ``TYPE_RULES``, one row per MySQL/TiDB type.

A row says, for its type: the ``tidb_type`` written into ``connect.parameters``, the Avro type (and the
one used when the column is unsigned), the value kind that picks the converter, and whether the Avro
type depends on an encoding mode. Converters turn a row value in TiCDC's text forms (what the mounter
hands TiCDC's encoders, see ``shared/reference/ticdc-inputs.md`` §0) into the Avro datum TiCDC writes;
SQL defaults go through the same converters, with TiCDC's exceptions (FLOAT rounded to float32, BIT
and binary defaults as base64 text, no default for precise decimals).

Behaviour follows TiCDC's implementation where it differs from its design doc: FLOAT is Avro ``float``
(not ``double``), INT UNSIGNED is ``long``, BIT ``length`` is the declared width, ENUM/SET ``allowed``
escapes commas.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Context, Decimal, InvalidOperation
from enum import Enum
from typing import Any, NamedTuple

from avro_registry_sink.errors import EncodingError, TableDefinitionError
from avro_registry_sink.settings.config import BigintUnsignedMode, DecimalMode, EncodingOptions
from avro_registry_sink.table import ColumnDef, MySQLType


class ValueKind(str, Enum):
    """How a column's values are converted; one converter per kind (``CONVERTERS``)."""

    INT = "int"
    BIGINT_UNSIGNED = "bigint_unsigned"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    DECIMAL = "decimal"
    BIT = "bit"
    TEXT = "text"
    BLOB = "blob"
    ENUM = "enum"
    SET = "set"
    JSON = "json"
    TEMPORAL = "temporal"
    YEAR = "year"
    VECTOR = "vector"


@dataclass(frozen=True)
class TypeRule:
    """One row of the mapping table."""

    tidb_type: str
    avro: str
    kind: ValueKind
    avro_unsigned: str | None = None  # Avro type when the column is UNSIGNED, if different
    shows_unsigned: bool = False  # tidb_type gets " UNSIGNED"
    signed_range: tuple[int, int] | None = None
    unsigned_max: int | None = None


def _int_rule(tidb: str, bits: int, avro: str = "int", avro_unsigned: str | None = None) -> TypeRule:
    return TypeRule(
        tidb_type=tidb,
        avro=avro,
        kind=ValueKind.INT,
        avro_unsigned=avro_unsigned,
        shows_unsigned=True,
        signed_range=(-(1 << (bits - 1)), (1 << (bits - 1)) - 1),
        unsigned_max=(1 << bits) - 1,
    )


_TEXT = TypeRule("TEXT", "string", ValueKind.TEXT)
_BLOB = TypeRule("BLOB", "bytes", ValueKind.BLOB)

#: One row per SQL type. Text types with charset ``binary`` use the BLOB row (see :func:`rule_for`).
TYPE_RULES: dict[MySQLType, TypeRule] = {
    MySQLType.TINYINT: _int_rule("INT", 8),
    MySQLType.SMALLINT: _int_rule("INT", 16),
    MySQLType.MEDIUMINT: _int_rule("INT", 24),
    MySQLType.INT: _int_rule("INT", 32, avro_unsigned="long"),
    MySQLType.BIGINT: TypeRule(
        "BIGINT", "long", ValueKind.INT, shows_unsigned=True,
        signed_range=(-(1 << 63), (1 << 63) - 1), unsigned_max=(1 << 64) - 1,
    ),
    MySQLType.FLOAT: TypeRule("FLOAT", "float", ValueKind.FLOAT32),
    MySQLType.DOUBLE: TypeRule("DOUBLE", "double", ValueKind.FLOAT64),
    MySQLType.DECIMAL: TypeRule("DECIMAL", "bytes", ValueKind.DECIMAL),
    MySQLType.BIT: TypeRule("BIT", "bytes", ValueKind.BIT, unsigned_max=(1 << 64) - 1),
    MySQLType.CHAR: _TEXT,
    MySQLType.VARCHAR: _TEXT,
    MySQLType.TINYTEXT: _TEXT,
    MySQLType.TEXT: _TEXT,
    MySQLType.MEDIUMTEXT: _TEXT,
    MySQLType.LONGTEXT: _TEXT,
    MySQLType.BINARY: _BLOB,
    MySQLType.VARBINARY: _BLOB,
    MySQLType.TINYBLOB: _BLOB,
    MySQLType.BLOB: _BLOB,
    MySQLType.MEDIUMBLOB: _BLOB,
    MySQLType.LONGBLOB: _BLOB,
    MySQLType.ENUM: TypeRule("ENUM", "string", ValueKind.ENUM),
    MySQLType.SET: TypeRule("SET", "string", ValueKind.SET),
    MySQLType.JSON: TypeRule("JSON", "string", ValueKind.JSON),
    MySQLType.DATE: TypeRule("DATE", "string", ValueKind.TEMPORAL),
    MySQLType.DATETIME: TypeRule("DATETIME", "string", ValueKind.TEMPORAL),
    MySQLType.TIMESTAMP: TypeRule("TIMESTAMP", "string", ValueKind.TEMPORAL),
    MySQLType.TIME: TypeRule("TIME", "string", ValueKind.TEMPORAL),
    MySQLType.YEAR: TypeRule("YEAR", "int", ValueKind.YEAR),
    MySQLType.VECTOR: TypeRule("TiDBVECTORFloat32", "string", ValueKind.VECTOR),
}

_TEXT_FAMILY = frozenset(t for t, r in TYPE_RULES.items() if r is _TEXT)

#: The types whose values are integers in every input format (BIT and YEAR included).
INT_TYPES = frozenset(
    {MySQLType.TINYINT, MySQLType.SMALLINT, MySQLType.MEDIUMINT, MySQLType.INT, MySQLType.BIGINT,
     MySQLType.YEAR, MySQLType.BIT}
)
#: The types whose values are floating-point numbers.
FLOAT_TYPES = frozenset({MySQLType.FLOAT, MySQLType.DOUBLE})

#: YEAR's values besides 0 (MySQL's range), and what a value outside them is refused with: every encoding engine
#: and the migration rules read them from here.
YEAR_RANGE = (1901, 2155)
YEAR_REFUSAL = f"YEAR must be 0 or {YEAR_RANGE[0]}..{YEAR_RANGE[1]}"


def range_refusal(low: int, high: int) -> str:
    """What an integer outside ``low..high`` (its column's range) is refused with."""
    return f"out of range {low}..{high}"


def rule_for(col: ColumnDef) -> TypeRule:
    """The mapping row for a column (a text type with charset ``binary`` maps like a BLOB)."""
    if col.binary and col.type in _TEXT_FAMILY:
        return _BLOB
    return TYPE_RULES[col.type]


class DecimalEncoding(NamedTuple):
    """How a DECIMAL column is written under ``avro-decimal-handling-mode`` (see :func:`decimal_encoding`)."""

    #: ``string`` mode: the decimal's text in an Avro ``string``; else ``bytes`` + ``decimal`` (precise).
    as_text: bool
    #: The column's precision, MySQL's 10 when it declares none.
    precision: int
    #: The column's scale, 0 when it declares none.
    scale: int


def decimal_encoding(col: ColumnDef, options: EncodingOptions) -> DecimalEncoding:
    """How a DECIMAL column is written: the one place that reads ``avro-decimal-handling-mode`` and the column's
    precision and scale, for the schema (:func:`avro_type`, :func:`avro_default`), the values (the converter here,
    the columnar encoder) and the JVM stage.

    >>> decimal_encoding(ColumnDef(name="d", type=MySQLType.DECIMAL, scale=2), EncodingOptions())
    DecimalEncoding(as_text=False, precision=10, scale=2)
    """
    return DecimalEncoding(options.decimal_mode is DecimalMode.STRING,
                           col.precision if col.precision is not None else 10,
                           col.scale if col.scale is not None else 0)


# --------------------------------------------------------------------------------------------------
# Schema fragments


def escape_enum_option(option: str) -> str:
    """TiCDC's ``EscapeEnumAndSetOptions`` for one member: ``,`` -> ``\\,`` (quotes are unescaped already)."""
    return option.replace(",", "\\,")


def connect_parameters(col: ColumnDef) -> dict[str, str]:
    """``connect.parameters`` for a column, keys sorted as Go writes a map."""
    rule = rule_for(col)
    tidb_type = rule.tidb_type
    if rule.shows_unsigned and col.unsigned:
        tidb_type += " UNSIGNED"
    params = {"tidb_type": tidb_type}
    if col.type is MySQLType.BIT:
        params["length"] = str(col.length if col.length is not None else 1)
    elif col.type in (MySQLType.ENUM, MySQLType.SET):
        params["allowed"] = ",".join(escape_enum_option(e) for e in col.elements)
    return dict(sorted(params.items()))


def avro_type(col: ColumnDef, options: EncodingOptions) -> dict[str, Any]:
    """The ``type`` object of a column's ColumnValueBlock (without the nullable union)."""
    rule = rule_for(col)
    params = connect_parameters(col)
    if rule.kind is ValueKind.DECIMAL:
        decimal = decimal_encoding(col, options)
        if decimal.as_text:
            return {"type": "string", "connect.parameters": params}
        return {
            "type": "bytes",
            "connect.parameters": params,
            "logicalType": "decimal",
            "precision": decimal.precision,
            "scale": decimal.scale,
        }
    avro = rule.avro
    if col.unsigned and rule.avro_unsigned:
        avro = rule.avro_unsigned
    if col.type is MySQLType.BIGINT and col.unsigned and options.bigint_unsigned_mode is BigintUnsignedMode.STRING:
        avro = "string"
    return {"type": avro, "connect.parameters": params}


# --------------------------------------------------------------------------------------------------
# Value converters: TiCDC's text forms -> Avro datum


def _missing_members(error: EncodingError) -> EncodingError:
    """Flag an error no value can avoid: the definition lacks what the input format leaves out."""
    error.context["missing_definition"] = "ENUM/SET members"
    return error


def _fail(col: ColumnDef, value: Any, why: str, table: str | None) -> EncodingError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    where = f"column {col.name!r}" + (f" of table {table}" if table else "")
    return EncodingError(
        f"Cannot encode value {shown} for {where} ({col.sql_type()}): {why}.",
        table=table,
        column=col.name,
        value=shown,
    )


def _to_int(col: ColumnDef, value: Any, table: str | None) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (str, bytes)):
        text = value.decode() if isinstance(value, bytes) else value
        try:
            return int(text.strip())
        except ValueError:
            pass
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    raise _fail(col, value, "expected an integer", table)


def _convert_int(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> Any:
    rule = rule_for(col)
    number = _to_int(col, value, table)
    if col.unsigned:
        assert rule.unsigned_max is not None
        if not 0 <= number <= rule.unsigned_max:
            raise _fail(col, value, range_refusal(0, rule.unsigned_max), table)
        if col.type is MySQLType.BIGINT:
            if options.bigint_unsigned_mode is BigintUnsignedMode.STRING:
                return str(number)
            return number - (1 << 64) if number >= (1 << 63) else number  # Go int64(uint64): wraps
        return number
    assert rule.signed_range is not None
    low, high = rule.signed_range
    if not low <= number <= high:
        raise _fail(col, value, range_refusal(low, high), table)
    return number


def _to_float(col: ColumnDef, value: Any, table: str | None) -> float:
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, (str, bytes)):
        try:
            number = float(value)
        except ValueError:
            raise _fail(col, value, "expected a number", table) from None
    else:
        raise _fail(col, value, "expected a number", table)
    if math.isnan(number) or math.isinf(number):
        return 0.0  # TiCDC's mounter replaces NaN and +-Inf by 0
    return number


def float32(number: float) -> float:
    """``number`` rounded to the nearest float32, as a Python float (Go ``float64(float32(x))``)."""
    try:
        return struct.unpack("<f", struct.pack("<f", number))[0]
    except OverflowError:
        return math.copysign(math.inf, number)


def _convert_float32(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> float:
    return float32(_to_float(col, value, table))


def _convert_float64(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> float:
    return _to_float(col, value, table)


def _to_decimal(col: ColumnDef, value: Any, table: str | None) -> Decimal:
    if isinstance(value, bool):
        raise _fail(col, value, "expected a decimal number", table)
    if isinstance(value, float):
        value = repr(value)
    try:
        number = Decimal(value.decode() if isinstance(value, bytes) else value)
    except (InvalidOperation, TypeError, ValueError):
        raise _fail(col, value, "expected a decimal number such as '123.45'", table) from None
    if not number.is_finite():
        raise _fail(col, value, "expected a finite decimal number", table)
    return number


# MySQL decimals have up to 65 digits; the default context (28 digits) would round them.
_EXACT = Context(prec=200)


def decimal_unscaled(number: Decimal, scale: int) -> int:
    """``floor(number * 10**scale)``, what goavro writes for a ``big.Rat`` at ``scale``."""
    return int(number.scaleb(scale, _EXACT).to_integral_value(rounding=ROUND_FLOOR, context=_EXACT))


def twos_complement(unscaled: int) -> bytes:
    """Minimal big-endian two's complement (0 -> ``00``, 128 -> ``0080``, -128 -> ``80``, -129 -> ``ff7f``)."""
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def _convert_decimal(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> Any:
    as_text, precision, scale = decimal_encoding(col, options)
    if as_text:
        if isinstance(value, str):
            _to_decimal(col, value, table)  # validate, but keep TiDB's text as it is
            return value
        return format(_to_decimal(col, value, table).quantize(Decimal(1).scaleb(-scale), context=_EXACT), "f")
    number = _to_decimal(col, value, table)
    unscaled = decimal_unscaled(number, scale)
    if len(str(abs(unscaled))) > max(precision, 1) and unscaled != 0:
        raise _fail(col, value, f"more than {precision} digits at scale {scale}", table)
    return twos_complement(unscaled)


def bit_bytes(number: int) -> bytes:
    """A BIT value as minimal big-endian bytes, at least one (683 -> ``02ab``, 0 -> ``00``)."""
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def _convert_bit(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        number = int.from_bytes(bytes(value), "big")
    else:
        number = _to_int(col, value, table)
    width = col.length if col.length is not None else 1
    if not 0 <= number < (1 << width):
        raise _fail(col, value, f"does not fit in BIT({width})", table)
    return bit_bytes(number)


def _convert_text(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise _fail(col, value, "not valid UTF-8 text", table) from None
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return str(value)
    raise _fail(col, value, "expected text", table)


def _convert_blob(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise _fail(col, value, "expected bytes", table)


def _convert_enum(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        if not col.elements:
            raise _missing_members(_fail(col, value, "an ENUM index needs the column's members, which this table definition lacks", table))
        if not 1 <= value <= len(col.elements):
            raise _fail(col, value, f"ENUM index must be 1..{len(col.elements)} (0 is MySQL's invalid '' value)", table)
        return col.elements[value - 1]
    text = _convert_text(col, value, options, table)
    if col.elements and text not in col.elements:
        raise _fail(col, value, "not a member; allowed: " + ", ".join(repr(e) for e in col.elements), table)
    return text


def _convert_set(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        if not col.elements:
            raise _missing_members(_fail(col, value, "a SET bitmask needs the column's members, which this table definition lacks", table))
        if not 0 <= value < (1 << len(col.elements)):
            raise _fail(col, value, f"SET bitmask has bits beyond its {len(col.elements)} members", table)
        return ",".join(e for i, e in enumerate(col.elements) if value >> i & 1)
    text = _convert_text(col, value, options, table)
    if col.elements and text:
        unknown = [m for m in text.split(",") if m not in col.elements]
        if unknown:
            raise _fail(col, value, "unknown members " + ", ".join(map(repr, unknown)) + "; allowed: "
                        + ", ".join(repr(e) for e in col.elements), table)
    return text


def _convert_json(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> str:
    if isinstance(value, (dict, list)):
        import json

        return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)  # TiDB's separators
    return _convert_text(col, value, options, table)


def _convert_temporal(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> str:
    import datetime as dt

    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        fsp = col.fsp or 0
        if isinstance(value, dt.datetime):
            text = value.strftime("%Y-%m-%d %H:%M:%S")
        elif isinstance(value, dt.date):
            return value.strftime("%Y-%m-%d")
        else:
            text = value.strftime("%H:%M:%S")
        if fsp:
            text += "." + f"{value.microsecond:06d}"[:fsp]
        return text
    return _convert_text(col, value, options, table)


def _convert_year(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> int:
    number = _to_int(col, value, table)
    if not (number == 0 or YEAR_RANGE[0] <= number <= YEAR_RANGE[1]):
        raise _fail(col, value, YEAR_REFUSAL, table)
    return number


def _convert_vector(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format(float32(float(v)), "g") for v in value) + "]"
    return _convert_text(col, value, options, table)


Converter = Callable[[ColumnDef, Any, EncodingOptions, "str | None"], Any]

CONVERTERS: dict[ValueKind, Converter] = {
    ValueKind.INT: _convert_int,
    ValueKind.BIGINT_UNSIGNED: _convert_int,
    ValueKind.FLOAT32: _convert_float32,
    ValueKind.FLOAT64: _convert_float64,
    ValueKind.DECIMAL: _convert_decimal,
    ValueKind.BIT: _convert_bit,
    ValueKind.TEXT: _convert_text,
    ValueKind.BLOB: _convert_blob,
    ValueKind.ENUM: _convert_enum,
    ValueKind.SET: _convert_set,
    ValueKind.JSON: _convert_json,
    ValueKind.TEMPORAL: _convert_temporal,
    ValueKind.YEAR: _convert_year,
    ValueKind.VECTOR: _convert_vector,
}


def converter_for(col: ColumnDef) -> Converter:
    """The value converter of a column's mapping row."""
    return CONVERTERS[rule_for(col).kind]


def to_avro_value(col: ColumnDef, value: Any, options: EncodingOptions, table: str | None = None) -> Any:
    """Convert one non-NULL row value to the Avro datum TiCDC writes for it.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType
    >>> to_avro_value(ColumnDef(name="d", type=MySQLType.DECIMAL, precision=10, scale=4), "2021.1208",
    ...               EncodingOptions()).hex()
    '01346608'
    """
    return CONVERTERS[rule_for(col).kind](col, value, options, table)


# --------------------------------------------------------------------------------------------------
# SQL defaults

def avro_default(col: ColumnDef, options: EncodingOptions, table: str | None = None) -> Any:
    """The schema ``default`` TiCDC writes for a column's SQL default, or :data:`NO_DEFAULT`.

    Same conversion as row values, except: precise DECIMAL has none (goavro cannot encode logical
    defaults), FLOAT is rounded to float32 then kept as float64 (``"3.14"`` -> ``3.140000104904175``),
    BIT and binary-charset defaults become base64 text (Go marshals ``[]byte`` that way).
    """
    if col.default is None:
        return NO_DEFAULT
    rule = rule_for(col)
    kind = rule.kind
    if kind is ValueKind.DECIMAL and not decimal_encoding(col, options).as_text:
        return NO_DEFAULT
    raw = col.default
    try:
        if kind is ValueKind.BIT:
            data = raw if isinstance(raw, bytes) else bit_bytes(_to_int(col, raw, table))
            return base64.b64encode(data).decode("ascii")
        if kind is ValueKind.BLOB:
            data = raw if isinstance(raw, bytes) else raw.encode("utf-8")
            return base64.b64encode(data).decode("ascii")
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if kind is ValueKind.YEAR:
            return _to_int(col, text, table)
        if kind in (ValueKind.ENUM, ValueKind.SET):
            return text  # stored text verbatim
        return CONVERTERS[kind](col, text, options, table)
    except EncodingError as exc:
        raise TableDefinitionError(
            f"Column {col.name!r}" + (f" of table {table}" if table else "")
            + f" has a default TiCDC cannot convert: {exc.message}",
            table=table,
            column=col.name,
        ) from None


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
