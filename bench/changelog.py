"""Changelog topics for the benchmarks: TiCDC canal-json and debezium-json messages of the reference table.

Messages are built column-wise with Arrow compute kernels (10^6 in a few seconds) from the reference
table's rows (:mod:`bench.data`), as TiCDC writes them:

* canal-json (``enable-tidb-extension=true``): every value a JSON string, ``mysqlType``/``sqlType``, the
  whole old row in ``old`` for an UPDATE, ``_tidb.commitTs``;
* debezium-json (TiCDC's ``protocol=debezium``, ``debezium-disable-schema=true``): the bare payload, values
  typed as TiCDC's debezium encoder writes them (DECIMAL a JSON number, DATETIME epoch ms, BIGINT UNSIGNED
  wrapped to int64), ``source.commit_ts``.

90% inserts, 6% updates, 4% deletes of earlier keys, as the storage trees (:mod:`bench.tree`); messages go
round-robin over ``tables`` tables ``bench.t000`` ... that share the reference table's columns.

>>> messages = canal_messages(3)
>>> [m.startswith('{"id":0,"database":"bench","table":"t000"') for m in messages.texts.to_pylist()]
[True, True, True]
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.table import TableDef
from bench.data import SEED, generate, reference_table

__all__ = ["Messages", "canal_messages", "create_table_sql", "debezium_messages", "produce", "start_ms"]

_START_MS = 1_715_241_600_000  # 2024-05-09 08:00:00 UTC
_SQL_TYPES = {"bigint": -5, "int": 4, "tinyint": -6, "bigint unsigned": -5, "decimal(20,4)": 3, "varchar(64)": 12,
              "datetime": 93, "text": 2005, "double": 8}


@dataclass(frozen=True)
class Messages:
    """Generated changelog messages: their text, table index, op (0 insert, 1 update, 2 delete) and commit ts."""

    texts: pa.Array
    tables: tuple[TableDef, ...]
    table_index: np.ndarray
    ops: np.ndarray
    commit_ts: np.ndarray

    def __len__(self) -> int:
        return len(self.texts)


def start_ms() -> int:
    return _START_MS


def create_table_sql(tables: tuple[TableDef, ...]) -> str:
    """``CREATE TABLE`` statements of the tables (for ``--tables``)."""
    out = []
    for table in tables:
        cols = ", ".join(f"`{c.name}` {c.sql_type().upper()}{'' if c.nullable else ' NOT NULL'}" for c in table.columns)
        out.append(f"CREATE TABLE `{table.schema_name}`.`{table.table}` ({cols}, "
                   f"PRIMARY KEY ({', '.join(f'`{k}`' for k in table.primary_key)}));")
    return "\n".join(out) + "\n"


def _rows(n: int, tables: int, seed: int, start: int) -> tuple[pa.RecordBatch, np.ndarray, np.ndarray, np.ndarray]:
    """Reference rows, ops, table index and commit ts of messages ``start .. start + n``."""
    batch = generate(n, reference_table(), seed=seed, start=start)
    index = np.arange(start, start + n, dtype=np.int64)
    rng = np.random.default_rng(seed * 7 + start)
    draw = rng.random(n)
    ops = np.where(draw < 0.90, 0, np.where(draw < 0.96, 1, 2)).astype(np.int8)
    ops[index < tables] = 0
    earlier = (rng.random(n) * np.maximum(index, 1)).astype(np.int64) + 10_000_000
    ids = np.where(ops == 0, batch.column(0).to_numpy(), earlier)
    batch = batch.set_column(0, "id", pa.array(ids))
    commit_ts = ((_START_MS + 1000 + index // 4) << 18) | (index % 4)
    return batch, ops, (index % tables).astype(np.int32), commit_ts


def _quoted(arr: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', arr, '"', "")


def _float_text(arr: pa.Array) -> pa.Array:
    """Go's ``strconv.FormatFloat(f, 'f', -1, 64)`` (TiCDC's canal-json DOUBLE), vectorized where Arrow agrees."""
    from avro_registry_sink.sources.demo import go_format_float

    text = arr.cast(pa.string())
    odd = pc.match_substring(text, "e").to_numpy(zero_copy_only=False)
    if odd.any():
        values = text.to_pylist()
        floats = arr.to_pylist()
        for i in np.flatnonzero(odd):
            values[i] = go_format_float(floats[i], "f")
        text = pa.array(values, pa.string())
    return text


def _canal_values(batch: pa.RecordBatch) -> list[pa.Array]:
    """Each column as canal-json value text (a JSON string, or ``null``)."""
    out = []
    for arr in batch.columns:
        if pa.types.is_floating(arr.type):
            text = _float_text(arr)
        else:
            text = arr.cast(pa.string())
        quoted = _quoted(text)
        if arr.null_count:
            quoted = pc.fill_null(quoted, "null")
        out.append(quoted)
    return out


def _object(names: list[str], values: list[pa.Array]) -> pa.Array:
    pieces: list[Any] = []
    for i, (name, value) in enumerate(zip(names, values, strict=False)):
        pieces.extend([("{" if i == 0 else ",") + f'"{name}":', value])
    pieces.append("}")
    return pc.binary_join_element_wise(*pieces, "")


def canal_messages(n: int, tables: int = 1, *, seed: int = SEED, start: int = 0) -> Messages:
    """``n`` TiCDC canal-json messages (``enable-tidb-extension=true``), compact as TiCDC writes them."""
    table = reference_table()
    defs = tuple(reference_table(schema="bench", name=f"t{i:03d}") for i in range(tables))
    batch, ops, which, commit_ts = _rows(n, tables, seed, start)
    names = [c.name for c in table.columns]
    values = _canal_values(batch)
    data = _object(names, values)
    old_values = list(values)
    qty = names.index("qty")
    old_values[qty] = _quoted(pc.add(batch.column(qty), 1).cast(pa.string()))
    old = pc.binary_join_element_wise("[", _object(names, old_values), "]", "")
    old = pc.if_else(pa.array(ops == 1), old, pa.scalar("null"))
    kind = pa.array(np.array(['"INSERT"', '"UPDATE"', '"DELETE"'])[ops])
    mysql = "{" + ",".join(f'"{c.name}":"{c.sql_type()}"' for c in table.columns) + "}"
    sql = "{" + ",".join(f'"{c.name}":{_SQL_TYPES[c.sql_type()]}' for c in table.columns) + "}"
    table_names = pa.array([f'"t{i:03d}"' for i in range(tables)]).take(pa.array(which))
    es = pa.array(commit_ts >> 18).cast(pa.string())
    texts = pc.binary_join_element_wise(
        '{"id":0,"database":"bench","table":', table_names, ',"pkNames":["id"],"isDdl":false,"type":', kind,
        ',"es":', es, ',"ts":', pa.array((commit_ts >> 18) + 3).cast(pa.string()),
        f',"sql":"","sqlType":{sql},"mysqlType":{mysql},"old":', old, ',"data":[', data,
        '],"_tidb":{"commitTs":', pa.array(commit_ts).cast(pa.string()), "}}", "")
    return Messages(texts, defs, which, ops, commit_ts)


#: Messages are made this many at a time (5x10^6 debezium payloads overflow a string array's 2 GiB).
_PIECE = 1_000_000


def _in_pieces(make: Any, n: int, tables: int, seed: int, start: int) -> Messages:
    """``make`` over ``n`` messages, a piece of :data:`_PIECE` at a time, the texts as one chunked array."""
    parts = [make(min(_PIECE, n - at), tables, seed=seed, start=start + at) for at in range(0, n, _PIECE)]
    chunks = [c for p in parts for c in (p.texts.chunks if isinstance(p.texts, pa.ChunkedArray) else [p.texts])]
    return Messages(pa.chunked_array(chunks, pa.string()), parts[0].tables,
                    *(np.concatenate([getattr(p, f) for p in parts]) for f in ("table_index", "ops", "commit_ts")))


def debezium_messages(n: int, tables: int = 1, *, seed: int = SEED, start: int = 0) -> Messages:
    """``n`` TiCDC debezium-json payloads (``debezium-disable-schema=true``), compact."""
    if n > _PIECE:
        return _in_pieces(debezium_messages, n, tables, seed, start)
    table = reference_table()
    defs = tuple(reference_table(schema="bench", name=f"t{i:03d}") for i in range(tables))
    batch, ops, which, commit_ts = _rows(n, tables, seed, start)
    names = [c.name for c in table.columns]
    values = []
    for col, arr in zip(table.columns, batch.columns, strict=False):
        if col.name == "counter":  # BIGINT UNSIGNED: TiCDC casts the uint64 to int64
            text = pa.array(arr.to_numpy().view(np.int64)).cast(pa.string())
        elif col.name == "amount":  # DECIMAL: a JSON number (a float64 in TiCDC's encoder)
            text = _decimal_number(arr)
        elif col.name == "created_at":  # DATETIME(0): epoch milliseconds (io.debezium.time.Timestamp)
            text = pc.multiply(arr.cast(pa.timestamp("s")).cast(pa.int64()), 1000).cast(pa.string())
        elif pa.types.is_floating(arr.type):
            text = _json_float(arr)
        elif pa.types.is_string(arr.type):
            text = _quoted(arr)
        else:
            text = arr.cast(pa.string())
        if arr.null_count:
            text = pc.fill_null(text, "null")
        values.append(text)
    row = _object(names, values)
    old_values = list(values)
    qty = names.index("qty")
    old_values[qty] = pc.add(batch.column(qty), 1).cast(pa.string())
    old_row = _object(names, old_values)
    before = pc.if_else(pa.array(ops == 0), pa.scalar("null"), pc.if_else(pa.array(ops == 1), old_row, row))
    after = pc.if_else(pa.array(ops == 2), pa.scalar("null"), row)
    letter = pa.array(np.array(['"c"', '"u"', '"d"'])[ops])
    ms = pa.array(commit_ts >> 18).cast(pa.string())
    table_names = pa.array([f'"t{i:03d}"' for i in range(tables)]).take(pa.array(which))
    texts = pc.binary_join_element_wise(
        '{"before":', before, ',"after":', after, ',"op":', letter, ',"ts_ms":', ms,
        ',"transaction":null,"source":{"version":"2.4.0.Final","connector":"TiCDC","name":"bench","ts_ms":', ms,
        ',"snapshot":"false","db":"bench","table":', table_names,
        ',"server_id":0,"gtid":null,"file":"","pos":0,"row":0,"thread":0,"query":null,"commit_ts":',
        pa.array(commit_ts).cast(pa.string()), ',"cluster_id":"bench"}}', "")
    return Messages(texts, defs, which, ops, commit_ts)


def _json_float(arr: pa.Array) -> pa.Array:
    """A float64 as Go's encoding/json writes it (shortest digits; exponent outside [1e-6, 1e21))."""
    text = arr.cast(pa.string())
    odd = pc.match_substring(text, "e").to_numpy(zero_copy_only=False)
    if odd.any():
        import json

        values = text.to_pylist()
        floats = arr.to_pylist()
        for i in np.flatnonzero(odd):
            values[i] = json.dumps(floats[i])
        text = pa.array(values, pa.string())
    return text


def _decimal_number(arr: pa.Array) -> pa.Array:
    """A DECIMAL as TiCDC's debezium encoder writes it: the float64 nearest to it, in shortest digits."""
    return _json_float(arr.cast(pa.string()).cast(pa.float64()))  # nearest double, as Go's ParseFloat gives


def produce(bootstrap: str, topic: str, texts: pa.Array, partitions: int = 1, *, keys: np.ndarray | None = None) -> float:
    """Write the messages to ``topic`` (created with ``partitions`` partitions when missing), message ``i`` to
    partition ``keys[i] % partitions`` (round-robin by default); returns the seconds it took."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=30).topics:
        for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            future.result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 1 << 20, "compression.type": "none", "acks": "1"})
    started = time.perf_counter()
    where = (np.arange(len(texts)) if keys is None else keys) % partitions
    first = 0
    # (over 2 GiB of text, a join of 5x10^6 messages comes back in chunks)
    for chunk in (texts.chunks if isinstance(texts, pa.ChunkedArray) else [texts]):
        large = pa.types.is_large_string(chunk.type) or pa.types.is_large_binary(chunk.type)
        offsets = np.frombuffer(chunk.buffers()[1], np.int64 if large else np.int32)[
            chunk.offset: chunk.offset + len(chunk) + 1]
        data = memoryview(chunk.buffers()[2])
        for j in range(len(chunk)):
            value, i = data[int(offsets[j]): int(offsets[j + 1])], first + j
            while True:
                try:
                    producer.produce(topic, value=bytes(value), partition=int(where[i]))
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 10000 == 0:
                producer.poll(0)
        first += len(chunk)
    producer.flush(120)
    return time.perf_counter() - started


# --------------------------------------------------------------------------------------------------
# The plain Spark job (the yardstick): Kafka reader -> from_json -> casts -> to_avro -> header -> Kafka

_CANAL_META = "database STRING, table STRING, type STRING, isDdl BOOLEAN, _tidb STRUCT<commitTs: BIGINT>"


def _typed_after(fmt: str, name: str, column: Any) -> Any:
    """A row image's value (canal-json: text; debezium-json: the JSON value) cast as the Avro field needs."""
    from pyspark.sql import functions as F

    from avro_registry_sink.table import MySQLType
    from bench.anchor import typed_column

    if fmt == "canal-json":
        return typed_column(name, column)
    c = F.col(name)
    t = column.type
    if t is MySQLType.DECIMAL:  # a JSON double: rounded half up at the column's scale
        return F.round(c.cast("decimal(38,18)"), column.scale or 0).cast(
            f"decimal({column.precision},{column.scale})").alias(name)
    if t is MySQLType.DATETIME:  # epoch ms, read as UTC
        return F.date_format(F.timestamp_millis(c), "yyyy-MM-dd HH:mm:ss").alias(name)
    if t in (MySQLType.INT, MySQLType.TINYINT, MySQLType.SMALLINT, MySQLType.MEDIUMINT):
        return c.cast("int").alias(name)
    return c.alias(name)


def anchor_frame(spark: Any, frame: Any, fmt: str, tables: tuple[TableDef, ...], ids: dict[str, tuple[int, int]],
                 partitions: int, topic_rule: str, *, ordered: bool = True) -> Any:
    """A Kafka source frame (``value``, ``partition``, ``offset``) -> the encoded records, as a user would write
    it in Spark SQL: ``from_json`` with the table's columns, one row per row image, SQL casts, ``to_avro``, the
    Confluent header, TiCDC's partition (CRC-32 of the key); ``ordered`` adds the product's order (a shuffle
    by topic and partition, rows in commit order), which a streaming query cannot do."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    from avro_registry_sink.schema.builder import derive_schemas
    from avro_registry_sink.settings.config import EncodingOptions

    table = tables[0]
    schemas = derive_schemas(table, EncodingOptions())
    if fmt == "canal-json":
        row_type = ", ".join(f"`{c.name}`: STRING" for c in table.columns)
        parsed = frame.select(F.from_json(F.col("value").cast("string"),
                                          f"{_CANAL_META}, data ARRAY<STRUCT<{row_type}>>").alias("m"),
                              F.col("partition").alias("_partition"), F.col("offset").alias("_offset"))
        rows = parsed.where("NOT m.isDdl AND m.type IN ('INSERT', 'UPDATE', 'DELETE')").select(
            F.col("m.database").alias("_schema"), F.col("m.table").alias("_table"),
            F.when(F.col("m.type") == "INSERT", "I").when(F.col("m.type") == "UPDATE", "U").otherwise("D").alias("_op"),
            F.col("m._tidb.commitTs").alias("_commit_ts"), "_partition", "_offset",
            F.posexplode("m.data").alias("_pos", "row")).select("*", "row.*").drop("row")
    else:
        from pyspark.sql.types import _parse_datatype_string

        def spark_type(c: Any) -> str:
            from avro_registry_sink.table import MySQLType

            if c.type in (MySQLType.VARCHAR, MySQLType.TEXT):
                return "STRING"
            if c.type is MySQLType.DOUBLE:
                return "DOUBLE"
            if c.type is MySQLType.DECIMAL:
                return "STRING"  # the JSON number's text, rounded below
            return "BIGINT"

        row_type = ", ".join(f"`{c.name}`: {spark_type(c)}" for c in table.columns)
        schema = _parse_datatype_string(
            f"before STRUCT<{row_type}>, after STRUCT<{row_type}>, op STRING, "
            "source STRUCT<db: STRING, table: STRING, commit_ts: BIGINT>")
        parsed = frame.select(F.from_json(F.col("value").cast("string"), schema).alias("m"),
                              F.col("partition").alias("_partition"), F.col("offset").alias("_offset"))
        rows = parsed.where("m.op IN ('c', 'r', 'u', 'd')").select(
            F.col("m.source.db").alias("_schema"), F.col("m.source.table").alias("_table"),
            F.when(F.col("m.op") == "u", "U").when(F.col("m.op") == "d", "D").otherwise("I").alias("_op"),
            F.col("m.source.commit_ts").alias("_commit_ts"), "_partition", "_offset", F.lit(0).alias("_pos"),
            F.when(F.col("m.op") == "d", F.col("m.before")).otherwise(F.col("m.after")).alias("row"),
        ).select("*", "row.*").drop("row")
    typed = rows.select("_schema", "_table", "_op", "_commit_ts", "_partition", "_offset", "_pos",
                        *(_typed_after(fmt, c.name, c) for c in table.columns))
    qualified = F.concat_ws(".", "_schema", "_table")

    def lookup(values: dict[str, Any]) -> Any:
        pairs = [x for name, value in values.items() for x in (F.lit(name), F.lit(value))]
        return F.element_at(F.create_map(*pairs), qualified)

    key_header = lookup({name: bytearray(b"\x00" + k.to_bytes(4, "big")) for name, (k, _) in ids.items()})
    value_header = lookup({name: bytearray(b"\x00" + v.to_bytes(4, "big")) for name, (_, v) in ids.items()})
    topics = lookup({t.qualified_name: topic_rule.format(schema=t.schema_name, table=t.table) for t in tables})
    key_cols = [c.name for c in table.handle_key_columns()]
    op = F.col("_op")
    value = F.when(op == "D", F.lit(None).cast("binary")).otherwise(
        F.concat(value_header, to_avro(F.struct(*(c.name for c in table.columns)), schemas.value_json)))
    key = F.concat(key_header, to_avro(F.struct(*key_cols), schemas.key_json or ""))
    hashed = F.concat(F.col("_schema"), F.lit("\x1f"), F.col("_table"), F.lit("\x1f"),
                      *[x for k in key_cols for x in (F.col(k).cast("string"), F.lit("\x1f"))])
    letter = F.when(op == "I", F.lit(bytearray(b"c"))).when(op == "U", F.lit(bytearray(b"u"))).otherwise(
        F.lit(bytearray(b"d")))
    headers = F.array(F.struct(F.lit("op").alias("key"), letter.alias("value")),
                      F.struct(F.lit("commit_ts").alias("key"), F.col("_commit_ts").cast("string").cast("binary")
                               .alias("value")))
    records = typed.select(
        topics.alias("topic"),
        F.pmod(F.crc32(hashed.cast("binary")), F.lit(partitions)).cast("int").alias("partition"),
        key.alias("key"), value.alias("value"), headers.alias("headers"),
        "_commit_ts", "_partition", "_offset", "_pos")
    if ordered:
        records = (records.repartition(int(spark.conf.get("spark.sql.shuffle.partitions")), "topic", "partition")
                   .sortWithinPartitions("topic", "partition", "_commit_ts", "_partition", "_offset", "_pos"))
    return records.select("topic", "partition", "key", "value", "headers")


def anchor_job(spark: Any, bootstrap: str, topic: str, fmt: str, tables: tuple[TableDef, ...], registry_url: str, *,
               partitions: int, topic_rule: str) -> None:
    """The plain batch job over the whole topic: register, read, encode, order, write to Kafka (idempotent,
    ``acks=all``); output topics must exist with ``partitions`` partitions."""
    from bench.anchor import register_tables

    ids = register_tables(registry_url, tables, topic_rule)
    frame = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    records = anchor_frame(spark, frame, fmt, tables, ids, partitions, topic_rule)
    (records.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
     .option("kafka.enable.idempotence", "true").option("kafka.acks", "all")
     .option("kafka.max.in.flight.requests.per.connection", "5").save())


def read_topic(bootstrap: str, topic: str, timeout: float = 60.0,
               limit: int | None = None) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    """Every record of ``topic`` by partition (the first ``limit`` of each), in offset order (key, value)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-read-{time.time_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in meta.partitions}
        if limit is not None:
            ends = {p: min(end, limit) for p, end in ends.items()}
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        out: dict[int, list[tuple[bytes | None, bytes | None]]] = {p: [] for p in meta.partitions}
        deadline = time.time() + timeout
        while any(len(out[p]) < ends[p] for p in out) and time.time() < deadline:
            for msg in consumer.consume(10000, 1.0):
                if msg.error() is None and len(out[msg.partition()]) < ends[msg.partition()]:
                    out[msg.partition()].append((msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------------------
# The section: the product's `run --available-now` on a changelog topic vs the plain Spark job


def _same_output(bootstrap: str, product_topics: list[str], anchor_topics: list[str],
                 limit: int | None = None) -> tuple[bool, int, str]:
    """Whether two sets of output topics hold the same records per partition, in the same order (the first
    ``limit`` of each partition)."""
    rows = 0
    for p_topic, a_topic in zip(product_topics, anchor_topics, strict=False):
        product, anchor = read_topic(bootstrap, p_topic, limit=limit), read_topic(bootstrap, a_topic, limit=limit)
        rows += sum(len(v) for v in product.values())
        for partition in sorted(set(product) | set(anchor)):
            mine, theirs = product.get(partition, []), anchor.get(partition, [])
            if mine != theirs:
                first = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), min(len(mine), len(theirs)))
                return False, rows, (f"{p_topic}[{partition}]: {len(mine)} vs {len(theirs)} records, first difference "
                                     f"at {first}")
    return True, rows, ""


def _same_records_kafka(bootstrap: str, mine: list[str], theirs: list[str]) -> tuple[bool, int, str]:
    """Whether two sets of topics hold the same records (key, value, headers) per partition, in any order."""
    from confluent_kafka import Consumer, TopicPartition

    from bench.ceiling import same_records

    def records(topics: list[str]) -> dict[tuple[str, int], list[Any]]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-ceiling-check-{time.time_ns()}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        out: dict[tuple[str, int], list[Any]] = {}
        try:
            ends = {}
            for topic in topics:
                for p in consumer.list_topics(topic, timeout=30).topics[topic].partitions:
                    ends[(topic, p)] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                    out[(topic.split("_", 2)[2], p)] = []
            consumer.assign([TopicPartition(t, p, 0) for t, p in ends])
            deadline = time.time() + 120
            while sum(len(v) for v in out.values()) < sum(ends.values()) and time.time() < deadline:
                for msg in consumer.consume(10000, 1.0):
                    if msg.error() is None:
                        headers = tuple(msg.headers() or ())
                        out[(msg.topic().split("_", 2)[2], msg.partition())].append((msg.key(), msg.value(), headers))
            return out
        finally:
            consumer.close()

    return same_records(records(mine), records(theirs), ordered=False)


def bench_changelog(ctx: Any) -> Any:
    """The product on a changelog topic against the plain Spark job, same topic, same session, same rounds."""
    import contextlib
    import shutil
    import statistics
    import tempfile
    import uuid
    from pathlib import Path

    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from bench.endtoend import _cli, _Kafka, _partitions, bench_session, kafka_bootstrap
    from bench.harness import ProcessTreeSampler, Row, Section, fmt_ratio, interleaved, per_round_ratios

    section = Section("Changelog topics: `run --available-now` vs the plain Spark job (same topic, same session)")
    opts = ctx.options
    configs = opts.get("changelog_configs") or ([(20_000, 1, "canal-json")] if ctx.quick else
                                                [(10**6, 1, "canal-json"), (10**6, 100, "canal-json"),
                                                 (10**6, 1, "debezium-json"), (10**6, 100, "debezium-json")])
    rounds = opts.get("e2e_rounds") or 1
    bootstrap = kafka_bootstrap()
    if bootstrap is None:
        section.lines.append("Not run: no broker at `KAFKA_BOOTSTRAP`.")
        return section
    kafka = _Kafka(bootstrap)
    spark = bench_session()
    registry = EmbeddedRegistry()
    registry_url = registry.start()
    ctx.cleanup.append(registry.stop)
    partitions = _partitions()
    work = Path(tempfile.mkdtemp(prefix="bench-changelog-"))
    tag = uuid.uuid4().hex[:6]
    lines = ["| messages | tables | format | plain Spark job msgs/s (median, min-max) | product msgs/s (median, min-max) | "
             "product / plain per round (median, min-max) | target | meets target | CPU s per 1M msgs: plain / product "
             "/ ceiling | peak RSS: plain / product | ceiling msgs/s (median, min-max) | product / ceiling per round | "
             "ceiling CPU µs/msg: read / parse / encode / write |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    checks = []
    ceiling_checks: list[tuple[bool, int, str]] = []
    try:
        for number, (n, tables, fmt) in enumerate(configs):
            make = canal_messages if fmt == "canal-json" else debezium_messages
            source = f"bcl{tag}_{number}"
            gen = time.perf_counter()
            messages = make(n, tables)
            produce(bootstrap, source, messages.texts, 3)
            gen = time.perf_counter() - gen
            ddl = work / f"tables-{number}.sql"
            ddl.write_text(create_table_sql(messages.tables), encoding="utf-8")
            log: list[dict[str, Any]] = []
            counter = {"n": 0}

            def anchor(fmt: str = fmt, source: str = source, messages: Messages = messages, log: list = log,
                       counter: dict[str, int] = counter, number: int = number) -> int:
                counter["n"] += 1
                rule = f"a{tag}{number}_{counter['n']}_" + "{schema}_{table}"
                kafka.create([rule.format(schema=t.schema_name, table=t.table) for t in messages.tables], partitions)
                with ProcessTreeSampler() as sampler:
                    anchor_job(spark, bootstrap, source, fmt, messages.tables, registry_url, partitions=partitions,
                               topic_rule=rule)
                log.append({"name": "plain", "cpu": sampler.cpu_seconds, "rss": sampler.peak_rss,
                            "prefix": rule.split("{")[0]})
                return len(messages)

            def product(fmt: str = fmt, source: str = source, messages: Messages = messages, log: list = log,
                        ddl: Path = ddl, counter: dict[str, int] = counter, number: int = number) -> int:
                counter["n"] += 1
                rule = f"p{tag}{number}_{counter['n']}_" + "{schema}_{table}"
                args = ["run", "--source", f"{fmt}+kafka://{bootstrap}/{source}", "--tables", str(ddl),
                        "--available-now", "--progress", "none", "--state-dir", str(work / f"state-{counter['n']}"),
                        "--sink-uri", f"kafka://{bootstrap}/?protocol=avro&partition-num={partitions}"
                        f"&schema-registry={registry_url}",
                        "--topic-rule", rule]
                with ProcessTreeSampler() as sampler:
                    result = _cli(args)
                log.append({"name": "product", "cpu": sampler.cpu_seconds, "rss": sampler.peak_rss,
                            "prefix": rule.split("{")[0], "rows": int(result.get("rows", 0))})
                return len(messages)

            def ceiling(fmt: str = fmt, source: str = source, messages: Messages = messages, log: list = log,
                        counter: dict[str, int] = counter, number: int = number) -> int:
                from bench.anchor import register_tables
                from bench.ceiling import CeilingInput, run_ceiling

                counter["n"] += 1
                rule = f"c{tag}{number}_{counter['n']}_" + "{schema}_{table}"
                kafka.create([rule.format(schema=t.schema_name, table=t.table) for t in messages.tables], partitions)
                ids = register_tables(registry_url, messages.tables, rule)
                result = run_ceiling(CeilingInput.of_topic(f"{fmt}-topic", bootstrap, source, messages.tables,
                                                           len(messages)),
                                     ids, sink="kafka", target=bootstrap, partitions=partitions, prefix=rule.split("{")[0])
                log.append({"name": "ceiling", "cpu": result.cpu_total, "rss": 0, "prefix": rule.split("{")[0],
                            "rows": result.records, "result": result})
                return len(messages)

            def between(_name: str, log: list = log, number: int = number, messages: Messages = messages,
                        n: int = n) -> None:
                if len(log) >= 2 and log[-1]["name"] == "product" and len(checks) <= number:
                    # the first pair of a configuration: the same records, byte for byte (every record up to
                    # 200,000 messages; above, the first 30,000 records of each partition of the first 3 topics)
                    prefixes = {e["name"]: e["prefix"] for e in log[-2:]}
                    topics = [t.table for t in messages.tables][: None if n <= 200_000 else 3]
                    checks.append(_same_output(bootstrap, [f"{prefixes['product']}bench_{t}" for t in topics],
                                               [f"{prefixes['plain']}bench_{t}" for t in topics],
                                               None if n <= 200_000 else 30_000))
                if log and log[-1]["name"] == "ceiling":
                    if len(ceiling_checks) <= number and n <= 200_000:
                        # the ceiling's records against the product's, per partition as multisets (its two
                        # workers interleave the source partitions otherwise than the job's order)
                        prefixes = {e["name"]: e["prefix"] for e in log[-3:]}
                        ceiling_checks.append(_same_records_kafka(
                            bootstrap, [f"{prefixes['ceiling']}bench_{t.table}" for t in messages.tables],
                            [f"{prefixes['product']}bench_{t.table}" for t in messages.tables]))
                    for entry in log[-3:]:
                        kafka.delete_prefixed(entry["prefix"])

            # a warm-up pair before the first configuration (JIT, Python workers, Kafka clients)
            timings = interleaved({"plain": anchor, "product": product, "ceiling": ceiling}, rounds,
                                  warmup=number == 0, between=between)
            plain_t, product_t, ceiling_t = timings["plain"], timings["product"], timings["ceiling"]
            ratios = per_round_ratios(product_t, n, plain_t, n)
            med = statistics.median(ratios) if ratios else float("nan")
            meets = med >= 1.5 if n >= 10**6 else None
            timed_log = log[3:] if number == 0 else log
            cpu = {k: statistics.median([e["cpu"] for e in timed_log if e["name"] == k] or [0])
                   for k in ("plain", "product", "ceiling")}
            vs_ceiling = per_round_ratios(product_t, n, ceiling_t, n)
            ceiling_runs = [e["result"] for e in timed_log if e["name"] == "ceiling"]
            ceiling_parts = " / ".join(f"{statistics.median(r.cpu_us_per_row(p) for r in ceiling_runs):,.2f}"
                                       for p in ("read", "parse", "encode", "write"))
            ceiling_rows = sorted({e["rows"] for e in log if e["name"] == "ceiling"})
            if ceiling_rows != [n]:
                ceiling_parts += f" (**ceiling wrote {ceiling_rows} records**)"
            rss = {k: max([e["rss"] for e in timed_log if e["name"] == k] or [0]) for k in ("plain", "product")}
            delivered = sorted({e["rows"] for e in log if e["name"] == "product"})
            a_row, p_row = Row.of(plain_t, n), Row.of(product_t, n)
            lines.append(
                f"| {n:,} | {tables} | {fmt} | {a_row.rows_per_s:,.0f} ({a_row.spread or '-'}) | "
                f"{p_row.rows_per_s:,.0f} ({p_row.spread or '-'}) | {fmt_ratio(ratios)} | "
                f"{'>= 1.5x' if n >= 10**6 else ''} | {'' if meets is None else ('yes' if meets else '**no**')} | "
                f"{cpu['plain'] / n * 1e6:,.0f} / {cpu['product'] / n * 1e6:,.0f} / {cpu['ceiling'] / n * 1e6:,.0f} | "
                f"{rss['plain'] / 2**30:,.2f} / {rss['product'] / 2**30:,.2f} GiB | "
                f"{Row.of(ceiling_t, n).rows_per_s:,.0f} ({Row.of(ceiling_t, n).spread or '-'}) | "
                f"{fmt_ratio(vs_ceiling, '%')} | {ceiling_parts} |")
            print(lines[-1], f"(generated and produced in {gen:,.0f} s; product rows {delivered})", flush=True)
            verdicts.append((f"{n:,} msgs, {tables} tables, {fmt}", med, meets))
            with contextlib.suppress(Exception):
                kafka.delete_prefixed(source)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        with contextlib.suppress(Exception):
            kafka.delete_prefixed(f"bcl{tag}")
    check_text = "; ".join(
        f"{c[0]}" + (f" ({c[1]:,} records)" if c[0] else f" ({c[2]})") for c in checks)
    ceiling_text = "; ".join(f"{c[0]}" + (f" ({c[1]:,} records)" if c[0] else f" ({c[2]})") for c in ceiling_checks)
    section.lines = [
        f"Ceiling harness vs product, same records per partition byte for byte, headers included, in any order "
        f"(first round of each configuration up to 200,000 messages): **{ceiling_text or 'not checked'}**.", "",
        f"Same records per partition, same order, byte for byte (product vs plain job, first round of each "
        f"configuration; every record up to 200,000 messages, else the first 30,000 of each partition of the first three topics): **{check_text}**.", "", *lines, "",
        f"{rounds} timed round(s) per configuration (a warm-up round before the first), plain job, product, then the "
        "ceiling harness (:mod:`bench.ceiling`, no Spark, two processes over the source partitions) in each round; "
        "msgs/s = messages in the topic / wall seconds of the run (the product: the CLI command, `--tables` given, "
        "session start excluded; both register in one registry, so the schema ids match; the plain job: registration, read, `from_json`, casts, `to_avro`, header, partition, "
        "order, write). Source topic: 3 partitions; output topics of "
        f"{partitions} partitions created per run. CPU seconds and peak RSS are the process tree's (driver JVM with "
        "the executors, Python workers).",
    ]
    targeted = [v for v in verdicts if v[2] is not None]
    if targeted:
        ctx.summary.append("changelog topic -> Kafka Avro / plain Spark job (>= 10^6 messages): met in "
                           f"**{sum(1 for v in targeted if v[2])} of {len(targeted)}** (target >= 1.5x); "
                           + ", ".join(f"{v[0]}: {v[1]:.2f}x" for v in targeted))
    return section
