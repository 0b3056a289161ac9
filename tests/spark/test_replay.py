"""Replay: dead-lettered rows, after the fix, delivered once through the job's own parse and encode path."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.settings.config import SinkConfig, load_config
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.audit.replay import pending_records, replay_dead_letters
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from tests.support.job import decode_file_sink, decoded_changes, key_of, manifest_definition

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]


def _delivered(out, client) -> Counter:
    """(table, key, value, commit ts) of every record in the file sink, counted."""
    found: Counter = Counter()
    for topic, records in decode_file_sink(out, client).items():
        for _, commit_ts, key, value in records:
            found[(topic.replace("_", ".", 1), key_of(key), json.dumps(value, sort_keys=True, default=str),
                   commit_ts)] += 1
    return found


def _expected(manifest) -> Counter:
    changes = decoded_changes(manifest.all_events, manifest_definition(manifest))
    return Counter((name, key, json.dumps(value, sort_keys=True, default=str), event.commit_ts)
                   for (name, key, value), event in zip(changes, manifest.all_events, strict=False))


def test_replay_after_the_fix_delivers_the_rest_exactly_once(spark, tmp_path, registry):
    manifest = generate_demo(tmp_path / "in", rows_per_table=6)
    fixed = JobOptions(source=parse_source(str(tmp_path / "in")), checkpoint=tmp_path / "ck",
                       sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), csv_options=manifest.csv_options,
                       tables=tuple(manifest.tables.values()))
    # 80 bytes: every tombstone (key + 36) fits, no row with a value does
    tight = replace(fixed, sink=fixed.sink.model_copy(update={"max_message_bytes": 80}))
    deletes = sum(c.deletes for c in manifest.counts.values())
    total = len(manifest.all_events)

    first = run_job(spark, tight, registry=registry)
    assert first.totals.rows == deletes and first.totals.errors == total - deletes
    pending = pending_records(tmp_path / "ck")
    assert len(pending) == total - deletes
    assert all(r["raw_base64"] and r["id"] for r in pending), [r for r in pending if not r["raw_base64"]]

    again = replay_dead_letters(spark, tight, registry=registry)  # not fixed yet: set aside again
    assert (again.replay, again.delivered, again.failed_again) == (1, 0, total - deletes)
    refailed = [json.loads(line) for line in again.dead_letter.read_text().splitlines()]
    assert {r["id"] for r in refailed} == {r["id"] for r in pending}
    assert all(r["replay"] == 1 and "max-message-bytes 80" in r["reason"] for r in refailed)
    assert {r["source"] for r in refailed} == {r["source"] for r in pending}  # the original locations

    done = replay_dead_letters(spark, fixed, registry=registry)  # after the fix
    assert (done.replay, done.delivered, done.failed_again) == (2, total - deletes, 0)
    assert _delivered(tmp_path / "out", registry) == _expected(manifest)  # each change once, commit ts kept
    assert pending_records(tmp_path / "ck") == []

    cli = CliRunner().invoke(app, [
        "replay", "--source", str(tmp_path / "in"), "--checkpoint", str(tmp_path / "ck"),
        "--sink-uri", f"file://{tmp_path / 'out'}", "--state-dir", str(tmp_path / "state")])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout.strip().splitlines()[-1])["delivered"] == 0  # nothing left: nothing twice
    assert _delivered(tmp_path / "out", registry) == _expected(manifest)


def test_replay_leaves_out_what_the_run_leaves_out(spark, tmp_path, registry):
    """Column selectors and ``[filter] rules`` hold for replayed rows as for the run's: the same schema, one
    version per subject, the selected columns only."""
    from tests.spark.test_job_selection import CHANGEFEED, DROPPED

    manifest = generate_demo(tmp_path / "in", rows_per_table=4)
    toml = tmp_path / "changefeed.toml"
    toml.write_text(CHANGEFEED)
    sink = load_config(config_file=toml, sink_uri=f"file://{tmp_path / 'out'}?protocol=avro", environ={})
    fixed = JobOptions(source=parse_source(str(tmp_path / "in")), checkpoint=tmp_path / "ck", sink=sink,
                       csv_options=manifest.csv_options, tables=tuple(manifest.tables.values()))
    tight = replace(fixed, sink=sink.model_copy(update={"max_message_bytes": 80}))  # only tombstones fit

    first = run_job(spark, tight, registry=registry)
    assert first.totals.errors and first.totals.filtered
    done = replay_dead_letters(spark, fixed, registry=registry)
    assert (done.delivered, done.failed_again) == (first.totals.errors, 0)

    assert not any(s.startswith("crm") for s in registry.get_subjects())
    assert registry.get_versions("shop_customers-value") == [1]
    fields = {f["name"] for f in json.loads(registry.get_latest("shop_customers-value").schema)["fields"]}
    assert fields and not DROPPED & fields
    customers = decode_file_sink(tmp_path / "out", registry)["shop_customers"]
    counts = manifest.counts["shop.customers"]
    assert len(customers) == counts.inserts + counts.updates + counts.deletes
    assert all(not DROPPED & set(value) for *_, value in customers if value is not None)


def test_replay_refuses_a_checkpoint_no_run_made(tmp_path):
    result = CliRunner().invoke(app, ["replay", "--source", str(tmp_path), "--checkpoint", str(tmp_path / "none")])
    assert result.exit_code == 2 and "No job ran with checkpoint" in result.stderr
