"""Spark's logs in a job's checkpoint, read without Spark: the batches of ``spark/offsets`` and ``spark/commits``,
the last committed batch and the source offset it ended at (for ``status``, the metrics and the checks before a
run, :mod:`~avro_registry_sink.spark.driver.checkpoint_files`)::

    <checkpoint>/spark/offsets/<batch>      v1, {"batchTimestampMs": ...}, then one offset per source (JSON)
    <checkpoint>/spark/commits/<batch>      v1, {"nextBatchWatermarkMs": ...}: the batch committed
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from avro_registry_sink.storage_fs import StoreFS

__all__ = ["batch_source_offset", "last_committed_batch", "log_ids"]


def log_ids(files: Iterable[str], directory: str) -> dict[int, str]:
    """Batch id -> relative path of the log files directly in ``directory`` (``N`` and ``N.compact``).

    >>> log_ids(["spark/commits/0", "spark/commits/.0.crc", "spark/commits/1", "spark/offsets/2"], "spark/commits")
    {0: 'spark/commits/0', 1: 'spark/commits/1'}
    """
    out = {}
    for path in files:
        head, _, name = path.rpartition("/")
        number = name.removesuffix(".compact")
        if head == directory and number.isdigit():
            out[int(number)] = path
    return out


def last_committed_batch(state: StoreFS) -> int | None:
    """The newest batch of ``spark/commits`` (``None``: no batch committed yet); one listing."""
    return max(log_ids(state.list_files("spark/commits"), "spark/commits"), default=None)


def batch_source_offset(state: StoreFS, batch: int, source: int = 0) -> Any:
    """The end offset of source ``source`` in batch ``batch`` (``spark/offsets/<batch>``, written before the batch
    ran): a Kafka source's ``{topic: {partition: offset}}``, a storage tree's file numbers per data directory;
    ``None`` when the file names no offset for it. Raises ``OSError``/``ValueError`` for a missing or torn file."""
    lines = [x for x in state.read_text(f"spark/offsets/{batch}").splitlines() if x.strip()]
    line = 2 + source  # the version, the batch's metadata, then one line per source
    if len(lines) <= line or lines[line].strip() == "-":
        return None
    return json.loads(lines[line])
