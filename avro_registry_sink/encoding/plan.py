"""What an encoder is given for one table version (:class:`EncodingPlan`) and the Confluent frame around the
Avro bodies it writes (:func:`frame`, :func:`unframe`).

Wire format: magic byte ``0x00``, the schema id as a big-endian int32, then the Avro binary body. The encoder
is :class:`~avro_registry_sink.encoding.columnar.ColumnarEncoder`; the per-row reference it is tested against
lives with the tests (``tests/support/reference_encoder.py``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from avro_registry_sink.errors import EncodingError
from avro_registry_sink.schema.builder import TableSchemas
from avro_registry_sink.settings.config import EncodingOptions
from avro_registry_sink.table import TableDef

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")


def frame(schema_id: int, body: bytes) -> bytes:
    """Prefix an Avro body with the Confluent header.

    >>> frame(8, b"\\x0e").hex()
    '00000000080e'
    """
    return _HEADER.pack(MAGIC_BYTE, schema_id) + body


def unframe(data: bytes) -> tuple[int, bytes]:
    """Split Confluent wire-format bytes into (schema id, Avro body)."""
    if len(data) < 5 or data[0] != MAGIC_BYTE:
        raise EncodingError(
            f"Not Confluent wire format: expected magic byte 0 and a 4-byte schema id, got {data[:5].hex() or 'nothing'}.",
        )
    return _HEADER.unpack_from(data)[1], bytes(data[5:])


@dataclass(frozen=True)
class EncodingPlan:
    """What an encoder needs for one table version: plain data, safe to ship to Spark executors."""

    table: TableDef
    options: EncodingOptions
    key_schema_json: str | None
    value_schema_json: str
    key_schema_id: int | None
    value_schema_id: int
    #: Columns of the source table that a column selector left out: ignored in row images.
    omitted: tuple[str, ...] = ()

    @classmethod
    def from_schemas(cls, schemas: TableSchemas, key_schema_id: int | None, value_schema_id: int,
                     omitted: tuple[str, ...] = ()) -> EncodingPlan:
        """The plan of a table version's derived schemas under the ids the registry gave them."""
        return cls(
            table=schemas.table,
            options=schemas.options,
            key_schema_json=schemas.key_json,
            value_schema_json=schemas.value_json,
            key_schema_id=key_schema_id,
            value_schema_id=value_schema_id,
            omitted=omitted,
        )
