"""SparkSessions with the settings this project's stages expect (used by the CLI, spark-submit, tests, benches).

Under ``spark-submit`` the session keeps what the submission configured: its ``--master``,
``--deploy-mode`` and every ``--conf`` win over this module's defaults, which only fill in the settings
nobody gave. Outside it, the caller's master is used (the CLI's: ``AVRO_SINK_SPARK_MASTER``, else
``local[*]``).

>>> # spark = local_session()                                  # local[2], UI off, Arrow on
>>> # spark = local_session(master="local[*]", **{"spark.sql.shuffle.partitions": "8"})
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from avro_registry_sink.spark.runtime import class_archive
from avro_registry_sink.spark.runtime.driver_python import driver_python
from avro_registry_sink.spark.runtime.jvm_output import quiet_start, quiet_submitted_jvm, verbose

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_CONF",
    "PROVIDED_ARTIFACTS",
    "SPARK_UI_ENV",
    "STORE_CLASSES",
    "STORE_PACKAGES",
    "apply_hadoop_conf",
    "conf_value",
    "default_driver_memory",
    "hadoop_version",
    "list_on_driver",
    "local_checkpoint_logs",
    "local_session",
    "master_of",
    "memory_bytes",
    "missing_store_classes",
    "physical_memory",
    "spark_ui_conf",
    "spread_file_partitions",
    "store_packages",
    "submitted_conf",
    "trigger_budget",
]

#: Settings every session gets unless ``conf`` (or a spark-submit ``--conf``) says otherwise.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Arrow batches of 64k rows (Spark: 10k) amortise the per-batch cost of the Python stages
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    # Spark 4.3+: a Python worker reads its next input batches in a thread while it parses and encodes this one
    # (older Sparks ignore the key). At 10^6 rows: a canal-json tree to Kafka 1.15x, the topics 1.04-1.14x, less CPU;
    # a CSV tree to files: 0.99x (bench/results.md, "Pipelined Python workers").
    "spark.python.udf.pipelined.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    # Spark masks settings and data-source options whose name or value matches these (in plans, the UI and
    # its logs): its defaults plus the Kafka client's SASL login line and inline PEM private keys.
    "spark.redaction.regex": r"(?i)secret|password|token|access[.]?key|jaas|private key|keystore\.key",
    "spark.sql.redaction.options.regex": r"(?i)url|secret|password|token|jaas|private key|keystore\.key",
}

#: The environment variable that turns Spark's web UI on, on this port (0: a free one); off by default.
SPARK_UI_ENV = "AVRO_SINK_SPARK_UI_PORT"


def spark_ui_conf() -> dict[str, str]:
    """``spark.ui.enabled`` and ``spark.ui.port`` from ``AVRO_SINK_SPARK_UI_PORT`` (none when it is unset: the UI
    stays off, as :data:`DEFAULT_CONF` has it). Spark binds the UI to ``SPARK_LOCAL_IP`` (127.0.0.1 for a local
    master unless set), else every interface; with port 0 Spark picks a free port. The URL is printed on stderr
    once the session runs."""
    value = os.environ.get(SPARK_UI_ENV, "").strip()
    if not value:
        return {}
    if not value.isdigit() or int(value) > 65535:
        raise ValueError(f"{SPARK_UI_ENV}={value!r} is not a port: give 0-65535 (0: a free port), or unset it to "
                         "keep Spark's web UI off.")
    return {"spark.ui.enabled": "true", "spark.ui.port": value}


#: A local session's JVM heap by default: this share of the machine's memory, within the bounds below
#: (``AVRO_SINK_DRIVER_MEMORY``, or ``spark.driver.memory`` passed to :func:`local_session`, overrides it).
#: Spark's own default, 1 GiB, is what made a 5M-row backlog die of a full heap.
HEAP_SHARE = 4
HEAP_BOUNDS = (1 << 30, 16 << 30)

#: Input bytes per micro-batch by default: this fraction of the heap (files: ``maxBytesPerTrigger``; Kafka:
#: ``maxOffsetsPerTrigger`` = that many bytes of ``ASSUMED_MESSAGE_BYTES`` messages), within the bounds below.
#: A batch's rows are parsed, encoded, shuffled and cached at several times their input size.
TRIGGER_SHARE = 8
#: The share for a Kafka source's batch that is written as it is encoded (not cached: no bad-row budget, or
#: the file sink): its messages stream from the consumer through the Python workers in Arrow batches and the
#: shuffle spills, so no part of the heap grows with the batch; a smaller share only adds batches, each with
#: its fixed cost (measured: 10^6 canal-json messages in one batch took 10 s where 786k + 214k took 12.6 s).
TRIGGER_SHARE_STREAMED = 4
TRIGGER_BOUNDS = (32 << 20, 1 << 30)
ASSUMED_MESSAGE_BYTES = 1024

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def conf_value(spark: SparkSession, key: str, default: str) -> str:
    """``spark.conf.get(key, default)``, typed: with a default it is a string (pyspark annotates it ``Optional``)."""
    value = spark.conf.get(key, default)
    if value is None:
        raise ValueError(f"The Spark setting {key} has no value (and not its default {default!r}).")
    return value


def master_of(spark: SparkSession) -> str:
    """The session's master URL (``local[2]``, ``spark://host:7077``, ...): a running SparkContext always has one
    (pyspark annotates it ``Optional``)."""
    master = spark.sparkContext.master
    if master is None:
        raise ValueError("The SparkContext has no master URL (spark.master).")
    return master


def memory_bytes(text: str | int) -> int:
    """Bytes of a JVM/Spark size (``"6g"``, ``"512m"``, ``"1024k"``, ``"2gb"``; a bare number is bytes).

    >>> memory_bytes("6g"), memory_bytes("512m"), memory_bytes(4096)
    (6442450944, 536870912, 4096)
    """
    if isinstance(text, int):
        return text
    found = re.fullmatch(r"(\d+)\s*([kmgt]?)b?", text.strip().lower())
    if found is None:
        raise ValueError(f"Invalid size {text!r}: expected a number with an optional unit k, m, g or t (e.g. 6g).")
    return int(found.group(1)) * _UNITS[found.group(2)]


def physical_memory() -> int:
    """The memory this process may use: the machine's, or the cgroup limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return total


def default_driver_memory() -> str:
    """``spark.driver.memory`` of a local session: ``AVRO_SINK_DRIVER_MEMORY``, else a quarter of the memory
    (1-16 GiB). In local mode the executors are threads of the driver, so this is the heap of everything."""
    configured = os.environ.get("AVRO_SINK_DRIVER_MEMORY")
    if configured:
        memory_bytes(configured)  # a bad value fails here, naming it
        return configured
    low, high = HEAP_BOUNDS
    return f"{min(max(physical_memory() // HEAP_SHARE, low), high) >> 20}m"


def trigger_budget(heap: int, *, streamed: bool = False) -> int:
    """Input bytes per micro-batch for a JVM heap of ``heap`` bytes (see :data:`TRIGGER_SHARE`;
    ``streamed``: :data:`TRIGGER_SHARE_STREAMED`).

    >>> trigger_budget(6 << 30) >> 20, trigger_budget(2 << 30, streamed=True) >> 20
    (768, 512)
    """
    low, high = TRIGGER_BOUNDS
    return min(max(heap // (TRIGGER_SHARE_STREAMED if streamed else TRIGGER_SHARE), low), high)


#: Spark's JVM logging: errors only (``AVRO_SINK_SPARK_LOG4J`` names another log4j2 properties file).
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")

#: Hadoop connector of each object store, at the Hadoop version of the running Spark (``{hadoop}``).
#: GCS's connector is versioned on its own: give it with ``--packages``/``spark.jars.packages``.
STORE_PACKAGES: dict[str, str] = {
    "s3": "org.apache.hadoop:hadoop-aws:{hadoop}",
    "azure": "org.apache.hadoop:hadoop-azure:{hadoop}",
}

#: Artifacts pyspark already ships: never fetched a second time with a package (``spark.jars.excludes``).
PROVIDED_ARTIFACTS = ("org.apache.hadoop:hadoop-client-api", "org.apache.hadoop:hadoop-client-runtime",
                      "org.slf4j:slf4j-api", "org.xerial.snappy:snappy-java", "at.yawk.lz4:lz4-java",
                      "org.lz4:lz4-java", "com.google.code.findbugs:jsr305",
                      "org.scala-lang.modules:scala-parallel-collections_2.13")


def submitted_conf() -> dict[str, str]:
    """The configuration of a ``spark-submit`` launch (its master, ``--conf``s, defaults file); empty otherwise.

    spark-submit starts the JVM first and hands its gateway to Python (``PYSPARK_GATEWAY_PORT``); what it
    was given is then in the JVM's system properties.
    """
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's gateway, starts nothing
    return dict(SparkConf().getAll())


def hadoop_version(spark: SparkSession | None = None) -> str:
    """The Hadoop version of the running Spark (its JVM when there is one, else pyspark's bundled jars)."""
    if spark is not None:
        return str(spark.sparkContext._jvm.org.apache.hadoop.util.VersionInfo.getVersion())  # type: ignore[union-attr]
    import pyspark

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    for jar in sorted(Path(home, "jars").glob("hadoop-client-api-*.jar")):
        match = re.fullmatch(r"hadoop-client-api-(.+)\.jar", jar.name)
        if match:
            return match.group(1)
    raise RuntimeError(f"No hadoop-client-api jar under {home}/jars: cannot tell this Spark's Hadoop version.")


def store_packages(stores: Iterable[str], version: str | None = None) -> list[str]:
    """Maven coordinates of the Hadoop connectors ``stores`` need, pinned to this Spark's Hadoop.

    >>> store_packages(["s3", "file"], "3.5.0")
    ['org.apache.hadoop:hadoop-aws:3.5.0']
    """
    wanted = sorted({STORE_PACKAGES[s] for s in stores if s in STORE_PACKAGES})
    if not wanted:
        return []
    version = version or hadoop_version()
    return [p.format(hadoop=version) for p in wanted]


#: The Hadoop FileSystem class each store needs on the session's classpath.
STORE_CLASSES: dict[str, str] = {
    "s3": "org.apache.hadoop.fs.s3a.S3AFileSystem",
    "azure": "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem",
    "gcs": "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem",
}


def has_class(spark: SparkSession, name: str) -> bool:
    """Whether the JVM class ``name`` is on the session's classpath (jars added with ``ADD JAR`` included)."""
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        assert jvm is not None
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(name, False, loader)
        return True
    except Exception:  # noqa: BLE001 - py4j's ClassNotFoundException (or no JVM: Spark Connect)
        return False


def missing_store_classes(spark: SparkSession, stores: Iterable[str]) -> list[str]:
    """The stores whose Hadoop connector is not on the session's classpath (e.g. spark-submit without --packages)."""
    return [store for store in sorted(set(stores)) if store in STORE_CLASSES
            and not has_class(spark, STORE_CLASSES[store])]


def apply_hadoop_conf(spark: SparkSession, conf: dict[str, str]) -> None:
    """Set Hadoop settings on the running session (file sources and writers copy them, executors too).

    Set here rather than as ``spark.hadoop.*`` properties so that credentials never sit in Spark's
    configuration (its UI, event logs).
    """
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in conf.items():
        hadoop.set(key, value)


#: Spark's checkpoint file manager that writes through Hadoop's ``FileSystem`` API (Spark 4, then Spark 3).
FILE_SYSTEM_CHECKPOINTS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)
_CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"


@contextlib.contextmanager
def local_checkpoint_logs(spark: SparkSession, local: bool = True) -> Iterator[Callable[[Any], None]]:
    """While starting a query whose checkpoint is on this machine's filesystem: Spark's offset and commit logs
    written through Hadoop's ``FileSystem`` API instead of ``FileContext``, unless the session chose a manager.

    Each micro-batch writes one file to each log (write a temporary file, rename it). Without Hadoop's native
    library, ``FileContext``'s rename runs ``readlink`` in a new process for each of its paths and checksum
    files: 40 ms a file here, where ``FileSystem`` takes 10 ms (one ``chmod`` process); two files a batch, so
    a continuously running query's batches start 60 ms apart sooner. A local rename is atomic (``rename(2)``)
    either way. The setting applies only to the query started inside: the context gives a function to call
    with the started query, which opens both logs before the session's setting is put back. ``local``: whether
    the checkpoint is on this machine's filesystem (else nothing changes).
    """
    if not local or spark.conf.get(_CHECKPOINT_MANAGER_KEY, None) is not None:  # elsewhere, or the session's choice
        yield lambda query: None
        return
    name = next((n for n in FILE_SYSTEM_CHECKPOINTS if _jvm_class_exists(spark, n)), None)
    if name is None:
        yield lambda query: None
        return

    def open_logs(query: Any) -> None:
        with contextlib.suppress(Exception):  # Spark's internals moved: the logs then open with its default
            execution = query._jsq.streamingQuery()
            execution.offsetLog()
            execution.commitLog()

    spark.conf.set(_CHECKPOINT_MANAGER_KEY, name)
    try:
        yield open_logs
    finally:
        spark.conf.unset(_CHECKPOINT_MANAGER_KEY)


def _jvm_class_exists(spark: SparkSession, name: str) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(name)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - py4j's error for a missing class
        return False
    return True


#: Read-side file partitions per core (``spark.sql.files.minPartitionNum`` = this x the default parallelism).
FILE_PARTITIONS_PER_CORE = 2


def spread_file_partitions(spark: SparkSession) -> None:
    """Let Spark's file scans split a batch's files over every core, unless the session sets it itself.

    Data files are read whole (a CSV or JSON file is parsed where it is read), so Spark's packing of files
    into read partitions decides how evenly the cores work. Its default aims at one partition per core and
    puts a large file and a small one together; aiming at two per core gives the scheduler room to even
    them out, without moving file contents through a shuffle (which a ``repartition`` of the read would).
    """
    key = "spark.sql.files.minPartitionNum"
    if spark.conf.get(key, None) is None:
        spark.conf.set(key, str(spark.sparkContext.defaultParallelism * FILE_PARTITIONS_PER_CORE))


#: Spark lists up to this many directories of a file source on the driver before it runs a listing job.
LOCAL_LISTING_THRESHOLD = 4096


def list_on_driver(spark: SparkSession) -> None:
    """List a local file source's directories on the driver, unless the session sets it itself.

    Above 32 directories (Spark's default) Spark lists a file source with a Spark job; for a local tree
    that job costs more than it saves (a storage tree of 100 tables started 1.3 s later with it).
    Only for sources on this machine's filesystem: an object store keeps Spark's parallel listing.
    """
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    if spark.conf.get(key, None) is None:
        spark.conf.set(key, str(LOCAL_LISTING_THRESHOLD))


def local_session(app_name: str = "avro-registry-sink", master: str | None = "local[2]", **conf: Any) -> SparkSession:
    """Build (or reuse) a SparkSession: UI off, 2 shuffle partitions, Arrow enabled.

    ``conf`` holds extra Spark settings by their dotted names (pass them as ``**{"spark.x": "y"}``); they
    override :data:`DEFAULT_CONF`. Under spark-submit (:func:`submitted_conf`) the submission's master
    and settings win over both, and ``master`` is only used when nothing configured one. Locally, Python
    workers run this interpreter (``PYSPARK_PYTHON`` is set to ``sys.executable`` when unset), so
    executors see the same virtual environment as the driver. An already running session is returned
    as it is (Spark applies static settings only once).
    """
    submitted = submitted_conf()
    chosen = submitted.get("spark.master") or master or "local[*]"
    if not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if chosen.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # one machine: no "resolves to a loopback" warning
    from pyspark.sql import SparkSession

    log4j = os.environ.get("AVRO_SINK_SPARK_LOG4J") or str(LOG4J_CONFIG)
    # A full heap ends the JVM at once (exit status 3) instead of leaving it half working; the job reports it.
    driver_java = f"-Dlog4j2.configurationFile=file:{log4j} -XX:+ExitOnOutOfMemoryError"
    archive = None if submitted else class_archive.driver_option()  # spark-submit's driver is already running
    java_options = {"spark.driver.extraJavaOptions": f"{driver_java} {archive}" if archive else driver_java,
                    "spark.driver.memory": default_driver_memory()}
    builder = SparkSession.builder
    if "spark.app.name" not in submitted:
        builder = builder.appName(app_name)
    if "spark.master" not in submitted:
        builder = builder.master(chosen)
    settings = {**DEFAULT_CONF, **java_options, **spark_ui_conf(), **{k: str(v) for k, v in conf.items()}}
    if submitted.get("spark.jars.packages") and settings.get("spark.jars.packages"):
        settings.pop("spark.jars.packages")  # resolved by spark-submit already; see the job's class check
    for key, value in settings.items():
        if key not in submitted:
            builder = builder.config(key, value)

    if submitted:
        quiet_submitted_jvm()
    with quiet_start():
        spark = builder.getOrCreate()
    if not verbose():
        spark.sparkContext.setLogLevel("ERROR")
    if spark.conf.get("spark.ui.enabled", "true") == "true" and SPARK_UI_ENV in os.environ:
        url = spark.sparkContext.uiWebUrl
        print(f"Spark UI: {url}" if sys.stderr.isatty() else
              json.dumps({"ts": round(time.time(), 3), "event": "spark-ui", "url": url}), file=sys.stderr, flush=True)
    if master_of(spark).startswith("local") and spark.sparkContext.pythonExec == sys.executable:
        # local workers run on this machine with the driver's interpreter: start them with its compiled pyspark
        # rather than Spark's zip (see spark.runtime.driver_python)
        spark.sparkContext.pythonExec = driver_python()
    return spark
