"""The downstream side: databases the JDBC sink writes to, and connectors on the Kafka Connect worker.

* :class:`Database` - PostgreSQL or MariaDB as started by ``scripts/postgres.sh`` / ``scripts/mariadb.sh``:
  its JDBC settings for the connector, and its tables read back as Python values (psycopg, PyMySQL).
* :func:`connector_config` - the JDBC sink connector's configuration (the one the README documents).
* :func:`add_connector` / :func:`wait_applied` - create a connector through the worker's REST API, then wait
  until its consumer group has committed every record of its topics (a failed task fails the wait with its
  trace).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

JDBC_SINK = "io.debezium.connector.jdbc.JdbcSinkConnector"
AVRO_CONVERTER = "io.apicurio.registry.utils.converter.AvroConverter"


@dataclass(frozen=True)
class Database:
    """A downstream database: ``kind`` is ``postgres`` or ``mariadb``; ``url`` as its start script prints it."""

    kind: str
    url: str

    @property
    def _parts(self):
        return urlsplit(self.url)

    def jdbc(self) -> dict[str, str]:
        """``connection.*`` settings of the JDBC sink for this database."""
        p = self._parts
        # MariaDB through MySQL's driver (the plugin bundles it; the sink then uses its MySQL dialect).
        # Not strict: the sink adds a NOT NULL string column without its DEFAULT (see added_column_value in the
        # test), so a record of the table's older version, without that column, must get MariaDB's implicit ''.
        url = (f"jdbc:postgresql://{p.hostname}:{p.port}{p.path}" if self.kind == "postgres" else
               f"jdbc:mysql://{p.hostname}:{p.port}{p.path}"
               "?sessionVariables=sql_mode=NO_ENGINE_SUBSTITUTION&jdbcCompliantTruncation=false")
        return {"connection.url": url,
                "connection.username": p.username or "", "connection.password": p.password or ""}

    def _connect(self):
        if self.kind == "postgres":
            import psycopg
            from psycopg.rows import dict_row

            return psycopg.connect(self.url, autocommit=True, row_factory=dict_row)
        import pymysql

        p = self._parts
        return pymysql.connect(host=p.hostname, port=p.port, user=p.username, password=p.password,
                               database=p.path.lstrip("/"), autocommit=True, charset="utf8mb4",
                               cursorclass=pymysql.cursors.DictCursor)

    def quote(self, name: str) -> str:
        return f'"{name}"' if self.kind == "postgres" else f"`{name}`"

    def rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of ``table`` as ``{column: value}`` (bytes for binary columns, Decimal for numeric)."""
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {self.quote(table)}")
            return [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()}
                    for row in cur.fetchall()]

    def column_types(self, table: str) -> dict[str, str]:
        """``{column: SQL type}`` of ``table`` as the database reports it (information_schema)."""
        query = ("SELECT column_name AS name, data_type AS type FROM information_schema.columns "
                 "WHERE table_name = %s" + (" AND table_schema = DATABASE()" if self.kind == "mariadb" else ""))
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute(query, (table,))
            return {row["name"]: row["type"] for row in cur.fetchall()}

    def execute(self, statement: str) -> None:
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute(statement)

    def count(self, table: str) -> int:
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) AS n FROM {self.quote(table)}")
            return int(cur.fetchone()["n"])


def connector_config(topics: list[str], database: Database, apicurio_url: str, **extra: str) -> dict[str, str]:
    """The JDBC sink's settings: upsert by the record key, tombstones as deletes, tables created and altered
    from the record schemas, one table per topic; Confluent-framed Avro read with Apicurio's converter.

    ``apicurio_url`` is the registry's Confluent-compatible base URL (``.../apis/ccompat/v7``): the converter
    itself reads schemas by id through Apicurio's own API (``/apis/registry/v2``).
    """
    registry_v2 = apicurio_url.split("/apis/")[0] + "/apis/registry/v2"
    converter = {"": AVRO_CONVERTER, ".apicurio.registry.url": registry_v2,
                 ".apicurio.registry.as-confluent": "true", ".apicurio.registry.use-id": "contentId"}
    return {
        "connector.class": JDBC_SINK, "tasks.max": "1", "topics": ",".join(topics),
        **database.jdbc(),
        "insert.mode": "upsert", "primary.key.mode": "record_key", "delete.enabled": "true",
        "schema.evolution": "basic", "collection.name.format": "${topic}", "quote.identifiers": "true",
        **{f"key.converter{k}": v for k, v in converter.items()},
        **{f"value.converter{k}": v for k, v in converter.items()},
        **extra,
    }


def add_connector(connect_url: str, name: str, config: dict[str, str]) -> None:
    response = httpx.post(f"{connect_url}/connectors", json={"name": name, "config": config}, timeout=60)
    assert response.status_code in (200, 201), response.text


def delete_connector(connect_url: str, name: str) -> None:
    httpx.delete(f"{connect_url}/connectors/{name}", timeout=60)


def _failure(connect_url: str, name: str) -> str | None:
    response = httpx.get(f"{connect_url}/connectors/{name}/status", timeout=30)
    if response.status_code != 200:
        return None
    status = response.json()
    for part in [status.get("connector", {}), *status.get("tasks", [])]:
        if part.get("state") == "FAILED":
            return part.get("trace", "FAILED without a trace")
    return None


def wait_applied(connect_url: str, name: str, bootstrap: str, topics: list[str], timeout: float = 180.0) -> None:
    """Wait until connector ``name`` committed the end offset of every partition of ``topics``.

    A sink task commits an offset only after the records before it were written (and committed) to the
    database, so then the database holds everything. Fails at once with the trace when the connector or its
    task failed.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"connect-{name}",
                         "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(timeout=30)
        partitions = [TopicPartition(t, p) for t in topics for p in metadata.topics[t].partitions]
        ends = {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in partitions}
        deadline = time.monotonic() + timeout
        while True:
            trace = _failure(connect_url, name)
            assert trace is None, f"connector {name} failed:\n{trace}"
            committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(partitions, timeout=30)}
            behind = {tp: (committed[tp], end) for tp, end in ends.items() if end > 0 and committed[tp] < end}
            if not behind:
                return
            assert time.monotonic() < deadline, f"connector {name} did not catch up in {timeout}s: {behind}"
            time.sleep(1.0)
    finally:
        consumer.close()
