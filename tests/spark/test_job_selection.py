"""``[filter] rules`` and ``column-selectors`` in the streaming job, from a changefeed TOML file.

A storage-sink tree and a canal-json changelog (the demo's three tables) run with ``crm.*`` filtered out and
``shop.customers``' ``email`` and ``avatar_hash`` columns left out: the crm table reaches no topic, no subject
and no dead-letter file but is counted; the registered schemas and every record lack the dropped columns;
every other value is what the reference encoder writes for the same rows without those columns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from avro_registry_sink.settings.config import load_config
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from tests.support.job import by_partition, canal_messages, decode_file_sink, replay

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

CHANGEFEED = """
case-sensitive = false
[filter]
rules = ['*.*', '!crm.*']
[sink]
protocol = "avro"
[[sink.column-selectors]]
matcher = ['shop.customers']
columns = ['*', '!email', '!avatar_*']
"""
DROPPED = {"email", "avatar_hash"}


def _config(tmp_path: Path, out: Path):
    toml = tmp_path / "changefeed.toml"
    toml.write_text(CHANGEFEED)
    return load_config(config_file=toml, sink_uri=f"file://{out}?protocol=avro", environ={})


def _check(result, manifest, out: Path, registry) -> None:
    from tests.support.job import expected_state

    assert result.totals.filtered and set(result.totals.filtered) == {"crm.events"}
    assert not result.bad_input and not result.dead_letters
    assert not any(s.startswith("crm") for s in registry.get_subjects())
    value_fields = [f["name"] for f in json.loads(registry.get_latest("shop_customers-value").schema)["fields"]]
    assert value_fields and not DROPPED & set(value_fields)
    topics = decode_file_sink(out, registry)
    assert sorted(topics) == ["shop_customers", "shop_orders"]
    expected = expected_state(manifest)
    customers = {k: ({c: v for c, v in value.items() if c not in DROPPED} if value is not None else None)
                 for k, value in expected["shop.customers"].items()}
    assert replay(by_partition(topics["shop_customers"])) == customers
    assert replay(by_partition(topics["shop_orders"])) == expected["shop.orders"]
    counts = manifest.counts["shop.customers"]
    assert len(topics["shop_customers"]) == counts.inserts + counts.updates + counts.deletes


def test_storage_tree_with_filter_rules_and_column_selector(spark, tmp_path, registry):
    manifest = generate_demo(tmp_path / "in", rows_per_table=8)
    options = JobOptions(source=parse_source(str(tmp_path / "in")), checkpoint=tmp_path / "checkpoint",
                         sink=_config(tmp_path, tmp_path / "out"), csv_options=manifest.csv_options,
                         tables=tuple(manifest.tables.values()))
    result = run_job(spark, options, registry=registry)
    assert result.totals.filtered["crm.events"] == sum(
        1 for f in manifest.data_files if f.startswith("crm/"))
    _check(result, manifest, tmp_path / "out", registry)


def test_canal_json_with_filter_rules_and_column_selector(spark, tmp_path, registry):
    manifest = generate_demo(tmp_path / "demo", rows_per_table=8)
    messages = [text for _, _, text in canal_messages(manifest, partitions=1)]
    src = tmp_path / "canal"
    src.mkdir()
    (src / "part-1.json").write_text("".join(m + "\n" for m in messages), encoding="utf-8")
    options = JobOptions(source=parse_source(f"canal-json+file://{src}"), checkpoint=tmp_path / "checkpoint",
                         sink=_config(tmp_path, tmp_path / "out"))
    result = run_job(spark, options, registry=registry)
    crm_messages = sum(1 for m in messages if json.loads(m).get("database") == "crm")
    assert result.totals.filtered["crm.events"] == crm_messages
    _check(result, manifest, tmp_path / "out", registry)
