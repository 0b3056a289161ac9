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


def test_read_topic_pairs():
    assert parse_read_topics(["a=b", " c = d "]) == {"a": "b", "c": "d"}
    with pytest.raises(ConfigError, match="--read-topic"):
        parse_read_topics(["a"])
