"""A crash of the compiled debezium-json scanner in a Spark job's Python worker: the message it was reading is
dead-lettered (reason ``native scanner crashed``), every other message is delivered, the batch commits
(:mod:`~avro_registry_sink.formats.native_scan`; the crash is made on purpose with ``AVRO_SINK_NATIVE_CRASH``)."""

from __future__ import annotations

import base64
import os

import pytest

from avro_registry_sink.formats.native_scan import CRASH_ENV
from avro_registry_sink.settings.config import SinkConfig
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from tests.spark.test_job_changelog import ITEMS_DDL, _debezium, _debezium_ddl, _write
from tests.support.job import decode_file_sink

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]


@pytest.fixture()
def crash_on(spark):
    """Sets the crash of the scanner on messages holding a text, in the driver and new Python workers."""
    saved = os.environ.get(CRASH_ENV)

    def set_text(text: str) -> None:
        os.environ[CRASH_ENV] = f"fault:{text}"
        spark.sparkContext.environment[CRASH_ENV] = f"fault:{text}"

    yield set_text
    if saved is None:
        os.environ.pop(CRASH_ENV, None)
    else:
        os.environ[CRASH_ENV] = saved
    spark.sparkContext.environment.pop(CRASH_ENV, None)


def test_a_crash_in_the_scanner_dead_letters_its_message_and_the_batch_goes_on(spark, tmp_path, registry, crash_on):
    ts = [(1_715_241_600_000 + i * 50) << 18 for i in range(8)]
    lines = [_debezium_ddl(ITEMS_DDL, ts[0])]
    for i in range(1, 8):
        name = "crash here" if i == 4 else f"item {i}"
        lines.append(_debezium("c", ts[i], None, {"id": i, "name": name, "price": i + 0.5,
                                                  "updated": 1715241600123 + i}, envelope=False))
    _write(tmp_path / "dbz" / "changes.json", lines, 1_700_000_000)
    crash_on("crash here")
    options = JobOptions(source=parse_source(f"debezium-json+file://{tmp_path / 'dbz'}"),
                         checkpoint=tmp_path / "checkpoint", sink=SinkConfig(scheme="file", path=str(tmp_path / "out")))
    result = run_job(spark, options, registry=registry)

    assert result.totals.batches == 1 and result.totals.rows == 6 and result.totals.errors == 1, result.bad_input
    letter, = result.bad_input
    assert letter["reason"] == "native scanner crashed" and letter["source"].endswith("changes.json:5"), letter
    assert base64.b64decode(letter["raw_base64"]).decode() == lines[4]
    records = decode_file_sink(tmp_path / "out", registry)["shop_items"]
    assert sorted(value["id"] for _, _, _, value in records) == [1, 2, 3, 5, 6, 7]
