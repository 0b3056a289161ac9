"""The storage tree's offsets: TiCDC's file numbers per data directory, never file times (issue 17)."""

from __future__ import annotations

import json
import os

import pytest

from avro_registry_sink.sources.storage import StorageLayout
from avro_registry_sink.spark.sources.storage_source import (
    TreeListing,
    batch_files,
    end_offset,
    initial_offset,
    list_tree,
    pending_files,
)

DIR = "shop/orders/449/2024-06-01"
OTHER_DIR = "shop/items/450/2024-06-01"


def _write(root, relpath, size=10, mtime=None):
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def _name(n):
    return f"CDC{n:020d}.csv"


def _take(root, start, **limits):
    listing = list_tree(StorageLayout(root))
    end = end_offset(start, listing, **limits)
    return end, batch_files(start, end, listing)


def test_every_file_is_taken_whatever_its_time(tmp_path):
    # one file 30 days in the future, the others 400 days old: Spark's maxFileAge skipped the old ones
    _write(tmp_path, f"{DIR}/{_name(1)}", mtime=1_700_000_000 + 30 * 86400)
    for n in (2, 3):
        _write(tmp_path, f"{DIR}/{_name(n)}", mtime=1_700_000_000 - 400 * 86400)
    end, files = _take(tmp_path, initial_offset())
    assert files == [(f"{DIR}/{_name(n)}", False) for n in (1, 2, 3)]
    assert end["dirs"] == {DIR: {"n": 3, "w": 20, "x": "csv"}}
    _write(tmp_path, f"{DIR}/{_name(4)}", mtime=1)  # 1970
    end2, files2 = _take(tmp_path, end)
    assert files2 == [(f"{DIR}/{_name(4)}", False)]
    assert _take(tmp_path, end2) == (end2, [])  # nothing new: the same offset


def test_a_file_that_appears_out_of_order_is_a_gap_taken_later(tmp_path):
    for n in (1, 3):
        _write(tmp_path, f"{DIR}/{_name(n)}")
    end, files = _take(tmp_path, initial_offset())
    assert [f for f, _ in files] == [f"{DIR}/{_name(1)}", f"{DIR}/{_name(3)}"]
    assert end["dirs"][DIR]["g"] == [[2, 2]]
    _write(tmp_path, f"{DIR}/{_name(2)}")
    end2, files2 = _take(tmp_path, end)
    assert files2 == [(f"{DIR}/{_name(2)}", False)]
    assert "g" not in end2["dirs"][DIR] and end2["dirs"][DIR]["n"] == 3


def test_pending_files_are_those_no_committed_offset_covers_per_table_with_their_bytes(tmp_path):
    for n in (1, 3):
        _write(tmp_path, f"{DIR}/{_name(n)}", size=10)
    _write(tmp_path, f"{OTHER_DIR}/{_name(1)}", size=7)
    listing = list_tree(StorageLayout(tmp_path))
    assert pending_files(None, listing) == {"shop.orders": (2, 20), "shop.items": (1, 7)}  # nothing committed
    end = end_offset(initial_offset(), listing, max_files=2)  # TiCDC's order: orders 1 and 3, items waits
    assert pending_files(end, listing) == {"shop.orders": (0, 0), "shop.items": (1, 7)}
    _write(tmp_path, f"{DIR}/{_name(2)}", size=5)  # the gap's file appears, and a new one
    _write(tmp_path, f"{DIR}/{_name(4)}", size=6)
    listing = list_tree(StorageLayout(tmp_path))
    assert pending_files(end, listing) == {"shop.orders": (2, 11), "shop.items": (1, 7)}
    assert pending_files(end_offset(end, listing), listing) == {"shop.orders": (0, 0), "shop.items": (0, 0)}
    with pytest.raises(ValueError, match="unknown storage-tree offset version 9"):
        pending_files({"v": 9}, listing)


def test_files_cleaned_up_before_the_start_are_gaps_in_ranges(tmp_path):
    for n in (11, 12):
        _write(tmp_path, f"{DIR}/{_name(n)}")
    end, files = _take(tmp_path, initial_offset())
    assert end["dirs"][DIR] == {"n": 12, "w": 20, "x": "csv", "g": [[1, 10]]}
    assert len(files) == 2


def test_a_rerun_from_the_offsets_reports_a_file_deleted_since_as_missing(tmp_path):
    for n in (1, 2):
        _write(tmp_path, f"{DIR}/{_name(n)}")
    listing = list_tree(StorageLayout(tmp_path))
    end = end_offset(initial_offset(), listing)
    (tmp_path / DIR / _name(2)).unlink()  # TiCDC's file-cleanup-cron-spec, a pruned bucket
    again = batch_files(initial_offset(), end, list_tree(StorageLayout(tmp_path)))
    assert again == [(f"{DIR}/{_name(1)}", False), (f"{DIR}/{_name(2)}", True)]


def test_limits_take_a_prefix_in_ticdc_order(tmp_path):
    for n in (1, 2, 3):
        _write(tmp_path, f"{DIR}/{_name(n)}", size=100)
        _write(tmp_path, f"{OTHER_DIR}/{_name(n)}", size=100)
    end, files = _take(tmp_path, initial_offset(), max_files=2)
    assert [f for f, _ in files] == [f"{DIR}/{_name(1)}", f"{DIR}/{_name(2)}"]  # version 449 before 450
    end, files = _take(tmp_path, end, max_bytes=250)
    assert [f for f, _ in files] == [f"{DIR}/{_name(3)}", f"{OTHER_DIR}/{_name(1)}"]
    end, files = _take(tmp_path, end, max_bytes=1)  # at least one file
    assert [f for f, _ in files] == [f"{OTHER_DIR}/{_name(2)}"]
    end, files = _take(tmp_path, end)
    assert [f for f, _ in files] == [f"{OTHER_DIR}/{_name(3)}"]
    json.dumps(end)  # Spark keeps it in its offset log


def test_look_alike_paths_come_once_for_the_dead_letters(tmp_path):
    _write(tmp_path, "shop/orders/notaversion/CDC000001.csv")
    _write(tmp_path, f"{DIR}/meta/CDC.index")
    end, files = _take(tmp_path, initial_offset())
    assert files == [("shop/orders/notaversion/CDC000001.csv", False)]
    assert _take(tmp_path, end) == (end, [])


def test_an_offset_of_another_release_is_refused():
    with pytest.raises(ValueError, match="offset version"):
        end_offset({"v": 99, "dirs": {}}, TreeListing(dirs={}, other=[]))
