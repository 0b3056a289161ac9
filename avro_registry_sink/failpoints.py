"""Named points where a fault test stops the process, as TiDB's and TiCDC's failpoints do.

The fault suites kill the job with ``kill -9`` at each point between a batch's first side write and
Spark's commit, to prove that a rerun loses and duplicates nothing. ``AVRO_SINK_FAILPOINTS`` names the
points: ``name=kill`` (SIGKILL on the first pass), ``name=kill@3`` (on the third pass), several separated
by commas. Actions: ``kill`` (this process), ``kill-driver`` (the driver's process, from an executor's
Python worker: the driver records its pid in ``AVRO_SINK_FAILPOINT_DRIVER`` when this module is first
imported there, and Spark's workers inherit it), ``raise`` (a :class:`FailpointError`: a failed task,
which Spark may retry). Passes are counted per process (a Python worker counts its own). Unset (always,
outside tests), :func:`failpoint` costs one dictionary look-up.

>>> failpoint("job.after-sink-write")  # no AVRO_SINK_FAILPOINTS: nothing happens
"""

from __future__ import annotations

import os
import signal

__all__ = ["DRIVER_ENV", "ENV", "EXACTLY_ONCE_POINTS", "FailpointError", "POINTS", "WORKER_POINTS", "failpoint"]

ENV = "AVRO_SINK_FAILPOINTS"
DRIVER_ENV = "AVRO_SINK_FAILPOINT_DRIVER"
#: The points the job passes, in order, in a batch.
POINTS = (
    "job.after-side-read",  # the batch's inputs and state are known, nothing written
    "job.after-sink-write",  # the sink has the batch's records (the file sink: published)
    "job.after-dead-letters",  # the batch's dead-letter file is written
    "job.after-side-write",  # the batch's side state is written; Spark has not committed
)
#: Points of exactly-once delivery on the driver (:mod:`avro_registry_sink.delivery`).
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
_hits: dict[str, int] = {}

if os.environ.get(ENV) and DRIVER_ENV not in os.environ:  # the first importer is the driver
    os.environ[DRIVER_ENV] = str(os.getpid())


class FailpointError(RuntimeError):
    """Raised at a failpoint whose action is ``raise`` (an injected task failure)."""


def failpoint(name: str) -> None:
    """Act here when ``AVRO_SINK_FAILPOINTS`` asks for it (see the module docs)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    _hits[name] = _hits.get(name, 0) + 1
    for item in spec.split(","):
        point, _, action = item.strip().partition("=")
        if point != name:
            continue
        kind, _, nth = action.partition("@")
        if _hits[name] != int(nth or 1):
            continue
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "kill-driver":
            os.kill(int(os.environ.get(DRIVER_ENV) or os.getpid()), signal.SIGKILL)
        elif kind == "raise":
            raise FailpointError(f"failpoint {name} (pass {_hits[name]})")
