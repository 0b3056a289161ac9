"""The pure-JVM Spark job a user would write instead of this product: the end-to-end yardstick.

What it does, all in Spark's JVM (no Python worker runs)::

    Spark's CSV reader (the storage tree's data files; strings)
      -> SQL casts to the columns' types (BIGINT UNSIGNED wrapped into a long, DECIMAL(20,4), ...)
      -> to_avro(key), to_avro(value)          (spark-avro; value NULL for deletes: a tombstone)
      -> Confluent header: magic byte 0 + the 4-byte schema id registered on the driver
      -> TiCDC's default partition: CRC-32 of "schema\\x1ftable\\x1f<key>\\x1f" mod partitions
      -> headers ("op", "commit_ts"), then the product's order: grouped by (topic, partition), rows in
         file and line order
      -> JSON lines per topic (key and value in hex) or Spark's Kafka sink (idempotent, acks=all)

It reads the same files as the product's ``run --available-now`` and produces the same key and value
bytes for them (checked by :func:`same_bytes` in the end-to-end section). Tables that share the reference
table's columns are read together (one CSV scan, the table named by each row's own table column), as a
user would for tables of one shape.

>>> # anchor_job(spark, tree, registry_url, sink="file", target="/tmp/out", partitions=3)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import EncodingOptions
from avro_registry_sink.table import MySQLType, TableDef

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

    from bench.tree import Tree

__all__ = ["META_COLUMNS", "anchor_frame", "anchor_job", "avro_package", "register_tables", "typed_column"]

#: TiCDC's CSV meta fields with ``include-commit-ts=true``, before the table's columns.
META_COLUMNS = ("_op", "_table", "_schema", "_commit_ts")
_UNSIGNED_WRAP = "18446744073709551616"
_SIGNED_LIMIT = "9223372036854775808"


def avro_package() -> str:
    """``spark-avro`` for the running Spark (the same version rule as the Kafka connector's)."""
    from avro_registry_sink.spark.runtime.packages import avro_package as package

    return package()


def register_tables(registry_url: str, tables: tuple[TableDef, ...], topic_rule: str = "{schema}_{table}") -> dict[str, tuple[int, int]]:
    """Register key and value schemas of every table (TopicNameStrategy); ``{"schema.table": (key id, value id)}``."""
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.settings.config import RegistryConfig

    ids = {}
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        for table in tables:
            schemas = derive_schemas(table, EncodingOptions())
            topic = topic_rule.format(schema=table.schema_name, table=table.table)
            ids[table.qualified_name] = (client.register(f"{topic}-key", schemas.key_json or ""),
                                         client.register(f"{topic}-value", schemas.value_json))
    return ids


def typed_column(name: str, column: Any) -> Column:
    """SQL cast of one CSV text column to what the column's Avro type needs."""
    from pyspark.sql import functions as F

    c = F.col(name)
    t = column.type
    if t is MySQLType.BIGINT and column.unsigned:
        wide = c.cast("decimal(20,0)")
        return F.when(wide >= F.lit(_SIGNED_LIMIT).cast("decimal(20,0)"),
                      wide - F.lit(_UNSIGNED_WRAP).cast("decimal(21,0)")).otherwise(wide).cast("bigint").alias(name)
    if t is MySQLType.BIGINT:
        return c.cast("bigint").alias(name)
    if t in (MySQLType.INT, MySQLType.TINYINT, MySQLType.SMALLINT, MySQLType.MEDIUMINT):
        return c.cast("int").alias(name)
    if t is MySQLType.DECIMAL:
        return c.cast(f"decimal({column.precision},{column.scale})").alias(name)
    if t is MySQLType.DOUBLE:
        return c.cast("double").alias(name)
    return c.alias(name)  # strings, DATETIME text


def anchor_frame(spark: SparkSession, tree: Tree, ids: dict[str, tuple[int, int]], partitions: int,
                 topic_rule: str = "{schema}_{table}") -> DataFrame:
    """The encoded, partitioned and ordered records (topic, partition, key, value, headers, commit_ts)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    table = tree.tables[0]
    schemas = derive_schemas(table, EncodingOptions())
    text_schema = ", ".join(f"`{name}` STRING" for name in (*META_COLUMNS, *(c.name for c in table.columns)))
    glob = str(tree.root) + "/*/*/*/*/CDC*.csv"
    raw = (spark.read.format("csv").schema(text_schema)
           .options(sep=",", quote='"', escape='"', nullValue="\\N", mode="FAILFAST")
           .load(glob)
           .withColumn("_file", F.input_file_name())
           .withColumn("_line", F.monotonically_increasing_id()))
    typed = raw.select(*META_COLUMNS, "_file", "_line", *(typed_column(c.name, c) for c in table.columns))
    qualified = F.concat_ws(".", "_schema", "_table")

    def lookup(values: dict[str, Any]) -> Column:
        pairs = [x for name, value in values.items() for x in (F.lit(name), F.lit(value))]
        return F.element_at(F.create_map(*pairs), qualified)

    key_header = lookup({name: bytearray(b"\x00" + k.to_bytes(4, "big")) for name, (k, _) in ids.items()})
    value_header = lookup({name: bytearray(b"\x00" + v.to_bytes(4, "big")) for name, (_, v) in ids.items()})
    topics = lookup({t.qualified_name: topic_rule.format(schema=t.schema_name, table=t.table) for t in tree.tables})
    key_cols = [c.name for c in table.handle_key_columns()]
    op = F.col("_op")
    value = F.when(op == "D", F.lit(None).cast("binary")).otherwise(
        F.concat(value_header, to_avro(F.struct(*(c.name for c in table.columns)), schemas.value_json)))
    key = F.concat(key_header, to_avro(F.struct(*key_cols), schemas.key_json or ""))
    hashed = F.concat(F.col("_schema"), F.lit("\x1f"), F.col("_table"), F.lit("\x1f"),
                      *[x for k in key_cols for x in (F.col(k).cast("string"), F.lit("\x1f"))])
    letter = F.when(op == "I", F.lit(bytearray(b"c"))).when(op == "U", F.lit(bytearray(b"u"))).otherwise(F.lit(bytearray(b"d")))
    headers = F.array(F.struct(F.lit("op").alias("key"), letter.alias("value")),
                      F.struct(F.lit("commit_ts").alias("key"), F.col("_commit_ts").cast("binary").alias("value")))
    records = typed.select(
        topics.alias("topic"),
        F.pmod(F.crc32(hashed.cast("binary")), F.lit(partitions)).cast("int").alias("partition"),
        key.alias("key"), value.alias("value"), headers.alias("headers"),
        F.col("_commit_ts").cast("bigint").alias("commit_ts"), "_file", "_line",
    )
    return (records.repartition(int(spark.conf.get("spark.sql.shuffle.partitions")), "topic", "partition")
            .sortWithinPartitions("topic", "partition", "_file", "_line")
            .drop("_file", "_line"))


def anchor_job(spark: SparkSession, tree: Tree, registry_url: str, *, sink: str, target: str, partitions: int,
               topic_rule: str = "{schema}_{table}") -> None:
    """Run the whole job once: register, read, encode, write to JSON lines (``target`` a directory) or
    Kafka (``target`` the bootstrap servers; topics must exist with ``partitions`` partitions)."""
    from pyspark.sql import functions as F

    ids = register_tables(registry_url, tree.tables, topic_rule)
    records = anchor_frame(spark, tree, ids, partitions, topic_rule)
    if sink == "file":
        hexed = F.transform("headers", lambda h: F.struct(h["key"].alias("key"), F.hex(h["value"]).alias("value")))
        (records.select("topic", "partition", F.hex("key").alias("key"), F.hex("value").alias("value"),
                        hexed.alias("headers"), "commit_ts")
         .write.mode("overwrite").partitionBy("topic").json(target))
    elif sink == "kafka":
        (records.select("topic", "partition", "key", "value", "headers")
         .write.format("kafka")
         .option("kafka.bootstrap.servers", target)
         .option("kafka.enable.idempotence", "true")
         .option("kafka.acks", "all")
         .option("kafka.max.in.flight.requests.per.connection", "5")
         .save())
    else:
        raise ValueError(f"sink must be 'file' or 'kafka', got {sink!r}")
