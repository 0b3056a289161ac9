"""``from_flat_avro(major=N)`` end to end: subjects of two and three majors registered by the schema manager
(``new-major``) in the embedded registry over HTTP, records encoded by the product's encoder, read in Spark in the
shape of each major and compared with the values MySQL holds after each DDL and with what confluent-kafka-python's
AvroDeserializer pinned to the same major gives (where it can: it refuses records holding decimals or bytes)."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.rules.jsonata.jsonata_executor import JsonataExecutor
from confluent_kafka.serialization import MessageField, SerializationContext

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.manager import SchemaManager
from avro_registry_sink.model import Op
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.spark.functions import flat_avro_udf, from_flat_avro
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
from tests.support.reference_encoder import RowEncoder

pytestmark = [pytest.mark.spark, pytest.mark.integration]

BIG = Decimal("123456789012345678901234567.8901234567")  # DECIMAL(38,10): 37 digits, far beyond 2^53
NEG = Decimal("-98765432109876543210.0000000001")


def registered(client: Any, create: str, ddl: list[tuple[int, str]],
               rows: dict[int, list[dict[str, Any]]]) -> tuple[str, list[bytes]]:
    """The subject the manager registers for the table of ``create`` and its DDLs (each one major), and the
    records of ``rows`` (table version -> rows) encoded with their version's schema."""
    schema = "fm" + uuid.uuid4().hex[:8]
    table = parse_ddl(create.format(schema=schema))[0].model_copy(update={"version": 1})
    tables = [table]
    for version, statement in ddl:
        table = apply_ddl(table, statement).model_copy(update={"version": version})
        tables.append(table)
    manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), on_incompatible="new-major",
                            ddl_history=lambda s, t: ddl)
    records = []
    for table in tables:
        plan = manager.prepare_batch([table])[(schema, "t", table.version)]
        encoder = RowEncoder(plan.encoding)
        records += [encoder.encode(Op.INSERT, row)[1] for row in rows.get(table.version, [])]
    assert [m.new_major for m in manager.take_majors()] == list(range(2, len(tables) + 1))
    return f"{schema}_t-value", records


def read(spark: Any, client: Any, subject: str, records: list[bytes], majors: list[int]) -> dict[int, list[dict]]:
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "n INT, value BINARY")
    out = df.select("n", *[from_flat_avro("value", registry=client, subject=subject, major=m).alias(f"m{m}")
                          for m in majors]).orderBy("n").collect()
    return {m: [row[f"m{m}"].asDict() for row in out] for m in majors}


def confluent(client: Any, subject: str, major: int) -> AvroDeserializer:
    JsonataExecutor.register()
    sr = SchemaRegistryClient({"url": client.urls[0]})
    return AvroDeserializer(sr, conf={"use.latest.with.metadata": {"major_version": str(major)}})


def causes(exc: BaseException | None) -> str:
    """The messages of ``exc`` and of the exceptions it was raised from (the client wraps its executor's)."""
    out = []
    while exc is not None:
        out.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return " <- ".join(out)


def test_money_and_blob_columns_follow_three_majors_exactly(spark, registry):
    subject, records = registered(
        registry, "CREATE TABLE {schema}.t (id BIGINT PRIMARY KEY, amount DECIMAL(38,10) NOT NULL, doc BLOB, "
                  "a INT NOT NULL)",
        [(2, "ALTER TABLE t MODIFY a VARCHAR(20) NOT NULL"), (3, "ALTER TABLE t RENAME COLUMN a TO b")],
        {1: [{"id": 1, "amount": BIG, "doc": b"\x00\xff\x10", "a": 42}],
         2: [{"id": 2, "amount": Decimal("19.99"), "doc": None, "a": "43"}],
         3: [{"id": 3, "amount": NEG, "doc": b"%PDF", "b": "-7"}]})
    got = read(spark, registry, subject, records, [1, 2, 3])
    # what MySQL holds after each DDL: the INT as text and back, the rename; every digit of the money column
    money = [BIG, Decimal("19.9900000000"), NEG]
    docs = [b"\x00\xff\x10", None, b"%PDF"]
    assert got[1] == [{"id": i + 1, "amount": money[i], "doc": docs[i], "a": a} for i, a in enumerate([42, 43, -7])]
    assert got[2] == [{"id": i + 1, "amount": money[i], "doc": docs[i], "a": a}
                      for i, a in enumerate(["42", "43", "-7"])]
    assert got[3] == [{"id": i + 1, "amount": money[i], "doc": docs[i], "b": b}
                      for i, b in enumerate(["42", "43", "-7"])]
    assert str(got[3][0]["amount"]) == "123456789012345678901234567.8901234567"
    # confluent-kafka-python pinned to a major reads the records of that major (Avro resolution), and refuses
    # every record it must migrate: its JSONata executor takes no Decimal (nor bytes)
    ctx = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
    for major in (1, 2, 3):
        reader = confluent(registry, subject, major)
        for n, data in enumerate(records):
            if n + 1 == major:
                assert reader(data, ctx) == got[major][n]
            else:
                with pytest.raises(Exception) as refused:
                    reader(data, ctx)
                assert "Unsupported type: <class 'decimal.Decimal'>" in causes(refused.value)


def test_a_record_the_rules_refuse_fails_the_read_naming_the_column(spark, registry):
    subject, records = registered(
        registry, "CREATE TABLE {schema}.t (id BIGINT PRIMARY KEY, amount DECIMAL(10,2) NOT NULL, a INT NOT NULL)",
        [(2, "ALTER TABLE t MODIFY a VARCHAR(20) NOT NULL")],
        {2: [{"id": 1, "amount": Decimal("1.50"), "a": "not a number"}]})
    df = spark.createDataFrame([(records[0],)], "value BINARY")
    with pytest.raises(Exception, match=r"column a: not a number is not an integer"):
        df.select(from_flat_avro("value", registry=registry, subject=subject, major=1)).collect()
    with pytest.raises(ConfigError, match=rf"Subject '{subject}' has no live version of major 5.*its majors: 1, 2"):
        from_flat_avro("value", registry=registry, subject=subject, major=5)
    with pytest.raises(ConfigError, match="takes version or major, not both"):
        from_flat_avro("value", registry=registry, subject=subject, version=1, major=1)


def test_without_decimals_or_bytes_the_python_client_and_spark_agree_on_two_majors(spark, registry):
    subject, records = registered(
        registry, "CREATE TABLE {schema}.t (id BIGINT PRIMARY KEY, a INT NOT NULL, note VARCHAR(20))",
        [(2, "ALTER TABLE t MODIFY a VARCHAR(20) NOT NULL")],
        {1: [{"id": 1, "a": 5, "note": "x"}, {"id": 2, "a": -2147483648, "note": None}],
         2: [{"id": 3, "a": "12", "note": "y"}]})
    got = read(spark, registry, subject, records, [1, 2])
    assert got[1] == [{"id": 1, "a": 5, "note": "x"}, {"id": 2, "a": -2147483648, "note": None},
                      {"id": 3, "a": 12, "note": "y"}]
    assert got[2] == [{"id": 1, "a": "5", "note": "x"}, {"id": 2, "a": "-2147483648", "note": None},
                      {"id": 3, "a": "12", "note": "y"}]
    ctx = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
    for major in (1, 2):
        reader = confluent(registry, subject, major)
        assert [reader(data, ctx) for data in records] == got[major]
    # the SQL surface: the same reader as a registered function
    spark.udf.register("t_major_1", flat_avro_udf(registry=registry, subject=subject, major=1))
    spark.createDataFrame([(r,) for r in records], "value BINARY").createOrReplaceTempView("t_records")
    assert [r.a for r in spark.sql("SELECT t_major_1(value).a AS a FROM t_records ORDER BY a").collect()] == [
        -2147483648, 5, 12]
