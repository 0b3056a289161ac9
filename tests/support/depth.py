"""How deep the suite's randomized tests go: property-test examples and fault-injection rounds.

A developer's run (no ``CI`` in the environment) explores new random examples at full depth. CI runs the
property tests derandomized (tests/conftest.py: the same examples on every run, so a failure is reproducible)
and at a quarter of the examples, and the fault tests with fewer rounds, to keep the whole suite inside its
15-minute budget on 2 cores; every behaviour is still exercised, only fewer random variations of it.
``AVRO_SINK_TEST_DEPTH=full`` runs CI's fixed examples at full depth, ``=ci`` a developer's run at CI's.
"""

from __future__ import annotations

import os

DEPTH_ENV = "AVRO_SINK_TEST_DEPTH"


def full_depth() -> bool:
    """Whether this run goes to full depth (a developer's run, or ``AVRO_SINK_TEST_DEPTH=full``)."""
    chosen = os.environ.get(DEPTH_ENV, "").strip().lower()
    if chosen in ("full", "ci"):
        return chosen == "full"
    return not os.environ.get("CI")


def examples(n: int) -> int:
    """``max_examples`` for a property test written for ``n`` examples: ``n`` at full depth, else a quarter
    (at least 25)."""
    return n if full_depth() else max(25, n // 4)


def rounds(full: int, ci: int) -> int:
    """A fault test's number of rounds: ``full`` at full depth, else ``ci``."""
    return full if full_depth() else ci
