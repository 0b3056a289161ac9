"""Fixtures of the downstream suite: every server it needs, started once per session by the repo's scripts.

Kafka (``scripts/kafka.sh``), Apicurio (``scripts/apicurio.sh``), PostgreSQL (``scripts/postgres.sh``), MariaDB
(``scripts/mariadb.sh``) and the Kafka Connect worker (``scripts/connect.sh``, after Kafka) start in parallel the
first time a test asks for them and stop when the session ends (``tests/support/servers.py``); each
``*_URL``/``KAFKA_BOOTSTRAP`` variable reuses a server you run instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from tests.downstream.sinkdb import Database
from tests.support.servers import (
    ensure_apicurio,
    ensure_connect,
    ensure_kafka,
    ensure_mariadb,
    ensure_postgres,
    start_apicurio_in_background,
    start_in_background,
)


@dataclass(frozen=True)
class Chain:
    """The running servers: broker, registry (Confluent-compatible URL), Connect worker, databases by kind."""

    bootstrap: str
    apicurio: str
    connect: str
    databases: dict[str, Database]


@pytest.fixture(scope="session")
def chain() -> Chain:
    start_apicurio_in_background()
    for script, url in (("postgres.sh", "POSTGRES_URL"), ("mariadb.sh", "MARIADB_URL")):
        if not os.environ.get(url, "").strip():
            start_in_background(script)
    bootstrap = ensure_kafka()
    connect = ensure_connect(bootstrap)
    return Chain(
        bootstrap=bootstrap, apicurio=ensure_apicurio(), connect=connect,
        databases={"postgres": Database("postgres", ensure_postgres()),
                   "mariadb": Database("mariadb", ensure_mariadb())},
    )
