"""DML tests in a downstream database (TiCDC's "DML Tests"), through a real Kafka Connect JDBC sink.

The product's job reads the scenario (``scenario.py``: every SQL type of the type map, a composite primary key,
a NOT NULL unique key as handle key, updates that change the handle key, deletes, an ADD COLUMN mid-stream)
from a TiCDC storage-sink directory or from a canal-json Kafka topic, and writes flat Avro into Kafka,
registering its schemas in a real Apicurio registry through its Confluent API. A Kafka Connect worker with
Apicurio's Avro converter and Debezium's JDBC sink upserts the records by key into PostgreSQL and MariaDB,
applies tombstones as deletes and adds the new column. Each downstream table must then equal the source's final
state, value by value, after the documented mapping of each SQL type (``DOWNSTREAM``, the README's table).

Both option sets run: TiCDC's defaults, and ``avro-decimal-handling-mode=string`` +
``avro-bigint-unsigned-handling-mode=string`` + ``enable-tidb-extension=true`` (then the three ``_tidb_*``
columns arrive too, holding the op and commit ts of each row's last change).
Marker ``downstream`` (plus ``kafka`` and ``spark``); the servers come from ``conftest.py``.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from avro_registry_sink.formats.csv import CsvOptions
from avro_registry_sink.settings.config import BigintUnsignedMode, DecimalMode, EncodingOptions, parse_sink_uri
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from avro_registry_sink.table import ColumnDef
from avro_registry_sink.table import MySQLType as T
from tests.downstream import scenario
from tests.downstream.sinkdb import add_connector, connector_config, delete_connector, wait_applied

pytestmark = [pytest.mark.downstream, pytest.mark.kafka, pytest.mark.spark,
              pytest.mark.filterwarnings("ignore::FutureWarning")]

OPTION_SETS = {
    "default": "",
    "string-ext": "&avro-decimal-handling-mode=string&avro-bigint-unsigned-handling-mode=string"
                  "&enable-tidb-extension=true",
}
EXTENSION = ("_tidb_op", "_tidb_commit_ts", "_tidb_commit_physical_time")


# --------------------------------------------------------------------------------------------------
# What a database holds for each SQL type (the README's "Loading a database" table)


def float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _same(col: ColumnDef, value: Any, options: EncodingOptions) -> Any:
    return value


def _float(col: ColumnDef, value: Any, options: EncodingOptions) -> Any:
    return float32(value)  # Avro float: the database's 4-byte REAL/FLOAT


def _bigint(col: ColumnDef, value: Any, options: EncodingOptions) -> Any:
    if not col.unsigned:
        return value
    if options.bigint_unsigned_mode is BigintUnsignedMode.STRING:
        return str(value)  # text
    return value - (1 << 64) if value >= 1 << 63 else value  # TiCDC's long mode wraps: max -> -1


def _decimal(col: ColumnDef, value: Any, options: EncodingOptions) -> Any:
    return value if options.decimal_mode is DecimalMode.STRING else Decimal(value)  # text, or NUMERIC(p,s)


def _bit(col: ColumnDef, value: Any, options: EncodingOptions) -> Any:
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")  # big-endian bytes, shortest


#: SQL type -> the value a database column holds (Python value as psycopg/PyMySQL return it). Integers and
#: YEAR are integers, text types and ENUM, SET, JSON, temporal types and VECTOR are their TiDB text, binary
#: types are their bytes.
DOWNSTREAM: dict[T, Callable[[ColumnDef, Any, EncodingOptions], Any]] = {
    **{t: _same for t in (T.TINYINT, T.SMALLINT, T.MEDIUMINT, T.INT, T.YEAR)},
    T.BIGINT: _bigint, T.FLOAT: _float, T.DOUBLE: _same, T.DECIMAL: _decimal, T.BIT: _bit,
    **{t: _same for t in (T.CHAR, T.VARCHAR, T.TINYTEXT, T.TEXT, T.MEDIUMTEXT, T.LONGTEXT)},
    **{t: _same for t in (T.BINARY, T.VARBINARY, T.TINYBLOB, T.BLOB, T.MEDIUMBLOB, T.LONGBLOB)},
    **{t: _same for t in (T.ENUM, T.SET, T.JSON, T.DATE, T.DATETIME, T.TIMESTAMP, T.TIME, T.VECTOR)},
}


TEXT_TYPES = frozenset({T.CHAR, T.VARCHAR, T.TINYTEXT, T.TEXT, T.MEDIUMTEXT, T.LONGTEXT})


def added_column_value(database: str, col: ColumnDef, default: Any) -> Any:
    """What a row written before an ADD COLUMN holds in that column downstream.

    PostgreSQL: the column's default (the sink's ALTER TABLE carries it). MariaDB: the sink's MySQL dialect
    makes string columns LONGTEXT, which it adds without a DEFAULT clause, so MariaDB fills NOT NULL text
    with '' (other types get their default).
    """
    if database == "mariadb" and col.type in TEXT_TYPES:
        return ""
    return default


def expected_rows(table: str, options: EncodingOptions, database: str) -> dict[tuple, dict[str, Any]]:
    """The downstream rows of ``table``, by key: the source's final state through ``DOWNSTREAM``."""
    definition = next(t for t in scenario.final_definitions(STEPS) if f"{t.schema_name}.{t.table}" == table)
    out = {}
    for final in scenario.final_state(STEPS)[table].values():
        row = {c.name: None if final.row[c.name] is None else DOWNSTREAM[c.type](c, final.row[c.name], options)
               for c in definition.columns}
        row |= {c.name: added_column_value(database, c, row[c.name])
                for c in definition.columns if c.name in final.defaulted}
        if options.enable_tidb_extension:
            row |= {"_tidb_op": final.op.tidb_op, "_tidb_commit_ts": final.commit_ts,
                    "_tidb_commit_physical_time": final.commit_ts >> 18}
        out[tuple(row[k] for k in definition.handle_key_names())] = row
    return out


def actual_rows(rows: list[dict[str, Any]], table: str) -> dict[tuple, dict[str, Any]]:
    definition = next(t for t in scenario.final_definitions(STEPS) if f"{t.schema_name}.{t.table}" == table)
    floats = {c.name for c in definition.columns if c.type is T.FLOAT}
    out = {}
    for row in rows:
        row = {k: float32(v) if k in floats and v is not None else v for k, v in row.items()}
        out[tuple(row[k] for k in definition.handle_key_names())] = row
    return out


def describe_difference(expected: dict[tuple, dict], actual: dict[tuple, dict]) -> str:
    lines = [f"missing row {k}" for k in expected.keys() - actual.keys()]
    lines += [f"row {k} should not be there (stale or deleted): {actual[k]}" for k in actual.keys() - expected.keys()]
    for key in expected.keys() & actual.keys():
        want, got = expected[key], actual[key]
        lines += [f"row {key} column {c}: expected {want.get(c)!r}, got {got.get(c)!r}"
                  for c in sorted(want.keys() | got.keys()) if want.get(c, "<no column>") != got.get(c, "<no column>")]
    return "\n".join(lines)


def mariadb_table(name: str, table, options: EncodingOptions) -> str:
    """``CREATE TABLE`` for MariaDB of a table whose handle key has a string column, as the sink would create it
    but with VARCHAR(255) key columns.

    Debezium's JDBC sink (3.5, MySQL dialect) types a string key column as TEXT when the first record of a table
    is not a tombstone, and MariaDB refuses TEXT in a primary key: such tables are created before the connector
    starts (the sink still adds the columns of later ADD COLUMNs itself).
    """
    def sql_type(col: ColumnDef) -> str:
        if col.name in table.handle_key_names() and col.type in TEXT_TYPES:
            return "VARCHAR(255)"
        if col.type is T.DECIMAL and options.decimal_mode is DecimalMode.PRECISE:
            return f"DECIMAL({col.precision},{col.scale})"
        if (col.type is T.INT and col.unsigned) or (col.type is T.BIGINT and not (
                col.unsigned and options.bigint_unsigned_mode is BigintUnsignedMode.STRING)):
            return "BIGINT"
        if col.type in (T.TINYINT, T.SMALLINT, T.MEDIUMINT, T.INT, T.YEAR):
            return "INT"
        return {T.FLOAT: "FLOAT", T.DOUBLE: "DOUBLE"}.get(col.type, "LONGBLOB" if col.binary or col.type is T.BIT
                                                          else "LONGTEXT")

    columns = [f"`{c.name}` {sql_type(c)}{'' if c.nullable else ' NOT NULL'}" for c in table.columns]
    if options.enable_tidb_extension:
        columns += ["`_tidb_op` LONGTEXT NULL", "`_tidb_commit_ts` BIGINT NULL", "`_tidb_commit_physical_time` BIGINT NULL"]
    key = ", ".join(f"`{k}`" for k in table.handle_key_names())
    return f"CREATE TABLE `{name}` ({', '.join(columns)}, PRIMARY KEY ({key}))"


# --------------------------------------------------------------------------------------------------
# Running the chain

STEPS = scenario.steps()
TABLES = [f"{t.schema_name}.{t.table}" for t in scenario.TABLES]


@dataclass(frozen=True)
class Loaded:
    """One job run into Kafka, loaded into every database by its own connector: topics by source table."""

    prefix: str
    options: EncodingOptions
    topics: dict[str, str]


def _run_source(spark, kind: str, root, chain, sink_uri: str, prefix: str, checkpoint) -> None:
    tables = (scenario.ALL_TYPES, scenario.UNIQUE_KEY)  # ENUM/SET members and the unique key
    if kind == "storage":
        scenario.write_storage_tree(root, STEPS)
        source = parse_source(str(root))
        csv = CsvOptions(include_commit_ts=True, output_old_value=True)
    else:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = f"{prefix}_canal"
        admin = AdminClient({"bootstrap.servers": chain.bootstrap})
        for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": chain.bootstrap, "enable.idempotence": True})
        for message in scenario.canal_json_messages(STEPS):
            producer.produce(topic, value=message.encode())
        assert producer.flush(30) == 0
        source = parse_source(f"canal-json+kafka://{chain.bootstrap}/{topic}")
        csv = None
    result = run_job(spark, JobOptions(source=source, checkpoint=checkpoint, sink=parse_sink_uri(sink_uri),
                                       topic_rule=prefix + "_{schema}_{table}", csv_options=csv, tables=tables))
    assert result.totals.rows > 0 and not result.bad_input, result.bad_input


@pytest.fixture(scope="module")
def loaded(chain, spark, tmp_path_factory) -> Callable[[str, str], Loaded]:
    """``loaded(source, option_set)``: the scenario through the job and Connect into every database, once."""
    runs: dict[tuple[str, str], Loaded] = {}

    def load(source: str, option_set: str) -> Loaded:
        if (source, option_set) in runs:
            return runs[(source, option_set)]
        prefix = f"ds{uuid.uuid4().hex[:6]}"
        sink_uri = (f"kafka://{chain.bootstrap}/?protocol=avro&partition-num=3&schema-registry={chain.apicurio}"
                    + OPTION_SETS[option_set])
        tmp = tmp_path_factory.mktemp(f"{source}-{option_set}")
        _run_source(spark, source, tmp / "in", chain, sink_uri, prefix, tmp / "checkpoint")
        topics = {t: f"{prefix}_{t.replace('.', '_')}" for t in TABLES}
        options = parse_sink_uri(sink_uri).encoding
        for table in (scenario.COMPOSITE, scenario.UNIQUE_KEY):
            topic = topics[f"{table.schema_name}.{table.table}"]
            chain.databases["mariadb"].execute(mariadb_table(topic, table, options))
        # One connector at a time: Debezium's JDBC sink (3.5) keeps its column types as singletons bound to the
        # dialect of the connector that started last, so a PostgreSQL and a MariaDB connector running together
        # in one worker can create tables with the other database's type names.
        for kind, database in chain.databases.items():
            name = f"{prefix}-{kind}"
            add_connector(chain.connect, name, connector_config(list(topics.values()), database, chain.apicurio))
            try:
                wait_applied(chain.connect, name, chain.bootstrap, list(topics.values()))
            finally:
                delete_connector(chain.connect, name)
        runs[(source, option_set)] = Loaded(prefix, options, topics)
        return runs[(source, option_set)]

    return load


@pytest.mark.parametrize("database", ["postgres", "mariadb"])
@pytest.mark.parametrize("option_set", list(OPTION_SETS))
@pytest.mark.parametrize("source", ["storage", "canal"])
def test_downstream_tables_equal_the_source(loaded, chain, source, option_set, database):
    run = loaded(source, option_set)
    db = chain.databases[database]
    for table, topic in run.topics.items():
        expected = expected_rows(table, run.options, database)
        actual = actual_rows(db.rows(topic), table)
        assert actual == expected, f"{database} table {topic} ({table}):\n" + describe_difference(expected, actual)


@pytest.mark.parametrize("database", ["postgres", "mariadb"])
def test_key_changes_deletes_and_added_column(loaded, chain, database):
    """The cases by name (the full comparison above covers them too): no stale row after an UPDATE that
    changed the handle key, no deleted row, the added column altered in with the default for old rows."""
    run = loaded("storage", "default")
    db = chain.databases[database]
    composite = {(r["tenant"], r["code"]): r for r in db.rows(run.topics["dml.composite"])}
    assert (1, "A-2") not in composite and composite[(1, "A-9")]["note"] == "touched"  # key change, then update
    assert (2, "A-1") not in composite  # deleted
    old_rows = [composite[(1, "A-1")], composite[(2, "B-7")]]  # written before the ADD COLUMNs, never again
    assert [r["priority"] for r in old_rows] == [5, 5]
    assert [r["note"] for r in old_rows] == (["none", "none"] if database == "postgres" else ["", ""])
    assert {"note", "priority"} <= db.column_types(run.topics["dml.composite"]).keys()
    emails = {r["email"] for r in db.rows(run.topics["dml.unique_key"])}
    assert emails == {"ana@new.example.com", "cy@example.com"}  # ana's old email gone, bo deleted
    ids = {r["id"] for r in db.rows(run.topics["dml.all_types"])}
    assert ids == {1, 2, 3, 4}  # 5 deleted
