"""Named points where a fault test stops the process, as TiDB's and TiCDC's failpoints do.

The fault suite kills the job with ``kill -9`` at each point between a batch's first side write and
Spark's commit, to prove that a rerun loses and duplicates nothing. ``AVRO_SINK_FAILPOINTS`` names the
points: ``name=kill`` (SIGKILL on the first pass), ``name=kill@3`` (on the third pass), several separated
by commas. Unset (always, outside tests), :func:`failpoint` costs one dictionary look-up.

>>> failpoint("job.after-sink-write")  # no AVRO_SINK_FAILPOINTS: nothing happens
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV", "POINTS", "failpoint"]

ENV = "AVRO_SINK_FAILPOINTS"
#: The points the job passes, in order, in a batch.
POINTS = (
    "job.after-side-read",  # the batch's inputs and state are known, nothing written
    "job.after-sink-write",  # the sink has the batch's records (the file sink: published)
    "job.after-dead-letters",  # the batch's dead-letter file is written
    "job.after-side-write",  # the batch's side state is written; Spark has not committed
)
_hits: dict[str, int] = {}


def failpoint(name: str) -> None:
    """Kill this process here when ``AVRO_SINK_FAILPOINTS`` asks for it (see the module docs)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    _hits[name] = _hits.get(name, 0) + 1
    for item in spec.split(","):
        point, _, action = item.strip().partition("=")
        if point != name:
            continue
        kind, _, nth = action.partition("@")
        if kind == "kill" and _hits[name] == int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)
