"""A local SparkSession with the settings this project's stages expect (used by the CLI, tests and benches).

>>> # spark = local_session()                                  # local[2], UI off, Arrow on
>>> # spark = local_session(master="local[*]", **{"spark.sql.shuffle.partitions": "8"})
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_CONF", "local_session"]

#: Settings every session gets unless ``conf`` overrides them.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Arrow batches of 64k rows (Spark: 10k) amortise the per-batch cost of the Python stages
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    "spark.sql.session.timeZone": "UTC",
    # Spark masks settings and data-source options whose name or value matches these (in plans, the UI and
    # its logs): its defaults plus the Kafka client's SASL login line and inline PEM private keys.
    "spark.redaction.regex": r"(?i)secret|password|token|access[.]?key|jaas|private key|keystore\.key",
    "spark.sql.redaction.options.regex": r"(?i)url|secret|password|token|jaas|private key|keystore\.key",
}

#: Spark's JVM logging: errors only (``AVRO_SINK_SPARK_LOG4J`` names another log4j2 properties file).
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def local_session(app_name: str = "avro-registry-sink", master: str = "local[2]", **conf: Any) -> SparkSession:
    """Build (or reuse) a local SparkSession: UI off, 2 shuffle partitions, Arrow enabled.

    ``conf`` holds extra Spark settings by their dotted names (pass them as ``**{"spark.x": "y"}``); they
    override :data:`DEFAULT_CONF`. Python workers run this interpreter (``PYSPARK_PYTHON`` is set to
    ``sys.executable`` when unset), so executors see the same virtual environment as the driver.
    An already running session is returned as it is (Spark applies static settings only once).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # one machine: no "resolves to a loopback" warning
    from pyspark.sql import SparkSession

    log4j = os.environ.get("AVRO_SINK_SPARK_LOG4J") or str(LOG4J_CONFIG)
    java_options = {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}"}
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULT_CONF, **java_options, **{k: str(v) for k, v in conf.items()}}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
