"""The notebook API (``avro_registry_sink.spark.functions``): a DataFrame to Kafka with ``to_flat_avro`` in one
call, read back with ``from_flat_avro`` and with confluent-kafka's own ``AvroDeserializer``; a second version of
the table (a column added) is read back in the newer shape. Real broker (``KAFKA_BOOTSTRAP``), real registry
over HTTP, the session SparkSession with Spark's Kafka connector."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.spark.functions import from_flat_avro, to_flat_avro
from tests.support.servers import ensure_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]


@pytest.fixture(scope="module")
def bootstrap() -> str:
    return ensure_kafka()


@pytest.fixture()
def registry_url():
    with EmbeddedRegistry() as server:
        yield server.url


def _kafka_spark(spark):
    from avro_registry_sink.spark.driver.job import ensure_spark_kafka

    assert ensure_spark_kafka(spark)
    return spark


def _consume_with_confluent(bootstrap: str, url: str, topic: str, expected: int) -> list:
    from confluent_kafka import DeserializingConsumer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    client = SchemaRegistryClient({"url": url})
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap, "group.id": "nb-" + uuid.uuid4().hex, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "key.deserializer": AvroDeserializer(client),
        "value.deserializer": AvroDeserializer(client)})
    consumer.subscribe([topic])
    out = []
    try:
        import time

        deadline = time.time() + 60
        while len(out) < expected and time.time() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            out.append((message.key(), message.value()))
    finally:
        consumer.close()
    return out


def test_a_dataframe_goes_to_kafka_in_one_call_and_reads_back(spark, bootstrap, registry_url):
    spark = _kafka_spark(spark)
    name = "nb" + uuid.uuid4().hex[:8]
    rows = [(1, "first", Decimal("1.50"), "c"), (2, "second", Decimal("-0.01"), "c"), (3, None, None, "c"),
            (2, "second", Decimal("-0.01"), "d")]
    df = spark.createDataFrame(rows, "id LONG, note STRING, amount DECIMAL(10,2), op STRING")
    sink_uri = f"kafka://{bootstrap}/?protocol=avro&partition-num=2&schema-registry={registry_url}"

    out = to_flat_avro(df, table=f"shop.{name}", key=["id"], sink_uri=sink_uri, op="op")
    assert out.columns == ["topic", "partition", "key", "value", "headers"]
    out.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).save()

    topic = f"shop_{name}"
    read = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").load())
    back = read.select(from_flat_avro("key", registry=registry_url, subject=f"{topic}-key").alias("k"),
                       from_flat_avro("value", registry=registry_url, subject=f"{topic}-value").alias("v"),
                       "partition").collect()
    assert {r["partition"] for r in back} <= {0, 1}
    got = sorted(((r["k"]["id"], None if r["v"] is None else (r["v"]["note"], r["v"]["amount"])) for r in back),
                 key=repr)
    assert got == sorted([(1, ("first", Decimal("1.50"))), (2, ("second", Decimal("-0.01"))), (3, (None, None)),
                          (2, None)], key=repr)  # the delete is a tombstone

    confluent = _consume_with_confluent(bootstrap, registry_url, topic, 4)
    assert sorted(((k["id"], None if v is None else (v["note"], v["amount"])) for k, v in confluent), key=repr) == got


def test_ddl_text_and_a_second_version_read_back_in_the_newer_shape(spark, bootstrap, registry_url):
    spark = _kafka_spark(spark)
    name = "nb" + uuid.uuid4().hex[:8]
    topic = f"shop_{name}"
    first = spark.createDataFrame([(1, "a")], "id INT, note STRING")
    v1 = to_flat_avro(first, table=f"CREATE TABLE shop.{name} (id INT PRIMARY KEY, note VARCHAR(20))",
                      registry=registry_url, partitions=1)
    second = spark.createDataFrame([(2, "b", 7)], "id INT, note STRING, qty INT")
    v2 = to_flat_avro(second, table=f"CREATE TABLE shop.{name} (id INT PRIMARY KEY, note VARCHAR(20), qty INT)",
                      registry=registry_url, partitions=1)
    v1.unionByName(v2).write.format("kafka").option("kafka.bootstrap.servers", bootstrap).save()

    read = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").load())
    values = read.select(from_flat_avro("value", registry=registry_url, subject=f"{topic}-value").alias("v")).collect()
    assert sorted((r["v"]["id"], r["v"]["note"], r["v"]["qty"]) for r in values) == [(1, "a", None), (2, "b", 7)]
    oldest = read.select(from_flat_avro("value", registry=registry_url, subject=f"{topic}-value", version=1)
                         .alias("v")).collect()
    assert sorted((r["v"].asDict() for r in oldest), key=repr) == [{"id": 1, "note": "a"}, {"id": 2, "note": "b"}]


def test_bad_calls_say_what_to_give(spark, registry_url):
    df = spark.createDataFrame([(1, [1])], "id INT, tags ARRAY<INT>")
    with pytest.raises(ConfigError, match=r"needs a primary key .* give key=\[...\] with columns of the DataFrame"):
        to_flat_avro(df, table="shop.t", registry=registry_url)
    with pytest.raises(ConfigError, match=r"Column tags of shop.t has Spark type array<int>"):
        to_flat_avro(df, table="shop.t", key=["id"], registry=registry_url)
    with pytest.raises(ConfigError, match="needs a schema registry"):
        to_flat_avro(df.select("id"), table="shop.t", key=["id"])
