"""``encode_table`` in the JVM (Spark's ``to_avro`` and SQL) against the Arrow stage, byte for byte.

Hypothesis draws rows of a table with every type the JVM stage converts (edges of each integer range,
BIGINT UNSIGNED over 2^63, NaN and infinities, nulls, ENUM members, YEAR 0), inserts, updates and deletes,
commit ts, and the partition dispatchers; both engines must give the same records. Bad values fail the
job with the table, column, value and valid choices; inputs without an exact SQL conversion go to the
Arrow stage (``auto``) or are refused by name (``jvm``).
"""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avro_registry_sink.encoding.plan import EncodingPlan
from avro_registry_sink.errors import ConfigError
from avro_registry_sink.routing.rules import Route
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import BigintUnsignedMode, EncodingOptions, PartitionStrategy
from avro_registry_sink.spark.stages.jvm_stage import ensure_spark_avro, jvm_stage_gap
from avro_registry_sink.spark.stages.plan import StagePlan
from avro_registry_sink.spark.stages.stage import encode_table
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

TABLE = TableDef(
    schema_name="shop", table="things", version=3, primary_key=("id", "code"),
    columns=(
        ColumnDef(name="id", type=T.BIGINT, nullable=False),
        ColumnDef(name="code", type=T.VARCHAR, length=8, nullable=False),
        ColumnDef(name="ti", type=T.TINYINT, nullable=False, default="1"),
        ColumnDef(name="tu", type=T.TINYINT, unsigned=True),
        ColumnDef(name="si", type=T.SMALLINT, unsigned=True),
        ColumnDef(name="mi", type=T.MEDIUMINT),
        ColumnDef(name="i", type=T.INT, unsigned=True),
        ColumnDef(name="bu", type=T.BIGINT, unsigned=True),
        ColumnDef(name="bl", type=T.BIGINT, unsigned=True, nullable=False),
        ColumnDef(name="f", type=T.FLOAT, default="3.14"),
        ColumnDef(name="dbl", type=T.DOUBLE),
        ColumnDef(name="dec", type=T.DECIMAL, precision=20, scale=4),
        ColumnDef(name="small", type=T.DECIMAL, precision=6, scale=2),
        ColumnDef(name="tx", type=T.TEXT),
        ColumnDef(name="bin", type=T.BLOB, binary=True),
        ColumnDef(name="en", type=T.ENUM, elements=("red", "green,blue", "é")),
        ColumnDef(name="js", type=T.JSON),
        ColumnDef(name="dtt", type=T.DATETIME, fsp=3),
        ColumnDef(name="yr", type=T.YEAR),
    ),
)

DDL = ("id BIGINT, code STRING, ti TINYINT, tu SMALLINT, si INT, mi INT, i BIGINT, bu DECIMAL(20,0), bl BIGINT, "
       "f FLOAT, dbl DOUBLE, dec DECIMAL(20,4), small DECIMAL(9,2), tx STRING, bin BINARY, en STRING, js STRING, "
       "dtt STRING, yr INT, _op STRING, _commit_ts BIGINT")


@pytest.fixture(scope="module")
def avro_spark(spark):
    assert ensure_spark_avro(spark), "spark-avro could not be added to the session (Maven Central unreachable?)"
    return spark


def _plan(options: EncodingOptions = EncodingOptions(), partition: PartitionStrategy = PartitionStrategy.DEFAULT,
          partitions: int = 5, limit: int = 0, table: TableDef = TABLE) -> StagePlan:
    encoding = EncodingPlan.from_schemas(derive_schemas(table, options), 11, 12)
    route = Route(schema=table.schema_name, table=table.table, topic="shop_things", key_subject="shop_things-key",
                  value_subject="shop_things-value", partition=partition)
    return StagePlan(encoding, "shop_things", partitions, route, max_message_bytes=limit)


def _ints(low: int, high: int):
    return st.one_of(st.sampled_from([low, high, 0 if low <= 0 else low]), st.integers(low, high))


def _nullable(strategy):
    return st.one_of(st.none(), strategy)


ROWS = st.fixed_dictionaries({
    "id": _ints(-(1 << 63), (1 << 63) - 1),
    "code": st.text(max_size=8),
    "ti": _ints(-128, 127),
    "tu": _nullable(_ints(0, 255)),
    "si": _nullable(_ints(0, 65535)),
    "mi": _nullable(_ints(-(1 << 23), (1 << 23) - 1)),
    "i": _nullable(_ints(0, (1 << 32) - 1)),
    "bu": _nullable(_ints(0, (1 << 64) - 1).map(Decimal)),
    "bl": _ints(0, (1 << 63) - 1),
    "f": _nullable(st.floats(width=32)),
    "dbl": _nullable(st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, -0.0]), st.floats())),
    "dec": _nullable(st.decimals(min_value=Decimal("-9999999999999999.9999"), max_value=Decimal("9999999999999999.9999"),
                                 places=4, allow_nan=False, allow_infinity=False)),
    "small": _nullable(st.decimals(min_value=Decimal("-9999.99"), max_value=Decimal("9999.99"), places=2,
                                   allow_nan=False, allow_infinity=False)),
    "tx": _nullable(st.text(max_size=30)),
    "bin": _nullable(st.binary(max_size=20)),
    "en": _nullable(st.sampled_from(["red", "green,blue", "é"])),
    "js": _nullable(st.sampled_from(['{"a": 1}', "[]", "null"])),
    "dtt": _nullable(st.sampled_from(["2024-05-01 00:00:00.000", "0000-00-00 00:00:00.000"])),
    "yr": _nullable(st.one_of(st.just(0), st.integers(1901, 2155))),
    "_op": _nullable(st.sampled_from(["c", "u", "d", "I", "U", "D", "insert", "Update", "DELETE", "create"])),
    "_commit_ts": _nullable(st.integers(0, (1 << 63) - 1)),
})


def _same(spark, rows, plan: StagePlan) -> None:
    df = spark.createDataFrame(rows, DDL)
    assert jvm_stage_gap(df, plan) is None
    jvm = encode_table(df, plan, engine="jvm").collect()
    arrow = encode_table(df, plan, engine="arrow").collect()
    assert len(jvm) == len(arrow) == len(rows)
    for j, a in zip(jvm, arrow, strict=True):
        assert tuple(j) == tuple(a)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROWS, min_size=1, max_size=40),
       partition=st.sampled_from([PartitionStrategy.DEFAULT, PartitionStrategy.TABLE, PartitionStrategy.TS]),
       unsigned=st.sampled_from(list(BigintUnsignedMode)))
def test_the_jvm_stage_equals_the_arrow_stage(avro_spark, rows, partition, unsigned):
    _same(avro_spark, rows, _plan(EncodingOptions(bigint_unsigned_mode=unsigned), partition))


def test_edges_deletes_and_one_partition(avro_spark):
    edge = {"id": -(1 << 63), "code": "", "ti": -128, "tu": 255, "si": 65535, "mi": -(1 << 23), "i": (1 << 32) - 1,
            "bu": Decimal((1 << 64) - 1), "bl": (1 << 63) - 1, "f": float("inf"), "dbl": float("nan"),
            "dec": Decimal("-9999999999999999.9999"), "small": Decimal("9999.99"), "tx": "ü\x00", "bin": b"\x00\xff",
            "en": "é", "js": None, "dtt": None, "yr": 0, "_op": None, "_commit_ts": None}
    rows = [edge, {**edge, "id": 1, "bu": Decimal(1 << 63), "_op": "d", "ti": 7}, {**edge, "id": 2, "bu": None}]
    for partitions in (1, 7):
        _same(avro_spark, rows, _plan(partitions=partitions))


def test_auto_uses_the_jvm_when_it_can(avro_spark):
    rows = [{"id": 1, "code": "a", "ti": 1, "bl": 2, "_op": "c", "_commit_ts": 5}]
    plan = encode_table(avro_spark.createDataFrame(rows, DDL), _plan())._jdf.queryExecution().executedPlan().toString()
    assert "to_avro" in plan and "MapInArrow" not in plan


@pytest.mark.parametrize(("change", "message"), [
    ({"ti": None}, r"column 'ti', TINYINT.*NOT NULL but the row has NULL"),
    ({"tu": 256}, r"column 'tu', TINYINT UNSIGNED.*value 256: out of range 0\.\.255"),
    ({"i": -1}, r"column 'i', INT UNSIGNED.*value -1: out of range 0\.\.4294967295"),
    ({"bu": Decimal(1 << 64)}, r"column 'bu'.*value 18446744073709551616: out of range 0\.\.18446744073709551615"),
    ({"en": "blue"}, r"column 'en', ENUM.*value blue: not a member \(valid: red, green,blue, é\)"),
    ({"yr": 1800}, r"column 'yr', YEAR.*value 1800: YEAR must be 0 or 1901\.\.2155"),
    ({"small": Decimal("10000.00")}, r"column 'small', DECIMAL\(6,2\).*value 10000\.00: more than 6 digits at scale 2"),
    ({"_op": "upsert"}, r"unknown operation upsert: valid values are insert, update, delete"),
])
def test_a_bad_value_fails_naming_table_column_value_and_choices(avro_spark, change, message):
    rows = [{"id": 1, "code": "a", "ti": 1, "bl": 2, "_op": "c", "_commit_ts": 5},
            {"id": 2, "code": "b", "ti": 1, "bl": 2, "_op": "u", "_commit_ts": 6, **change}]
    with pytest.raises(Exception, match="(?i)" + message) as info:
        encode_table(avro_spark.createDataFrame(rows, DDL), _plan(), engine="jvm").collect()
    assert "shop.things" in str(info.value)


def test_a_delete_needs_only_its_key_and_a_record_over_max_message_bytes_fails(avro_spark):
    rows = [{"id": 1, "code": "a", "ti": None, "bl": None, "_op": "d", "_commit_ts": 5}]  # NOT NULL: not read
    _same(avro_spark, rows, _plan())
    big = [{"id": 1, "code": "a", "ti": 1, "bl": 2, "tx": "x" * 500, "_op": "c", "_commit_ts": 9}]
    with pytest.raises(Exception, match=r"shop.things at commit ts 9 .*message too large: \d+ bytes .* > max-message-bytes 300"):
        encode_table(avro_spark.createDataFrame(big, DDL), _plan(limit=300), engine="jvm").collect()


def test_inputs_without_an_exact_conversion_go_to_the_arrow_stage(avro_spark):
    with_bit = TABLE.model_copy(update={"columns": (*TABLE.columns, ColumnDef(name="flags", type=T.BIT, length=8))})
    plan = _plan(table=with_bit)
    rows = [{"id": 1, "code": "a", "ti": 1, "bl": 2, "flags": 5, "_op": "c", "_commit_ts": 5}]
    df = avro_spark.createDataFrame(rows, DDL + ", flags BIGINT")
    assert "flags" in (jvm_stage_gap(df, plan) or "")
    with pytest.raises(ConfigError, match=r"(?i)JVM stage cannot encode table shop.things: no SQL conversion of bigint "
                                          r"for flags BIT\(8\); use engine='arrow' or 'auto'"):
        encode_table(df, plan, engine="jvm")
    assert encode_table(df, plan).collect() == encode_table(df, plan, engine="arrow").collect()
    extension = _plan(EncodingOptions(enable_tidb_extension=True))
    assert "extension" in (jvm_stage_gap(avro_spark.createDataFrame(rows[:0], DDL), extension) or "")
    with pytest.raises(ConfigError, match="valid values are auto, jvm, arrow"):
        encode_table(df, plan, engine="fast")
