"""Housekeeping of the Python processes (Spark's Python workers) that run the product's executor functions."""

from __future__ import annotations

import gc

__all__ = ["settle"]


def settle() -> None:
    """Call first in a ``mapInArrow`` function: moves every object alive now (modules, classes, caches: what
    earlier tasks and imports left) out of the cyclic garbage collector's sight (``gc.freeze``).

    PySpark's daemon runs a full ``gc.collect()`` in a reused worker after every task; over the hundreds of
    thousands of objects that pyarrow, pydantic and this package import it took 30-80 ms a task, which a
    running stream's small micro-batches waited for (or started a new worker, paying the imports again).
    Frozen objects are still freed by reference counting; only a cycle among them that dies later is kept.
    """
    gc.freeze()
