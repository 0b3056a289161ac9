"""Stopping a running job by a signal (issue 38): a real ``avro-registry-sink run`` subprocess, continuous, into
Kafka with exactly-once delivery, gets SIGTERM or SIGINT while a batch is held mid-way by a failpoint (a slice
writer paused in its open transaction).

* A canal-json topic, SIGTERM, a batch that does not finish within ``--stop-timeout``: abandoned, exit 143, the
  summary names the batch and counts only what was committed before it; nothing of the abandoned batch is left
  open; a rerun delivers the rest exactly once and ``verify`` agrees.
* A storage tree, SIGINT, a batch that finishes within the stop timeout: committed, exit 130, the summary says so.

Reruns and ``verify`` run in this process, on the session's Spark (the scenario helpers of test_exactly_once).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from avro_registry_sink.failpoints import COUNTS_ENV, DRIVER_ENV, ENV, PAUSE_ENV
from tests.spark.test_exactly_once import (
    CanalSource,
    Faults,
    Scenario,
    StorageSource,
    _assert_exactly_once,
    _assert_verified,
    _tables_sql,
)
from tests.support.servers import ensure_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]


@pytest.fixture(scope="module")
def bootstrap() -> str:
    return ensure_kafka()


@pytest.fixture()
def registry_url(tmp_path):
    from avro_registry_sink.registry.embedded import EmbeddedRegistry

    with EmbeddedRegistry(data=str(tmp_path / "registry.db")) as server:
        yield server.url


@pytest.fixture()
def faults(spark, tmp_path):
    f = Faults(spark, tmp_path)
    yield f
    f.close()


class Run:
    """``avro-registry-sink run`` (continuous, a 1 s trigger) of ``scenario`` in a subprocess; its stderr's JSON
    events read as they come."""

    def __init__(self, scenario: Scenario, *, stop_timeout: float, pause: float) -> None:
        faults = scenario.faults
        faults.arm("")
        env = {k: v for k, v in os.environ.items() if k not in (ENV, COUNTS_ENV, DRIVER_ENV)}
        env.update({ENV: f"@{faults.spec_file}", COUNTS_ENV: str(faults.counts), PAUSE_ENV: str(pause),
                    "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                    "AVRO_SINK_SPARK_MASTER": "local[2]", "AVRO_SINK_SHUFFLE_PARTITIONS": "2",
                    "AVRO_SINK_CONTROL_TOPIC": scenario.control_topic, "AVRO_SINK_DRIVER_MEMORY": "1g"})
        source = scenario.source
        args = ["run", "--source", source.source_arg(), "--trigger-interval", "1 second", "--checkpoint",
                str(scenario.checkpoint), "--sink-uri", f"kafka://{scenario.bootstrap}/?protocol=avro&partition-num=3",
                "--registry", scenario.registry_url, "--topic-rule", source.prefix + "_{schema}_{table}",
                "--tables", str(scenario.tables_sql), "--delivery", "exactly-once", "--producer", "confluent",
                "--progress", "json", "--stop-timeout", str(stop_timeout), *source.cli_args()]
        self.proc = subprocess.Popen([sys.executable, "-c", "from avro_registry_sink.cli import main; main()", *args],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            if line.startswith("{"):
                self.events.put(json.loads(line))

    def wait_event(self, name: str, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=1)
            except queue.Empty:
                assert self.proc.poll() is None, "".join(self.stderr)[-3000:]
                continue
            if event["event"] == name:
                return event
        raise AssertionError(f"no {name!r} event within {timeout} s: " + "".join(self.stderr)[-3000:])

    def signal_when_paused(self, marker: Path, sig: int, timeout: float = 180) -> float:
        """Send ``sig`` once the failpoint's ``.paused`` marker appears; the monotonic time it was sent."""
        deadline = time.monotonic() + timeout
        while not marker.exists():
            assert time.monotonic() < deadline and self.proc.poll() is None, "".join(self.stderr)[-3000:]
            time.sleep(0.05)
        self.proc.send_signal(sig)
        return time.monotonic()

    def finish(self, timeout: float = 120) -> tuple[int, dict[str, Any]]:
        """The exit status and the summary (the last line of stdout)."""
        self.proc.wait(timeout=timeout)
        assert self.proc.stdout is not None
        lines = self.proc.stdout.read().strip().splitlines()
        self._reader.join(30)  # the rest of stderr
        assert lines, "".join(self.stderr)[-3000:]
        return self.proc.returncode, json.loads(lines[-1])


def _scenario(spark, source, bootstrap, registry_url, faults, tmp_path) -> Scenario:
    return Scenario(spark, source, bootstrap, registry_url, "exactly-once", faults, f"stop-ctl-{uuid.uuid4().hex[:8]}",
                    _tables_sql(tmp_path), producer="confluent")


def test_sigterm_abandons_a_batch_that_does_not_finish_and_a_rerun_delivers_it_once(spark, bootstrap, registry_url,
                                                                                    faults, tmp_path):
    source = CanalSource(tmp_path, "s" + uuid.uuid4().hex[:8], bootstrap)
    scenario = _scenario(spark, source, bootstrap, registry_url, faults, tmp_path)
    source.add_wave()
    run = Run(scenario, stop_timeout=3, pause=300)  # the held slice would sleep far beyond the stop timeout
    first = run.wait_event("batch")  # the first wave, committed
    faults.arm("eos.produced=pause")  # the next batch: its first slice stops in its open transaction
    source.add_wave()
    sent = run.signal_when_paused(faults.counts / "eos.produced.paused", signal.SIGTERM)
    stopping = run.wait_event("stopping")
    status, summary = run.finish()
    took = time.monotonic() - sent

    assert status == 143, "".join(run.stderr)[-3000:]
    assert stopping["signal"] == "SIGTERM" and stopping["batch"] == first["batch_id"] + 1
    stop = summary["stop"]
    assert summary["status"] == "stopped" and stop["outcome"] == "abandoned" and stop["why"] == "timeout"
    assert stop["batch"] == first["batch_id"] + 1 and stop["exit_status"] == 143
    assert summary["batches"] == 1 and summary["rows"] == first["rows"] == 18  # only what was committed
    assert "was abandoned" in stop["message"] and "processes it again" in stop["message"]
    assert "nothing_read" not in summary.get("note", "")
    assert took < 3 + 60, f"the stop took {took:.0f} s"  # bounded: the timeout, the cancel, the summary
    assert not [line for line in run.stderr if not line.startswith("{")], "".join(run.stderr)[-3000:]  # no trace
    finish = json.loads([line for line in run.stderr if '"finish"' in line][-1])
    assert finish["status"] == "stopped" and finish["stop"]["outcome"] == "abandoned"

    faults.arm("")
    assert scenario.here("") == "ok", faults.log  # the rerun: the abandoned batch again, each row once
    received = scenario.received()
    _assert_exactly_once(scenario, received)
    _assert_verified(spark, scenario, received)


def test_sigint_lets_a_batch_finish_within_the_stop_timeout(spark, bootstrap, registry_url, faults, tmp_path):
    source = StorageSource(tmp_path, "t" + uuid.uuid4().hex[:8])
    scenario = _scenario(spark, source, bootstrap, registry_url, faults, tmp_path)
    source.add_wave()
    run = Run(scenario, stop_timeout=120, pause=2)  # the held slice goes on after 2 s
    first = run.wait_event("batch")
    faults.arm("eos.produced=pause")
    source.add_wave()
    sent = run.signal_when_paused(faults.counts / "eos.produced.paused", signal.SIGINT)
    status, summary = run.finish()
    took = time.monotonic() - sent

    assert status == 130, "".join(run.stderr)[-3000:]
    stop = summary["stop"]
    assert summary["status"] == "stopped" and stop["outcome"] == "finished" and stop["signal"] == "SIGINT"
    assert stop["batch"] == first["batch_id"] + 1 and "was committed" in stop["message"]
    assert summary["batches"] == 2 and summary["rows"] == 2 * first["rows"]  # both waves, committed
    assert took < 60, f"the stop took {took:.0f} s"

    source.add_wave()
    faults.arm("")
    assert scenario.here("") == "ok", faults.log
    received = scenario.received()
    _assert_exactly_once(scenario, received)
    _assert_verified(spark, scenario, received)
