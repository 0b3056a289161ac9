"""Compact JSON text exactly as Go's ``encoding/json`` writes it.

TiCDC registers schemas that Go marshalled, so byte-identical schema text needs Go's rules: keys in the
order given (TiCDC's struct order, or alphabetical for maps: the builder orders them), ``<``, ``>``,
``&``, U+2028 and U+2029 escaped as ``\\u003c`` ..., other non-ASCII written raw, and floats in Go's
shortest form (``'f'`` notation between 1e-6 and 1e21, ``'e'`` with a two-digit minimum exponent
outside it: ``1e+21``, ``1e-07``).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _string(text: str) -> str:
    out = ['"']
    for ch in text:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _float(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"JSON cannot represent the float {value!r}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    magnitude = abs(value)
    if 1e-6 <= magnitude < 1e21:
        text = repr(value)
        if "e" in text or "E" in text:  # Python's repr uses exponents below 1e-4 and from 1e16; Go does not
            text = format(Decimal(text), "f")  # the same shortest digits, written out in full
            if "." in text:
                text = text.rstrip("0").rstrip(".")
        elif text.endswith(".0"):
            text = text[:-2]
        return text
    mantissa, exponent = repr(value).lower().split("e") if "e" in repr(value).lower() else (repr(value), "0")
    if mantissa.endswith(".0"):
        mantissa = mantissa[:-2]
    sign = "-" if exponent.startswith("-") else "+"
    digits = exponent.lstrip("+-").lstrip("0") or "0"
    return f"{mantissa}e{sign}{digits.zfill(2)}"


def dumps(obj: Any) -> str:
    """Serialise ``obj`` (dict, list, str, int, float, bool, None) as Go's ``json.Marshal`` would.

    >>> dumps({"a": "<b>", "f": 3.140000104904175, "n": [1, None, True]})
    '{"a":"\\\\u003cb\\\\u003e","f":3.140000104904175,"n":[1,null,true]}'
    """
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, str):
        return _string(obj)
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, float):
        return _float(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(_string(str(k)) + ":" + dumps(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"cannot serialise {type(obj).__name__} as JSON")
