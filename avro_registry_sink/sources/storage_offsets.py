"""A TiCDC storage tree's offsets, in pure Python (no Spark): the tree listed as data files per data directory
and number, the offset after a batch, the files between two offsets, and the files an offset does not cover
(a backlog). The offset's format and why it counts file numbers, never file times: see
:mod:`~avro_registry_sink.spark.sources.storage_source`, the Spark streaming source built on these functions
(here so that ``status`` and the metrics measure a backlog without importing Spark)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from avro_registry_sink.sources.storage import StorageLayout

__all__ = [
    "OFFSET_VERSION",
    "TreeFile",
    "TreeListing",
    "batch_files",
    "end_offset",
    "initial_offset",
    "list_tree",
    "pending_files",
]

OFFSET_VERSION = 1
_LOOKS_LIKE_DATA = re.compile(r"CDC.*\.(?:csv|json)")
_DATA_DEPTHS = (4, 5, 6)  # <schema>/<table>/<version>/ [<partition>/] [<date>/] CDC<n>.<ext>


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
    backlog of the job's metrics (:class:`~avro_registry_sink.ops.metrics.StorageBacklog`)."""
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
