"""Schema manager per-batch cost versus tables per batch, with no schema change.

Registers N tables once (through the embedded registry over real HTTP), then times steady-state
``prepare_batch`` calls and counts registry HTTP calls made by them (must be zero).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from avro_registry_sink.config import RegistryConfig
from avro_registry_sink.manager import SchemaManager
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.routing import TopicRouter
from avro_registry_sink.table import ColumnDef, MySQLType as T, TableDef


def reference_table(schema: str, name: str) -> TableDef:
    """The 12-column reference CDC table of the benchmark."""
    return TableDef(
        schema_name=schema,
        table=name,
        primary_key=("id",),
        columns=(
            ColumnDef(name="id", type=T.BIGINT, nullable=False),
            ColumnDef(name="qty", type=T.INT, nullable=False),
            ColumnDef(name="customer_id", type=T.INT, nullable=False),
            ColumnDef(name="status", type=T.TINYINT, nullable=False),
            ColumnDef(name="counter", type=T.BIGINT, unsigned=True, nullable=False),
            ColumnDef(name="amount", type=T.DECIMAL, precision=20, scale=4, nullable=False),
            ColumnDef(name="name", type=T.VARCHAR, length=64, nullable=False),
            ColumnDef(name="email", type=T.VARCHAR, length=64, nullable=False),
            ColumnDef(name="created_at", type=T.DATETIME, nullable=False),
            ColumnDef(name="note", type=T.TEXT),
            ColumnDef(name="score", type=T.DOUBLE, nullable=False),
            ColumnDef(name="region", type=T.INT, nullable=False),
        ),
    )


@dataclass
class ManagerCost:
    tables: int
    first_batch_s: float
    steady_batch_s: float
    registry_http_calls_steady: int
    registrations: int


def measure(table_counts=(1, 10, 100, 1000), repeats: int = 20) -> list[ManagerCost]:
    results = []
    with EmbeddedRegistry() as server:
        with RegistryClient(RegistryConfig(urls=(server.url,))) as client:
            for n in table_counts:
                tables = [reference_table(f"db{n}", f"t{i}") for i in range(n)]
                manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"))
                start = time.perf_counter()
                manager.prepare_batch(tables)
                first = time.perf_counter() - start
                http_before = client.cache_info().http_calls
                start = time.perf_counter()
                for _ in range(repeats):
                    manager.prepare_batch(tables)
                steady = (time.perf_counter() - start) / repeats
                results.append(
                    ManagerCost(
                        tables=n,
                        first_batch_s=first,
                        steady_batch_s=steady,
                        registry_http_calls_steady=client.cache_info().http_calls - http_before,
                        registrations=manager.stats.registrations,
                    )
                )
    return results


if __name__ == "__main__":  # pragma: no cover
    for r in measure():
        print(r)
