"""The benchmark harness runs: generated storage trees read back cleanly, the quick encoder section reports."""

from __future__ import annotations

from pathlib import Path

from avro_registry_sink.model import Op
from avro_registry_sink.sources.storage import StorageLayout
from bench.harness import Timing, fmt_ratio, per_round_ratios
from bench.run import main
from bench.tree import CSV_OPTIONS, storage_tree


def test_generated_tree_is_what_ticdc_writes_and_is_reused(tmp_path: Path):
    tree = storage_tree(2_500, 3, cache=tmp_path, rows_per_file=1_000)
    events, errors = StorageLayout(tree.root).read_all(CSV_OPTIONS)
    assert errors == []
    assert len(events) == tree.rows == 2_500
    assert {e.table for e in events} == {"t000", "t001", "t002"}
    counts = {op: sum(e.op is op for e in events) for op in Op}
    assert counts == {Op.INSERT: tree.ops["insert"], Op.UPDATE: tree.ops["update"], Op.DELETE: tree.ops["delete"]}
    assert counts[Op.UPDATE] and counts[Op.DELETE]
    assert tree.files == 3  # 834 + 833 + 833 rows: one file each
    per_table = {}
    for e in events:
        per_table.setdefault(e.table, []).append(e.commit_ts)
    assert all(ts == sorted(ts) for ts in per_table.values())
    again = storage_tree(2_500, 3, cache=tmp_path, rows_per_file=1_000)
    assert again.root == tree.root and again.seconds == 0.0  # from the cache


def test_ratios_are_taken_round_by_round():
    candidate, baseline = Timing("c", [1.0, 4.0, 2.0]), Timing("b", [2.0, 4.0, 8.0])
    assert per_round_ratios(candidate, 10, baseline, 10) == [2.0, 1.0, 4.0]
    assert fmt_ratio([2.0, 1.0, 4.0]) == "2.00x (1.00-4.00x)"


def test_quick_encoder_section_writes_results(tmp_path: Path):
    out = tmp_path / "results.md"
    assert main(["--quick", "--only", "encoders", "--rows", "3000", "--rounds", "1", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "- machine (read at run time): " in text and " cores (" in text
    assert "columnar encoder / confluent-kafka AvroSerializer, per core, same rounds: **" in text
    assert "Columnar output equals the reference encoder's bytes on the first 2,000 rows: **True**" in text
