"""The demo generator is linear in the rows it writes (issue 22: it was quadratic and ran out of keys near 99k
rows per table). No timed assertion: the work is counted (lines of the generator executed, random draws of
the live-key chooser), so a loaded machine cannot fail it and a quadratic step cannot pass it."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from avro_registry_sink.sources import demo
from avro_registry_sink.sources.demo import LiveKeys, generate_demo
from avro_registry_sink.sources.storage import StorageLayout

ROWS = 10_000  # per table: over 40,000 changes in all, four progress steps and the end


class _OverBudget(Exception):
    pass


def _lines_executed(root: Path, rows: int, budget: int) -> int:
    """Lines of ``sources/demo.py`` executed by ``generate_demo(rows_per_table=rows)`` (loop iterations of
    comprehensions included); stops with ``_OverBudget`` past ``budget``."""
    count = 0
    target = demo.__file__

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
            if count > budget:
                raise _OverBudget(f"more than {budget} lines for {rows} rows per table")
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename == target else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        generate_demo(root, rows_per_table=rows)
    finally:
        sys.settrace(previous)
    return count


def test_ten_times_the_rows_is_ten_times_the_work(tmp_path):
    small = _lines_executed(tmp_path / "small", 400, budget=10**8)
    large = _lines_executed(tmp_path / "large", 4000, budget=20 * small)  # quadratic work stops here

    assert large <= 11 * small, (small, large)


def test_the_keys_never_run_out_near_a_hundred_thousand():
    """Issue 22's failure: each table's keys came from a range that ended before 100,000 (orders at 98,999), so a
    demo of ~99k rows per table stopped there. Every table's key source gives 150,000 distinct keys (the source
    alone: a whole demo of that size takes ~15 s)."""
    keys = demo._Generator(random.Random(7))
    for name in ("shop.orders", "shop.customers", "crm.events"):
        drawn = [keys.new_key(name) for _ in range(150_000)]
        assert len(set(drawn)) == len(drawn), name


def test_a_large_demo_counts_without_keeping_events(tmp_path):
    choosers: list[LiveKeys] = []

    def counting() -> LiveKeys:
        choosers.append(LiveKeys())
        return choosers[-1]

    done: list[tuple[int, int]] = []
    manifest = generate_demo(tmp_path / "big", rows_per_table=ROWS, keep_events=False, live_keys=counting,
                             progress=lambda written, total: done.append((written, total)))

    picks = 0
    for name, counts in manifest.counts.items():
        assert counts.inserts == ROWS, name
        assert counts.updates > 0 and counts.deletes > 0
        picks += counts.updates + counts.deletes
    draws = sum(chooser.draws for chooser in choosers)
    assert picks <= draws <= 1.2 * picks + 100  # one draw per update or delete, rarely a second
    assert manifest.events == {name: [] for name in manifest.tables} and manifest.final_rows == {
        name: {} for name in manifest.tables}  # keep_events=False: counts only, memory bounded by the live rows
    total = sum(c.inserts + c.updates + c.deletes for c in manifest.counts.values())
    assert len(done) > total // demo.PROGRESS_STEP >= 4 and done[-1][0] == done[-1][1] == total
    assert [w for w, _ in done] == sorted(w for w, _ in done)


@pytest.mark.parametrize("rows", [4, 5, 12, 37])
def test_small_demos_keep_their_shape(tmp_path, rows):
    manifest = generate_demo(tmp_path / "d", rows_per_table=rows, max_rows_per_file=3)
    for name, counts in manifest.counts.items():
        assert counts.inserts == rows
        assert len(manifest.events[name]) == counts.inserts + counts.updates + counts.deletes
        assert len(manifest.final_rows[name]) == counts.inserts - counts.deletes
    if rows > 12:  # a flush of more changes than max_rows_per_file is split into numbered files
        assert len(manifest.data_files) > 9 and any(f.endswith("CDC00000000000000000003.csv") for f in manifest.data_files)
        events, errors = StorageLayout(manifest.root).read_all(manifest.csv_options)
        assert errors == [] and sorted(events, key=_order) == sorted(manifest.all_events, key=_order)


def _order(event) -> tuple:
    return (event.commit_ts, event.schema, event.table, event.source)
