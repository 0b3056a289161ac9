"""The demo's changes as a TiCDC changelog topic: canal-json or debezium-json messages, for a trial of a Kafka source.

:func:`changelog_messages` turns a :class:`~avro_registry_sink.sources.demo.DemoManifest` (the three demo tables,
inserts, updates, deletes and the ``ALTER TABLE shop.orders ADD COLUMN`` mid-stream) into the messages a TiCDC
changefeed with the Kafka sink would write, in commit order:

* ``canal-json`` (``protocol=canal-json``, ``enable-tidb-extension=true``): a DDL message (``isDdl``, the
  ``CREATE TABLE`` or ``ALTER TABLE`` text in ``sql``) per table version, then one message per row change; values as
  canal-json text (ENUM as its 1-based index, SET as its bitmask, binary as ISO-8859-1 text), ``_tidb.commitTs``.
* ``debezium-json`` (``protocol=debezium``, ``debezium-disable-schema=true``): DDL messages with ``ddl`` and
  ``tableChanges`` (the table after the DDL), row changes with ``op`` ``c``/``u``/``d``, ``before`` and ``after`` in
  TiCDC's debezium values (DECIMAL a double, DATE days, DATETIME epoch ms or µs, TIMESTAMP ISO text in UTC, TIME µs,
  BIT bytes little-endian in base64, binary in base64, BIGINT UNSIGNED cast to int64) and ``source.commit_ts``.

DDL messages go to every partition (as TiCDC broadcasts them); a row change to the partition of its handle key's hash
(every change of a row in one partition, in commit order). Debezium does not list unique keys in ``tableChanges``:
``shop.customers`` (keyed by a UNIQUE KEY) needs ``--tables tables.sql`` (see
:func:`~avro_registry_sink.sources.demo.write_rerun_files`), as it does for the storage tree.

:func:`fill_topic` creates the topic when it is missing and produces the messages (idempotent producer).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.model import Op
from avro_registry_sink.sources.demo import DemoManifest, _mysql_type, _sql_type, go_format_float
from avro_registry_sink.table import BINARY_TYPES, ColumnDef, MySQLType, TableDef

__all__ = ["CHANGELOG_FORMATS", "DEMO_WRITERS", "TopicMessage", "changelog_messages", "fill_topic"]

_EPOCH = dt.datetime(1970, 1, 1)
_KIND = {Op.INSERT: "INSERT", Op.UPDATE: "UPDATE", Op.DELETE: "DELETE"}
_LETTER = {Op.INSERT: "c", Op.UPDATE: "u", Op.DELETE: "d"}


@dataclass(frozen=True)
class TopicMessage:
    """One Kafka message of the changelog: its partition, key (``None`` for none) and value."""

    partition: int
    key: bytes | None
    value: bytes
    commit_ts: int
    is_ddl: bool


# --------------------------------------------------------------------------------------------------
# canal-json


def _canal_text(col: ColumnDef, value: Any) -> str | None:
    if value is None:
        return None
    if col.type is MySQLType.ENUM:
        return str(col.elements.index(value) + 1)  # TiCDC sends the 1-based index
    if col.type is MySQLType.SET:
        return str(sum(1 << col.elements.index(m) for m in str(value).split(",") if m))  # and the bitmask
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, float):
        return go_format_float(value, "f")
    return str(value)


def _canal_dml(table: TableDef, op: Op, commit_ts: int, before: Mapping[str, Any] | None,
               after: Mapping[str, Any] | None) -> dict[str, Any]:
    row = before if op is Op.DELETE else after
    assert row is not None

    def image(values: Mapping[str, Any]) -> dict[str, str | None]:
        return {c.name: _canal_text(c, values[c.name]) for c in table.columns if c.name in values}

    return {
        "id": 0, "database": table.schema_name, "table": table.table, "pkNames": list(table.primary_key) or None,
        "isDdl": False, "type": _KIND[op], "es": commit_ts >> 18, "ts": (commit_ts >> 18) + 3, "sql": "",
        "sqlType": {c.name: _sql_type(c, row.get(c.name)) for c in table.columns},
        "mysqlType": {c.name: _mysql_type(c) for c in table.columns},
        "old": [image(before)] if op is Op.UPDATE and before is not None else None,
        "data": [image(row)], "_tidb": {"commitTs": commit_ts},
    }


def _canal_ddl(table: TableDef, kind: str, query: str, commit_ts: int) -> dict[str, Any]:
    return {
        "id": 0, "database": table.schema_name, "table": table.table, "pkNames": None, "isDdl": True, "type": kind,
        "es": commit_ts >> 18, "ts": (commit_ts >> 18) + 5, "sql": query, "sqlType": None, "mysqlType": None,
        "data": None, "old": None, "_tidb": {"commitTs": commit_ts},
    }


# --------------------------------------------------------------------------------------------------
# debezium-json


def _micros(text: str) -> int:
    """``[-]HH:MM:SS[.f]`` as microseconds (hours may exceed 24)."""
    sign = -1 if text.startswith("-") else 1
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(p) for p in clock.split(":"))
    return sign * (((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + int((fraction + "000000")[:6]))


def _debezium_value(col: ColumnDef, value: Any) -> Any:
    """A value of the demo (TiCDC's text forms, bytes, numbers) as TiCDC's debezium encoder writes it."""
    if value is None:
        return None
    kind = col.type
    if kind is MySQLType.BIT:
        number = int(value)
        if (col.length or 1) == 1:
            return bool(number)
        return base64.b64encode(number.to_bytes(((col.length or 1) + 7) // 8, "little")).decode()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if kind in (MySQLType.TINYINT, MySQLType.SMALLINT, MySQLType.MEDIUMINT, MySQLType.INT, MySQLType.BIGINT,
                MySQLType.YEAR):
        number = int(value)
        return number - (1 << 64) if number >= 1 << 63 else number  # TiCDC casts uint64 to int64
    if kind in (MySQLType.FLOAT, MySQLType.DOUBLE, MySQLType.DECIMAL):
        return float(value)
    if kind is MySQLType.DATE:
        return (dt.date.fromisoformat(str(value)) - _EPOCH.date()).days
    if kind is MySQLType.DATETIME:
        moment = dt.datetime.fromisoformat(str(value)) - _EPOCH
        micros = (moment.days * 86_400 + moment.seconds) * 1_000_000 + moment.microseconds
        return micros // 1000 if (col.fsp or 0) <= 3 else micros
    if kind is MySQLType.TIMESTAMP:  # the demo's time zone is UTC: the text is already UTC
        return str(value).replace(" ", "T") + "Z"
    if kind is MySQLType.TIME:
        return _micros(str(value))
    return str(value)


def _debezium_column(col: ColumnDef, position: int) -> dict[str, Any]:
    if col.type is MySQLType.DECIMAL:
        length, scale = col.precision, col.scale
    elif col.type in (MySQLType.DATETIME, MySQLType.TIMESTAMP, MySQLType.TIME):
        length, scale = col.fsp or None, None
    else:
        length, scale = col.length, None
    binary = col.type in BINARY_TYPES or col.binary
    return {
        "name": col.name, "jdbcType": _sql_type(col, None), "nativeType": None, "comment": None,
        "defaultValueExpression": col.default,
        "enumValues": ["'" + e.replace("'", "''") + "'" for e in col.elements] or None,
        "typeName": _mysql_type(col).upper(), "typeExpression": _mysql_type(col).upper(),
        "charsetName": "binary" if binary else ("utf8mb4" if col.type in _TEXT_TYPES else None),
        "length": length, "scale": scale, "position": position, "optional": col.nullable,
        "autoIncremented": False, "generated": False,
    }


_TEXT_TYPES = frozenset({MySQLType.CHAR, MySQLType.VARCHAR, MySQLType.TINYTEXT, MySQLType.TEXT, MySQLType.MEDIUMTEXT,
                         MySQLType.LONGTEXT, MySQLType.ENUM, MySQLType.SET})


def _source(table: TableDef, commit_ts: int, cluster: str) -> dict[str, Any]:
    return {"version": "2.4.0.Final", "connector": "TiCDC", "name": cluster, "ts_ms": commit_ts >> 18,
            "snapshot": "false", "db": table.schema_name, "table": table.table, "server_id": 0, "gtid": None,
            "file": "", "pos": 0, "row": 0, "thread": 0, "query": None, "commit_ts": commit_ts, "cluster_id": cluster}


def _debezium_dml(table: TableDef, op: Op, commit_ts: int, before: Mapping[str, Any] | None,
                  after: Mapping[str, Any] | None, cluster: str) -> dict[str, Any]:
    def image(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
        if values is None:
            return None
        return {c.name: _debezium_value(c, values.get(c.name)) for c in table.columns}

    return {"before": image(before) if op is not Op.INSERT else None, "after": image(after) if op is not Op.DELETE
            else None, "op": _LETTER[op], "ts_ms": (commit_ts >> 18) + 3, "transaction": None,
            "source": _source(table, commit_ts, cluster)}


def _debezium_ddl(table: TableDef, kind: str, query: str, commit_ts: int, cluster: str) -> dict[str, Any]:
    change = {"type": kind, "id": f'"{table.schema_name}"."{table.table}"',
              "table": {"defaultCharsetName": "utf8mb4", "primaryKeyColumnNames": list(table.primary_key),
                        "columns": [_debezium_column(c, i) for i, c in enumerate(table.columns, 1)],
                        "comment": None}}
    return {"payload": {"source": _source(table, commit_ts, cluster), "ts_ms": (commit_ts >> 18) + 5,
                        "databaseName": table.schema_name, "schemaName": None, "ddl": query, "tableChanges": [change]}}


# --------------------------------------------------------------------------------------------------


def _dumps(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def _canal_ddl_message(table: TableDef, kind: str, query: str, commit_ts: int, cluster: str) -> tuple[bytes, bytes | None]:
    return _dumps(_canal_ddl(table, kind, query, commit_ts)), None


def _debezium_ddl_message(table: TableDef, kind: str, query: str, commit_ts: int,
                          cluster: str) -> tuple[bytes, bytes | None]:
    return (_dumps(_debezium_ddl(table, kind, query, commit_ts, cluster)),
            _dumps({"payload": {"databaseName": table.schema_name}}))


def _canal_dml_message(table: TableDef, op: Op, commit_ts: int, before: Mapping[str, Any] | None,
                       after: Mapping[str, Any] | None, key_values: Mapping[str, Any],
                       cluster: str) -> tuple[bytes, bytes | None]:
    return _dumps(_canal_dml(table, op, commit_ts, before, after)), None


def _debezium_dml_message(table: TableDef, op: Op, commit_ts: int, before: Mapping[str, Any] | None,
                          after: Mapping[str, Any] | None, key_values: Mapping[str, Any],
                          cluster: str) -> tuple[bytes, bytes | None]:
    return (_dumps(_debezium_dml(table, op, commit_ts, before, after, cluster)),
            _dumps({"payload": {c: _debezium_value(table.column(c), v) for c, v in key_values.items()}}))


#: How the demo writes each changelog format it can write (named as :data:`~avro_registry_sink.formats.FORMATS`
#: names it): a DDL's message and a row change's message, each as (value, key).
DEMO_WRITERS: Mapping[str, tuple[Callable[..., tuple[bytes, bytes | None]], Callable[..., tuple[bytes, bytes | None]]]] = {
    "canal-json": (_canal_ddl_message, _canal_dml_message),
    "debezium-json": (_debezium_ddl_message, _debezium_dml_message),
}

#: The formats :func:`changelog_messages` writes (the ``--source`` scheme of each is ``<format>+kafka://``).
CHANGELOG_FORMATS = tuple(DEMO_WRITERS)


def changelog_messages(manifest: DemoManifest, fmt: str, partitions: int = 3, *,
                       cluster: str = "default") -> list[TopicMessage]:
    """The manifest's DDLs and row changes as TiCDC's ``fmt`` messages (``canal-json`` or ``debezium-json``),
    in commit order, DDLs on every one of ``partitions`` partitions. The manifest must keep its events
    (``generate_demo(..., keep_events=True)``, the default)."""
    if fmt not in CHANGELOG_FORMATS:
        raise ValueError(f"Unknown changelog format {fmt!r}; choose one of: {', '.join(CHANGELOG_FORMATS)}.")
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    events = manifest.all_events
    if not events and any(c.inserts for c in manifest.counts.values()):
        raise ValueError("The demo manifest holds no events (generated with keep_events=False).")
    out: list[TopicMessage] = []
    ddl_message, dml_message = DEMO_WRITERS[fmt]

    def ddl(table: TableDef, kind: str, query: str, commit_ts: int) -> None:
        value, key = ddl_message(table, kind, query, commit_ts, cluster)
        out.extend(TopicMessage(p, key, value, commit_ts, True) for p in range(partitions))

    for name, statement in manifest.create_statements.items():
        schema, name_only = name.split(".")
        ddl(manifest.table_versions[(schema, name_only, manifest.start_ts)], "CREATE", statement, manifest.start_ts)
    for name, statements in manifest.ddl_statements.items():
        schema, name_only = name.split(".")
        for statement, version in zip(statements, manifest.schema_versions[name][1:], strict=True):
            ddl(manifest.table_versions[(schema, name_only, version)], "ALTER", statement, version)
    for event in events:
        table = manifest.table_versions[(event.schema, event.table, event.table_version)]
        image = event.before if event.op is Op.DELETE else event.after
        assert image is not None
        key_values = {c: image[c] for c in manifest.key_columns[f"{event.schema}.{event.table}"]}
        partition = zlib.crc32(repr(list(key_values.values())).encode()) % partitions
        value, key = dml_message(table, event.op, event.commit_ts, event.before, event.after, key_values, cluster)
        out.append(TopicMessage(partition, key, value, event.commit_ts, False))
    out.sort(key=lambda m: m.commit_ts)  # stable: a DDL before the row changes of its commit ts
    return out


def fill_topic(bootstrap: str, topic: str, messages: list[TopicMessage], *, partitions: int = 3,
               config: Mapping[str, str] | None = None, timeout: float = 30.0) -> int:
    """Produce ``messages`` to ``topic`` (created with ``partitions`` partitions when missing; an existing topic must
    have at least as many). ``config``: more librdkafka settings (SASL, TLS). Returns the number produced."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic


    settings: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap, **(config or {})}
    admin = AdminClient(settings)
    try:
        existing = admin.list_topics(topic=topic, timeout=timeout).topics.get(topic)
    except KafkaException as exc:
        raise ConfigError(f"Kafka at {bootstrap} did not answer within {timeout:g} s: {exc}.",
                          option="to-kafka") from exc
    if existing is None or existing.error is not None or not existing.partitions:
        for future in admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                                    replication_factor=-1)]).values():
            try:
                future.result(timeout)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise ConfigError(f"Could not create topic {topic!r} on {bootstrap}: {exc}.",
                                      option="topic") from exc
    elif len(existing.partitions) < partitions:
        raise ConfigError(f"Topic {topic!r} has {len(existing.partitions)} partitions, fewer than the "
                          f"{partitions} asked for: pass --partitions {len(existing.partitions)} or another topic.",
                          option="partitions")
    producer = Producer({**settings, "enable.idempotence": True, "linger.ms": 5})
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for message in messages:
        while True:
            try:
                producer.produce(topic, value=message.value, key=message.key, partition=message.partition,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(timeout)
    if left or failures:
        raise ConfigError(f"{left + len(failures)} of {len(messages)} messages were not delivered to topic {topic!r} "
                          f"on {bootstrap}" + (f": {failures[0]}" if failures else f" within {timeout:g} s") + ".",
                          option="to-kafka")
    return len(messages)
