"""A TiCDC storage tree as a Spark streaming source whose offsets are TiCDC's file numbers, never file times.

Spark's own file source decides what is new by modification time: it skips files more than
``maxFileAge`` (7 days) older than the newest file it has seen, so one clock-skewed file, a restored
backup or a bucket sync with old times made it skip good files without a word. This source decides by
the tree itself. TiCDC numbers the data files of each data directory
(``<schema>/<table>/<version>/[<partition>/][<date>/]``) 1, 2, 3, ... in the order it writes them, so
an offset is, per data directory, the highest file number taken (``n``) and the numbers at or below it
that were absent when it was taken (``g``, gaps as ``[low, high]`` ranges: files deleted by TiCDC's
cleanup before the job started, or copied out of order). A batch holds exactly the numbers between its
start and end offsets; a gap file that appears later is new and taken by a later batch.

Offsets live in Spark's offset log, which Spark writes before a batch runs and reads back when it reruns
an uncommitted batch, so a rerun sees the very same files. A file of the batch that is gone when the batch
is planned (TiCDC's ``file-cleanup-cron-spec``, a pruned bucket) comes out as a row with ``missing``
set: the job reports it instead of losing it silently. Paths that look like data files
(``CDC*.csv``/``CDC*.json`` at a data file's depth) but are not (a directory that is no table version)
come out once, as rows the job dead-letters.

The offset, as Spark's log shows it::

    {"v": 1, "dirs": {"shop/orders/449/2024-06-01": {"n": 7, "w": 20, "x": "csv", "g": [[1, 2]]}},
     "other": ["shop/orders/x/CDC1.csv"]}

``w`` and ``x`` (the name's digits and extension) name a missing file in reports.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from avro_registry_sink.sources.storage import StorageLayout
from avro_registry_sink.sources.storage_offsets import (
    OFFSET_VERSION,
    TreeFile,
    TreeListing,
    batch_files,
    end_offset,
    initial_offset,
    list_tree,
    pending_files,
)
from avro_registry_sink.spark.runtime.driver_python import driver_python
from avro_registry_sink.storage_fs import StorageURI

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "FORMAT_NAME",
    "OFFSET_VERSION",
    "STREAM_DDL",
    "StorageTreeSource",
    "TreeFile",
    "TreeListing",
    "batch_files",
    "end_offset",
    "initial_offset",
    "list_tree",
    "pending_files",
    "storage_tree_stream",
]

#: The name the source is registered under.
FORMAT_NAME = "avro-registry-sink-storage-tree"
#: A batch's rows: the file's path relative to the tree, its Hadoop URI, whether it was gone when the
#: batch was planned, and its table version (for reports).
STREAM_DDL = "relpath STRING, path STRING, missing BOOLEAN"

# option names: Spark redacts the values of options whose names say "secret"
_LOCATION_OPTION = "secret.location"
_MAX_FILES_OPTION = "maxFilesPerTrigger"
_MAX_BYTES_OPTION = "maxBytesPerTrigger"


# --------------------------------------------------------------------------------------------------
# The Spark data source


def _location_json(location: StorageURI) -> str:
    return json.dumps(dataclasses.asdict(location))


def _location_from(text: str) -> StorageURI:
    fields = json.loads(text)
    for name in ("params", "extra"):
        fields[name] = tuple(tuple(pair) for pair in fields.get(name, ()))
    return StorageURI(**fields)


class StorageTreeReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans batches of a storage tree by file number (see the module docs); runs in Spark's Python source
    process on the driver. The job takes a batch's files from the offsets Spark logged
    (:func:`batch_files`), so :meth:`read` only serves whoever reads the stream itself."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.location = _location_from(options[_LOCATION_OPTION])
        self.layout = StorageLayout(self.location)
        self.max_files = int(options[_MAX_FILES_OPTION]) if options.get(_MAX_FILES_OPTION) else None
        self.max_bytes = int(options[_MAX_BYTES_OPTION]) if options.get(_MAX_BYTES_OPTION) else None
        self._frozen: TreeListing | None = None  # Trigger.AvailableNow: the tree as it was at the start

    def initialOffset(self) -> dict:
        return initial_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_files:
            return ReadMaxFiles(self.max_files)
        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        listing = self._frozen if self._frozen is not None else list_tree(self.layout)
        return end_offset(start, listing, max_files=limit.max_files if isinstance(limit, ReadMaxFiles) else None,
                          max_bytes=limit.max_bytes if isinstance(limit, ReadMaxBytes) else None)

    def prepareForTriggerAvailableNow(self) -> None:
        self._frozen = list_tree(self.layout)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return [] if start == end else [InputPartition((start, end))]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        start, end = partition.value  # type: ignore[attr-defined]
        for relpath, missing in batch_files(start, end, list_tree(self.layout)):
            yield relpath, self.location.hadoop_uri(relpath), missing


class StorageTreeSource(DataSource):
    """``spark.readStream.format(FORMAT_NAME)``: the data files of a TiCDC storage tree (see the module docs)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return STREAM_DDL

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return StorageTreeReader(self.options)


def _register_for_the_driver(spark: SparkSession, source: type[DataSource]) -> None:
    """Register ``source`` to run on the driver's Python. Spark runs a Python source's planning in a process
    of the interpreter its context names for the executors, which under spark-submit with
    ``--archives env.tar.gz#env`` is ``./env/bin/python``: a path that exists in the executors' directories,
    not beside the driver. The job needs the source only on the driver (see :class:`StorageTreeReader`), and
    there Spark starts that process anew for each query: :func:`~avro_registry_sink.spark.runtime.driver_python.driver_python`
    starts it with the driver's compiled pyspark instead of Spark's zip (0.35-0.4 s less before the first batch)."""
    context = spark.sparkContext
    executors_python = context.pythonExec
    context.pythonExec = driver_python()
    try:
        spark.dataSource.register(source)
    finally:
        context.pythonExec = executors_python


def storage_tree_stream(spark: SparkSession, location: StorageURI, *, max_files_per_trigger: int | None = None,
                        max_bytes_per_trigger: int | None = None) -> DataFrame:
    """The new data files of the storage tree at ``location``: a streaming DataFrame of :data:`STREAM_DDL`
    rows, at most that many files (else bytes) per micro-batch."""
    _register_for_the_driver(spark, StorageTreeSource)
    reader = spark.readStream.format(FORMAT_NAME).option(_LOCATION_OPTION, _location_json(location))
    if max_files_per_trigger:
        reader = reader.option(_MAX_FILES_OPTION, str(int(max_files_per_trigger)))
    elif max_bytes_per_trigger:
        reader = reader.option(_MAX_BYTES_OPTION, str(int(max_bytes_per_trigger)))
    return reader.load()
