"""Is a ``--source`` a TiCDC storage-sink tree? Checked before Spark starts, so a wrong directory is refused
with what it holds instead of "succeeding" with zero rows.

A tree (tiflow ``pkg/sink/cloudstorage``) has at its top ``metadata``, table schema files
``<schema>/<table>/meta/schema_<version>_<checksum>.json`` and data files
``<schema>/<table>/<version>/[<partition>/][<date>/]CDC<number>.csv|json`` (with ``meta/CDC.index`` beside
them). :func:`check_storage_tree` accepts a directory that holds any of them at that depth. Otherwise it
looks for them at other depths to say where the tree is: one or more levels down (the tree's parent was
given), or up (a ``<schema>`` or ``<schema>/<table>`` folder of a tree was given), and refuses
(:class:`~avro_registry_sink.errors.ConfigError`, exit 2) naming the source to give instead. An empty
directory, or one that holds no tree yet, is refused too unless the caller waits for data (``--wait-for-data``:
a job started before the changefeed has written anything); a directory at the wrong level is refused
always (TiCDC would never write where the job looks).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.storage_fs import StorageURI

__all__ = ["EXPECTED_LAYOUT", "TreeFinding", "check_storage_tree", "find_tree"]

_SCHEMA_FILE = re.compile(r"schema_\d+_\d{10}\.json")
_DATA_FILE = re.compile(r"CDC\d{6,20}\.(?:csv|json)")
_INDEX_FILE = "CDC.index"
_SUFFIX = re.compile(r"(?:\d+)?(?:/?\d{4}(?:-\d{2}){0,2})?")  # [<partition>/][<date>/] after the version

#: What a storage-sink tree looks like, for messages.
EXPECTED_LAYOUT = ("a TiCDC storage-sink tree has 'metadata' and <schema>/<table>/meta/schema_<version>_<checksum>.json "
                   "at its top, and data in <schema>/<table>/<version>/[<partition>/][<date>/]CDC<number>.csv|json")


class TreeFinding:
    """What a listing holds: ``kind`` is ``tree`` (a tree at the top), ``empty``, ``below`` (a tree in the
    sub-directory ``where``), ``above`` (the source is ``levels`` levels inside a tree) or ``none``."""

    def __init__(self, kind: str, *, files: int = 0, where: str = "", levels: int = 0, example: str = "",
                 sample: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.files = files
        self.where = where
        self.levels = levels
        self.example = example
        self.sample = sample

    def __repr__(self) -> str:
        return f"TreeFinding({self.kind!r}, files={self.files}, where={self.where!r}, levels={self.levels})"


def _version_at(parts: tuple[str, ...]) -> int | None:
    """Index of the ``<version>`` directory of a data file or CDC.index path, or ``None``: an all-digit
    directory followed only by an optional partition, an optional date and (for CDC.index) ``meta``; the
    leftmost such one at index 2 or later (``<schema>/<table>/<version>``), else the leftmost."""
    dirs = parts[:-1]
    if dirs and dirs[-1] == "meta" and parts[-1] == _INDEX_FILE:
        dirs = dirs[:-1]
    valid = [i for i, part in enumerate(dirs) if part.isdigit() and _SUFFIX.fullmatch("/".join(dirs[i + 1:]))]
    later = [i for i in valid if i >= 2]
    found = later or valid
    return found[0] if found else None


def _root_of(parts: tuple[str, ...]) -> tuple[int, bool] | None:
    """How many leading parts of a tree file's path lie above the tree's top (negative: the path starts that
    many levels inside a tree) and whether the file says so for sure (``metadata``, a data file or CDC.index:
    a schema file ``<x>/<y>/meta/...`` is a table's at this level or a database's one level down), or ``None``
    when the file is no tree file."""
    name = parts[-1]
    if name == "metadata":
        return len(parts) - 1, True
    if _SCHEMA_FILE.fullmatch(name) and len(parts) >= 2 and parts[-2] == "meta":
        return len(parts) - 4, False  # a table schema file: <schema>/<table>/meta/<file>
    if _DATA_FILE.fullmatch(name) or (name == _INDEX_FILE and len(parts) >= 2 and parts[-2] == "meta"):
        version = _version_at(parts)
        return None if version is None else (version - 2, True)  # <schema>/<table>/<version>/...
    return None


def find_tree(relpaths: Iterable[str]) -> TreeFinding:
    """Where a tree is in a listing (paths relative to the source, posix)."""
    paths = [p for p in relpaths if p]
    if not paths:
        return TreeFinding("empty")
    votes: dict[bool, Counter[tuple[str, ...] | int]] = {True: Counter(), False: Counter()}
    examples: dict[tuple[str, ...] | int, str] = {}
    for relpath in paths:
        parts = tuple(relpath.split("/"))
        found = _root_of(parts)
        if found is None:
            continue
        offset, sure = found
        key: tuple[str, ...] | int = parts[:offset] if offset > 0 else offset
        votes[sure][key] += 1
        examples.setdefault(key, relpath)
    sample = tuple(paths[:3])
    counted = votes[True] or votes[False]  # schema files decide only when nothing else does
    if not counted:
        return TreeFinding("none", files=len(paths), sample=sample)
    if 0 in counted:
        return TreeFinding("tree", files=len(paths))
    key, _ = counted.most_common(1)[0]
    if isinstance(key, tuple):
        return TreeFinding("below", files=len(paths), where="/".join(key), example=examples[key], sample=sample)
    return TreeFinding("above", files=len(paths), levels=-key, example=examples[key], sample=sample)


def check_storage_tree(location: StorageURI, *, wait: bool = False) -> TreeFinding:
    """Refuse a ``--source`` that is no storage-sink tree (see the module docs); returns what was found."""
    store = location.filesystem()
    finding = find_tree(store.list_files())
    shown = str(location)
    if finding.kind == "tree" or (wait and finding.kind in ("empty", "none")):
        return finding
    wait_hint = (" Give --wait-for-data to start the job before TiCDC has written to it (the job then waits for "
                 "the tree to appear).")
    if finding.kind == "empty":
        message = f"--source {shown!r} is empty: {EXPECTED_LAYOUT}.{wait_hint}"
    elif finding.kind == "below":
        inner = str(location.child(*finding.where.split("/")))
        message = (f"--source {shown!r} holds no TiCDC storage-sink tree at its top, but one in {finding.where!r} "
                   f"(found {finding.example!r}): give --source {inner!r}.")
    elif finding.kind == "above":
        outer = location
        for _ in range(finding.levels):
            outer = outer.parent()
        inside = "a <schema> folder" if finding.levels == 1 else "a <schema>/<table> folder"
        message = (f"--source {shown!r} looks like {inside} of a TiCDC storage-sink tree (found {finding.example!r}; "
                   f"{EXPECTED_LAYOUT}): give the tree's top, --source {str(outer)!r}.")
    else:
        found = ", ".join(repr(p) for p in finding.sample) + (" ..." if finding.files > len(finding.sample) else "")
        message = (f"--source {shown!r} holds {finding.files} file{'s' if finding.files != 1 else ''} ({found}) but no "
                   f"TiCDC storage-sink tree: {EXPECTED_LAYOUT}.{wait_hint}")
    raise ConfigError(message, option="source", value=shown)
