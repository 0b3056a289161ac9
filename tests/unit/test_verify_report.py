"""The verify report without Spark: its verdict, its JSON, its table on a terminal, the --read-topic option."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.spark.verify import DISCREPANCIES, VerifyReport, parse_read_topics, print_report


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


def test_the_terminal_table_names_every_table_and_the_verdict():
    report = _report()
    report.table("shop.orders")["missing"] = 2
    report.samples.append({"kind": "missing", "table": "shop.orders", "source": "shop/orders/1/CDC1.csv:7"})
    report.notes.append("1 batch(es) of the file sink are staged")
    console = Console(record=True, width=250)

    print_report(report, console)

    text = console.export_text()
    assert "shop.orders" in text and "crm.events" in text and "missing" in text
    assert "CDC1.csv:7" in text and "staged" in text and "discrepancies found" in text


def test_the_terminal_table_shows_completeness_of_an_exactly_once_run():
    report = _report()
    report.table("shop.orders")["completeness"] = {"resolved_ts": 4496, "complete": True,
                                                   "first_missing_ts": None, "max_delivered_ts": 4496}
    report.table("crm.events")["completeness"] = {"resolved_ts": 4500, "complete": False,
                                                  "first_missing_ts": 4499, "max_delivered_ts": 4400}
    report.table("topic canal")["unread"] = 0  # the source topic's unread messages: no resolved ts there
    console = Console(record=True, width=250)

    print_report(report, console)

    text = console.export_text()
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if line.count("│") > 3]
    assert "resolved ts" in text and "complete" in text
    assert {row[0]: row[-2:] for row in cells} == {"shop.orders": ["4496", "yes"], "crm.events": ["4500", "no"],
                                                   "topic canal": ["-", "-"]}


def test_a_report_without_resolved_ts_has_no_completeness_columns():
    console = Console(record=True, width=250)
    print_report(_report(), console)
    assert "resolved ts" not in console.export_text()


def test_read_topic_pairs():
    assert parse_read_topics(["a=b", " c = d "]) == {"a": "b", "c": "d"}
    with pytest.raises(ConfigError, match="--read-topic"):
        parse_read_topics(["a"])
