"""Helpers of the job tests (tests/spark/test_job_* and tests/integration/test_e2e_kafka.py).

* :func:`expected_state` - what a consumer must end up with for a demo manifest: per table, the
  decoded value of every live key, computed with the reference encoder (``RowEncoder``) from the
  manifest's own table definitions and events, decoded with fastavro.
* :func:`replay` - the same from records read back (key dict, value dict or ``None`` for a tombstone).
* :func:`canal_messages` - the manifest's changes as a TiCDC canal-json changelog (``enable-tidb-extension``):
  CREATE TABLE and ALTER TABLE DDL messages broadcast to every partition, DMLs dispatched by key.
* :func:`decode_file_sink` - the file sink's records decoded with the registry's schemas.

Their own tests are in tests/spark/test_job_helpers.py (no Spark).
"""

from __future__ import annotations

import io
import json
import zlib
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import fastavro

from avro_registry_sink.encoding.plan import EncodingPlan, unframe
from avro_registry_sink.model import Op
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import DEFAULT_ENCODING, EncodingOptions
from avro_registry_sink.sources.demo import DemoManifest, go_format_float
from avro_registry_sink.table import MySQLType, TableDef
from tests.support.reference_encoder import RowEncoder

Key = tuple[tuple[str, Any], ...]


def _decode(schema_json: str, framed: bytes) -> dict[str, Any]:
    parsed = fastavro.parse_schema(json.loads(schema_json))
    return fastavro.schemaless_reader(io.BytesIO(framed[5:]), parsed, parsed)


def side_state(checkpoint, name: str) -> Any:
    """The job's newest side state ``name`` (``held``, ``numbers``, ``tables``) in a local checkpoint."""
    from avro_registry_sink.side_state import SideState
    from avro_registry_sink.storage_fs import parse_storage_uri

    return SideState(parse_storage_uri(str(checkpoint)).filesystem()).latest(name)


def key_of(record: dict[str, Any]) -> Key:
    return tuple(sorted(record.items()))


def decoded_changes(events, definition_of, options: EncodingOptions = DEFAULT_ENCODING):
    """``(table, key, value or None)`` per event (ChangeEvents in commit order): encoded with the reference
    encoder for ``definition_of(event)`` and decoded with fastavro, as a consumer would see them."""
    encoders: dict[TableDef, tuple[EncodingPlan, RowEncoder]] = {}
    for event in events:
        table = definition_of(event)
        if table not in encoders:
            plan = EncodingPlan.from_schemas(derive_schemas(table, options), 1, 2)
            encoders[table] = (plan, RowEncoder(plan))
        plan, encoder = encoders[table]
        image = event.before if event.op is Op.DELETE else event.after
        assert image is not None and plan.key_schema_json is not None
        key = key_of(_decode(plan.key_schema_json, encoder.encode_key(image)))
        value = None
        if event.op is not Op.DELETE:
            value = _decode(plan.value_schema_json, encoder.encode_value(event.op, image, event.commit_ts))
        yield f"{event.schema}.{event.table}", key, value


def expected_rows(events, definition_of, options: EncodingOptions = DEFAULT_ENCODING) -> dict[str, dict[Key, dict]]:
    """``{"schema.table": {key: decoded value}}`` after ``events`` (see :func:`decoded_changes`)."""
    state: dict[str, dict[Key, dict]] = defaultdict(dict)
    for name, key, value in decoded_changes(events, definition_of, options):
        if value is None:
            state[name].pop(key, None)
        else:
            state[name][key] = value
    return dict(state)


def manifest_definition(manifest: DemoManifest):
    return lambda e: manifest.table_versions[(e.schema, e.table, e.table_version)]


def expected_state(manifest: DemoManifest, options: EncodingOptions = DEFAULT_ENCODING) -> dict[str, dict[Key, dict]]:
    """What a consumer must end up with for a demo manifest, per table."""
    state = expected_rows(manifest.all_events, manifest_definition(manifest), options)
    return {name: state.get(name, {}) for name in manifest.tables}


def replay(records: Iterable[tuple[dict[str, Any], dict[str, Any] | None]]) -> dict[Key, dict]:
    """The live rows after records in partition order (a ``None`` value deletes its key)."""
    state: dict[Key, dict] = {}
    for key, value in records:
        if value is None:
            state.pop(key_of(key), None)
        else:
            state[key_of(key)] = value
    return state


def decode_file_sink(path, client) -> dict[str, list[tuple[int, int | None, dict, dict | None]]]:
    """``{topic: [(partition, commit_ts, key dict, value dict or None)]}`` in the file sink's order."""
    from avro_registry_sink.spark.sinks.sinks import read_file_sink

    schemas: dict[int, Any] = {}

    def decode(framed: bytes) -> dict[str, Any]:
        schema_id, body = unframe(framed)
        if schema_id not in schemas:
            schemas[schema_id] = fastavro.parse_schema(json.loads(client.get_schema(schema_id).schema))
        return fastavro.schemaless_reader(io.BytesIO(body), schemas[schema_id], schemas[schema_id])

    out: dict[str, list] = defaultdict(list)
    for record in read_file_sink(path):
        assert record.key is not None
        out[record.topic].append((record.partition, record.commit_ts, decode(record.key),
                                  decode(record.value) if record.value is not None else None))
    return dict(out)


def by_partition(records: list[tuple[int, Any, dict, dict | None]]) -> list[tuple[dict, dict | None]]:
    """Records of one topic, partition by partition in their order: what a consumer replays."""
    ordered = sorted(enumerate(records), key=lambda item: (item[1][0], item[0]))
    return [(key, value) for _, (_, _, key, value) in ordered]


def stamp_in_order(root, relpaths, start: float = 1_715_241_600.0) -> None:
    """Give data files strictly increasing modification times in the order TiCDC wrote them.

    Spark's file source takes new files oldest first; a generator writes files within the same
    millisecond, and appending a bad line to an old file would make it the newest.
    """
    import os
    from pathlib import Path

    for i, rel in enumerate(relpaths):
        os.utime(Path(root) / rel, (start + i, start + i))


# --------------------------------------------------------------------------------------------------
# canal-json


def _canal_text(col, value: Any) -> str | None:
    if value is None:
        return None
    if col.type is MySQLType.ENUM:
        return str(col.elements.index(value) + 1)  # TiCDC sends the 1-based index
    if col.type is MySQLType.SET:
        return str(sum(1 << col.elements.index(m) for m in value.split(",") if m))  # and the bitmask
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, float):
        return go_format_float(value, "f")
    return str(value)


def _mysql_type(col) -> str:
    text = col.type.value.lower()
    return text + (" unsigned" if col.unsigned and col.type not in (MySQLType.BIT, MySQLType.YEAR) else "")


def canal_dml(table: TableDef, op: Op, commit_ts: int, before: dict | None, after: dict | None) -> str:
    kind = {Op.INSERT: "INSERT", Op.UPDATE: "UPDATE", Op.DELETE: "DELETE"}[op]
    row = before if op is Op.DELETE else after
    assert row is not None

    def obj(image: dict) -> dict:
        return {c.name: _canal_text(c, image[c.name]) for c in table.columns if c.name in image}

    return json.dumps({
        "id": 0, "database": table.schema_name, "table": table.table, "pkNames": list(table.primary_key),
        "isDdl": False, "type": kind, "es": commit_ts >> 18, "ts": (commit_ts >> 18) + 3, "sql": "",
        "sqlType": {c.name: 12 for c in table.columns}, "mysqlType": {c.name: _mysql_type(c) for c in table.columns},
        "old": [obj(before)] if op is Op.UPDATE and before is not None else None,
        "data": [obj(row)], "_tidb": {"commitTs": commit_ts},
    }, ensure_ascii=False)


def canal_ddl(schema: str, table: str, kind: str, query: str, commit_ts: int) -> str:
    return json.dumps({
        "id": 0, "database": schema, "table": table, "pkNames": None, "isDdl": True, "type": kind,
        "es": commit_ts >> 18, "ts": (commit_ts >> 18) + 5, "sql": query, "sqlType": None, "mysqlType": None,
        "data": None, "old": None, "_tidb": {"commitTs": commit_ts},
    })


def canal_messages(manifest: DemoManifest, partitions: int = 3) -> list[tuple[int, int, str]]:
    """``(partition, commit_ts, message)`` in commit order: the manifest as a canal-json topic."""
    out: list[tuple[int, int, str]] = []
    for name, statement in manifest.create_statements.items():
        schema, table = name.split(".")
        out.extend((p, manifest.start_ts, canal_ddl(schema, table, "CREATE", statement, manifest.start_ts))
                   for p in range(partitions))
    for name, statements in manifest.ddl_statements.items():
        schema, table = name.split(".")
        ddl_ts = manifest.schema_versions[name][-1]
        for statement in statements:
            out.extend((p, ddl_ts, canal_ddl(schema, table, "ALTER", statement, ddl_ts)) for p in range(partitions))
    for event in manifest.all_events:
        table = manifest.table_versions[(event.schema, event.table, event.table_version)]
        image = event.before if event.op is Op.DELETE else event.after
        assert image is not None
        key = [image[c] for c in manifest.key_columns[f"{event.schema}.{event.table}"]]
        partition = zlib.crc32(repr(key).encode()) % partitions
        out.append((partition, event.commit_ts,
                    canal_dml(table, event.op, event.commit_ts, event.before, event.after)))
    out.sort(key=lambda m: m[1])  # stable: DDLs before the DMLs of their commit ts
    return out


def log_file_manager(spark: Any, query: Any, log: str) -> str:
    """The class name of the checkpoint file manager of a running query's ``offsetLog`` or ``commitLog`` (Spark's
    ``HDFSMetadataLog.fileManager``, read by reflection)."""
    jlog = getattr(query._jsq.streamingQuery(), log)()
    cls = jlog.getClass()
    while cls is not None and cls.getSimpleName() != "HDFSMetadataLog":
        cls = cls.getSuperclass()
    assert cls is not None, f"{log} is no HDFSMetadataLog"
    field = cls.getDeclaredField("fileManager")
    field.setAccessible(True)
    return str(field.get(jlog).getClass().getSimpleName())
