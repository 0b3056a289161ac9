"""The dead-letter record: one bad input row or message, on its own, with what a replay needs.

Every place that sets input aside (the parse stages, the encode stage, the driver's checks) builds its
record with :func:`dead_letter_record`, so the fields are the same everywhere::

    {"id", "format", "source", "file", "line", "offset", "topic", "partition", "schema", "table",
     "table_version", "commit_ts", "reason", "message", "raw_base64"}

``id`` is stable for a location (SHA-1 of source, line and offset), so a replayed or re-read row is
recognised; ``raw_base64`` holds the row's bytes exactly as read (a CSV record or a JSON line without its
terminator, a Kafka message value). The job adds ``batch`` when it writes the file.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

__all__ = ["FIELDS", "dead_letter_json", "dead_letter_record"]

#: The fields of every record, in the order they are written.
FIELDS = ("id", "format", "source", "file", "line", "offset", "topic", "partition", "schema", "table",
          "table_version", "commit_ts", "reason", "message", "raw_base64")


def dead_letter_record(
    *,
    fmt: str | None,
    source: str,
    reason: str,
    message: str,
    raw: bytes | str | None = None,
    file: str | None = None,
    line: int | None = None,
    offset: int | None = None,
    topic: str | None = None,
    partition: int | None = None,
    schema: str | None = None,
    table: str | None = None,
    table_version: int | None = None,
    commit_ts: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One dead-letter record (see the module docs); ``extra`` (e.g. ``column``) is kept after the fields.

    >>> r = dead_letter_record(fmt="csv", source="s/t/1/CDC1.csv:3", file="s/t/1/CDC1.csv", line=3,
    ...                        reason="bad integer", message="...", raw=b"x")
    >>> r["raw_base64"], len(r["id"])
    ('eA==', 40)
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    ident = hashlib.sha1(f"{source}\x1f{line}\x1f{offset}".encode("utf-8", "surrogateescape")).hexdigest()
    record: dict[str, Any] = {
        "id": ident, "format": fmt, "source": source, "file": file, "line": line, "offset": offset,
        "topic": topic, "partition": partition, "schema": schema, "table": table, "table_version": table_version,
        "commit_ts": commit_ts, "reason": reason, "message": message,
        "raw_base64": base64.b64encode(raw).decode("ascii") if raw is not None else None,
    }
    record.update({k: v for k, v in extra.items() if v is not None})
    return record


def dead_letter_json(**fields: Any) -> str:
    """:func:`dead_letter_record` as one line of JSON (what executors hand to the driver)."""
    return json.dumps(dead_letter_record(**fields), ensure_ascii=False, default=str)
