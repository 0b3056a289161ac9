"""The shared row shapes: what one layer hands the next, defined once.

Everything here is plain data that every layer may import (it imports only :mod:`.errors`):

* :class:`Op` - a row change's operation, and :data:`OP_ALIASES` (the spellings sources use);
* :data:`PlanKey` - ``(schema, table, table_version)``, the key of a table version's plan;
* :data:`DEFAULT_TOPIC_RULE` - one topic per table when nothing else names the topic;
* the frames between stages, as Spark DDL and as Arrow schemas:

  - :data:`CHANGE_DDL` / :data:`CHANGE_SCHEMA` / :data:`CHANGE_COLUMNS` - change events (row images as JSON text);
  - :data:`KAFKA_DDL` / :data:`KAFKA_SCHEMA` / :data:`KAFKA_COLUMNS` - Kafka records (plus ``commit_ts``);
  - :data:`KAFKA_ERROR_SCHEMA` - Kafka records plus the dead-letter JSON of a refused row;
  - :data:`ENCODED_DDL` / :data:`ORDER_COLUMNS` - the one-pass stages' output, with what orders it;
  - :data:`FILE_LINES_DDL` / :data:`FILE_LINE_COLUMNS` - the file sink's lines;
  - :data:`MESSAGE_OVERHEAD` - TiCDC's allowance per Kafka message on top of key and value;

* the dead-letter record (:data:`DEAD_LETTER_FIELDS`, :func:`dead_letter_record`, :func:`dead_letter_json`):
  one bad input row or message, on its own, with what a replay needs; :class:`RefusalReason`, the
  reasons that steer the driver (:func:`refusal_reason` reads one from a record).

Every place that sets input aside (the parse stages, the encode stage, the driver's checks) builds its
dead-letter record with :func:`dead_letter_record`, so the fields are the same everywhere::

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
from collections.abc import Mapping
from enum import Enum, StrEnum
from typing import Any

import pyarrow as pa

from avro_registry_sink.errors import EncodingError

__all__ = [
    "CHANGE_COLUMNS",
    "CHANGE_DDL",
    "CHANGE_SCHEMA",
    "DEAD_LETTER_FIELDS",
    "DEFAULT_TOPIC_RULE",
    "ENCODED_DDL",
    "FILE_LINES_DDL",
    "FILE_LINE_COLUMNS",
    "HEADERS_TYPE",
    "KAFKA_COLUMNS",
    "KAFKA_DDL",
    "KAFKA_ERROR_SCHEMA",
    "KAFKA_SCHEMA",
    "MESSAGE_OVERHEAD",
    "OP_ALIASES",
    "ORDER_COLUMNS",
    "OVERSIZE_ADVICE",
    "REPLAY_BATCH_BASE",
    "Op",
    "PlanKey",
    "RefusalReason",
    "dead_letter_json",
    "dead_letter_record",
    "is_misconfiguration",
    "refusal_reason",
]


# --------------------------------------------------------------------------------------------------
# Operations


class Op(str, Enum):
    """A row change's operation."""

    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"

    @classmethod
    def parse(cls, text: str) -> Op:
        """Accept ``insert|update|delete``, TiCDC/Debezium's ``c|u|d``, and CSV's ``I|U|D``.

        >>> Op.parse("c"), Op.parse("D")
        (<Op.INSERT: 'insert'>, <Op.DELETE: 'delete'>)
        """
        op = OP_ALIASES.get(text if text in OP_ALIASES else str(text).lower())
        if op is None:
            raise EncodingError(
                f"Unknown operation {text!r}: valid values are insert, update, delete (or c, u, d / I, U, D).",
                value=text,
            )
        return op

    @property
    def tidb_op(self) -> str:
        """The ``_tidb_op`` extension field's value: ``c`` for an insert, else ``u``."""
        return "c" if self is Op.INSERT else "u"


#: Every spelling of an operation that a source may use -> the operation.
OP_ALIASES = {
    "insert": Op.INSERT, "c": Op.INSERT, "i": Op.INSERT, "create": Op.INSERT, "I": Op.INSERT,
    "update": Op.UPDATE, "u": Op.UPDATE, "U": Op.UPDATE,
    "delete": Op.DELETE, "d": Op.DELETE, "D": Op.DELETE,
}

#: ``(schema, table, table_version)``: the key of one table version's plan.
PlanKey = tuple[str, str, int]

#: One topic per table when neither a topic rule nor dispatchers nor a sink URI topic say otherwise.
DEFAULT_TOPIC_RULE = "{schema}_{table}"

#: Output batch ids of replays start here (above any micro-batch id a job reaches), so a replay's files in
#: the file sink never replace a micro-batch's, and a replay's batches count as committed.
REPLAY_BATCH_BASE = 9_000_000_000


# --------------------------------------------------------------------------------------------------
# Frames between stages

#: Spark DDL of the change DataFrame; ``source`` locates the event (file:line or topic/partition@offset).
CHANGE_DDL = (
    "schema STRING, table STRING, table_version BIGINT, op STRING, commit_ts BIGINT, "
    "before STRING, after STRING, source STRING"
)
CHANGE_COLUMNS = ("schema", "table", "table_version", "op", "commit_ts", "before", "after", "source")

#: The Arrow schema of :data:`CHANGE_DDL` (the input of the encode stage's change path).
CHANGE_SCHEMA = pa.schema([
    pa.field("schema", pa.string()), pa.field("table", pa.string()), pa.field("table_version", pa.int64()),
    pa.field("op", pa.string()), pa.field("commit_ts", pa.int64()), pa.field("before", pa.string()),
    pa.field("after", pa.string()), pa.field("source", pa.string()),
])

#: Spark DDL of the stage's output: the columns Spark's Kafka sink writes, plus ``commit_ts``.
KAFKA_DDL = (
    "topic STRING, partition INT, key BINARY, value BINARY, "
    "headers ARRAY<STRUCT<key: STRING, value: BINARY>>, commit_ts BIGINT"
)

#: Columns Spark's Kafka sink writes (``commit_ts`` stays behind).
KAFKA_COLUMNS = ("topic", "partition", "key", "value", "headers")

#: The Arrow type of a record's headers.
HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

#: The Arrow schema of :data:`KAFKA_DDL`.
KAFKA_SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", HEADERS_TYPE),
    pa.field("commit_ts", pa.int64()),
])

#: :data:`KAFKA_SCHEMA` plus ``error`` (dead-letter JSON of a row that could not be encoded, else null).
KAFKA_ERROR_SCHEMA = KAFKA_SCHEMA.append(pa.field("error", pa.string()))

#: The columns that keep records in input order across a batch: table version, file, line.
ORDER_COLUMNS = ("order_version", "order_file", "order_line")

#: The one-pass stages' output: Kafka columns, order columns, ``error`` (dead-letter JSON).
ENCODED_DDL = (
    "topic STRING, partition INT, key BINARY, value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>, "
    "commit_ts BIGINT, order_version BIGINT, order_file STRING, order_line BIGINT, error STRING"
)

#: What the encode stage hands the file sink instead of Kafka columns: the line, and what orders it.
FILE_LINE_COLUMNS = ("topic", "line", "order_version", "order_file", "order_line")

#: The stage's output for the file sink (see :data:`FILE_LINE_COLUMNS`).
FILE_LINES_DDL = "topic STRING, line STRING, order_version BIGINT, order_file STRING, order_line BIGINT"

#: TiCDC's allowance per Kafka message on top of key and value (``len(key)+len(value)+36 > max-message-bytes``).
MESSAGE_OVERHEAD = 36

#: What to do about a message over max-message-bytes.
OVERSIZE_ADVICE = "raise it in the sink URI and the topic's max.message.bytes, as for TiCDC"


# --------------------------------------------------------------------------------------------------
# The dead-letter record

#: The fields of every dead-letter record, in the order they are written.
DEAD_LETTER_FIELDS = ("id", "format", "source", "file", "line", "offset", "topic", "partition", "schema", "table",
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
    """:func:`dead_letter_record` as one line of JSON (what executors hand to the driver), UTF-8 encodable."""
    record = dead_letter_record(**fields)
    text = json.dumps(record, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a message's "\ud83d" escape, decoded): kept as its escape
        text = json.dumps(record, ensure_ascii=True, default=str)
    return text


class RefusalReason(StrEnum):
    """The ``reason`` of a refused row that tells the driver what to do with it (any other reason, free
    text from the parser or encoder, makes an ordinary dead letter).

    The records still travel from executors as JSON text; these are the values the driver acts on.
    """

    #: Not a refused row: what a stage detected (a CSV layout read from the file), reported, not dead-lettered.
    NOTE = "note"
    #: The input does not match the settings (CSV layout, a missing table definition): the batch fails.
    MISCONFIGURATION = "misconfiguration"
    #: A data file vanished before it was read: its rows are unknown.
    MISSING_FILE = "missing file"


def refusal_reason(record: Mapping[str, Any]) -> RefusalReason | None:
    """The :class:`RefusalReason` of a dead-letter record (decoded JSON), or ``None`` for an ordinary one.

    >>> refusal_reason({"reason": "note"}), refusal_reason({"reason": "bad integer"}), refusal_reason({})
    (<RefusalReason.NOTE: 'note'>, None, None)
    """
    reason = record.get("reason")
    try:
        return RefusalReason(reason) if isinstance(reason, str) else None
    except ValueError:
        return None


def is_misconfiguration(error: str | None) -> bool:
    """Whether a stage's ``error`` text (dead-letter JSON, or ``None`` for a record) is a misconfiguration verdict,
    which stops the batch rather than setting one row aside.

    >>> is_misconfiguration('{"reason": "misconfiguration"}'), is_misconfiguration('{"reason": "bad"}'), is_misconfiguration(None)
    (True, False, False)
    """
    return error is not None and refusal_reason(json.loads(error)) is RefusalReason.MISCONFIGURATION
