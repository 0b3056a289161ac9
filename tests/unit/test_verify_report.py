"""The verify report without Spark: its verdict, its JSON, its table on a terminal, the --read-topic option."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.spark.audit.verify import DISCREPANCIES, VerifyReport, parse_read_topics, print_report


def _report() -> VerifyReport:
    report = VerifyReport(source="storage:///data/ticdc", sink="/out", checkpoint="/ck", committed_batch=4)
    report.table("shop.orders").update(expected=20, delivered=20, topic="shop_orders")
    report.table("crm.events").update(expected=5, delivered=5, dead_lettered=1, held_files=1)
    return report


def test_a_report_without_discrepancies_is_ok():
    report = _report()
    assert report.ok
    data = json.loads(json.dumps(report.to_json()))
    assert data["status"] == "ok" and data["totals"]["expected"] == 25 and data["totals"]["dead_lettered"] == 1
    assert sorted(data["tables"]) == ["crm.events", "shop.orders"]


@pytest.mark.parametrize("count", DISCREPANCIES)
def test_any_discrepancy_fails_the_report(count):
    report = _report()
    report.table("shop.orders")[count] = 1
    assert not report.ok and report.to_json()["status"] == "discrepancies"


def _printed(report: VerifyReport, width: int = 80) -> str:
    console = Console(record=True, width=width)
    print_report(report, console)
    return console.export_text()


def test_the_terminal_report_names_every_table_and_the_verdict():
    report = _report()
    report.table("shop.orders")["missing"] = 2
    report.samples.append({"kind": "missing", "table": "shop.orders", "source": "shop/orders/1/CDC1.csv:7"})
    report.notes.append("1 batch(es) of the file sink are staged")

    text = _printed(report)

    assert "shop.orders" in text and "crm.events" in text and "2 missing" in text
    assert "CDC1.csv:7" in text and "staged" in text and text.startswith("DISCREPANCIES in 1 of 2 table(s)")


def test_what_is_wrong_comes_first_readable_at_80_columns_with_whole_table_names():
    report = _report()
    long_name = "shop.order_line_items_archive_2024_with_a_long_name"
    report.table(long_name).update(expected=9, delivered=7, missing=2, value_mismatch=1, topic="shop_order_lines")
    report.table("shop.orders")["duplicated"] = 1
    report.samples.append({"kind": "missing", "table": long_name, "source": "shop/order_line_items/1/CDC1.csv:7"})

    text = _printed(report)
    lines = text.splitlines()

    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "…" not in text
    assert lines[0].startswith("DISCREPANCIES in 2 of 3 table(s): 2 missing, 1 duplicated, 1 value differs")
    blocks = [line for line in lines if line and not line.startswith(" ")]
    assert blocks[1].startswith(long_name) and blocks[2].startswith("shop.orders")  # the worst table first
    assert lines.index(blocks[1]) < text.splitlines().index("Reconciled (1):")
    assert "  crm.events: 5 expected, 5 delivered, 1 dead-lettered, 1 held files" in lines


def test_a_reconciled_report_says_so_on_its_first_line():
    text = _printed(_report())
    assert text.splitlines()[0].startswith("OK: 2 table(s) reconcile, 25 rows expected, 25 delivered")
    assert "DISCREPANCIES" not in text


@pytest.mark.parametrize(("in_source", "said"), [
    (3, "3 out of order (the source has them in that order too)"),
    (1, "3 out of order (1 of them in that order in the source too)"),
    (0, "3 out of order (the source has them in commit-ts order)"),
])
def test_out_of_order_says_whether_the_source_had_that_order(in_source, said):
    report = _report()
    report.table("shop.orders").update(out_of_order=3, out_of_order_in_source=in_source)
    text = " ".join(_printed(report, width=200).split())
    assert said in text
    assert report.to_json()["tables"]["shop.orders"]["out_of_order_in_source"] == in_source


def test_the_report_shows_completeness_of_an_exactly_once_run_and_where_the_mode_came_from():
    report = _report()
    report.delivery, report.delivery_from = "exactly-once", "the checkpoint's delivery.json"
    report.table("shop.orders")["completeness"] = {"resolved_ts": 4496, "complete": True,
                                                   "first_missing_ts": None, "max_delivered_ts": 4496}
    report.table("crm.events").update(missing=1)
    report.table("crm.events")["completeness"] = {"resolved_ts": 4500, "complete": False,
                                                  "first_missing_ts": 4499, "max_delivered_ts": 4400}

    text = " ".join(_printed(report).split())

    assert "incomplete up to resolved ts 4500 (first missing commit ts 4499)" in text
    assert "shop.orders: 20 expected, 20 delivered, complete up to resolved ts 4496" in text
    assert "delivery: exactly-once (the checkpoint's delivery.json)" in text
    assert report.to_json()["delivery"] == "exactly-once"


def test_a_report_without_resolved_ts_says_nothing_of_completeness():
    assert "resolved ts" not in _printed(_report())


def test_the_delivery_mode_comes_from_the_checkpoint_not_the_options(tmp_path):
    from types import SimpleNamespace

    from avro_registry_sink.kafka.delivery import STATE_FILE
    from avro_registry_sink.settings.config import SinkConfig
    from avro_registry_sink.spark.audit.verify import run_delivery
    from avro_registry_sink.storage_fs import parse_storage_uri

    checkpoint = parse_storage_uri(str(tmp_path), option="checkpoint")
    kafka = SinkConfig(scheme="kafka", brokers=("k:9092",))  # delivery not given: at-least-once by default
    options = SimpleNamespace(sink=kafka, checkpoint_uri=checkpoint)
    assert run_delivery(options) == ("at-least-once", f"the checkpoint has no {STATE_FILE}")
    (tmp_path / STATE_FILE).write_text('{"query": "q1", "writers": {}}')
    assert run_delivery(options) == ("exactly-once", f"the checkpoint's {STATE_FILE}")
    given = SimpleNamespace(sink=kafka.model_copy(update={"delivery": "exactly-once"}), checkpoint_uri=checkpoint)
    (tmp_path / STATE_FILE).unlink()
    assert run_delivery(given)[1].endswith("(not the exactly-once verify was given)")
    assert run_delivery(SimpleNamespace(sink=SinkConfig(), checkpoint_uri=checkpoint))[0] == "exactly-once"


def test_read_topic_pairs():
    assert parse_read_topics(["a=b", " c = d "]) == {"a": "b", "c": "d"}
    with pytest.raises(ConfigError, match="--read-topic"):
        parse_read_topics(["a"])
