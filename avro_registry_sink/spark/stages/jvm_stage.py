"""The encode stage in Spark's JVM: SQL conversions and Spark's own ``to_avro`` (``spark-avro``).

:func:`~avro_registry_sink.spark.stages.stage.encode_table` runs here when the session has ``spark-avro`` and
every column of the table has a conversion below for the DataFrame's Spark type; otherwise it runs the
Arrow stage (``mapInArrow`` + :class:`~avro_registry_sink.encoding.columnar.ColumnarEncoder`). Both give the same
records byte for byte (``tests/spark/test_jvm_stage.py`` compares them): the Confluent header, the Avro
body ``to_avro`` writes for the registered schema, TiCDC's partition (CRC-32 of the key text), the
``op``/``commit_ts`` headers, tombstones for deletes.

Why: a ``mapInArrow`` stage moves every row to a Python worker and back; ``to_avro`` runs where the rows
are, and on this machine it outruns even a ``mapInArrow`` pass that does nothing (bench ``spark``).

The checks the Arrow stage makes become SQL ``raise_error`` calls that name the table, the column, the
value and the valid choices: integer ranges, NOT NULL, ENUM members, YEAR, decimal digits, unknown
operations, ``max-message-bytes``. Inputs this module has no exact conversion for (BIT, SET, decimals as
text or at a larger scale, temporal Spark types, ``decimal-handling-mode=string``, the TiDB extension
fields, the ``columns`` partition dispatcher, columns the table lacks) go to the Arrow stage, whose
per-value reference path handles them; :func:`jvm_stage_gap` says which.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from avro_registry_sink.encoding.columnar import record_fields
from avro_registry_sink.model import MESSAGE_OVERHEAD, OP_ALIASES, OVERSIZE_ADVICE, Op
from avro_registry_sink.settings.config import EncodingOptions, PartitionStrategy
from avro_registry_sink.spark.runtime.packages import avro_package, ivy_dir
from avro_registry_sink.spark.runtime.session import has_class
from avro_registry_sink.table import ColumnDef
from avro_registry_sink.typemap.mysql import (
    YEAR_RANGE,
    YEAR_REFUSAL,
    ValueKind,
    decimal_encoding,
    range_refusal,
    rule_for,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from avro_registry_sink.spark.stages.plan import StagePlan

__all__ = ["ensure_spark_avro", "has_spark_avro", "jvm_encode_table", "jvm_stage_gap"]

def has_spark_avro(spark: SparkSession) -> bool:
    """Whether Spark's Avro functions (``spark-avro``) are on the session's classpath."""
    return has_class(spark, "org.apache.spark.sql.avro.CatalystDataToAvro")


def ensure_spark_avro(spark: SparkSession) -> bool:
    """Make ``spark-avro`` available on a running session (``ADD JAR``: from the Ivy cache when an earlier
    run fetched it, else from Maven Central); ``False`` if that is impossible. ``spark-avro`` needs only the
    Avro jars pyspark ships."""
    from pathlib import Path

    if has_spark_avro(spark):
        return True
    coordinate = avro_package()
    version = coordinate.rsplit(":", 1)[1]
    cached = Path(ivy_dir(), "jars", f"org.apache.spark_spark-avro_2.13-{version}.jar")
    try:
        spark.sql(f"ADD JAR '{cached}'" if cached.is_file() else f"ADD JAR 'ivy://{coordinate}?transitive=false'")
    except Exception:  # noqa: BLE001 - offline, or no such version: the caller decides what that means
        return False
    return has_spark_avro(spark)


# --------------------------------------------------------------------------------------------------
# One conversion per value kind: (column expression, its Spark type, the column, the Avro type, the encoding
# options) -> (the value as to_avro takes it, [(condition that makes the row bad, reason as a Column)]) or None.

Conversion = tuple["Column", list[tuple["Column", "Column"]]]


def _is_int(t: DataType) -> bool:
    from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

    return isinstance(t, (ByteType, ShortType, IntegerType, LongType))


def _is_whole_decimal(t: DataType) -> bool:
    from pyspark.sql.types import DecimalType

    return isinstance(t, DecimalType) and t.scale == 0 and t.precision <= 20


def _shown(c: Column, text: str) -> Column:
    """``value <c>: <text>`` as a Column (the reason of a bad row)."""
    from pyspark.sql import functions as F

    return F.concat(F.lit("value "), F.coalesce(c.cast("string"), F.lit("NULL")), F.lit(f": {text}"))


def _int(c: Column, t: DataType, col: ColumnDef, avro: str, options: EncodingOptions) -> Conversion | None:
    from pyspark.sql import functions as F

    if not (_is_int(t) or _is_whole_decimal(t)):
        return None
    rule = rule_for(col)
    low, high = (0, rule.unsigned_max) if col.unsigned else rule.signed_range  # type: ignore[misc]
    assert low is not None and high is not None
    reason = _shown(c, range_refusal(low, high))
    if _is_int(t):
        checks = [(bad, reason) for bad in _long_out_of(c, t, low, high)]
        if avro == "int":
            return c.cast("int"), checks
        return (c.cast("string") if avro == "string" else c.cast("bigint")), checks
    wide = c.cast("decimal(20,0)")
    checks = [((wide < _whole(low)) | (wide > _whole(high)) if low else wide > _whole(high), reason)]
    if avro == "int":
        return wide.cast("int"), checks
    if avro == "string":  # BIGINT UNSIGNED in string mode: the decimal text
        return wide.cast("string"), checks
    # over 2^63 - 1 (BIGINT UNSIGNED): two's complement wrap, as the Avro long carries it
    wrapped = F.when(wide >= _whole(1 << 63), wide - F.lit(str(1 << 64)).cast("decimal(21,0)")).otherwise(wide)
    return wrapped.cast("bigint"), checks


def _whole(n: int) -> Column:
    from pyspark.sql import functions as F

    return F.lit(str(n)).cast("decimal(20,0)")


#: The values each Spark integer type can hold.
_INT_RANGES = {"tinyint": (-(1 << 7), (1 << 7) - 1), "smallint": (-(1 << 15), (1 << 15) - 1),
               "int": (-(1 << 31), (1 << 31) - 1), "bigint": (-(1 << 63), (1 << 63) - 1)}


def _long_out_of(c: Column, t: DataType, low: int, high: int) -> list[Column]:
    """The range checks a value of Spark type ``t`` needs (none when the type cannot leave low..high)."""
    held_low, held_high = _INT_RANGES[t.simpleString()]
    parts = []
    if low > held_low:
        parts.append(c < low)
    if high < held_high:
        parts.append(c > high)
    return parts


def _float(c: Column, t: DataType, col: ColumnDef, avro: str, options: EncodingOptions) -> Conversion | None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType

    if not isinstance(t, (FloatType, DoubleType)):
        return None
    d = c.cast("double")
    finite = F.when(F.isnan(d) | (F.abs(d) == F.lit(float("inf"))), F.lit(0.0)).otherwise(d)  # TiCDC: NaN, Inf -> 0
    return finite.cast("float" if avro == "float" else "double"), []


def _decimal(c: Column, t: DataType, col: ColumnDef, avro: str, options: EncodingOptions) -> Conversion | None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType

    as_text, precision, scale = decimal_encoding(col, options)
    if as_text or avro != "bytes" or precision > 38 or scale > precision:
        return None
    if not isinstance(t, DecimalType) or t.scale > scale:
        return None  # text, and values to floor to a smaller scale: the Arrow stage
    whole_digits = max(precision, 1) - scale
    if t.precision - t.scale <= whole_digits:  # the input type cannot hold a value with more digits
        return c.cast(f"decimal({precision},{scale})"), []
    over = F.abs(c) >= F.lit(str(10 ** whole_digits)).cast(f"decimal({min(38, whole_digits + 1)},0)")
    return c.cast(f"decimal({precision},{scale})"), [(over, _shown(c, f"more than {precision} digits at scale {scale}"))]


def _text(c: Column, t: DataType, col: ColumnDef, avro: str, options: EncodingOptions) -> Conversion | None:
    from pyspark.sql.types import StringType

    return (c, []) if isinstance(t, StringType) else None


def _blob(c: Column, t: DataType, col: ColumnDef, avro: str, options: EncodingOptions) -> Conversion | None:
    from pyspark.sql.types import BinaryType, StringType

    if isinstance(t, BinaryType):
        return c, []
    return (c.cast("binary"), []) if isinstance(t, StringType) else None


def _enum(c: Column, t: DataType, col: ColumnDef, avro: str, options: EncodingOptions) -> Conversion | None:
    from pyspark.sql.types import StringType

    if not isinstance(t, StringType):
        return None
    if not col.elements:
        return c, []
    choices = ", ".join(col.elements)
    return c, [(~c.isin(list(col.elements)), _shown(c, f"not a member (valid: {choices[:200]})"))]


def _year(c: Column, t: DataType, col: ColumnDef, avro: str, options: EncodingOptions) -> Conversion | None:
    if not _is_int(t):
        return None
    bad = (c != 0) & ((c < YEAR_RANGE[0]) | (c > YEAR_RANGE[1]))
    return c.cast("int"), [(bad, _shown(c, YEAR_REFUSAL))]


_CONVERSIONS: dict[ValueKind, Callable[..., Conversion | None]] = {
    ValueKind.INT: _int,
    ValueKind.BIGINT_UNSIGNED: _int,
    ValueKind.FLOAT32: _float,
    ValueKind.FLOAT64: _float,
    ValueKind.DECIMAL: _decimal,
    ValueKind.TEXT: _text,
    ValueKind.JSON: _text,
    ValueKind.TEMPORAL: _text,
    ValueKind.VECTOR: _text,
    ValueKind.BLOB: _blob,
    ValueKind.ENUM: _enum,
    ValueKind.YEAR: _year,
}


# --------------------------------------------------------------------------------------------------
# The stage


def jvm_stage_gap(df: DataFrame, plan: StagePlan, keep: Sequence[str] = ()) -> str | None:
    """Why :func:`jvm_encode_table` cannot encode ``df`` for ``plan`` (``None``: it can)."""
    return _prepared(df, plan, tuple(keep))[1]


class _Unsupported(Exception):
    """The JVM stage has no exact conversion for this input."""


def jvm_encode_table(df: DataFrame, plan: StagePlan, keep: Sequence[str] = ()) -> DataFrame:
    """:func:`~avro_registry_sink.spark.stages.stage.encode_table` in the JVM (check :func:`jvm_stage_gap` first)."""
    built, gap = _prepared(df, plan, tuple(keep))
    if built is None:
        raise ValueError(f"the JVM stage cannot encode table {plan.encoding.table.qualified_name}: {gap}")
    columns, value_guard = built
    records = df.select(*columns)
    return records.withColumn("value", value_guard) if value_guard is not None else records


#: Built expressions per (application, plan, input schema, kept columns): a streaming job encodes the same
#: table with the same plan batch after batch, and building them costs a few thousand Py4J calls.
_BUILT: dict[tuple[Any, ...], tuple[Any, str | None]] = {}


def _prepared(df: DataFrame, plan: StagePlan, keep: tuple[str, ...]) -> tuple[Any, str | None]:
    spark = df.sparkSession
    key = (spark.sparkContext.applicationId, plan, df.schema.json(), keep)
    hit = _BUILT.get(key)
    if hit is None:
        try:
            if not has_spark_avro(spark):
                raise _Unsupported("the session has no spark-avro (add org.apache.spark:spark-avro_2.13 to "
                                   "spark.jars.packages)")
            hit = (_build(df, plan, keep), None)
        except _Unsupported as exc:
            hit = (None, str(exc))
        if len(_BUILT) >= 256:
            _BUILT.clear()
        _BUILT[key] = hit
    return hit


def _build(df: DataFrame, plan: StagePlan, keep: tuple[str, ...]) -> tuple[list[Column], Column | None]:
    """The output columns and the max-message-bytes guard of the value (over the output), or _Unsupported."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StringType

    enc = plan.encoding
    table = enc.table
    name = table.qualified_name
    if enc.options.enable_tidb_extension:
        raise _Unsupported("the TiDB extension fields are written by the Arrow stage")
    types = {f.name.lower(): (f.name, f.dataType) for f in df.schema.fields}
    known = {c.name.lower() for c in table.columns} | {n.lower() for n in enc.omitted} | {"_op", "_commit_ts"}
    extra = [n for low, (n, _) in types.items() if low not in known and n not in keep]
    if extra:
        raise _Unsupported(f"columns {extra} are not in {name}")

    def column(col: ColumnDef) -> tuple[Column, DataType]:
        found = types.get(col.name.lower())
        if found is None:
            raise _Unsupported(f"column {col.name!r} is missing")
        return F.col(f"`{found[0]}`"), found[1]

    # operation code: 0 insert, 1 update, 2 delete (null or absent: insert)
    if "_op" in types:
        op_name, op_type = types["_op"]
        if not isinstance(op_type, StringType):
            raise _Unsupported("_op is not a string")
        raw = F.col(f"`{op_name}`")
        # Op.parse's aliases: each one in lower case is an alias of the same operation
        codes = {Op.INSERT: 0, Op.UPDATE: 1, Op.DELETE: 2}
        pairs = {alias.lower(): codes[kind] for alias, kind in OP_ALIASES.items()}
        op = F.create_map(*[F.lit(x) for pair in pairs.items() for x in pair])[F.lower(raw)]
        op = F.when(raw.isNull(), F.lit(0)).when(op.isNull(), F.raise_error(F.concat(
            F.lit(f"Cannot encode a change of table {name}: unknown operation "), raw,
            F.lit(": valid values are insert, update, delete (or c, u, d / I, U, D).")))).otherwise(op)
    else:
        op = F.lit(0)
    if "_commit_ts" in types:
        ts_name, ts_type = types["_commit_ts"]
        if not isinstance(ts_type, (IntegerType, LongType)):
            raise _Unsupported("_commit_ts is not an integer")
        ts = F.coalesce(F.col(f"`{ts_name}`").cast("bigint"), F.lit(0).cast("bigint"))
    else:
        ts = F.lit(0).cast("bigint")

    problems: list[tuple[Column, Column]] = []  # (the row is bad, why), over every field

    def converted(fields: list[Any], schema_id: int | None, live: Column | None) -> Column:
        """The record struct; each field's checks go to ``problems`` (``live``: rows whose values are checked)."""
        members = []
        for field in fields:
            col = field.column
            c, t = column(col)
            handler = _CONVERSIONS.get(field.kind)
            conv = handler(c, t, col, field.avro, enc.options) if handler is not None else None
            if conv is None:
                raise _Unsupported(f"no SQL conversion of {t.simpleString()} for {col.name} {col.sql_type()}")
            value, checks = conv
            if not col.nullable:
                checks = [(c.isNull(), F.lit("NOT NULL but the row has NULL")), *checks]
            for bad, reason in checks:
                problems.append((bad if live is None else (live & bad), F.concat(
                    F.lit(f"Cannot encode the change for table {name} (column {col.name!r}, {col.sql_type()}, "
                          f"schema id {schema_id}): "), reason, F.lit(". Fix the value or the table definition."))))
            members.append(value.alias(field.name))
        return F.struct(*members)

    key_fields = record_fields(enc.key_schema_json, table.handle_key_columns() if enc.key_schema_json else ())
    value_fields = record_fields(enc.value_schema_json, table.columns)
    is_delete = op == F.lit(2)
    key_struct = converted(key_fields, enc.key_schema_id, None) if key_fields else None
    value_struct = converted(value_fields, enc.value_schema_id, ~is_delete)
    partition = _partition(plan, types, ts)
    from pyspark.sql.avro.functions import to_avro

    def header(schema_id: int) -> Column:
        return F.lit(bytearray(b"\x00" + schema_id.to_bytes(4, "big")))

    key = (F.concat(header(enc.key_schema_id), to_avro(key_struct, enc.key_schema_json))  # type: ignore[arg-type]
           if key_struct is not None and enc.key_schema_id is not None else F.lit(None).cast("binary"))
    value = F.when(is_delete, F.lit(None).cast("binary")).otherwise(
        F.concat(header(enc.value_schema_id), to_avro(value_struct, enc.value_schema_json)))
    letter = F.when(op == 0, F.lit(bytearray(b"c"))).when(op == 1, F.lit(bytearray(b"u"))).otherwise(
        F.lit(bytearray(b"d")))
    headers = F.array(F.struct(F.lit("op").alias("key"), letter.alias("value")),
                      F.struct(F.lit("commit_ts").alias("key"), ts.cast("string").cast("binary").alias("value")))
    topic = F.lit(plan.topic)
    if problems:  # one test per row over all checks (kept out of to_avro's input); the reason only when one fails
        bad = problems[0][0]
        for cond, _ in problems[1:]:
            bad = bad | cond
        why = F.when(problems[0][0], problems[0][1])
        for cond, reason in problems[1:]:
            why = why.when(cond, reason)
        topic = F.when(bad, F.raise_error(why)).otherwise(topic)
    columns = [topic.alias("topic"), partition.alias("partition"), key.alias("key"), value.alias("value"),
               headers.alias("headers"), ts.alias("commit_ts"), *[F.col(f"`{k}`") for k in keep]]
    limit = plan.max_message_bytes
    if not limit:
        return columns, None
    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0)) + F.lit(MESSAGE_OVERHEAD)
    return columns, F.when(size > limit, F.raise_error(F.concat(
        F.lit(f"Table {name} at commit ts "), F.col("commit_ts").cast("string"),
        F.lit(f" (topic {plan.topic!r}): message too large: "), size.cast("string"),
        F.lit(f" bytes (key + value + {MESSAGE_OVERHEAD}) > max-message-bytes {limit}; {OVERSIZE_ADVICE}.")))
    ).otherwise(F.col("value"))


def _partition(plan: StagePlan, types: dict[str, tuple[str, Any]], ts: Column) -> Column:
    """TiCDC's partition of each row, as :func:`~avro_registry_sink.spark.stages.stage.partition_numbers` computes it."""
    import zlib

    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    route = plan.route
    n = plan.partitions
    if n <= 1:
        return F.lit(0).cast("int")
    strategy = route.partition
    prefix = route.schema.encode() + b"\x1f" + route.table.encode() + b"\x1f"
    if strategy is PartitionStrategy.TABLE:
        return F.lit(zlib.crc32(prefix) % n).cast("int")
    if strategy is PartitionStrategy.TS:
        return F.pmod(ts, F.lit(n)).cast("int")
    if strategy is PartitionStrategy.COLUMNS:
        raise _Unsupported("the columns dispatcher is computed by the Arrow stage")
    table = plan.encoding.table
    parts = []
    for key in table.handle_key_names() or ():
        found = types.get(key.lower())
        if found is None:
            continue
        c, t = F.col(f"`{found[0]}`"), found[1]
        if _is_int(t) or _is_whole_decimal(t) or isinstance(t, StringType):
            text = c.cast("string").cast("binary")
        elif isinstance(t, BinaryType):
            text = c
        else:
            raise _Unsupported(f"key column {key} of type {t.simpleString()} is hashed by the Arrow stage")
        parts += [F.coalesce(text, F.lit(bytearray(b"\x00"))), F.lit(bytearray(b"\x1f"))]
    if not parts:
        return F.lit(zlib.crc32(prefix) % n).cast("int")
    return F.pmod(F.crc32(F.concat(F.lit(bytearray(prefix)), *parts)), F.lit(n)).cast("int")
