"""``verify`` reads a changelog source with the job's own changelog stage
(:func:`~avro_registry_sink.spark.sources.changelog_stage.encode_changelog`): the full pass and the re-read of
the messages behind a differing value both go through it, with the run's ``[filter] rules`` and dead letters;
the records' source locations are the text the job's dead letters carry.
"""

from __future__ import annotations

import json

import pytest

from avro_registry_sink.sources.demo import generate_demo
from tests.support.job import canal_messages
from tests.support.tamper import tamper_file_sink

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]


def test_verify_reads_a_changelog_through_the_jobs_stage(spark, tmp_path, registry, monkeypatch):
    from avro_registry_sink.settings.config import SinkConfig
    from avro_registry_sink.spark.audit import verify
    from avro_registry_sink.spark.driver.job import run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source

    manifest = generate_demo(tmp_path / "demo", rows_per_table=4)
    messages = [m for _, _, m in canal_messages(manifest, partitions=1)]
    (tmp_path / "canal").mkdir()
    half = len(messages) // 2
    (tmp_path / "canal" / "part-1.jsonl").write_text("".join(m + "\n" for m in messages[:half]))
    (tmp_path / "canal" / "part-2.jsonl").write_text("{not json\n" + "".join(m + "\n" for m in messages[half:]))
    out = tmp_path / "out"
    options = JobOptions(source=parse_source(f"canal-json+file://{tmp_path / 'canal'}"),
                         checkpoint=tmp_path / "checkpoint",
                         sink=SinkConfig(scheme="file", path=str(out), filter_rules=("*.*", "!crm.events")))
    run_job(spark, options, registry=registry)
    calls: list[tuple[str, object, object]] = []
    job_stage = verify.encode_changelog

    def watched(batch_df, spec, history, plans, excluded=frozenset(), output=None, **kwargs):
        calls.append((spec.kind, excluded, kwargs.get("table_filter")))
        return job_stage(batch_df, spec, history, plans, excluded, output, **kwargs)

    monkeypatch.setattr(verify, "encode_changelog", watched)

    tamper_file_sink(out, "shop_orders", "decimal", registry)  # one DECIMAL off by one unit in the last place

    report = verify.verify_run(spark, options, registry=registry)

    assert [c[0] for c in calls] == ["canal-json"] * 2  # the whole committed input, then the differing message's file
    assert not calls[0][2].matches("crm", "events") and calls[0][2].matches("shop", "orders")  # the run's filter
    shown = [e for e in manifest.all_events if (e.schema, e.table) != ("crm", "events")]
    assert report.totals["expected"] == report.totals["delivered"] == len(shown)
    assert "crm.events" not in report.tables  # left out by [filter] rules, as the run left it out
    assert report.totals["dead_lettered"] == 1  # the line that is no JSON: set aside by the run, not missing
    assert {k: report.totals[k] for k in verify.DISCREPANCIES if report.totals[k]} == {"value_mismatch": 1}, (
        json.dumps(report.to_json(), indent=1, default=str))
    assert report.tables["shop.orders"]["value_mismatch"] == 1
    sample = next(s for s in report.samples if s["kind"] == "value_mismatch")
    assert sample["source"].startswith("part-") and sample["differs"] == ["amount"], sample
    file, _, line = sample["source"].rpartition(":")
    message = json.loads((tmp_path / "canal" / file).read_text().splitlines()[int(line) - 1])
    assert message["table"] == "orders"  # the location names the very message the record came from
    assert str(sample["expected_value"]["amount"]) == message["data"][0]["amount"], (sample, message)


def test_a_kafka_records_location_is_its_dead_letters_source_text(spark):
    from avro_registry_sink.spark.audit.verify import _source_of
    from avro_registry_sink.spark.sources.sources import parse_source

    kafka = parse_source("canal-json+kafka://127.0.0.1:1/t.x-1")
    files = parse_source("canal-json+file:///tmp/canal")
    ddl = "order_file STRING, order_line BIGINT"
    records = spark.createDataFrame([("t.x-1/0000000012", 17), ("t.x-1/0000000000", 0)], ddl)
    lines = spark.createDataFrame([("a/b.jsonl", 3)], ddl)

    assert [r[0] for r in records.select(_source_of(kafka)).collect()] == ["t.x-1/12@17", "t.x-1/0@0"]
    assert [r[0] for r in lines.select(_source_of(files)).collect()] == ["a/b.jsonl:3"]
