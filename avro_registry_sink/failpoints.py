"""Named points where a fault test stops the process, as TiDB's and TiCDC's failpoints do.

The fault suites kill the job with ``kill -9`` at each point between a batch's first side write and
Spark's commit, to prove that a rerun loses and duplicates nothing. ``AVRO_SINK_FAILPOINTS`` names the
points: ``name=kill`` (SIGKILL on the first pass), ``name=kill@3`` (on the third pass), several separated
by commas. Actions: ``kill`` (this process), ``kill-driver`` (the driver's process, from an executor's
Python worker: the driver records its pid in ``AVRO_SINK_FAILPOINT_DRIVER`` when this module is first
imported there, and Spark's workers inherit it), ``raise`` (a :class:`FailpointError`: a failed task,
which Spark may retry), ``pause`` (writes ``<name>.paused`` into the counts directory below and sleeps
``AVRO_SINK_FAILPOINT_PAUSE`` seconds, default 3, or until the test writes ``<name>.release`` beside it: a
window for the test to act, e.g. restart a broker).
Passes are counted per process (a Python worker counts its own), or across all processes with
``AVRO_SINK_FAILPOINT_COUNTS=<dir>`` (one file per point, a byte appended per pass: ``kill@1`` then kills
once, not once per retried task's fresh worker). ``@/path`` instead
of a spec reads the spec from that file at every pass, so a test can change the points of a running Spark
(whose Python workers keep the environment they started with); the counts start again when it changes.
Unset (always, outside tests), :func:`failpoint` costs one dictionary look-up. The JVM slice writer of
exactly-once delivery (``spark/sinks/java/TransactionalSliceWriter.java``) passes the same ``eos.*`` points of
:data:`WORKER_POINTS` with the same variables and actions (``kill`` there is its JVM's); it also reads them as
Java system properties of the same names, which a test can set in a running local session's JVM.

>>> failpoint("job.after-sink-write")  # no AVRO_SINK_FAILPOINTS: nothing happens
"""

from __future__ import annotations

import os
import signal

__all__ = [
    "COUNTS_ENV",
    "DRIVER_ENV",
    "ENV",
    "EXACTLY_ONCE_POINTS",
    "PAUSE_ENV",
    "POINTS",
    "PROBES",
    "WORKER_POINTS",
    "FailpointError",
    "failpoint",
    "passes",
]

ENV = "AVRO_SINK_FAILPOINTS"
DRIVER_ENV = "AVRO_SINK_FAILPOINT_DRIVER"
COUNTS_ENV = "AVRO_SINK_FAILPOINT_COUNTS"
PAUSE_ENV = "AVRO_SINK_FAILPOINT_PAUSE"
#: The points the job passes, in order, in a batch.
POINTS = (
    "job.after-side-read",  # the batch's inputs and state are known, nothing written
    "job.after-sink-write",  # the sink has the batch's records (the file sink: published)
    "job.after-dead-letters",  # the batch's dead-letter file is written
    "job.after-side-write",  # the batch's side state is written; Spark has not committed
)
#: Points of exactly-once delivery on the driver (:mod:`avro_registry_sink.kafka.delivery`).
EXACTLY_ONCE_POINTS = (
    "eos.after-abort",  # at start: the writers' open transactions aborted, the tokens not read yet
    "eos.before-resolved",  # every slice committed, the batch's resolved record not written
)
#: Points in executor code (a Python worker of Spark): encoding, and one slice's transaction.
WORKER_POINTS = (
    "stage.encoded",  # an Arrow batch of records encoded (each batch the encode stage yields)
    "eos.before-init",  # a slice writer about to initialise its transactional producer
    "eos.produced",  # an Arrow batch of the slice handed to the producer, in its open transaction
    "eos.before-commit",  # the slice's records and token produced, not committed
    "eos.after-commit",  # the slice's transaction committed, the task not finished
)
#: Probes: points no fault test acts on, whose passes a test counts to see which way the job went.
PROBES = (
    "storage.record-by-record",  # a storage data file read record by record (not by the vectorized reader)
)
_hits: dict[str, int] = {}
_spec_seen: list[str] = [""]  # the spec the counts belong to

if os.environ.get(ENV) and DRIVER_ENV not in os.environ:  # the first importer is the driver
    os.environ[DRIVER_ENV] = str(os.getpid())


class FailpointError(RuntimeError):
    """Raised at a failpoint whose action is ``raise`` (an injected task failure)."""


def failpoint(name: str) -> None:
    """Act here when ``AVRO_SINK_FAILPOINTS`` asks for it (see the module docs)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    if spec.startswith("@"):
        try:
            with open(spec[1:], encoding="utf-8") as fh:
                spec = fh.read().strip()
        except OSError:
            spec = ""
        if spec != _spec_seen[0]:
            _spec_seen[0] = spec
            _hits.clear()
        if not spec:
            return
    if not any(item.strip().partition("=")[0] == name for item in spec.split(",")):
        return
    count = _count(name)
    for item in spec.split(","):
        point, _, action = item.strip().partition("=")
        if point != name:
            continue
        kind, _, nth = action.partition("@")
        if count != int(nth or 1):
            continue
        if kind == "pause":
            import time

            counts = os.environ.get(COUNTS_ENV)
            if counts:
                with open(os.path.join(counts, f"{name}.paused"), "w", encoding="utf-8") as fh:
                    fh.write(str(os.getpid()))
            until = time.monotonic() + float(os.environ.get(PAUSE_ENV) or 3)
            release = os.path.join(counts, f"{name}.release") if counts else None
            while time.monotonic() < until and not (release and os.path.exists(release)):
                time.sleep(0.05)
        elif kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "kill-driver":
            os.kill(int(os.environ.get(DRIVER_ENV) or os.getpid()), signal.SIGKILL)
        elif kind == "raise":
            raise FailpointError(f"failpoint {name} (pass {count})")


def _count(name: str) -> int:
    """This pass's number: across processes with ``AVRO_SINK_FAILPOINT_COUNTS``, else in this process."""
    counts = os.environ.get(COUNTS_ENV)
    if counts:
        fd = os.open(os.path.join(counts, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b".")
            return os.fstat(fd).st_size
        finally:
            os.close(fd)
    _hits[name] = _hits.get(name, 0) + 1
    return _hits[name]


def passes(name: str) -> int:
    """How often ``name`` was passed, counted in the ``AVRO_SINK_FAILPOINT_COUNTS`` directory (tests)."""
    counts = os.environ.get(COUNTS_ENV)
    path = os.path.join(counts, name) if counts else ""
    return os.path.getsize(path) if path and os.path.exists(path) else 0
