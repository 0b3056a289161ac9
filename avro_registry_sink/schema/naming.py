"""Avro names from SQL names, as TiCDC makes them (``common.SanitizeName``)."""

from __future__ import annotations

#: TiCDC's changefeed namespace; the record namespace is ``default.<schema>``.
CHANGEFEED_NAMESPACE = "default"


def _is_name_char(ch: str) -> bool:
    return ch == "_" or ("a" <= ch <= "z") or ("A" <= ch <= "Z") or ("0" <= ch <= "9")


def sanitize_name(name: str) -> str:
    """Make ``name`` a valid Avro name: every code point outside ``[A-Za-z0-9_]`` becomes ``_``, and a
    leading digit is kept behind a ``_``.

    >>> sanitize_name("1ColumnNameStartWithNumber"), sanitize_name("A.B"), sanitize_name("columnNameWith中文")
    ('_1ColumnNameStartWithNumber', 'A_B', 'columnNameWith__')
    """
    out = []
    for i, ch in enumerate(name):
        if i == 0 and "0" <= ch <= "9":
            out.append("_" + ch)
        elif _is_name_char(ch):
            out.append(ch)
        else:
            out.append("_")
    return "".join(out)


def record_namespace(schema_name: str, changefeed_namespace: str = CHANGEFEED_NAMESPACE) -> str:
    """``default.<schema>`` with both parts sanitised; just the first part when the schema sanitises to "".

    >>> record_namespace("S.chema", "N-amespace"), record_namespace("", "normalNamespace")
    ('N_amespace.S_chema', 'normalNamespace')
    """
    ns = sanitize_name(changefeed_namespace)
    schema = sanitize_name(schema_name)
    return f"{ns}.{schema}" if schema else ns
