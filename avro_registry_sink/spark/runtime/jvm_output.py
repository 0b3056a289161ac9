"""Spark's JVM kept quiet by default: no Ivy resolution report, no banner, no INFO lines; ``-v`` shows them.

A local session's JVM is started by PySpark with this process's standard error, and it writes there before any
log4j setting applies: Ivy's report of the packages it resolved (about 25 lines for the Kafka connector), the
``Setting default log level`` banner, the JDK's incubator warning. :func:`quiet_start` gives the JVM a pipe as
its standard error while it starts; a relay thread copies the pipe to the real standard error, holding what the
JVM says during the start and printing it only when the start fails (or with ``AVRO_SINK_VERBOSE``). Later
lines (errors of the JVM's log4j, Python workers' tracebacks) pass as they come.

Under ``spark-submit`` the JVM runs before Python does, with Spark's own log4j defaults (INFO): the Spark
context logs about 140 INFO lines while it starts. :func:`quiet_submitted_jvm` sets the JVM's root logger to
ERROR through the gateway before the context starts, unless the submission names its own log4j configuration.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["VERBOSE_ENV", "quiet_start", "quiet_submitted_jvm", "verbose"]

#: Set (to anything but 0/false/no) to see everything Spark's JVM prints (the CLI's ``-v``).
VERBOSE_ENV = "AVRO_SINK_VERBOSE"


def verbose() -> bool:
    """Whether the user asked to see the JVM's own output."""
    return os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no")


class _Relay(threading.Thread):
    """Copies the JVM's standard error (a pipe) to ``target`` (a file descriptor), holding the start's lines."""

    def __init__(self, source: int, target: int) -> None:
        super().__init__(name="spark-stderr", daemon=True)
        self.source = source
        self.target = target
        self.holding = True
        self.held: list[bytes] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        with open(self.source, "rb", buffering=0) as pipe:
            pending = b""
            while True:
                chunk = pipe.read(65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._emit(line + b"\n")
            if pending:
                self._emit(pending)

    def _emit(self, line: bytes) -> None:
        with self.lock:
            if self.holding:
                self.held.append(line)
                return
        self._write(line)

    def _write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(self.target, data)

    def release(self, *, show_held: bool) -> None:
        """The start is over: from now on lines pass; the held ones are printed only when ``show_held``."""
        with self.lock:
            self.holding = False
            held, self.held = self.held, []
        if show_held:
            self._write(b"".join(held))


@contextlib.contextmanager
def quiet_start() -> Iterator[None]:
    """Around the start of a local session's JVM (see the module docs); nothing changes with
    ``AVRO_SINK_VERBOSE``, when a JVM already runs, or where standard error is no file descriptor."""
    from pyspark import SparkContext

    if verbose() or SparkContext._active_spark_context is not None or SparkContext._gateway is not None:
        yield
        return
    try:
        sys.stderr.flush()
        original = os.dup(2)
    except (OSError, ValueError):  # no real standard error (an embedding host)
        yield
        return
    read_end, write_end = os.pipe()
    relay = _Relay(read_end, original)
    relay.start()
    os.dup2(write_end, 2)  # the JVM started now inherits the pipe
    os.close(write_end)
    failed = True
    try:
        yield
        failed = False
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)  # this process writes to the real standard error again; the JVM keeps the pipe
        relay.release(show_held=failed)


def quiet_submitted_jvm() -> None:
    """Under spark-submit: the JVM's root logger to ERROR before the Spark context starts (module docs)."""
    if verbose() or "log4j" in os.environ.get("SPARK_SUBMIT_OPTS", "") or not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return
    from pyspark import SparkContext

    with contextlib.suppress(Exception):  # logging is a nicety: never fail a run over it
        SparkContext._ensure_initialized()
        jvm: Any = SparkContext._jvm
        conf = jvm.org.apache.spark.SparkConf()
        if "log4j" in conf.get("spark.driver.extraJavaOptions", ""):
            return
        jvm.org.apache.logging.log4j.core.config.Configurator.setRootLevel(jvm.org.apache.logging.log4j.Level.ERROR)
