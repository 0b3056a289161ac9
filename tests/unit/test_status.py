"""``status`` (avro_registry_sink.ops.status and the CLI command): a job's state read from its checkpoint alone, on
synthetic checkpoints laid out as the job writes them (spark/commits, spark/offsets, state/<name>/<batch>.json,
dead-letter/, delivery.json, last-error.json)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.ops.status import read_status

NOW = 1_800_000_000.0


def ts(seconds_ago: float, now: float = NOW) -> int:
    return int((now - seconds_ago) * 1000) << 18


def make_checkpoint(root: Path, *, batches: int = 3, dead_letter_batches: tuple[int, ...] = (1,),
                    committed_at: float = NOW - 5, now: float = NOW) -> Path:
    """A checkpoint of ``batches`` committed batches (the last one's state written at ``committed_at``)."""
    ck = root / "ck"
    for d in ("spark/commits", "spark/offsets", "state/progress", "state/held", "dead-letter/replayed"):
        (ck / d).mkdir(parents=True, exist_ok=True)
    (ck / "job.json").write_text(json.dumps({"source": "storage:///data/ticdc", "created": NOW - 3600}))
    for i in range(batches):
        (ck / "spark/commits" / str(i)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    last = batches - 1
    (ck / "spark/offsets" / str(last)).write_text(f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":{int((NOW - 8) * 1000)}}}\n3')
    for i in range(max(0, last - 3), last + 1):  # the job keeps the last few files of each side state
        (ck / "state/progress" / f"{i:010d}.json").write_text(json.dumps({
            "batch": i, "time": committed_at - (last - i), "rows": 10 * (i + 1), "dead_lettered": 3,
            "tables": {"shop.orders": {"rows": 7 * (i + 1), "newest_commit_ts": ts(40, now)},
                       "crm.events": {"rows": 3 * (i + 1), "newest_commit_ts": ts(400, now)}}, "resolved_ts": {}}))
    (ck / "state/held" / f"{last:010d}.json").write_text(json.dumps({"held": {"shop/orders/1/CDC2.csv": "no schema"}}))
    # a batch that failed after writing its state: not committed, so not read
    (ck / "state/progress" / f"{last + 1:010d}.json").write_text(json.dumps({"batch": last + 1, "rows": 10 ** 9}))
    for b in dead_letter_batches:
        (ck / "dead-letter" / f"batch-{b:010d}.jsonl").write_text("".join(
            json.dumps({"batch": b, "id": f"{b}-{n}", "schema": "shop", "table": "orders", "reason": "bad"}) + "\n"
            for n in range(3)))
    return ck


def test_a_healthy_checkpoint_reports_batches_tables_lags_dead_letters_and_held_files(tmp_path):
    ck = make_checkpoint(tmp_path, dead_letter_batches=(1,))
    (ck / "dead-letter/replayed/replay-0000.json").write_text(json.dumps({"delivered": ["1-0"], "failed": []}))
    status = read_status(ck, now=NOW)
    assert status.verdict == "healthy" and status.exit_status == 0
    assert status.last_batch == 2
    assert status.last_batch_time == NOW - 8
    assert status.last_commit_time == NOW - 5
    assert status.rows == 30  # the committed batch's, not the uncommitted attempt's
    assert status.tables["shop.orders"]["rows"] == 21
    assert status.tables["shop.orders"]["lag_seconds"] == 40.0
    assert status.tables["crm.events"]["lag_seconds"] == 400.0
    assert status.dead_lettered == 3 and status.dead_letters_pending == 2
    assert status.held_files == ["shop/orders/1/CDC2.csv"]
    assert status.last_error is None and status.exactly_once is None


def test_max_lag_makes_a_table_behind_and_exactly_once_uses_the_resolved_ts(tmp_path):
    ck = make_checkpoint(tmp_path)
    status = read_status(ck, max_lag=100, now=NOW)
    assert status.verdict == "behind" and status.exit_status == 1
    assert status.reasons == ["table crm.events is 400 s behind its source (over --max-lag 100 s)"]
    progress = ck / "state/progress/0000000002.json"
    data = json.loads(progress.read_text())
    data["resolved_ts"] = {"shop.orders": ts(10), "crm.events": ts(20)}  # exactly once: all delivered up to these
    progress.write_text(json.dumps(data))
    (ck / "delivery.json").write_text(json.dumps({"query": "q-1", "writers": {"w": 4}}))
    status = read_status(ck, max_lag=100, now=NOW)
    assert status.verdict == "healthy"
    assert status.tables["crm.events"]["resolved_lag_seconds"] == 20.0
    assert status.exactly_once == {"query": "q-1", "writers": {"w": 4}}


def test_an_error_newer_than_the_last_commit_is_a_failure_an_older_one_is_history(tmp_path):
    ck = make_checkpoint(tmp_path)
    error = {"time": NOW - 1, "batch": 3, "error_class": "RegistryUnavailable", "message": "Schema registry unreachable"}
    (ck / "last-error.json").write_text(json.dumps(error))
    status = read_status(ck, now=NOW)
    assert status.verdict == "failed" and status.exit_status == 2
    assert "RegistryUnavailable" in status.reasons[0] and "batch 3" in status.reasons[0]
    (ck / "last-error.json").write_text(json.dumps({**error, "time": NOW - 60}))  # a later batch committed
    status = read_status(ck, now=NOW)
    assert status.verdict == "healthy" and status.last_error["batch"] == 3


def test_not_a_checkpoint_is_a_failure(tmp_path):
    status = read_status(tmp_path / "nothing", now=NOW)
    assert status.verdict == "failed" and "not a job's checkpoint" in status.reasons[0]


def test_pending_dead_letters_agree_with_replay(tmp_path):
    from avro_registry_sink.spark.audit.replay import pending_records

    ck = make_checkpoint(tmp_path, dead_letter_batches=(0, 1, 2))
    (ck / "dead-letter/replayed/replay-0000.json").write_text(json.dumps({"delivered": ["0-0", "2-1"]}))
    (ck / "dead-letter/replay-0000.jsonl").write_text(json.dumps({"id": "0-1", "reason": "bad again"}) + "\n")
    status = read_status(ck, now=NOW)
    assert status.dead_letters_pending == len(pending_records(ck)) == 7
    assert status.dead_lettered == 9


def test_the_command_prints_json_and_exits_with_the_verdict(tmp_path):
    ck = make_checkpoint(tmp_path, committed_at=time.time() - 5, now=time.time())
    runner = CliRunner()
    ok = runner.invoke(app, ["status", "--checkpoint", str(ck), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["last_batch"] == 2
    behind = runner.invoke(app, ["status", "--checkpoint", str(ck), "--json", "--max-lag", "100"])
    assert behind.exit_code == 1 and json.loads(behind.output)["status"] == "behind"
    missing = runner.invoke(app, ["status", "--checkpoint", str(tmp_path / "none")])
    assert missing.exit_code == 2


def test_a_checkpoint_of_ten_thousand_batches(tmp_path, record_property):
    """10^4 committed batches, a dead-letter file for every tenth: the time is recorded (docs/operations.md),
    not asserted."""
    ck = make_checkpoint(tmp_path, batches=10_000, dead_letter_batches=tuple(range(0, 10_000, 10)))
    started = time.perf_counter()
    status = read_status(ck, now=NOW)
    seconds = time.perf_counter() - started
    record_property("status_seconds", round(seconds, 3))
    print(f"status of a checkpoint of 10^4 batches: {seconds:.3f} s")
    assert status.last_batch == 9_999
    assert status.dead_lettered == 3_000 and status.dead_letters_pending == 3_000


def test_a_failed_run_leaves_its_error_in_the_checkpoint_with_secrets_masked(tmp_path):
    from types import SimpleNamespace

    from avro_registry_sink.settings.config import parse_sink_uri
    from avro_registry_sink.spark.driver.job import LAST_ERROR_FILE, _save_last_error
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source
    from avro_registry_sink.storage_fs import StoreFS, parse_storage_uri

    ck = make_checkpoint(tmp_path, committed_at=time.time() - 60, now=time.time())
    options = JobOptions(source=parse_source(str(tmp_path)), checkpoint=ck,
                         sink=parse_sink_uri("kafka://b:9092/?protocol=avro&sasl-password=hunter2secret"))
    processor = SimpleNamespace(failed_batch=3, current_batch=3, state=StoreFS(parse_storage_uri(str(ck))))
    _save_last_error(processor, RuntimeError("broker said no to hunter2secret"), options)
    saved = json.loads((ck / LAST_ERROR_FILE).read_text())
    assert saved["batch"] == 3 and saved["error_class"] == "RuntimeError"
    assert "hunter2secret" not in saved["message"]
    status = read_status(ck)
    assert status.verdict == "failed" and "RuntimeError" in status.reasons[0]
