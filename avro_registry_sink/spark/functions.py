"""One call each way for notebooks: a DataFrame to Kafka-ready flat Avro, and Confluent-framed bytes back.

::

    from avro_registry_sink.spark.functions import from_flat_avro, notebook_session, to_flat_avro

    spark = notebook_session()                          # Kafka connector + spark-avro, workers on this Python
    out = to_flat_avro(df, table="CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))",
                       sink_uri="kafka://127.0.0.1:9092/?protocol=avro&schema-registry=http://127.0.0.1:8081")
    out.write.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9092").save()

    back = spark.read.format("kafka")...load()
    back.select(from_flat_avro("value", registry="http://127.0.0.1:8081", subject="shop_orders-value").alias("row"))

:func:`to_flat_avro` takes the table from DDL text, a :class:`~avro_registry_sink.table.TableDef`, or the
DataFrame's own schema (``table="shop.orders", key=["id"]``); registers the key and value schemas on the driver
(once, as the job does); finds the topic's partition count (creating the topic with the sink URI's
``partition-num`` when it is missing) and encodes with the job's own stage
(:func:`~avro_registry_sink.spark.stages.stage.encode_table`): the same bytes as ``avro-registry-sink run``.
:func:`from_flat_avro` decodes each value with the schema whose id it carries, resolved to the version asked for
(Avro schema resolution), so records of every version of a subject read back as one struct; with ``major=N``, in
the shape of major ``N`` by the subject's migration rules, as Confluent's pinned clients read them
(:mod:`avro_registry_sink.schema.follow`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from avro_registry_sink.errors import ConfigError, RegistryUnavailable
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.settings.config import RegistryConfig, SinkConfig, SinkKind, parse_sink_uri
from avro_registry_sink.spark.runtime.packages import avro_package, ivy_dir, kafka_package
from avro_registry_sink.spark.runtime.session import PROVIDED_ARTIFACTS, local_session
from avro_registry_sink.spark.stages.jvm_stage import ensure_spark_avro
from avro_registry_sink.spark.stages.plan import StagePlan
from avro_registry_sink.spark.stages.stage import encode_table
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

# The schema manager, the registry client, the DDL parser and the record follower are imported by the calls that
# use them (about 0.5 s of this module's import otherwise), the streaming job only when Kafka is asked for (0.6 s).

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from avro_registry_sink.settings.config import SinkConfig

# Imported inside functions, for start-up: the notebook API imports in about 1 s; the registry client, the
# schema manager and the job's sink (about 70 more modules, 1.8 s in all at the top) load where a function uses them.

__all__ = ["flat_avro_udf", "from_flat_avro", "notebook_session", "table_from_schema", "to_flat_avro"]

#: Spark's type names -> the MySQL type a column of that Spark type is encoded as (TiCDC's mapping from there).
SPARK_TO_MYSQL: dict[str, MySQLType] = {
    "byte": MySQLType.TINYINT, "short": MySQLType.SMALLINT, "integer": MySQLType.INT, "long": MySQLType.BIGINT,
    "float": MySQLType.FLOAT, "double": MySQLType.DOUBLE, "string": MySQLType.TEXT, "binary": MySQLType.BLOB,
    "boolean": MySQLType.TINYINT, "date": MySQLType.DATE, "timestamp": MySQLType.DATETIME,
    "timestamp_ntz": MySQLType.DATETIME,
}


def notebook_session(*, master: str | None = None, app_name: str = "avro-registry-sink") -> SparkSession:
    """A local SparkSession with what :func:`to_flat_avro` and Kafka need: Spark's Kafka connector and
    ``spark-avro`` (from Maven Central through Ivy), and Python workers on this interpreter (``PYSPARK_PYTHON``,
    without which workers fail with ``ModuleNotFoundError``). A running session gets the packages added."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = local_session(app_name=app_name, master=master or os.environ.get("AVRO_SINK_SPARK_MASTER", "local[*]"),
                          **{"spark.jars.packages": f"{kafka_package()},{avro_package()}", "spark.jars.ivy": ivy_dir(),
                             "spark.jars.excludes": ",".join(PROVIDED_ARTIFACTS)})
    from avro_registry_sink.spark.driver.job import ensure_spark_kafka

    ensure_spark_kafka(spark)  # a session that was already running without them
    ensure_spark_avro(spark)
    return spark


def table_from_schema(schema: StructType, name: str, key: Sequence[str]) -> TableDef:
    """The table a DataFrame schema describes: ``name`` is ``schema.table``, ``key`` the primary key's columns.

    >>> from pyspark.sql.types import LongType, StringType, StructField, StructType
    >>> t = table_from_schema(StructType([StructField("id", LongType()), StructField("note", StringType())]),
    ...                       "shop.orders", ["id"])
    >>> [(c.name, c.type.value, c.nullable) for c in t.columns], t.primary_key
    ([('id', 'BIGINT', False), ('note', 'TEXT', True)], ('id',))
    """
    schema_name, dot, table = name.partition(".")
    if not dot or not schema_name or not table:
        raise ConfigError(f"Invalid table name {name!r}: give it as 'schema.table'.", option="table", value=name)
    names = {f.name.lower() for f in schema.fields}
    missing = [k for k in key if k.lower() not in names]
    if not key or missing:
        raise ConfigError(
            f"Table {name} needs a primary key to be encoded (the Kafka key): give key=[...] with columns of the "
            f"DataFrame ({', '.join(f.name for f in schema.fields if not f.name.startswith('_'))})"
            + (f"; not among them: {', '.join(missing)}" if missing else "") + ".", option="key", table=name)
    keys = {k.lower() for k in key}
    columns = []
    for field in schema.fields:
        if field.name.lower() in ("_op", "_commit_ts"):
            continue
        spark_type = field.dataType.typeName()
        nullable = field.nullable and field.name.lower() not in keys
        if spark_type == "decimal":
            decimal: Any = field.dataType
            columns.append(ColumnDef(name=field.name, type=MySQLType.DECIMAL, precision=decimal.precision,
                                     scale=decimal.scale, nullable=nullable))
            continue
        mysql = SPARK_TO_MYSQL.get(spark_type)
        if mysql is None:
            raise ConfigError(
                f"Column {field.name} of {name} has Spark type {field.dataType.simpleString()}, which has no MySQL "
                f"type here; valid Spark types: {', '.join([*sorted(SPARK_TO_MYSQL), 'decimal'])}. Cast it, or give "
                "the table as DDL.", table=name, column=field.name, option="table")
        extra: dict[str, Any] = {}
        if spark_type == "boolean":
            extra["length"] = 1
        if spark_type in ("timestamp", "timestamp_ntz"):
            extra["fsp"] = 6
        columns.append(ColumnDef(name=field.name, type=mysql, nullable=nullable, **extra))
    return TableDef(schema_name=schema_name, table=table, columns=tuple(columns), primary_key=tuple(key))


def _table_of(df: DataFrame, table: str | TableDef, key: Sequence[str] | None) -> TableDef:
    if isinstance(table, TableDef):
        return table
    if "create" in table.lower() and "table" in table.lower() and "(" in table:
        from avro_registry_sink.tabledef.ddl import parse_ddl

        tables = parse_ddl(table)
        if len(tables) != 1:
            raise ConfigError(f"The DDL text defines {len(tables)} tables; give one CREATE TABLE "
                              f"({', '.join(t.qualified_name for t in tables) or 'none found'}).", option="table")
        return tables[0]
    return table_from_schema(df.schema, table, key or ())


#: The notebook API's registry connection, where the settings leave them unset: a call answers within seconds
#: (one request per URL, each given this long), not after the job's retry budget for a registry restarting.
NOTEBOOK_REGISTRY_TIMEOUT = 5.0
NOTEBOOK_REGISTRY_RETRIES = 0


def _notebook_registry(registry: Any) -> Any:
    """``registry`` (a URL, a comma-separated list of URLs or a RegistryConfig) as the RegistryConfig the
    notebook API connects with: a short timeout and no retries unless the config sets them itself."""
    config = registry if isinstance(registry, RegistryConfig) else \
        RegistryConfig(urls=tuple(u.strip() for u in str(registry).split(",")))
    update = {name: value for name, value in (("timeout", NOTEBOOK_REGISTRY_TIMEOUT),
                                              ("max_retries", NOTEBOOK_REGISTRY_RETRIES))
              if name not in config.model_fields_set}
    return config.model_copy(update=update)


@contextlib.contextmanager
def _registry_reachable(call: str, what: str, urls: Sequence[str]) -> Iterator[None]:
    """An unreachable registry as an error of the notebook call: what was tried, and what to do."""
    try:
        yield
    except RegistryUnavailable as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, RegistryUnavailable) else exc
        raise RegistryUnavailable(
            f"{call} could not reach the schema registry at {', '.join(urls) or '(none given)'} for {what}: "
            f"{cause.message.rstrip('.')}. Nothing was registered or read; start the registry or "
            f"pass registry='http://host:port' (a RegistryConfig with timeout= and max_retries= to wait longer), "
            f"then call {call} again.",
            subject=exc.context.get("subject"), status_code=exc.context.get("status_code"), error_code=exc.context.get("error_code"),
        ) from exc


def _sink_config(sink_uri: str | None, registry: Any, *, need_registry: bool) -> SinkConfig:
    config = parse_sink_uri(sink_uri) if sink_uri else SinkConfig(scheme=SinkKind.FILE, path=".")
    if isinstance(registry, (str, RegistryConfig)):
        config = config.model_copy(update={"registry": registry if isinstance(registry, RegistryConfig)
                                           else RegistryConfig(urls=tuple(u.strip() for u in registry.split(",")))})
    if need_registry and config.registry.is_embedded:
        raise ConfigError("to_flat_avro needs a schema registry: give registry='http://host:8081' (or a sink URI "
                          "with schema-registry=...); an embedded one would be gone when the notebook ends.",
                          option="registry")
    if not config.registry.is_embedded:
        config = config.model_copy(update={"registry": _notebook_registry(config.registry)})
    return config


def to_flat_avro(
    df: DataFrame,
    *,
    table: str | TableDef,
    key: Sequence[str] | None = None,
    sink_uri: str | None = None,
    registry: Any = None,
    topic_rule: str = "{schema}_{table}",
    partitions: int | None = None,
    op: str | None = None,
    commit_ts: str | None = None,
    keep: Sequence[str] = (),
    engine: str = "auto",
) -> DataFrame:
    """``df`` (one table's rows) as Kafka-ready flat Avro: ``topic, partition, key, value, headers`` (+ ``keep``).

    ``table``: a ``CREATE TABLE`` statement, a :class:`~avro_registry_sink.table.TableDef`, or ``"schema.table"``
    with ``key`` (the DataFrame's schema gives the columns: :func:`table_from_schema`). ``sink_uri``: TiCDC's
    Kafka sink URI (encoding options such as ``avro-decimal-handling-mode``, ``schema-registry``,
    ``partition-num``, ``max-message-bytes``; the topic is created with ``partition-num`` partitions when it is
    missing); without one, ``partitions`` (default 1) is the topic's partition count. ``registry``: a URL, a
    :class:`~avro_registry_sink.settings.config.RegistryConfig` or a registry client (overrides the sink URI's). ``op`` and
    ``commit_ts`` name the columns holding each row's operation (``c``/``u``/``d``, insert/update/delete; a
    delete gives a tombstone) and commit ts. The schemas are registered now, on the driver, under
    TopicNameStrategy subjects of the topic ``topic_rule`` names.
    """
    from pyspark.sql import functions as F

    from avro_registry_sink.manager import SchemaManager
    from avro_registry_sink.registry.client import RegistryClient

    frame = df
    for given, name in ((op, "_op"), (commit_ts, "_commit_ts")):
        if given and given != name:
            frame = frame.withColumnRenamed(given, name)
    definition = _table_of(frame, table, key)
    given_client = registry is not None and hasattr(registry, "register")
    config = _sink_config(sink_uri, None if given_client else registry, need_registry=not given_client)
    router = TopicRouter(topic_rule=topic_rule)
    with _registry_reachable("to_flat_avro", f"table {definition.qualified_name}", config.registry.urls), \
            contextlib.nullcontext(registry) if given_client else RegistryClient(config.registry) as client:
        plans = SchemaManager(client, router, config.encoding, unavailable_budget=0).prepare_batch([definition])
    (table_plan,) = plans.values()
    topic = table_plan.route.topic
    count = partitions
    if config.scheme == SinkKind.KAFKA:
        from avro_registry_sink.spark.driver.job import build_sink

        sink = build_sink(config, producer="confluent")
        try:
            count = sink.prepare({topic: config.partition_num})[topic]
        finally:
            sink.close()
    stage_plan = StagePlan(table_plan.encoding, topic, count or 1, table_plan.route,
                           max_message_bytes=config.max_message_bytes if sink_uri else 0)
    encoded = encode_table(frame, stage_plan, keep=keep, engine=engine)
    return encoded.select("topic", "partition", "key", "value", "headers", *[F.col(k) for k in keep])


# --------------------------------------------------------------------------------------------------
# Reading back


def _spark_type(avro: Any) -> tuple[DataType, bool]:
    """(Spark type, nullable) of an Avro type (flat-avro's and any other's)."""
    from pyspark.sql import types as T

    if isinstance(avro, list):
        others = [a for a in avro if a != "null"]
        inner, _ = _spark_type(others[0]) if len(others) == 1 else (T.StringType(), True)
        return inner, "null" in avro or len(others) != 1
    if isinstance(avro, dict):
        kind = avro.get("type")
        logical = avro.get("logicalType")
        if logical == "decimal":
            return T.DecimalType(int(avro["precision"]), int(avro.get("scale", 0))), False
        if kind == "record":
            return T.StructType([T.StructField(f["name"], *_spark_type(f["type"])) for f in avro["fields"]]), False
        if kind == "array":
            return T.ArrayType(_spark_type(avro["items"])[0]), False
        if kind == "map":
            return T.MapType(T.StringType(), _spark_type(avro["values"])[0]), False
        if kind == "enum":
            return T.StringType(), False
        if kind == "fixed":
            return T.BinaryType(), False
        return _spark_type(kind)
    simple = {"int": T.IntegerType(), "long": T.LongType(), "float": T.FloatType(), "double": T.DoubleType(),
              "string": T.StringType(), "bytes": T.BinaryType(), "boolean": T.BooleanType(), "null": T.NullType()}
    if avro not in simple:
        raise ConfigError(f"Avro type {avro!r} has no Spark type here.", option="subject")
    return simple[avro], False


def _subject_schemas(registry: Any, subject: str, version: int | str) -> tuple[dict[int, str], str]:
    """Every version's (schema id -> schema text) of ``subject``, and the text of ``version``."""
    from avro_registry_sink.registry.client import RegistryClient

    def read(client: Any) -> tuple[dict[int, str], str]:
        versions = client.get_versions(subject)
        schemas: dict[int, str] = {}
        chosen = ""
        for number in versions:
            got = client.get_version(subject, number)
            schemas[got.id] = got.schema
            if (version == "latest" and number == versions[-1]) or version == number:
                chosen = got.schema
        if not chosen:
            raise ConfigError(f"Subject {subject!r} has no version {version!r}; its versions: "
                              f"{', '.join(map(str, versions))}.", option="version", subject=subject)
        return schemas, chosen

    if hasattr(registry, "get_versions"):
        return read(registry)
    config = _notebook_registry(registry)
    with _registry_reachable("from_flat_avro", f"subject {subject!r}", config.urls), RegistryClient(config) as client:
        return read(client)


def _subject_versions(registry: Any, subject: str) -> list[Any]:
    """Every version of ``subject``, soft-deleted ones too (they stay on migration chains, as in Confluent's
    clients), as :class:`~avro_registry_sink.schema.follow.RegisteredVersion`."""
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.schema.follow import RegisteredVersion

    def read(client: Any) -> list[RegisteredVersion]:
        live = set(client.get_versions(subject))
        out = []
        for number in client.get_versions(subject, deleted=True):
            got = client.get_version(subject, number, deleted=True)
            out.append(RegisteredVersion(got.version, got.id, got.schema, got.properties, got.rule_set,
                                         deleted=number not in live))
        return out

    if hasattr(registry, "get_versions"):
        return read(registry)
    config = _notebook_registry(registry)
    with _registry_reachable("from_flat_avro", f"subject {subject!r}", config.urls), RegistryClient(config) as client:
        return read(client)


def follow_plan(registry: Any, subject: str, major: int) -> Any:
    """The :class:`~avro_registry_sink.schema.follow.FollowPlan` :func:`from_flat_avro` runs for ``major``:
    the reader version and, per writer schema id, the migration rules between (read on the driver)."""
    from avro_registry_sink.schema.follow import RecordRefused, plan_follow

    try:
        return plan_follow(subject, _subject_versions(registry, subject), major=int(major))
    except RecordRefused as exc:
        raise ConfigError(exc.message, option="major", subject=subject) from None


def from_flat_avro(column: Column | str, *, registry: Any, subject: str, version: int | str = "latest",
                   major: int | None = None) -> Column:
    """Decode Confluent-framed Avro (``column``: binary) into a struct, by the schema id each value carries.

    Every version of ``subject`` is fetched now, on the driver; each value is read with its own writer schema
    and resolved to ``version``'s (the latest by default), so records of older versions come out in the
    newer shape (Avro's rules: defaults for added fields, dropped fields left out). A null (a tombstone) gives a
    null struct; a value whose schema id is not one of the subject's, or whose bytes are not Confluent's
    framing, fails the query naming the id and the subject's ids.

    ``major=N`` (instead of ``version``) reads records of every major version in the shape of major ``N`` (the
    latest live version whose metadata ``major_version`` is ``N``) as a Confluent consumer pinned with
    ``use.latest.with.metadata`` does: the migration rules of the versions between a record's and the reader's
    run on it (JSONata, UPGRADE going up, DOWNGRADE going down), and with no rules between, Avro resolution.
    Unlike confluent-kafka-python, records holding DECIMAL (precise) and bytes values are followed, exactly:
    a value that cannot be given exactly fails the query naming the column, the value and the reason
    (:mod:`avro_registry_sink.schema.follow`).
    """
    from pyspark.sql import functions as F

    col = F.col(column) if isinstance(column, str) else column
    return flat_avro_udf(registry=registry, subject=subject, version=version, major=major)(col)


def flat_avro_udf(*, registry: Any, subject: str, version: int | str = "latest", major: int | None = None) -> Any:
    """The user-defined function behind :func:`from_flat_avro` (same arguments but the column), for SQL:
    ``spark.udf.register("orders_v2", flat_avro_udf(registry=url, subject="shop_orders-value", major=2))`` then
    ``SELECT orders_v2(value).amount FROM kafka_records``. The subject's versions are read now, on the driver."""
    from pyspark.sql import functions as F

    if major is not None:
        if version != "latest":
            raise ConfigError(f"from_flat_avro takes version or major, not both (version={version!r}, "
                              f"major={major!r}).", option="major", subject=subject)
        plan = follow_plan(registry, subject, major)
        spark_type, _ = _spark_type(json.loads(plan.reader_schema))
        plan_key = repr(plan)  # the same registry state gives the same plan: one follower per worker for it

        def follow(value: bytes | None) -> Any:
            from avro_registry_sink.schema.follow import RecordFollower

            if value is None:
                return None
            follower = _FOLLOWERS.get(plan_key)
            if follower is None:
                follower = _FOLLOWERS[plan_key] = RecordFollower(plan)
            return follower.read(bytes(value))

        return F.udf(follow, spark_type, useArrow=False)

    writers_text, reader_text = _subject_schemas(registry, subject, version)
    reader_json = json.loads(reader_text)
    spark_type, _ = _spark_type(reader_json)
    known = ", ".join(map(str, sorted(writers_text)))

    def decode(value: bytes | None) -> Any:
        import fastavro

        if value is None:
            return None
        state = _DECODERS.setdefault((subject, reader_text), {})
        if "reader" not in state:
            state["reader"] = fastavro.parse_schema(json.loads(reader_text))
        data = bytes(value)
        if len(data) < 5 or data[0] != 0:
            raise ValueError(f"Not Confluent's wire format (magic byte 0, a 4-byte schema id): {data[:8].hex()}.")
        schema_id = int.from_bytes(data[1:5], "big")
        writer = state.get(schema_id)
        if writer is None:
            text = writers_text.get(schema_id)
            if text is None:
                raise ValueError(f"Schema id {schema_id} is not a version of subject {subject!r} (its ids: {known}).")
            writer = state[schema_id] = fastavro.parse_schema(json.loads(text))
        return fastavro.schemaless_reader(io.BytesIO(data[5:]), writer, state["reader"])

    return F.udf(decode, spark_type, useArrow=False)


#: Per Python worker: the record followers of ``major=`` reads.
_FOLLOWERS: dict[str, Any] = {}

#: Per Python worker: parsed schemas by (subject, reader text), then by writer schema id.
_DECODERS: dict[tuple[str, str], dict[Any, Any]] = {}
