"""Row changes -> Confluent-framed Avro key and value bytes (the per-row reference path).

Wire format: magic byte ``0x00``, the schema id as a big-endian int32, then the Avro binary body.
INSERT and UPDATE give key + value; DELETE gives the key (built from the pre-image) and ``None``
(a Kafka tombstone, no extension fields). Everything here is plain data and pickles to executors;
fastavro state is built lazily, once per encoder.
"""

from __future__ import annotations

import copy
import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro

from avro_registry_sink.errors import EncodingError
from avro_registry_sink.model import Op
from avro_registry_sink.schema.builder import TableSchemas
from avro_registry_sink.schema.naming import sanitize_name
from avro_registry_sink.settings.config import EncodingOptions
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.typemap.mysql import converter_for

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


def physical_time(commit_ts: int) -> int:
    """The physical part of a TiDB TSO in ms since the epoch (417318403368288260 -> 1591943372224)."""
    return commit_ts >> 18


def writer_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema fastavro writes with: decimal logical types removed, so the exact two's-complement
    bytes computed by the type map are written as plain Avro ``bytes`` (the wire bytes are identical;
    fastavro's own decimal writer emits an extra byte for some negative values)."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            if node.get("logicalType") == "decimal":
                node = {k: v for k, v in node.items() if k not in ("logicalType", "precision", "scale")}
            return {k: strip(v) for k, v in node.items()}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return strip(copy.deepcopy(dict(schema)))


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
        return cls(
            table=schemas.table,
            options=schemas.options,
            key_schema_json=schemas.key_json,
            value_schema_json=schemas.value_json,
            key_schema_id=key_schema_id,
            value_schema_id=value_schema_id,
            omitted=omitted,
        )


class RowEncoder:
    """Encode row changes of one table version.

    >>> # enc = RowEncoder(plan); key, value = enc.encode("insert", {"id": 1}, commit_ts=0)
    """

    def __init__(self, plan: EncodingPlan) -> None:
        import json

        self.plan = plan
        table = plan.table
        self._table_name = table.qualified_name
        self._columns = [(c, sanitize_name(c.name), converter_for(c)) for c in table.columns]
        self._by_lower = {c.name.lower(): c.name for c in table.columns}
        self._omitted = {name.lower() for name in plan.omitted}
        self._value_schema = fastavro.parse_schema(writer_schema(json.loads(plan.value_schema_json)))
        self._key_schema = None
        key_names: set[str] = set()
        if plan.key_schema_json is not None:
            self._key_schema = fastavro.parse_schema(writer_schema(json.loads(plan.key_schema_json)))
            key_names = {c.name for c in table.handle_key_columns()}
        self._key_columns = [entry for entry in self._columns if entry[0].name in key_names]
        self._ext = plan.options.enable_tidb_extension

    def _normalise(self, values: Mapping[str, Any]) -> Mapping[str, Any]:
        if all(c.name in values for c, _, _ in self._columns) and len(values) == len(self._columns):
            return values
        out: dict[str, Any] = {}
        unknown = []
        for name, value in values.items():
            canonical = self._by_lower.get(name.lower())
            if canonical is None:
                if name.lower() not in self._omitted:
                    unknown.append(name)
            else:
                out[canonical] = value
        if unknown:
            raise EncodingError(
                f"Row for table {self._table_name} has columns {', '.join(map(repr, unknown))} that its "
                f"definition (version {self.plan.table.version}) lacks; columns are: "
                + ", ".join(c.name for c, _, _ in self._columns)
                + ". The table definition is stale: apply the DDL that added them.",
                table=self._table_name,
                column=unknown[0],
                schema_id=self.plan.value_schema_id,
            )
        return out

    def _datum(self, columns: list[tuple[ColumnDef, str, Any]], values: Mapping[str, Any], schema_id: int | None) -> dict[str, Any]:
        datum: dict[str, Any] = {}
        options = self.plan.options
        for col, field_name, convert in columns:
            try:
                value = values[col.name]
            except KeyError:
                raise EncodingError(
                    f"Row for table {self._table_name} has no value for column {col.name!r} "
                    f"(schema id {schema_id}); give every column, with null for NULL.",
                    table=self._table_name,
                    column=col.name,
                    schema_id=schema_id,
                ) from None
            if value is None:
                if not col.nullable:
                    raise EncodingError(
                        f"Column {col.name!r} of table {self._table_name} is NOT NULL but the row has NULL "
                        f"(schema id {schema_id}).",
                        table=self._table_name,
                        column=col.name,
                        schema_id=schema_id,
                    )
                datum[field_name] = None
            else:
                try:
                    datum[field_name] = convert(col, value, options, self._table_name)
                except EncodingError as exc:
                    raise EncodingError(f"{exc.message} (schema id {schema_id})", **{**exc.context, "schema_id": schema_id}) from None
        return datum

    def _write(self, schema: Any, datum: dict[str, Any], schema_id: int) -> bytes:
        buf = io.BytesIO()
        buf.write(_HEADER.pack(MAGIC_BYTE, schema_id))
        try:
            fastavro.schemaless_writer(buf, schema, datum)
        except (ValueError, TypeError, OverflowError, struct.error) as exc:
            raise EncodingError(
                f"Avro encoding failed for table {self._table_name} with schema id {schema_id}: {exc}",
                table=self._table_name,
                schema_id=schema_id,
            ) from None
        return buf.getvalue()

    def key_values(self, values: Mapping[str, Any]) -> list[Any]:
        """The raw handle-key values of a row, in key order (for partition dispatch)."""
        values = self._normalise(values)
        return [values.get(col.name) for col, _, _ in self._key_columns]

    def encode_key(self, values: Mapping[str, Any]) -> bytes | None:
        """The framed key of a row (``None`` when the table has no key schema)."""
        if self._key_schema is None:
            return None
        values = self._normalise(values)
        assert self.plan.key_schema_id is not None
        datum = self._datum(self._key_columns, values, self.plan.key_schema_id)
        return self._write(self._key_schema, datum, self.plan.key_schema_id)

    def encode_value(self, op: Op, values: Mapping[str, Any], commit_ts: int = 0) -> bytes:
        """The framed value of an INSERT or UPDATE."""
        values = self._normalise(values)
        datum = self._datum(self._columns, values, self.plan.value_schema_id)
        if self._ext:
            datum["_tidb_op"] = op.tidb_op
            datum["_tidb_commit_ts"] = commit_ts
            datum["_tidb_commit_physical_time"] = physical_time(commit_ts)
        return self._write(self._value_schema, datum, self.plan.value_schema_id)

    def encode(self, op: Op | str, values: Mapping[str, Any], commit_ts: int = 0) -> tuple[bytes | None, bytes | None]:
        """Key and value bytes of one row change; a DELETE's value is ``None`` (tombstone)."""
        op = op if isinstance(op, Op) else Op.parse(op)
        key = self.encode_key(values)
        if op is Op.DELETE:
            return key, None
        return key, self.encode_value(op, values, commit_ts)
