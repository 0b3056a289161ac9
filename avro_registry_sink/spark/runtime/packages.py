"""The Maven packages the job adds to Spark (the Kafka connector, spark-avro), and where the product keeps what
it fetches and builds.

Packages come from Maven Central through Ivy; the cache is ``AVRO_SINK_IVY_DIR``, else ``ivy/`` in the product's
cache directory (:func:`~avro_registry_sink.cache_dir.cache_root`: ``AVRO_SINK_CACHE_DIR``, else
``~/.cache/avro-registry-sink``).
"""

from __future__ import annotations

import os

from avro_registry_sink.cache_dir import cache_root

__all__ = ["NEWEST_PUBLISHED_KAFKA_CONNECTOR", "avro_package", "ivy_dir", "kafka_package"]

#: The newest ``spark-sql-kafka-0-10`` on Maven Central when this was written; used when the running
#: Spark's own version is not published (a pre-release build). Override with AVRO_SINK_SPARK_KAFKA_VERSION.
NEWEST_PUBLISHED_KAFKA_CONNECTOR = "4.2.0"


def kafka_package(spark_version: str | None = None) -> str:
    """Maven coordinates of Spark's Kafka connector for this Spark (see ``NEWEST_PUBLISHED_KAFKA_CONNECTOR``)."""
    version = os.environ.get("AVRO_SINK_SPARK_KAFKA_VERSION")
    if not version:
        if spark_version is None:
            import pyspark

            spark_version = pyspark.__version__
        numbers = tuple(int(p) for p in spark_version.split(".")[:2] if p.isdigit())
        newest = tuple(int(p) for p in NEWEST_PUBLISHED_KAFKA_CONNECTOR.split(".")[:2])
        version = NEWEST_PUBLISHED_KAFKA_CONNECTOR if numbers > newest else spark_version.split("+")[0]
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"


def ivy_dir() -> str:
    """Ivy's directory for the packages this product adds to Spark."""
    if os.environ.get("AVRO_SINK_IVY_DIR"):
        return os.environ["AVRO_SINK_IVY_DIR"]
    return str(cache_root() / "ivy")


def avro_package(spark_version: str | None = None) -> str:
    """``spark-avro``'s Maven coordinate for the running Spark (the Kafka connector's version rule)."""
    return kafka_package(spark_version).replace("spark-sql-kafka-0-10", "spark-avro")
