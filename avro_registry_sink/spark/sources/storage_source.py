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
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from avro_registry_sink.storage_fs import StorageURI

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from avro_registry_sink.sources.storage import StorageLayout

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
OFFSET_VERSION = 1
#: A batch's rows: the file's path relative to the tree, its Hadoop URI, whether it was gone when the
#: batch was planned, and its table version (for reports).
STREAM_DDL = "relpath STRING, path STRING, missing BOOLEAN"

_LOOKS_LIKE_DATA = re.compile(r"CDC.*\.(?:csv|json)")
_DATA_DEPTHS = (4, 5, 6)  # <schema>/<table>/<version>/ [<partition>/] [<date>/] CDC<n>.<ext>
# option names: Spark redacts the values of options whose names say "secret"
_LOCATION_OPTION = "secret.location"
_MAX_FILES_OPTION = "maxFilesPerTrigger"
_MAX_BYTES_OPTION = "maxBytesPerTrigger"


@dataclass(frozen=True)
class TreeFile:
    """A data file found in the tree."""

    relpath: str
    directory: str
    number: int
    size: int
    sort_key: tuple[Any, ...]


@dataclass
class TreeListing:
    """One listing of the tree: data files per data directory (by number), and look-alike paths."""

    dirs: dict[str, dict[int, TreeFile]]
    other: list[str]
    #: TiCDC's order of a data file's path (for files named by an offset but not listed)
    key_of: Callable[[str], tuple[Any, ...]] | None = None

    def exists(self, relpath: str) -> bool:
        directory, _, _ = relpath.rpartition("/")
        return any(f.relpath == relpath for f in self.dirs.get(directory, {}).values()) or relpath in self.other


def list_tree(layout: StorageLayout, files: Iterable[tuple[str, tuple[int | None, int | None]]] | None = None,
              ) -> TreeListing:
    """Every data file of ``layout``'s tree by directory and number, with its size: from ``files`` (a listing
    with each file's (size, modification time)) or a new listing."""
    dirs: dict[str, dict[int, TreeFile]] = {}
    other: list[str] = []
    for relpath, (size, _) in (files if files is not None else layout.store.list_files_stamped()):
        parts = tuple(relpath.split("/"))
        if len(parts) not in _DATA_DEPTHS or not _LOOKS_LIKE_DATA.fullmatch(parts[-1]):
            continue
        data_file = layout.data_file(relpath)
        if data_file is None:
            other.append(relpath)
            continue
        directory = relpath.rpartition("/")[0]
        dirs.setdefault(directory, {})[data_file.number] = TreeFile(
            relpath=relpath, directory=directory, number=data_file.number, size=size or 0, sort_key=data_file.sort_key)

    def key_of(relpath: str) -> tuple[Any, ...]:
        data_file = layout.data_file(relpath)
        return data_file.sort_key if data_file is not None else ()

    return TreeListing(dirs=dirs, other=sorted(other), key_of=key_of)


def initial_offset() -> dict[str, Any]:
    """The offset before anything was read."""
    return {"v": OFFSET_VERSION, "dirs": {}, "other": []}


def _ranges(numbers: Iterable[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for n in sorted(set(numbers)):
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def _numbers(ranges: Iterable[Sequence[int]]) -> set[int]:
    return {n for low, high in ranges for n in range(int(low), int(high) + 1)}


def _name_parts(relpath: str) -> tuple[int, str]:
    name = relpath.rpartition("/")[2]
    stem, _, ext = name.partition(".")
    return len(stem) - 3, ext


def _check_offset(offset: Mapping[str, Any]) -> None:
    if offset.get("v") != OFFSET_VERSION:
        raise ValueError(f"unknown storage-tree offset version {offset.get('v')!r} (this release writes "
                         f"{OFFSET_VERSION}); the checkpoint was written by another release.")


def _new_numbers(entry: Mapping[str, Any] | None, present: Iterable[int]) -> list[int]:
    """The file numbers of a directory that are not in its offset ``entry``: above ``n`` or in a gap."""
    if entry is None:
        return sorted(present)
    top, gaps = int(entry["n"]), _numbers(entry.get("g", ()))
    return sorted(n for n in present if n > top or n in gaps)


def end_offset(start: Mapping[str, Any], listing: TreeListing, *, max_files: int | None = None,
               max_bytes: int | None = None) -> dict[str, Any]:
    """The offset after the next batch: the new files of ``listing`` in TiCDC's order (table version,
    partition, date, schema, table, number), at most ``max_files`` of them or ``max_bytes`` together (at
    least one file). Returns ``start`` unchanged when nothing is new."""
    _check_offset(start)
    dirs: Mapping[str, Any] = start.get("dirs", {})
    new: list[TreeFile] = []
    for directory, files in listing.dirs.items():
        new.extend(files[n] for n in _new_numbers(dirs.get(directory), files))
    new.sort(key=lambda f: f.sort_key)
    if max_files is not None:
        new = new[:max(1, max_files)]
    if max_bytes is not None:
        count, total = 0, 0
        for f in new:
            if count and total + f.size > max_bytes:
                break
            count, total = count + 1, total + f.size
        new = new[:count]
    seen_other = set(start.get("other", ()))
    other = [p for p in listing.other if p not in seen_other]
    if not new and not other:
        return dict(start)
    out_dirs = {d: dict(e) for d, e in dirs.items()}
    by_dir: dict[str, list[TreeFile]] = {}
    for f in new:
        by_dir.setdefault(f.directory, []).append(f)
    for directory, taken_files in by_dir.items():
        entry = dirs.get(directory)
        top = int(entry["n"]) if entry else 0
        gaps = _numbers(entry.get("g", ())) if entry else set()
        taken = {f.number for f in taken_files}
        new_top = max(top, *taken)
        present = set(listing.dirs[directory])
        gaps = (gaps - taken) | {n for n in range(top + 1, new_top + 1) if n not in present}
        width, ext = _name_parts(listing.dirs[directory][new_top].relpath)
        out_dirs[directory] = {"n": new_top, "w": width, "x": ext, **({"g": _ranges(gaps)} if gaps else {})}
    return {"v": OFFSET_VERSION, "dirs": out_dirs, "other": sorted(seen_other | set(other))}


def pending_files(committed: Mapping[str, Any] | None, listing: TreeListing) -> dict[str, tuple[int, int]]:
    """The data files of ``listing`` that the offset ``committed`` does not cover (``None``: no batch committed, every
    file), per table (``schema.table``) as ``(files, bytes)``: files above a data directory's highest number taken,
    and gap files that appeared since. Every table of the listing has an entry (``(0, 0)``: caught up). The input
    backlog of the job's metrics (:class:`~avro_registry_sink.metrics.StorageBacklog`)."""
    start = committed if committed is not None else initial_offset()
    _check_offset(start)
    dirs: Mapping[str, Any] = start.get("dirs", {})
    out: dict[str, tuple[int, int]] = {}
    for directory, files in listing.dirs.items():
        schema, table = directory.split("/")[:2]
        count, size = out.get(f"{schema}.{table}", (0, 0))
        new = _new_numbers(dirs.get(directory), files)
        out[f"{schema}.{table}"] = (count + len(new), size + sum(files[n].size for n in new))
    return out


def batch_files(start: Mapping[str, Any], end: Mapping[str, Any], listing: TreeListing) -> list[tuple[str, bool]]:
    """The files between two offsets as ``(relpath, missing)`` in TiCDC's order, look-alike paths last.

    The numbers come from the offsets alone (the same on a rerun); ``listing`` only says whether each
    file is still there and how it is named."""
    _check_offset(start)
    _check_offset(end)
    start_dirs: Mapping[str, Any] = start.get("dirs", {})
    out: list[tuple[tuple[Any, ...], str, bool]] = []
    for directory, entry in end.get("dirs", {}).items():
        before = start_dirs.get(directory)
        top = int(before["n"]) if before else 0
        old_gaps = _numbers(before.get("g", ())) if before else set()
        new_gaps = _numbers(entry.get("g", ()))
        numbers = {n for n in range(top + 1, int(entry["n"]) + 1) if n not in new_gaps} | (old_gaps - new_gaps)
        files = listing.dirs.get(directory, {})
        for number in numbers:
            found = files.get(number)
            if found is not None:
                out.append((found.sort_key, found.relpath, False))
            else:
                name = f"CDC{number:0{int(entry.get('w', 20))}d}.{entry.get('x', 'csv')}"
                relpath = posixpath.join(directory, name)
                out.append((listing.key_of(relpath) if listing.key_of else (), relpath, True))
    out.sort(key=lambda item: (item[0] or (0,), item[1]))
    seen_other = set(start.get("other", ()))
    others = [(p, not listing.exists(p)) for p in end.get("other", ()) if p not in seen_other]
    return [(relpath, missing) for _, relpath, missing in out] + others


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
        from avro_registry_sink.sources.storage import StorageLayout

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
    from avro_registry_sink.spark.runtime.driver_python import driver_python

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
