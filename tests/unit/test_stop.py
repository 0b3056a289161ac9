"""How the job settles a stop asked for by SIGINT or SIGTERM (issue 38), without Spark: the signal handler, the
decision at each look of the run's loop (wait for the running batch, abandon it at the timeout or a second
signal, stop between batches once Spark is not committing), the summary. The same end to end, on real runs:
tests/spark/test_stop_signals.py."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace
from typing import Any

import pytest

from avro_registry_sink.ops.progress import JobTotals
from avro_registry_sink.spark.driver.job import (
    StopRequested,
    _BatchProcessor,
    _settle_stop,
    _Stop,
    _stop_report,
    _stop_signals,
)


class Fakes:
    def __init__(self, *, in_batch: bool, trigger_active: bool = False) -> None:
        self.calls: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.trigger_active = trigger_active
        self.spark = SimpleNamespace(sparkContext=SimpleNamespace(cancelAllJobs=lambda: self.calls.append("cancel")))
        self.query = SimpleNamespace(stop=lambda: self.calls.append("stop"))
        self.processor = SimpleNamespace(in_batch=in_batch, current_batch=7, batch_inputs=12)
        self.sink = SimpleNamespace(transactions=SimpleNamespace(abort_open=lambda: self.calls.append("abort")))
        self.progress = SimpleNamespace(stopping=self.events.append)

    def look(self, stop: _Stop, timeout: float = 30.0) -> bool:
        self.query.status = {"isTriggerActive": self.trigger_active}
        return _settle_stop(self.spark, self.query, self.processor, self.sink, self.progress, stop, timeout)


def _signalled(name: str = "SIGTERM", ago: float = 0.0) -> _Stop:
    stop = _Stop()
    stop(getattr(signal, name), None)
    stop.at -= ago
    return stop


def test_a_running_batch_is_waited_for_then_abandoned_at_a_second_signal():
    fakes = Fakes(in_batch=True)
    stop = _signalled("SIGINT")
    assert not fakes.look(stop) and not fakes.look(stop)  # within the timeout: the batch goes on
    assert fakes.calls == [] and len(fakes.events) == 1  # "stopping" said once
    assert fakes.events[0]["batch"] == 7 and "a second signal abandons it" in fakes.events[0]["message"]
    stop(signal.SIGINT, None)
    assert fakes.look(stop)
    assert fakes.calls == ["cancel", "stop", "abort"] and stop.abandoned  # jobs cancelled, transactions aborted
    report = _stop_report(stop, 30.0, JobTotals(batches=7, rows=70))
    assert (report["outcome"], report["why"], report["exit_status"], report["batch"]) == \
        ("abandoned", "second signal", 130, 7)
    assert report["message"].startswith("Stopped by SIGINT: batch 7 (12 files or messages) at the second signal "
                                        "was abandoned: nothing of it is committed")
    assert "This run committed 7 batches (70 rows)." in report["message"]


def test_a_batch_that_outlasts_the_stop_timeout_is_abandoned():
    fakes = Fakes(in_batch=True)
    stop = _signalled("SIGTERM", ago=31)
    assert fakes.look(stop, timeout=30) and stop.abandoned
    report = _stop_report(stop, 30.0, JobTotals())
    assert (report["outcome"], report["why"], report["exit_status"]) == ("abandoned", "timeout", 143)
    assert "did not finish within the stop timeout (30 s)" in report["message"]


def test_a_batch_that_finishes_in_time_is_committed_before_the_query_stops():
    fakes = Fakes(in_batch=True)
    stop = _signalled()
    assert not fakes.look(stop)
    fakes.processor.in_batch, fakes.trigger_active = False, True  # Spark is committing it
    assert not fakes.look(stop) and fakes.calls == []
    fakes.trigger_active = False
    assert fakes.look(stop) and fakes.calls == ["stop"] and not stop.abandoned
    report = _stop_report(stop, 30.0, JobTotals(batches=8, rows=80))
    assert report["outcome"] == "finished" and report["batch"] == 7 and "was committed" in report["message"]


def test_between_batches_the_query_stops_at_once():
    fakes = Fakes(in_batch=False)
    stop = _signalled()
    assert fakes.look(stop) and fakes.calls == ["stop"]
    assert "no batch is running" in fakes.events[0]["message"]
    report = _stop_report(stop, 30.0, JobTotals(batches=2, rows=5))
    assert report["outcome"] == "between-batches" and report["batch"] is None
    assert report["message"].startswith("Stopped by SIGTERM between batches")


def test_no_batch_starts_after_a_stop():
    processor = object.__new__(_BatchProcessor)
    processor.stop = _signalled()
    with pytest.raises(StopRequested, match="Batch 4 was not started: the job is stopping"):
        processor(None, 4)  # type: ignore[arg-type]


def test_the_signals_are_caught_while_the_job_runs_and_restored_after():
    stop = _Stop()
    before = signal.getsignal(signal.SIGTERM)
    with _stop_signals(stop):
        os.kill(os.getpid(), signal.SIGTERM)  # the process goes on
        time.sleep(0.05)
        assert stop.signal == "SIGTERM" and not stop.again
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt: a second signal
        time.sleep(0.05)
        assert stop.again
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_stop_timeout_setting(tmp_path):
    from avro_registry_sink.errors import ConfigError
    from avro_registry_sink.settings.config import load_config

    assert load_config(environ={}).stop_timeout == 30.0
    toml = tmp_path / "settings.toml"
    toml.write_text('stop-timeout = "2m"\n')
    assert load_config(config_file=toml, environ={}).stop_timeout == 120.0
    assert load_config(config_file=toml, environ={"AVRO_SINK_STOP_TIMEOUT": "5"}).stop_timeout == 5.0  # env wins
    toml.write_text("stop-timeout = -1\n")
    with pytest.raises(ConfigError, match="'stop-timeout': seconds"):
        load_config(config_file=toml, environ={})


def test_a_signal_while_spark_starts_stops_the_session_and_exits_with_its_status(monkeypatch, capsys):
    import typer

    from avro_registry_sink import cli

    stopped = []

    def session(options, stores):  # the JVM's start, during which SIGTERM comes
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        return SimpleNamespace(stop=lambda: stopped.append(True))

    monkeypatch.setattr(cli, "_job_session", session)
    with pytest.raises(typer.Exit) as exited:
        cli._session_or_stop(None, set())
    assert exited.value.exit_code == 143 and stopped  # no JVM left behind
    summary = __import__("json").loads(capsys.readouterr().out)
    assert summary["status"] == "stopped" and summary["stop"]["outcome"] == "not-started"


def test_an_ignored_sigint_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job of a shell script
    try:
        stop = _Stop()
        with _stop_signals(stop):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is stop
    finally:
        signal.signal(signal.SIGINT, previous)
