"""``workers.settle``: what is alive when a task starts is out of the cyclic collector's sight, and still freed."""

from __future__ import annotations

import gc
import weakref

from avro_registry_sink.workers import settle


class _Node:
    pass


def test_settle_freezes_what_is_alive_and_reference_counting_still_frees_it():
    gc.unfreeze()
    try:
        node = _Node()
        kept = _Node()
        settle()
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # out of the collector's generations
        gone = weakref.ref(node)
        del node  # no cycle: freed by its count, frozen or not
        assert gone() is None
    finally:
        gc.unfreeze()
