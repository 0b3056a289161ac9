"""The per-row reference encoder the package's encoder is tested against: row changes -> Confluent-framed Avro
key and value bytes, one fastavro ``schemaless_writer`` call per record.

:class:`RowEncoder` converts each value with the type map's converters
(:func:`~avro_registry_sink.typemap.mysql.converter_for`) and writes TiCDC's bytes, as
:class:`~avro_registry_sink.encoding.columnar.ColumnarEncoder` does on whole Arrow columns; the equivalence tests
(``tests/unit/test_columnar.py``, ``test_stage_property.py``, ``tests/spark/test_stage.py``) compare the two byte
for byte, and ``bench/run.py`` times it as the per-row baseline. INSERT and UPDATE give key + value; DELETE gives
the key (built from the pre-image) and ``None`` (a Kafka tombstone, no extension fields).
"""

from __future__ import annotations

import copy
import io
import json
import struct
from collections.abc import Mapping
from typing import Any

import fastavro

from avro_registry_sink.encoding.plan import EncodingPlan, frame
from avro_registry_sink.errors import EncodingError
from avro_registry_sink.model import Op
from avro_registry_sink.schema.naming import sanitize_name
from avro_registry_sink.table import ColumnDef
from avro_registry_sink.typemap.mysql import converter_for

__all__ = ["RowEncoder", "physical_time", "writer_schema"]


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


class RowEncoder:
    """Encode row changes of one table version.

    >>> # enc = RowEncoder(plan); key, value = enc.encode("insert", {"id": 1}, commit_ts=0)
    """

    def __init__(self, plan: EncodingPlan) -> None:
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
        buf.write(frame(schema_id, b""))
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
