"""Running spark-submit from this environment: its command, environment and arguments, and whether Spark's
Python workers can start here (used by the ``spark-submit`` and ``run`` commands; the application file that
spark-submit runs is :mod:`avro_registry_sink.spark.runtime.submit`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

__all__ = ["spark_submit_args", "spark_submit_env", "worker_python_problem"]


def spark_submit_args(args: list[str]) -> list[str]:
    """spark-submit's arguments with ``spark.pyspark.driver.python`` set to this interpreter when the workers'
    Python is set (``spark.pyspark.python``, which spark-submit also takes for the driver otherwise: an
    ``./env/bin/python`` of an archive that only executors unpack) and the driver runs here (client mode).

    >>> spark_submit_args(["--conf", "spark.pyspark.python=./env/bin/python", "app.py"])[:2] == [
    ...     "--conf", f"spark.pyspark.driver.python={sys.executable}"]
    True
    """
    joined = " ".join(args)
    if ("spark.pyspark.python=" not in joined or "spark.pyspark.driver.python=" in joined
            or "--deploy-mode cluster" in joined or "--deploy-mode=cluster" in joined):
        return list(args)
    return ["--conf", f"spark.pyspark.driver.python={sys.executable}", *args]


def spark_submit_env(environ: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """PySpark's own ``bin/spark-submit`` and the environment to run it with (``avro-registry-sink
    spark-submit``): ``SPARK_HOME`` is PySpark's directory and the driver's Python (``PYSPARK_DRIVER_PYTHON``,
    ``PYSPARK_PYTHON``) this interpreter, unless already set. A virtual environment's ``bin/spark-submit``
    looks for SPARK_HOME with the system's ``python3`` and fails unless the environment is activated.

    >>> command, env = spark_submit_env({})
    >>> command.endswith("/bin/spark-submit") and env["SPARK_HOME"] in command
    True
    """
    import pyspark

    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    env = dict(environ)
    env.setdefault("SPARK_HOME", home)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.setdefault("PYSPARK_PYTHON", env["PYSPARK_DRIVER_PYTHON"])
    return os.path.join(env["SPARK_HOME"], "bin", "spark-submit"), env


def worker_python_problem(master: str, python: str, cwd: str | None = None) -> str | None:
    """Why Spark's Python workers cannot start, when it can be known on the driver: under a ``local`` master
    they run on this machine, in this directory, so the worker Python (``spark.pyspark.python`` /
    ``PYSPARK_PYTHON``) must exist here. ``--archives env.tar.gz#env`` with ``spark.pyspark.python=./env/bin/python``
    works on a cluster, whose executors unpack the archive into their working directory; ``local`` does not.

    >>> worker_python_problem("local[2]", "./env/bin/python", "/nowhere")[:60]
    "the Python of Spark's workers, './env/bin/python' (spark.pys"
    >>> worker_python_problem("spark://h:7077", "./env/bin/python") is None
    True
    """
    import shutil

    if not master.startswith("local"):
        return None
    found = (os.path.join(cwd or os.getcwd(), python) if os.sep in python and not os.path.isabs(python) else python)
    if os.sep in python:
        if os.path.isfile(found) and os.access(found, os.X_OK):
            return None
    elif shutil.which(python):
        return None
    archives = (" A --archives ...#env archive is not unpacked there under a local master (only a cluster's "
                "executors unpack it into their working directory)." if python.startswith("./") else "")
    return (f"the Python of Spark's workers, {python!r} (spark.pyspark.python or PYSPARK_PYTHON), does not exist "
            f"here, and under --master {master} the workers run on this machine, in this directory.{archives} "
            "Leave out spark.pyspark.python and --archives to run them with the driver's Python, or submit to "
            "a cluster master (spark://, yarn, k8s://).")
