"""``avro-registry-sink demo --to-kafka``: the demo's changes as TiCDC's debezium-json messages on a real topic
(``KAFKA_BOOTSTRAP``), then the job run on that topic as the command says (``debezium-json+kafka://``, its
``--tables``): every row change is delivered, the records replay to the demo's final rows, and the ALTER TABLE gives
shop.orders its second value schema. One small Spark run; canal-json's messages are checked without Spark in
tests/unit/test_demo_topic.py."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.cli_options import read_tables
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig, SinkConfig
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from tests.support.job import decode_file_sink, expected_state, replay
from tests.support.servers import ensure_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

ROWS = 40  # per table: 3 x 40 inserts, their updates and deletes, ~160 messages


def test_demo_fills_a_debezium_topic_the_job_delivers_every_row_of(spark, tmp_path):
    bootstrap = ensure_kafka()
    topic = "demo-dbz-" + uuid.uuid4().hex[:8]
    result = CliRunner().invoke(app, ["demo", "--to-kafka", bootstrap, "--format", "debezium-json", "--topic", topic,
                                      "--rows", str(ROWS), "--dir", str(tmp_path / "trial")], terminal_width=200)
    assert result.exit_code == 0, result.output
    manifest = generate_demo(tmp_path / "again", rows_per_table=ROWS)  # the same seed: the same changes
    changes = len(manifest.all_events)
    assert f"{changes} row changes" in result.output and "12 DDL messages" in result.output
    command = re.search(r"Run the job on it: (avro-registry-sink run .*)", result.output.replace("\n", " "))
    assert command is not None
    words = command.group(1).split()
    assert words[words.index("--source") + 1] == f"debezium-json+kafka://{bootstrap}/{topic}"
    tables_file = Path(words[words.index("--tables") + 1])

    with EmbeddedRegistry() as server, RegistryClient(RegistryConfig(urls=(server.url,))) as client:
        run = run_job(spark, JobOptions(
            source=parse_source(f"debezium-json+kafka://{bootstrap}/{topic}"), checkpoint=tmp_path / "checkpoint",
            sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), tables=tuple(read_tables(tables_file)),
            available_now=True), registry=client)
        assert run.totals.errors == 0, run.bad_input
        assert run.totals.rows == changes
        records = decode_file_sink(tmp_path / "out", client)
        expected = expected_state(manifest)
        for name in ("crm.events", "shop.customers", "shop.orders"):
            got = records[name.replace(".", "_")]
            counts = manifest.counts[name]
            assert len(got) == counts.inserts + counts.updates + counts.deletes, name
            assert replay((key, value) for _, _, key, value in got) == expected[name], name
        assert client.get_versions("shop_orders-value") == [1, 2]
        assert json.loads(client.get_version("shop_customers-key", 1).schema)["fields"][0]["name"] == "code"
