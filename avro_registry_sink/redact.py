"""The one place that masks secrets before anything is shown, logged or written.

Secrets reach text in three ways, and each has its mask:

* user-info in URLs and URIs (``http://user:pw@registry``, ``kafka://jo:pw@host/``): the password part
  becomes ``***`` (:func:`redact_url`, and any URL inside free text with :func:`redact_text`);
* options whose name says secret (``sasl-password=``, ``key-password``, ``password="..."`` in a JAAS line,
  ``token``, ``secret`` ...): the value becomes ``***`` (in query strings, text and mappings);
* known secret values (the configured passwords and tokens, gathered from the settings models by
  :func:`secret_values`), wherever they appear verbatim: a client library's error text, an exception.

:class:`RedactFilter` applies :func:`redact_text` to every record of a :mod:`logging` logger (the Kafka
clients' loggers use it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from pydantic import BaseModel, SecretStr

__all__ = ["MASK", "RedactFilter", "guard_loggers", "is_secret_name", "redact_mapping", "redact_text", "redact_url",
           "remember", "secret_values"]

MASK = "***"

_SECRET_NAME = re.compile(r"(?i)(pass(word|wd|phrase)?|secret|token|credential|jaas|api[-_.]?key|private[-_.]?key|"
                          r"keystore[-_.]key|authorization)")

# scheme://user:password@  (the password may be empty; stops at the first '@' of the authority)
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s'\"]*):(?P<pw>[^@/?#\s'\"]*)@")
# name=value where the name says secret (query strings, k=v lists, JAAS name="value")
_SECRET_PAIR = re.compile(
    r"(?P<name>[\w.\-]*(?:pass(?:word|wd|phrase)?|secret|token|credential|api[-_.]?key)[\w.\-]*)"
    r"(?P<eq>\s*[=:]\s*)(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^&\s,;'\"}]+)",
    re.IGNORECASE,
)
#: Words that begin an instruction or a description after ``name:`` in a message ("give access-key but not
#: secret-access-key: give both"): prose about the option, not its value, so left as written.
_PROSE = frozenset({"a", "an", "the", "give", "set", "use", "check", "both", "either", "neither", "none", "not",
                    "no", "missing", "required", "expected", "must", "is", "are", "was", "see", "only", "needs",
                    "need", "empty", "unset", "invalid", "wrong", "refused", "from", "with", "without", "as"})
_PEM_KEY = re.compile(r"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----", re.DOTALL)
_MIN_SECRET = 3  # shorter known values would mask ordinary words

# The secrets of the settings this process runs with (see :func:`remember`). Process-wide on purpose: an
# error can surface far from the settings that hold the secret (a client library's message, a traceback).
_REMEMBERED: set[str] = set()


def remember(*objects: Any) -> None:
    """Mask the secrets held by ``objects`` (settings models, mappings) in every later :func:`redact_text`."""
    _REMEMBERED.update(secret_values(*objects))


def is_secret_name(name: str) -> bool:
    """Whether an option or field name holds a secret (``sasl-password``, ``bearer_token`` ...)."""
    return bool(_SECRET_NAME.search(name))


def secret_values(*objects: Any) -> set[str]:
    """Every :class:`SecretStr` value held (at any depth) by pydantic models, mappings or sequences."""
    found: set[str] = set()

    def walk(obj: Any, depth: int) -> None:
        if depth > 8 or obj is None:
            return
        if isinstance(obj, SecretStr):
            value = obj.get_secret_value()
            if len(value) >= _MIN_SECRET:
                found.add(value)
        elif isinstance(obj, BaseModel):
            for name in type(obj).model_fields:
                walk(getattr(obj, name, None), depth + 1)
        elif isinstance(obj, Mapping):
            for key, value in obj.items():
                if isinstance(value, str) and is_secret_name(str(key)) and len(value) >= _MIN_SECRET:
                    found.add(value)
                else:
                    walk(value, depth + 1)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for item in obj:
                walk(item, depth + 1)

    for obj in objects:
        walk(obj, 0)
    return found


def redact_url(url: str) -> str:
    """``scheme://user:pw@host/p?sasl-password=x`` -> ``scheme://user:***@host/p?sasl-password=***``.

    >>> redact_url("ftp://user:S3cret@host:21/x?sasl-password=a%2Bb&protocol=avro")
    'ftp://user:***@host:21/x?sasl-password=***&protocol=avro'
    """
    try:
        split = urlsplit(url)
    except ValueError:
        return redact_text(url)
    netloc = split.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}{':' + MASK if colon else ''}@{hosts}"
    query = split.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = "&".join(f"{quote(k, safe='-_.')}={MASK if is_secret_name(k) else quote(v, safe='-_.:/,')}"
                         for k, v in pairs)
    return split._replace(netloc=netloc, query=query).geturl()


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask URL passwords, secret-named ``name=value`` pairs and the given secret values in free text.

    >>> redact_text('bad URL "http://u:pw@h" and password="x y" token=abc', secrets=["S3cret!"])
    'bad URL "http://u:***@h" and password=*** token=***'
    """
    known = {s for s in secrets if s and len(s) >= _MIN_SECRET} | _REMEMBERED
    for value in sorted(known, key=len, reverse=True):
        text = text.replace(value, MASK)
        encoded = quote(value, safe="")
        if encoded != value:
            text = text.replace(encoded, MASK)
    text = _PEM_KEY.sub(MASK, text)
    text = _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    return _SECRET_PAIR.sub(_mask_pair, text)


def _mask_pair(m: re.Match[str]) -> str:
    """``name=value`` -> ``name=***``; ``name: word`` stays when the word is prose (:data:`_PROSE`)."""
    if m.group("eq").strip() == ":" and m.group("eq") != ":" and m.group("value").lower() in _PROSE:
        return m.group(0)
    return f"{m.group('name')}{m.group('eq')}{MASK}"


def redact_mapping(data: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``data`` (mappings, sequences, strings) with secret-named keys and secrets in text masked."""
    secrets = tuple(secrets)
    if isinstance(data, Mapping):
        return {k: (MASK if is_secret_name(str(k)) and v not in (None, "") and not isinstance(v, (bool, Mapping))
                    else redact_mapping(v, secrets)) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(redact_mapping(v, secrets) for v in data)
    if isinstance(data, SecretStr):
        return MASK
    if isinstance(data, str):
        return redact_text(data, secrets)
    return data


class RedactFilter(logging.Filter):
    """A logging filter that masks secrets in every record's final message (see :func:`redact_text`)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = tuple(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage(), self.secrets)
        record.args = ()
        return True


def guard_loggers(*names: str) -> None:
    """Put a :class:`RedactFilter` on the named loggers (once each): e.g. py4j's, whose debug records carry
    every value sent to the JVM, Kafka client settings included."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactFilter) for f in logger.filters):
            logger.addFilter(RedactFilter())
