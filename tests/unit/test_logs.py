"""``run --log-format json`` (avro_registry_sink.ops.logs): every line on stderr one JSON object, with the batch id,
a line per table of each batch, and the product's log records."""

from __future__ import annotations

import io
import json
import logging

from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.errors import RegistryUnavailable
from avro_registry_sink.ops.logs import CURRENT_BATCH, JsonLogs, json_logging
from avro_registry_sink.ops.progress import BatchReport, JobTotals


def lines(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_batch_gives_a_line_and_one_per_table_and_a_failure_names_its_class():
    out = io.StringIO()
    logs = JsonLogs(out)
    logs.start({"source": "storage:///data"})
    report = BatchReport(batch_id=7, rows=5, per_table={"shop.orders": 3, "crm.events": 2})
    totals = JobTotals()
    totals.add(report)
    logs.batch(report, totals)
    logs.finish(totals, RegistryUnavailable("Schema registry unreachable", batch=7))
    got = lines(out)
    assert [g["event"] for g in got] == ["start", "batch", "table", "table", "finish"]
    assert all(g["level"] == "info" for g in got[:-1])
    assert [(g["batch_id"], g["table"], g["rows"]) for g in got if g["event"] == "table"] == [
        (7, "crm.events", 2), (7, "shop.orders", 3)]
    assert got[-1]["level"] == "error" and got[-1]["error_class"] == "RegistryUnavailable"


def test_log_records_carry_the_running_batch_id_and_a_table_when_given():
    out = io.StringIO()
    log = logging.getLogger("avro_registry_sink.registry.client")
    with json_logging(out):
        token = CURRENT_BATCH.set(12)
        try:
            log.info("Schema registry %s: answered HTTP %d", "http://r", 503)
            log.warning("held", extra={"table": "shop.orders"})
        finally:
            CURRENT_BATCH.reset(token)
        log.info("between batches")
        logging.getLogger("py4j").warning("not ours")
    log.info("after: not written")
    got = lines(out)
    assert [(g["level"], g["batch_id"], g["message"]) for g in got] == [
        ("info", 12, "Schema registry http://r: answered HTTP 503"), ("warning", 12, "held"),
        ("info", None, "between batches")]
    assert got[1]["table"] == "shop.orders" and got[0]["logger"] == "avro_registry_sink.registry.client"


def test_run_with_log_format_json_writes_only_json_lines(tmp_path, monkeypatch):
    from avro_registry_sink.spark.driver.job import JobResult

    runner = CliRunner()
    assert runner.invoke(app, ["demo", "--dir", str(tmp_path / "demo"), "--rows", "5", "--no-run",
                               "--progress", "none"]).exit_code == 0

    def run_job(spark, options, *, progress=None, **_):
        totals = JobTotals()
        progress.start({"source": options.source.describe()})
        token = CURRENT_BATCH.set(0)
        logging.getLogger("avro_registry_sink.spark.driver.job").info("a record of the batch")
        CURRENT_BATCH.reset(token)
        report = BatchReport(batch_id=0, rows=2, per_table={"shop.orders": 2})
        totals.add(report)
        progress.batch(report, totals)
        progress.finish(totals)
        return JobResult(totals=totals, checkpoint=tmp_path / "ck")

    monkeypatch.setattr("avro_registry_sink.cli._job_session", lambda options, stores: object())
    monkeypatch.setattr("avro_registry_sink.spark.driver.job.run_job", run_job)
    monkeypatch.setattr("avro_registry_sink.cli._probe_job", lambda *a, **k: None)
    args = ["run", "--source", str(tmp_path / "demo/input"), "--tables", str(tmp_path / "demo/tables.sql"),
            "--state-dir", str(tmp_path / "state"), "--available-now"]
    result = runner.invoke(app, [*args, "--log-format", "json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stderr.splitlines()]
    assert [e["event"] for e in events] == ["start", "log", "batch", "table", "finish"]
    assert events[1]["batch_id"] == 0 and events[3]["table"] == "shop.orders"
    bad = runner.invoke(app, [*args, "--log-format", "xml"])
    assert bad.exit_code == 2 and "--log-format" in bad.stderr and "text or json" in bad.stderr
