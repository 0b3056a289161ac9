"""The demo storage-sink directory: re-read through StorageLayout it yields exactly its manifest."""

from __future__ import annotations

import filecmp
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from avro_registry_sink.changes import ChangeEvent
from avro_registry_sink.formats.csv import CsvOptions
from avro_registry_sink.model import Op
from avro_registry_sink.sources.demo import DemoManifest, OpCounts, generate_demo
from avro_registry_sink.sources.storage import StorageLayout

pytest.importorskip("avro_registry_sink.tabledef.storage")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoManifest:
    return generate_demo(tmp_path_factory.mktemp("demo") / "ticdc")


def _by_table(events: list[ChangeEvent]) -> dict[str, list[ChangeEvent]]:
    out: dict[str, list[ChangeEvent]] = defaultdict(list)
    for event in events:
        out[f"{event.schema}.{event.table}"].append(event)
    return dict(out)


def _replay(manifest: DemoManifest, events: list[ChangeEvent]) -> dict[str, dict[tuple[Any, ...], dict[str, Any]]]:
    rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {name: {} for name in manifest.tables}
    for event in events:
        name = f"{event.schema}.{event.table}"
        keys = manifest.key_columns[name]
        image = event.key_image
        key = tuple(image[k] for k in keys)
        if event.op is Op.DELETE:
            del rows[name][key]
        else:
            rows[name][key] = dict(event.after or {})
    for name, table in manifest.tables.items():  # columns added later show their DEFAULT
        for row in rows[name].values():
            for col in table.columns:
                row.setdefault(col.name, col.default)
    return rows


def test_reread_yields_exactly_the_manifest_events(demo: DemoManifest) -> None:
    layout = StorageLayout(demo.root)
    events, errors = layout.read_all(demo.csv_options)
    assert errors == []
    assert _by_table(events) == demo.events
    assert sum(len(v) for v in demo.events.values()) == len(events)


def test_counts_versions_checkpoint_and_final_rows(demo: DemoManifest) -> None:
    layout = StorageLayout(demo.root)
    events, _ = layout.read_all(demo.csv_options)
    for name, table_events in _by_table(events).items():
        got = OpCounts(*(sum(e.op is op for e in table_events) for op in (Op.INSERT, Op.UPDATE, Op.DELETE)))
        assert got == demo.counts[name]
        assert got.inserts == 12 and got.updates >= 2 and got.deletes >= 2
    versions: dict[str, list[int]] = defaultdict(list)
    for schema, table, version in layout.table_versions():
        versions[f"{schema}.{table}"].append(version)
    assert {k: tuple(v) for k, v in versions.items()} == demo.schema_versions
    assert len(demo.schema_versions["shop.orders"]) == 2
    assert layout.checkpoint_ts() == demo.checkpoint_ts
    assert all(e.commit_ts < demo.checkpoint_ts for e in events)
    assert _replay(demo, demo.all_events) == demo.final_rows
    assert _replay(demo, sorted(events, key=lambda e: e.commit_ts)) == demo.final_rows


def test_layout_is_realistic(demo: DemoManifest) -> None:
    layout = StorageLayout(demo.root)
    [ddl] = layout.ddl_events()
    assert (ddl.schema, ddl.table, ddl.kind) == ("shop", "orders", "5")
    assert ddl.query == "ALTER TABLE `shop`.`orders` ADD COLUMN `channel` VARCHAR(16) NOT NULL DEFAULT 'web'"
    assert ddl.commit_ts == demo.schema_versions["shop.orders"][1]
    files = layout.data_files()
    assert [f.relpath for f in files] == sorted(demo.data_files, key=lambda p: next(
        f.sort_key for f in files if f.relpath == p))
    per_dir: dict[Path, list[str]] = defaultdict(list)
    for f in files:
        per_dir[f.path.parent].append(f.path.name)
        assert f.date is not None and f.partition is None
    for directory, names in per_dir.items():
        assert (directory / "meta" / "CDC.index").read_text() == max(names) + "\n"
    old_orders = [f for f in files if f.table == "orders" and f.version == demo.start_ts]
    assert [f.number for f in old_orders] == [1, 2]  # two flushes before the DDL
    assert {f.format for f in files if f.schema == "crm"} == {"json"}
    assert {f.format for f in files if f.schema == "shop"} == {"csv"}
    assert json.loads((demo.root / "metadata").read_text()) == {"checkpoint-ts": demo.checkpoint_ts}
    commit_ts = [e.commit_ts for e in demo.all_events]
    assert commit_ts == sorted(commit_ts) and all(ts >> 18 > 1_700_000_000_000 for ts in commit_ts)


def test_demo_data_exercises_the_hard_cases(demo: DemoManifest) -> None:
    values = defaultdict(list)
    for event in demo.all_events:
        for image in (event.before, event.after):
            for name, value in (image or {}).items():
                values[f"{event.schema}.{event.table}.{name}"].append(value)
    notes = values["shop.orders.note"]
    assert None in notes and any(isinstance(n, str) and ("\n" in n or '"' in n) for n in notes)
    assert max(values["crm.events.id"]) > 2**63
    assert any(isinstance(p, bytes) and b"\x00" in p and b"\xff" in p for p in values["crm.events.payload"])
    assert all(isinstance(d, str) and len(d.split(".")[1]) == 2 for d in values["shop.orders.amount"])
    assert any(isinstance(b, bytes) for b in values["shop.customers.avatar_hash"])
    assert demo.tables["shop.customers"].primary_key == ()
    assert demo.key_columns["shop.customers"] == ("code",)
    assert "UNIQUE KEY" in demo.create_statements["shop.customers"]
    canal = next(demo.root.glob("crm/events/*/*/CDC*.json")).read_bytes()
    assert canal.endswith(b"\r\n") and b'"_tidb":{"commitTs":' in canal


def test_same_seed_same_bytes_other_seed_other_data(tmp_path: Path) -> None:
    a = generate_demo(tmp_path / "a", seed=3, rows_per_table=6)
    b = generate_demo(tmp_path / "b", seed=3, rows_per_table=6)
    c = generate_demo(tmp_path / "c", seed=4, rows_per_table=6)
    assert a.data_files == b.data_files
    for relpath in a.data_files:
        assert filecmp.cmp(a.root / relpath, b.root / relpath, shallow=False)
    assert a.final_rows == b.final_rows
    assert a.final_rows != c.final_rows


@pytest.mark.parametrize(
    "options",
    [
        CsvOptions(delimiter="|", quote="", binary_encoding_method="hex", output_field_header=True),
        CsvOptions(delimiter="::", output_old_value=False, include_commit_ts=True, terminator="\n"),
        CsvOptions(),
    ],
)
def test_other_csv_settings_round_trip(tmp_path: Path, options: CsvOptions) -> None:
    demo = generate_demo(tmp_path / "d", rows_per_table=8, csv_options=options)
    events, errors = StorageLayout(demo.root).read_all(options)
    assert errors == []
    assert _by_table(events) == demo.events
    csv_updates = [e for e in events if e.schema == "shop" and e.op is Op.UPDATE]
    assert all((e.before is not None) == options.output_old_value for e in csv_updates)


def test_rows_per_table_must_allow_updates_and_deletes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 4"):
        generate_demo(tmp_path, rows_per_table=3)


def test_summary_is_json(demo: DemoManifest) -> None:
    summary = json.loads(json.dumps(demo.summary()))
    assert summary["tables"]["shop.orders"]["inserts"] == 12
    assert summary["tables"]["crm.events"]["format"] == "json"
