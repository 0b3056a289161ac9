"""The one change-event shape every source produces and the Spark stage consumes.

A :class:`ChangeEvent` is one row change of one table version. In Spark the same thing is a row of
:data:`~avro_registry_sink.model.CHANGE_COLUMNS` (see :data:`~avro_registry_sink.model.CHANGE_DDL`): row values travel as one JSON object per image,
column name -> value in TiCDC's text forms:

* integers, BIT and YEAR as JSON numbers (or decimal text; BIGINT UNSIGNED above 2^63 as text is safest),
* DECIMAL as text with the column's scale (``"123.4500"``), FLOAT/DOUBLE as numbers,
* DATE/DATETIME/TIMESTAMP/TIME and JSON as text, ENUM/SET as member names (or 1-based index / bitmask),
* binary-charset columns as **base64** text (as TiCDC's CSV writes them), NULL as ``null``.

``after`` is the new image (INSERT/UPDATE), ``before`` the old one (UPDATE with old values, DELETE).
The Kafka key of a DELETE comes from ``before`` (or ``after`` when a source puts the deleted row there).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from avro_registry_sink.model import Op
from avro_registry_sink.table import TableDef


@dataclass(frozen=True)
class ChangeEvent:
    """One row change of one table version."""

    schema: str
    table: str
    op: Op
    commit_ts: int
    after: Mapping[str, Any] | None = None
    before: Mapping[str, Any] | None = None
    table_version: int = 0
    source: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key_image(self) -> Mapping[str, Any]:
        """The image the Kafka key is built from: ``before`` for deletes, else ``after``."""
        if self.op is Op.DELETE:
            image = self.before if self.before is not None else self.after
        else:
            image = self.after
        if image is None:
            raise ValueError(f"{self.op.value} event of {self.schema}.{self.table} at {self.source or '?'} has no row image")
        return image

    def to_row(self, table: TableDef | None = None) -> tuple[Any, ...]:
        """This event as a tuple of :data:`~avro_registry_sink.model.CHANGE_COLUMNS` (binary values base64-encoded)."""
        return (
            self.schema,
            self.table,
            self.table_version,
            self.op.value,
            self.commit_ts,
            dump_image(self.before),
            dump_image(self.after),
            self.source,
        )


def split_key_change(event: ChangeEvent, table: TableDef | None) -> tuple[ChangeEvent, ...]:
    """An UPDATE that changes the handle key, as TiCDC's MQ sinks write it: a DELETE of the old key, then
    an INSERT of the new row (``ShouldSplitUpdateEvent``); any other event as it is.

    Without the split the old key would stay live in a compacted topic. Changelogs from Canal and Flink
    carry such updates as one event with both images; TiCDC's own output is already split.

    >>> from avro_registry_sink.table import ColumnDef, MySQLType
    >>> t = TableDef(schema_name="s", table="t", primary_key=("id",),
    ...              columns=(ColumnDef(name="id", type=MySQLType.INT, nullable=False),))
    >>> [e.op.value for e in split_key_change(ChangeEvent("s", "t", Op.UPDATE, 1, {"id": 2}, {"id": 1}), t)]
    ['delete', 'insert']
    """
    if table is None or event.op is not Op.UPDATE or not event.before or not event.after:
        return (event,)
    names = table.handle_key_names()
    if not names:
        return (event,)
    before = {k.lower(): v for k, v in event.before.items()}
    after = {k.lower(): v for k, v in event.after.items()}
    keys = [n.lower() for n in names]
    if any(k not in before or k not in after for k in keys) or all(before[k] == after[k] for k in keys):
        return (event,)
    return (replace(event, op=Op.DELETE, after=None), replace(event, op=Op.INSERT, before=None))


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1 << 53:
        return str(value)  # keep big integers exact for every JSON reader
    return value


def dump_image(image: Mapping[str, Any] | None) -> str | None:
    """A row image as the JSON text carried in the change DataFrame."""
    if image is None:
        return None
    return json.dumps({k: _jsonable(v) for k, v in image.items()}, ensure_ascii=False, separators=(",", ":"))


def load_image(text: str | None, table: TableDef) -> dict[str, Any] | None:
    """Parse an image's JSON text back into Python values, base64-decoding binary columns."""
    if text is None:
        return None
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError(f"a row image must be a JSON object, not {type(raw).__name__}")
    binary = {c.name for c in table.columns if c.binary}
    if binary:
        for name in binary & raw.keys():
            if isinstance(raw[name], str):
                raw[name] = base64.b64decode(raw[name])
    return raw
