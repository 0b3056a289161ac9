"""What JSON text can hold that UTF-8 cannot: lone UTF-16 surrogate escapes (``\\ud800`` without its pair).

JSON's ``\\uXXXX`` escapes name UTF-16 code units, so a message can spell half a surrogate pair; Python's ``json``
decodes it to a lone surrogate, which no MySQL/TiDB text, Avro string or Arrow array can hold. The per-message
readers refuse such a message (:func:`refuse_lone_surrogates`); the Arrow path sends it to them
(:func:`has_lone_surrogate`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from avro_registry_sink.errors import SourceError

__all__ = ["has_lone_surrogate", "refuse_lone_surrogates"]

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def has_lone_surrogate(text: str, parsed: Any) -> bool:
    """Whether ``parsed`` (``text`` decoded by ``json``) holds a string with a lone UTF-16 surrogate: JSON's
    ``\\ud800``-style escapes decode to one, which UTF-8 (and so no MySQL/TiDB text, Avro string or Arrow array)
    can hold. Only a text with such an escape is looked into."""
    try:
        text.encode("utf-8")  # (a surrogate itself: a message re-written from a JSON array file)
        if "\\u" not in text or not _SURROGATE_ESCAPE.search(text):
            return False
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def refuse_lone_surrogates(text: str | bytes | bytearray, parsed: Any, source: str) -> None:
    """Raise :class:`SourceError` when :func:`has_lone_surrogate`."""
    raw = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else text
    if has_lone_surrogate(raw, parsed):
        raise SourceError(f"{source or 'message'}: a string holds a lone UTF-16 surrogate escape (\\ud800-\\udfff "
                          "without its pair), which no UTF-8 text can hold.", source=source, reason="lone surrogate")
