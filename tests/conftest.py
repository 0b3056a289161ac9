"""Fixtures shared by every suite: one SparkSession for the whole test session (local[2], UI off, 2 shuffle
partitions, Arrow on), created only when a test asks for it."""

from __future__ import annotations

import warnings
from typing import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The session SparkSession (built with ``local_session``); stopped at the end of the run."""
    from avro_registry_sink.spark.session import local_session

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark on pandas 3
        session = local_session(master="local[2]", **{"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()
