"""``avro-registry-sink verify`` on a Kafka sink (read with ``isolation.level=read_committed``): a clean run
reconciles (exit 0); a copy of a delivered topic with faults (a record left out, one produced twice, two
changes of one key swapped, a DECIMAL off by one unit in the last place, a wrong or unknown schema id, an op
header), each on a key of its own, read in its place (``--read-topic``) is found by one verify run (exit 1):
each fault counted and listed on its record; an exact copy of another topic, read in the same run, reconciles. A canal-json topic as the source is
verified the same way (its committed offsets, the table versions the run kept).

Markers ``kafka`` and ``spark``; topics and subjects carry a prefix of their own (the broker is shared).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig
from avro_registry_sink.sources.demo import DemoManifest, generate_demo
from avro_registry_sink.spark.audit.verify import DISCREPANCIES
from tests.support.job import canal_messages, stamp_in_order
from tests.support.servers import ensure_kafka
from tests.support.tamper import (
    SAMPLE_KIND,
    UNKNOWN_ID,
    copy_topic,
    copy_topic_with_faults,
    decoded_key,
    fault_counts,
    read_topic,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

runner = CliRunner()
TABLES = ("crm.events", "shop.customers", "shop.orders")


@dataclass
class Run:
    base: Path
    manifest: DemoManifest
    client: RegistryClient
    bootstrap: str
    prefix: str
    options: list[str]

    def verify(self, *extra: str) -> tuple[int, dict[str, Any]]:
        result = runner.invoke(app, ["verify", *self.options, "--json", *extra])
        assert result.exit_code in (0, 1), result.output
        return result.exit_code, json.loads(result.stdout.strip().splitlines()[-1])

    def topic(self, table: str) -> str:
        return f"{self.prefix}_{table.replace('.', '_')}"


@pytest.fixture(scope="module")
def bootstrap() -> str:
    return ensure_kafka()


@pytest.fixture(scope="module")
def registry_url():
    server = EmbeddedRegistry()
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="module")
def run(spark, bootstrap, registry_url, tmp_path_factory) -> Any:
    """The demo tree run into Kafka by the CLI (three partitions per topic), in several batches."""
    base = tmp_path_factory.mktemp("verify-kafka")
    prefix = "v" + uuid.uuid4().hex[:8]
    manifest = generate_demo(base / "in", rows_per_table=12)
    stamp_in_order(base / "in", manifest.data_files)
    ddl = base / "tables.sql"
    ddl.write_text(";\n".join(manifest.create_statements.values()) + ";\n", encoding="utf-8")
    options = ["--source", str(base / "in"), "--checkpoint", str(base / "checkpoint"), "--registry", registry_url,
               "--sink-uri", f"kafka://{bootstrap}/?protocol=avro&partition-num=3", "--topic-rule",
               prefix + "_{schema}_{table}", "--tables", str(ddl), "--csv", "include-commit-ts=true",
               "--csv", "output-old-value=true"]
    result = runner.invoke(app, ["run", *options, "--available-now", "--max-files-per-trigger", "4",
                                 "--progress", "none"])
    assert result.exit_code == 0, result.output
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        yield Run(base=base, manifest=manifest, client=client, bootstrap=bootstrap, prefix=prefix, options=options)


def _counts(report: dict[str, Any], table: str) -> dict[str, int]:
    return {k: report["tables"][table][k] for k in DISCREPANCIES}


def _total(manifest: DemoManifest, table: str) -> int:
    counts = manifest.counts[table]
    return counts.inserts + counts.updates + counts.deletes


def test_a_clean_kafka_run_reconciles(run):
    code, report = run.verify()

    assert code == 0, report
    assert all(report["totals"][k] == 0 for k in DISCREPANCIES)
    assert sorted(report["tables"]) == list(TABLES)
    for table in TABLES:
        counts = report["tables"][table]
        assert counts["expected"] == counts["delivered"] == _total(run.manifest, table), table
        assert counts["topic"] == run.topic(table)


#: The faults injected into one copy of its topic, each on a key of its own, and found by one verify run:
#: shop.orders shows the sum of what each shows (``tamper.SHOWS``), each listed on its own record.
FAULTS = ("drop", "duplicate", "swap", "decimal", "wrong_schema_id", "unknown_schema_id", "op_header")


@dataclass
class Found:
    report: dict[str, Any]
    changed: dict[str, dict[str, Any]]  # fault kind -> the record it changed, as it was
    faulty: str  # the copy of shop.orders' topic with the faults
    records: list[list[dict[str, Any]]]  # its records, per partition
    exact: str  # an exact copy of shop.customers' topic


@pytest.fixture(scope="module")
def found(run) -> Found:
    """One verify run reading shop.orders from a copy of its topic with every fault of FAULTS (each on a key of
    its own) and shop.customers from an exact copy of its topic."""
    faulty, exact = run.topic("shop.orders") + "_faults", run.topic("shop.customers") + "_copy"
    changed = copy_topic_with_faults(run.bootstrap, run.topic("shop.orders"), faulty, FAULTS, run.client)
    copy_topic(run.bootstrap, run.topic("shop.customers"), exact, None, run.client)

    code, report = run.verify("--read-topic", f"{run.topic('shop.orders')}={faulty}",
                              "--read-topic", f"{run.topic('shop.customers')}={exact}")

    assert code == 1, report
    return Found(report=report, changed=changed, faulty=faulty, records=read_topic(run.bootstrap, faulty),
                 exact=exact)


def test_an_exact_copy_of_a_topic_reconciles(run, found):
    assert _counts(found.report, "shop.customers") == {k: 0 for k in DISCREPANCIES}
    assert found.report["tables"]["shop.customers"]["delivered"] == _total(run.manifest, "shop.customers")
    assert found.report["tables"]["shop.customers"]["expected"] == _total(run.manifest, "shop.customers")


def test_every_fault_in_a_copy_of_a_topic_is_counted(run, found):
    report = found.report
    assert _counts(report, "shop.orders") == fault_counts(FAULTS, DISCREPANCIES)
    total = _total(run.manifest, "shop.orders")
    assert report["tables"]["shop.orders"]["expected"] == total
    assert report["tables"]["shop.orders"]["delivered"] == total - 1 + 1  # one record dropped, one duplicated
    for table in ("crm.events", "shop.customers"):
        assert _counts(report, table) == {k: 0 for k in DISCREPANCIES}
    assert all(s["table"] == "shop.orders" for s in report["samples"])
    assert len(report["samples"]) == len(FAULTS)  # each fault listed once


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_each_fault_in_a_copy_of_a_topic_is_listed_on_its_record(run, found, kind):
    record = found.changed[kind]
    key = decoded_key(record, run.client)
    listed = [s for s in found.report["samples"] if s["kind"] == SAMPLE_KIND[kind] and s["key"] == key
              and s.get("commit_ts", record["commit_ts"]) == record["commit_ts"]]
    assert len(listed) == 1, (kind, key, record["commit_ts"], found.report["samples"])
    sample = listed[0]

    assert sample["table"] == "shop.orders"
    if kind == "drop":
        assert sample["source"].startswith("shop/orders/")
    if kind in ("duplicate", "decimal", "wrong_schema_id", "unknown_schema_id", "op_header"):
        partition, _, offset = sample["sink"].removeprefix(found.faulty + "/").partition("@")
        at = next(r for r in found.records[int(partition)] if r["offset"] == int(offset))
        assert (at["key"], at["commit_ts"]) == (record["key"], record["commit_ts"])  # the sink location is its record
    if kind == "decimal":
        assert sample["differs"] == ["amount"] and at["value"] != record["value"]
    if kind == "wrong_schema_id":
        assert sample["delivered"]["value_schema_id"] == int.from_bytes(record["key"][1:5], "big")
        assert sample["decoded"] == "undecodable"
    if kind == "unknown_schema_id":
        assert sample["delivered"]["value_schema_id"] == UNKNOWN_ID and sample["decoded"] == "unknown"
    if kind == "swap":
        stamps = [d["commit_ts"] for d in sample["delivered"]]
        assert record["commit_ts"] in stamps and stamps != sorted(stamps)
    if kind == "op_header":
        assert (sample["header"], sample["expected"], sample["found"]) == ("op", "c", "d")
        assert sample["offset"] == int(offset) and ("op", b"d") in at["headers"]  # the offset is the tampered record's


def test_a_canal_json_topic_source_reconciles_and_a_drop_is_found(spark, bootstrap, registry_url, tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix = "w" + uuid.uuid4().hex[:8]
    manifest = generate_demo(tmp_path / "demo", rows_per_table=10)
    source = f"{prefix}_canal"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(source, num_partitions=3, replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for partition, _, message in canal_messages(manifest, partitions=3):
        producer.produce(source, value=message.encode(), partition=partition)
    producer.flush(30)
    options = ["--source", f"canal-json+kafka://{bootstrap}/{source}", "--checkpoint", str(tmp_path / "checkpoint"),
               "--registry", registry_url, "--sink-uri", f"kafka://{bootstrap}/?protocol=avro&partition-num=3",
               "--topic-rule", prefix + "_{schema}_{table}", "--enable-tidb-extension", "true"]
    result = runner.invoke(app, ["run", *options, "--available-now", "--max-offsets-per-trigger", "40",
                                 "--progress", "none"])
    assert result.exit_code == 0, result.output

    clean = runner.invoke(app, ["verify", *options, "--json"])
    assert clean.exit_code == 0, clean.output
    report = json.loads(clean.stdout.strip().splitlines()[-1])
    assert report["totals"]["expected"] == report["totals"]["delivered"] == len(manifest.all_events)
    assert all(report["totals"][k] == 0 for k in DISCREPANCIES)

    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        orders = f"{prefix}_shop_orders"
        copy_topic(bootstrap, orders, orders + "_drop", "drop", client)
    dropped = runner.invoke(app, ["verify", *options, "--json", "--read-topic", f"{orders}={orders}_drop"])
    assert dropped.exit_code == 1, dropped.output
    report = json.loads(dropped.stdout.strip().splitlines()[-1])
    assert _counts(report, "shop.orders") == {k: int(k == "missing") for k in DISCREPANCIES}
    assert report["samples"][0]["source"].startswith(f"{source}/")  # the message it came from
