"""``DEFAULT`` clauses -> the default value TiDB stores (``ColumnInfo.GetDefaultValue()``), per column type.

Literals and expressions are evaluated with sqlglot's parser (``CURRENT_TIMESTAMP(3)``, ``NOW()``, ``-1.5``,
``b'101'``, ``_binary'..'``); the result is what TiDB's DDL (``getDefaultValue``) stores: integers
normalised, FLOAT(M,D)/DOUBLE(M,D) rounded to D places, DECIMAL as the literal was written (TiDB checks the value against the column but stores the
evaluated literal, so ``DEFAULT 1.5`` on DECIMAL(10,2) stays ``"1.5"`` and ``DEFAULT 0`` stays ``"0"``),
BIT and binary strings as bytes (BINARY(n) padded with zero bytes to n), temporal values normalised at the
column's fsp, ENUM/SET members checked. TIMESTAMP string defaults are taken as UTC (a DDL file does not
say which session time zone it ran in).
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

import numpy
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

from avro_registry_sink.errors import TableDefinitionError
from avro_registry_sink.table import ColumnDef, MySQLType
from avro_registry_sink.tabledef.lexer import DIALECT, Statement, Tok

__all__ = ["default_value", "evaluate_default"]

# --------------------------------------------------------------------------------------------------
# DEFAULT values


_NOW_FUNCTIONS = frozenset({"NOW", "CURRENT_TIMESTAMP", "LOCALTIME", "LOCALTIMESTAMP"})
_NOW_NODES = (exp.CurrentTimestamp, exp.Localtime, exp.Localtimestamp)

_INTEGER_TYPES = frozenset({MySQLType.TINYINT, MySQLType.SMALLINT, MySQLType.MEDIUMINT, MySQLType.INT,
                            MySQLType.BIGINT})


@dataclass(frozen=True)
class _Literal:
    kind: str  # "null", "bool", "num", "str", "bytes", "now", "expr"
    value: object = None


def _literal(node: exp.Expression, source: str) -> _Literal:
    """A DEFAULT expression (sqlglot AST) reduced to the literal MySQL would evaluate it to."""
    if isinstance(node, exp.Null):
        return _Literal("null")
    if isinstance(node, exp.Boolean):
        return _Literal("bool", bool(node.this))
    if isinstance(node, exp.Literal):
        return _Literal("str" if node.is_string else "num", str(node.this))
    if isinstance(node, exp.Neg):
        inner = _literal(node.this, source)
        if inner.kind == "num":
            text = str(inner.value)
            return _Literal("num", text[1:] if text.startswith("-") else "-" + text)
        if inner.kind == "bool":
            return _Literal("num", "-1" if inner.value else "0")
        return _Literal("expr", source)
    if isinstance(node, exp.National):
        return _Literal("str", str(node.this))
    if isinstance(node, exp.HexString):
        digits = str(node.this)
        return _Literal("bytes", bytes.fromhex(digits.rjust(len(digits) + len(digits) % 2, "0")))
    if isinstance(node, exp.BitString):
        bits = str(node.this) or "0"
        return _Literal("bytes", int(bits, 2).to_bytes((len(bits) + 7) // 8, "big"))
    if isinstance(node, exp.Introducer):
        inner = _literal(node.expression, source)
        if str(node.this).lower() == "_binary" and inner.kind == "str":
            return _Literal("bytes", str(inner.value).encode("utf-8"))
        return inner
    if isinstance(node, exp.Concat) and all(isinstance(e, exp.Literal) and e.is_string for e in node.expressions):
        return _Literal("str", "".join(str(e.this) for e in node.expressions))
    if isinstance(node, exp.Paren):
        inner = _literal(node.this, source)
        if inner.kind == "expr":
            return _Literal("expr", source[1:-1].strip() if source.startswith("(") else source)
        return inner
    if isinstance(node, _NOW_NODES):
        return _Literal("now", int(node.this.this) if node.this is not None else 0)
    if isinstance(node, exp.Anonymous) and str(node.this).upper() in _NOW_FUNCTIONS:
        args = node.expressions
        return _Literal("now", int(args[0].this) if args and isinstance(args[0], exp.Literal) else 0)
    return _Literal("expr", source)


def evaluate_default(toks: list[Tok], stmt: Statement, column: ColumnDef, table: str) -> str | bytes | None:
    source = stmt.text[toks[0].start : toks[-1].end + 1]
    sg_tokens: list[Token] = []
    if toks[0].kind is TokenType.DOT:  # .5
        sg_tokens.append(Token(TokenType.NUMBER, "." + toks[1].text))
    else:
        for tok in toks:
            if not sg_tokens or sg_tokens[-1] is not tok.src:
                sg_tokens.append(tok.src)
    try:
        parsed = DIALECT.parser().parse(sg_tokens, stmt.text)
    except ParseError as exc:
        raise TableDefinitionError(
            f"Column {column.name!r} of table {table} has a DEFAULT that cannot be read: {source!r} ({exc}).",
            table=table, column=column.name,
        ) from None
    node = parsed[0] if parsed else None
    literal = _literal(node, source) if node is not None else _Literal("expr", source)  # type: ignore[arg-type]
    return default_value(column, literal.kind, literal.value, table=table)


def _bad_default(column: ColumnDef, value: object, table: str, why: str) -> TableDefinitionError:
    return TableDefinitionError(
        f"Column {column.name!r} of table {table} has an invalid default {value!r} for "
        f"{column.sql_type()}: {why}.",
        table=table, column=column.name,
    )


def _to_decimal(column: ColumnDef, kind: str, value: object, table: str) -> Decimal:
    if kind == "bool":
        return Decimal(int(bool(value)))
    if kind == "bytes":
        return Decimal(int.from_bytes(value, "big")) if value else Decimal(0)  # type: ignore[arg-type]
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise _bad_default(column, value, table, "not a number") from None
    if not number.is_finite():
        raise _bad_default(column, value, table, "not a finite number")
    return number


def _int_text(number: Decimal) -> str:
    return str(int(number.to_integral_value(rounding=ROUND_HALF_UP)))


def _minimal_bytes(number: int) -> bytes:
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


def default_value(column: ColumnDef, kind: str, value: object, *, table: str = "?") -> str | bytes | None:
    """The default TiDB stores for ``column`` given a literal of ``kind``.

    ``kind`` is ``"null"``, ``"bool"``, ``"num"`` (number text as written), ``"str"`` (string value),
    ``"bytes"`` (``x'..'``/``0x..``/``b'..'``/``_binary'..'``), ``"now"`` (``value`` = fsp) or ``"expr"``
    (``value`` = expression text, kept as written). Rules: integers normalized (``'5'`` -> ``"5"``,
    ``TRUE`` -> ``"1"``, ``1.5`` -> ``"2"``); DECIMAL as written, the way TiDB prints the evaluated literal
    (``1.5`` in DECIMAL(10,2) -> ``"1.5"``, ``1.50`` -> ``"1.50"``, ``.5`` -> ``"0.5"``, ``1e3`` -> ``"1000"``,
    ``'2.25'`` -> ``"2.25"``; a value too large for the column is refused); FLOAT/DOUBLE numbers as written;
    BIT -> minimal big-endian bytes; binary-charset strings -> bytes (UTF-8 of a string literal; BINARY(n)
    padded with zero bytes to n); hex on a text column -> decoded text; DATETIME/TIMESTAMP ->
    ``YYYY-MM-DD HH:MM:SS[.fsp]``, DATE -> ``YYYY-MM-DD``, TIME -> ``HH:MM:SS[.fsp]``; YEAR -> 4 digits;
    ``NOW()``/``CURRENT_TIMESTAMP(3)``/``LOCALTIME`` -> ``"CURRENT_TIMESTAMP"`` / ``"CURRENT_TIMESTAMP(3)"``.

    >>> default_value(ColumnDef(name="p", type=MySQLType.DECIMAL, precision=10, scale=2), "num", "1.5")
    '1.5'
    >>> default_value(ColumnDef(name="b", type=MySQLType.BIT, length=10), "num", "682")
    b'\\x02\\xaa'
    """
    t = column.type
    if kind == "null":
        return None
    if kind == "now":
        return f"CURRENT_TIMESTAMP({value})" if value else "CURRENT_TIMESTAMP"
    if kind == "expr":
        return str(value)
    if t in _INTEGER_TYPES:
        text = _int_text(_to_decimal(column, kind, value, table))
        if column.unsigned and text.startswith("-"):
            raise _bad_default(column, value, table, "negative value for an UNSIGNED column")
        return text
    if t is MySQLType.DECIMAL:
        return _decimal_text(column, kind, value, table)
    if t in (MySQLType.FLOAT, MySQLType.DOUBLE):
        if kind in ("num", "str"):
            text = str(value).strip()
            _to_decimal(column, kind, text, table)
            if column.precision is not None and column.scale is not None:
                return _fixed_float_text(column, float(text), value, table)
            return text[1:] if text.startswith("+") else text
        return _int_text(_to_decimal(column, kind, value, table))
    if t is MySQLType.BIT:
        if kind == "bytes":
            return bytes(value).lstrip(b"\0") or b"\0"  # type: ignore[call-overload]
        if kind == "str":
            return str(value).encode("utf-8").lstrip(b"\0") or b"\0"
        number = int(_int_text(_to_decimal(column, kind, value, table)))
        if number < 0:
            raise _bad_default(column, value, table, "negative BIT value")
        return _minimal_bytes(number)
    if t is MySQLType.YEAR:
        return _year_text(column, kind, value, table)
    if t in (MySQLType.DATETIME, MySQLType.TIMESTAMP, MySQLType.DATE, MySQLType.TIME):
        text = _text(column, kind, value, table)
        return _temporal_text(column, text, table)
    if column.binary:
        if kind == "bytes":
            data = bytes(value)  # type: ignore[call-overload]
        elif kind == "bool":
            data = b"1" if value else b"0"
        else:
            data = str(value).encode("utf-8")
        if t is MySQLType.BINARY:  # fixed width: TiDB pads the stored default as it pads values
            data = data.ljust(1 if column.length is None else column.length, b"\0")
        return data
    if t is MySQLType.ENUM and kind in ("num", "bool"):
        index = int(_int_text(_to_decimal(column, kind, value, table)))
        if not 1 <= index <= len(column.elements):
            raise _bad_default(column, value, table, f"ENUM index out of 1..{len(column.elements)}")
        return column.elements[index - 1]
    if t is MySQLType.SET and kind in ("num", "bool"):
        mask = int(_int_text(_to_decimal(column, kind, value, table)))
        if mask < 0 or mask >= 1 << len(column.elements):
            raise _bad_default(column, value, table, "SET bitmask out of range")
        return ",".join(e for i, e in enumerate(column.elements) if mask >> i & 1)
    return _text(column, kind, value, table)


def _fixed_float_text(column: ColumnDef, number: float, value: object, table: str) -> str:
    """FLOAT(M,D)/DOUBLE(M,D): TiDB converts the default to the column type before storing it, rounding to
    D places (half away from zero, in double arithmetic) and refusing what needs more than M-D digits."""
    precision, scale = column.precision or 0, column.scale or 0
    shifted = number * 10.0**scale
    rounded = math.copysign(math.floor(abs(shifted) + 0.5), shifted) / 10.0**scale
    if abs(rounded) > 10.0 ** (precision - scale) - 10.0**-scale:
        raise _bad_default(column, value, table, f"out of range for {precision - scale} digits before the point")
    if column.type is MySQLType.FLOAT:
        text = numpy.format_float_positional(numpy.float32(rounded), unique=True, trim="-")
    else:
        text = numpy.format_float_positional(numpy.float64(rounded), unique=True, trim="-")
    return "0" if text == "-0" else text


def _decimal_literal_text(text: str) -> str:
    """A numeric literal as TiDB prints the datum it evaluates to: exact literals keep their fraction digits
    (``1.50``) without leading zeros (``007.5`` -> ``7.5``, ``.5`` -> ``0.5``); literals with an exponent are
    doubles, printed in positional form (``1e3`` -> ``1000``)."""
    body = text.strip()
    sign = "-" if body.startswith("-") else ""
    body = body.lstrip("+-")
    if "e" in body.lower():
        positional = format(Decimal(repr(float(body))), "f")
        if "." in positional:
            positional = positional.rstrip("0").rstrip(".")
        digits = positional
    else:
        whole, dot, fraction = body.partition(".")
        digits = (whole.lstrip("0") or "0") + (f".{fraction}" if dot and fraction else "")
    if sign and Decimal(digits) == 0:
        sign = ""
    return sign + digits


def _decimal_text(column: ColumnDef, kind: str, value: object, table: str) -> str:
    number = _to_decimal(column, kind, value, table)
    precision, scale = column.precision or 10, column.scale or 0
    whole_digits = len(str(abs(int(number)))) if abs(number) >= 1 else 0
    if whole_digits > precision - scale:
        raise _bad_default(column, value, table, f"out of range for {precision - scale} digits before the point")
    if kind == "num":
        return _decimal_literal_text(str(value))
    if kind == "str":
        return str(value)  # TiDB stores the string as written once it has checked it is a number
    return _int_text(number)  # TRUE/FALSE, x'..'/b'..' (TiDB stores their integer value)


def _text(column: ColumnDef, kind: str, value: object, table: str) -> str:
    if kind == "bytes":
        try:
            return bytes(value).decode("utf-8")  # type: ignore[call-overload]
        except UnicodeDecodeError:
            raise _bad_default(column, value, table, "the bytes are not valid UTF-8 text") from None
    if kind == "bool":
        return "1" if value else "0"
    return str(value)


def _year_text(column: ColumnDef, kind: str, value: object, table: str) -> str:
    number = int(_int_text(_to_decimal(column, kind, value, table)))
    short = kind == "str" and len(str(value).strip()) <= 2
    if short or 0 < number < 100:  # two-digit years: 1..69 -> 20xx, 70..99 -> 19xx ('0'/'00' -> 2000)
        number += 2000 if number < 70 else 1900
    if number != 0 and not 1901 <= number <= 2155:
        raise _bad_default(column, value, table, "YEAR is 1901..2155 or 0")
    return f"{number:04d}"


def _split_fraction(text: str) -> tuple[str, str]:
    main, _, frac = text.partition(".")
    return main, frac


def _round_fraction(frac: str, fsp: int) -> tuple[int, bool]:
    """(fraction digits rounded to fsp as an int, carry into the seconds)."""
    digits = (frac + "000000000")[:9]
    micro = int(digits[:fsp] or "0")
    if int(digits[fsp] if fsp < 9 else "0") >= 5:
        micro += 1
    if micro >= 10**fsp:
        return 0, True
    return micro, False


def _temporal_text(column: ColumnDef, text: str, table: str) -> str:
    raw = text.strip()
    fsp = column.fsp or 0
    try:
        if column.type is MySQLType.TIME:
            return _time_text(raw, fsp)
        return _datetime_text(raw, fsp, date_only=column.type is MySQLType.DATE)
    except (ValueError, IndexError):
        raise _bad_default(column, text, table, "not a valid date/time literal") from None


def _datetime_text(raw: str, fsp: int, *, date_only: bool) -> str:
    main, frac = _split_fraction(raw.replace("T", " "))
    if main.isdigit():  # 20240229 / 20240229123456 / 0
        if int(main) == 0:
            parts = [0, 0, 0, 0, 0, 0]
        elif len(main) in (8, 14):
            parts = [int(main[0:4]), int(main[4:6]), int(main[6:8])]
            parts += [int(main[i : i + 2]) for i in (8, 10, 12)] if len(main) == 14 else [0, 0, 0]
        else:
            raise ValueError(raw)
    else:
        date_part, _, time_part = main.strip().partition(" ")
        ymd = [int(p) for p in date_part.replace("/", "-").split("-")]
        hms = [int(p) for p in time_part.strip().split(":")] if time_part.strip() else []
        if len(ymd) != 3 or len(hms) > 3:
            raise ValueError(raw)
        if len(date_part.split("-")[0]) <= 2:
            ymd[0] += 2000 if ymd[0] < 70 else 1900
        parts = ymd + hms + [0] * (3 - len(hms))
    year, month, day, hour, minute, second = parts
    micro, carry = _round_fraction(frac, fsp) if not date_only else (0, False)
    if (year, month, day) == (0, 0, 0) or month == 0 or day == 0:  # zero dates cannot carry
        if date_only:
            return f"{year:04d}-{month:02d}-{day:02d}"
        moment_text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
    else:
        moment = _dt.datetime(year, month, day, hour, minute, second)
        if carry:
            moment += _dt.timedelta(seconds=1)
        if date_only:
            return moment.strftime("%Y-%m-%d").rjust(10, "0")
        moment_text = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} {moment:%H:%M:%S}"
    return moment_text + (f".{micro:0{fsp}d}" if fsp else "")


def _time_text(raw: str, fsp: int) -> str:
    sign = "-" if raw.startswith("-") else ""
    main, frac = _split_fraction(raw.lstrip("-+"))
    days = 0
    if " " in main:
        day_text, main = main.split(" ", 1)
        days = int(day_text)
    if main.isdigit():  # HHMMSS, MMSS or SS
        main = main.rjust(6, "0") if len(main) <= 6 else main
        hours, minutes, seconds = int(main[:-4]), int(main[-4:-2]), int(main[-2:])
    else:
        pieces = [int(p) for p in main.split(":")]
        pieces += [0] * (3 - len(pieces))
        hours, minutes, seconds = pieces[:3]
    if minutes > 59 or seconds > 59:
        raise ValueError(raw)
    micro, carry = _round_fraction(frac, fsp)
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds + int(carry)
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if total == 0 and micro == 0:
        sign = ""
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}" + (f".{micro:0{fsp}d}" if fsp else "")


