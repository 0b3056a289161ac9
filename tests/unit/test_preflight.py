"""Every reachable thing is checked before work (issue 22): the registry (and its credentials) and Kafka answer
within seconds with one line naming the setting, for run, replay, encode and check, before Spark starts.
(A wrong registry port took 113 s with run and 60 s with encode, a wrong Kafka port 23 s.) In-process through
the CLI; ``job_session`` fails the test if Spark would start."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.registry.embedded import BasicAuthUsers, EmbeddedRegistry
from avro_registry_sink.sources.demo import generate_demo, write_rerun_files
from avro_registry_sink.spark.sources.sources import parse_source

runner = CliRunner()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once it is closed


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("preflight")
    manifest = generate_demo(root / "input", rows_per_table=4)
    ddl, settings = write_rerun_files(manifest, root)
    events = root / "events.jsonl"
    events.write_text(json.dumps({"schema": "shop", "table": "orders", "op": "insert",
                                  "values": {"id": 1, "customer_code": "C1", "amount": "1.00", "status": "new",
                                             "created_at": "2024-01-01 00:00:00.000"}}) + "\n")
    return {"input": root / "input", "ddl": ddl, "settings": settings, "events": events, "root": root}


@pytest.fixture(autouse=True)
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started: the pre-flight check should have stopped the command")

    monkeypatch.setattr("avro_registry_sink.spark.driver.job.job_session", refuse)


def _fails_fast(args: list[str], code: int = 1) -> str:
    started = time.monotonic()
    result = runner.invoke(app, args)
    elapsed = time.monotonic() - started
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert elapsed < 30, f"took {elapsed:.0f} s"  # seconds, not the clients' minutes of retrying
    return lines[0]


def _run(tree, tmp_path, *extra) -> list[str]:
    return ["run", "--source", str(tree["input"]), "--tables", str(tree["ddl"]), "--config", str(tree["settings"]),
            "--available-now", "--state-dir", str(tmp_path / "state"), *extra]


def test_run_with_a_wrong_registry_port(tree, tmp_path):
    port = _closed_port()
    line = _fails_fast(_run(tree, tmp_path, "--registry", f"http://jo:Secret99@127.0.0.1:{port}"))
    assert f"127.0.0.1:{port} (--registry) is unreachable" in line
    assert "Connection refused" in line and "Secret99" not in line


def test_run_names_the_sink_uri_when_the_registry_comes_from_it(tree, tmp_path):
    port = _closed_port()
    line = _fails_fast(_run(tree, tmp_path, "--sink-uri",
                            f"file://{tmp_path / 'out'}?protocol=avro&schema-registry=http://127.0.0.1:{port}"))
    assert "(schema-registry= in --sink-uri) is unreachable" in line


def test_run_with_a_wrong_kafka_port(tree, tmp_path):
    port = _closed_port()
    line = _fails_fast(_run(tree, tmp_path, "--sink-uri", f"kafka://127.0.0.1:{port}/?protocol=avro"))
    assert line.startswith(f"error: --sink-uri: Kafka at 127.0.0.1:{port} (plaintext) is not reachable")
    assert "Connection refused" in line


def test_a_kafka_source_on_a_wrong_port(tmp_path):
    port = _closed_port()
    line = _fails_fast(["run", "--source", f"canal-json+kafka://127.0.0.1:{port}/cdc", "--state-dir",
                        str(tmp_path / "state")])
    assert line.startswith(f"error: --source: Kafka at 127.0.0.1:{port}")


def test_refused_registry_credentials(tree, tmp_path):
    with EmbeddedRegistry(users=BasicAuthUsers({"jo": "right-password"})) as server:
        host = server.url.removeprefix("http://")
        line = _fails_fast(_run(tree, tmp_path, "--registry", f"http://jo:wrong-password@{host}"))
    assert "(--registry) refused the credentials (HTTP 401)" in line and "wrong-password" not in line


def test_a_url_that_is_no_registry(tree, tmp_path):
    with EmbeddedRegistry() as server:
        line = _fails_fast(_run(tree, tmp_path, "--registry", f"{server.url}/not/the/api"))
    assert "answered HTTP 404 to GET /subjects" in line and "Confluent-compatible" in line


def test_encode_and_check_with_a_wrong_registry_port(tree):
    port = _closed_port()
    for command in (["encode", "--events", str(tree["events"])], ["check"]):
        line = _fails_fast([*command, "--ddl", str(tree["ddl"]), "--registry", f"http://127.0.0.1:{port}"])
        assert f"The schema registry at http://127.0.0.1:{port} (--registry) is unreachable" in line


def test_bad_options_still_come_before_reachability(tree):
    port = _closed_port()
    line = _fails_fast(["check", "--ddl", str(tree["root"] / "missing.sql"), "--registry",
                        f"http://127.0.0.1:{port}"], code=2)
    assert "cannot read DDL file" in line


def test_replay_checks_kafka_too(tree, tmp_path):
    port = _closed_port()
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "job.json").write_text(json.dumps({"source": parse_source(str(tree["input"])).describe()}))
    line = _fails_fast(["replay", "--source", str(tree["input"]), "--checkpoint", str(checkpoint),
                        "--sink-uri", f"kafka://127.0.0.1:{port}/?protocol=avro", "--state-dir", str(tmp_path / "s")])
    assert line.startswith("error: --sink-uri: Kafka at")


def test_a_reachable_registry_and_kafka_pass(tree, tmp_path, monkeypatch):
    import os

    started = []

    def session(*args, **kwargs):
        started.append(True)
        raise RuntimeError("every check passed: Spark would start here")

    monkeypatch.setattr("avro_registry_sink.spark.driver.job.job_session", session)
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    try:
        socket.create_connection(tuple(bootstrap.rsplit(":", 1)), timeout=2).close()  # type: ignore[arg-type]
    except OSError:
        pytest.skip(f"no Kafka broker at {bootstrap}")
    with EmbeddedRegistry() as server:
        result = runner.invoke(app, _run(tree, tmp_path, "--registry", server.url, "--sink-uri",
                                         f"kafka://{bootstrap}/?protocol=avro"))
    assert started, result.output


def _broker() -> str:
    import os

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    try:
        socket.create_connection(tuple(bootstrap.rsplit(":", 1)), timeout=2).close()  # type: ignore[arg-type]
    except OSError:
        pytest.skip(f"no Kafka broker at {bootstrap}")
    return bootstrap


def test_a_source_topic_that_does_not_exist_is_refused_before_spark(tmp_path):
    """Issue 38: a missing topic failed 15 s into Spark with a plan dump and a new checkpoint; now one line, exit
    2, naming the topic, the broker and the close existing topics, and nothing written."""
    import uuid

    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = _broker()
    prefix = f"pf{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(f"{prefix}-orders", num_partitions=1, replication_factor=1)]).values():
        future.result(30)
    state = tmp_path / "state"
    line = _fails_fast(["run", "--source", f"canal-json+kafka://{bootstrap}/{prefix}-ordrs,{prefix}-orders",
                        "--state-dir", str(state)], code=2)
    assert line.startswith(f"error: --source: topic '{prefix}-ordrs' (did you mean '{prefix}-orders'"), line
    assert f"does not exist on Kafka at {bootstrap}." in line and f"'{prefix}-orders' does not" not in line
    assert "no checkpoint created" in line and len(line) < 600
    assert not (state / "checkpoints").exists()  # no checkpoint for a source that cannot be read

    checkpoint = tmp_path / "ck"
    unlike = [f"zq{uuid.uuid4().hex}", f"zq{uuid.uuid4().hex}"]
    line = _fails_fast(["run", "--source", f"debezium-json+kafka://{bootstrap}/{','.join(unlike)}",
                        "--checkpoint", str(checkpoint), "--state-dir", str(state)], code=2)
    assert f"topics '{unlike[0]}', '{unlike[1]}' do not exist on Kafka at {bootstrap}." in line
    assert "did you mean" not in line
    assert not checkpoint.exists()


def test_a_kafka_sink_with_the_in_process_registry_warns_once(tree, tmp_path, monkeypatch):
    """Issue 38: records written to Kafka with ids of the registry inside the job are unreadable once it stops;
    the run says so once, and how to run a registry other clients reach."""
    bootstrap = _broker()

    def session(*args, **kwargs):
        raise RuntimeError("every check passed: Spark would start here")

    monkeypatch.setattr("avro_registry_sink.spark.driver.job.job_session", session)
    result = runner.invoke(app, _run(tree, tmp_path, "--sink-uri", f"kafka://{bootstrap}/?protocol=avro"))
    warnings = [json.loads(line) for line in result.stderr.splitlines() if '"warning"' in line]
    assert len(warnings) == 1, result.stderr
    (warning,) = warnings
    assert warning["warning"] == "embedded-registry" and warning["registry_file"] == str(tmp_path / "state" /
                                                                                         "registry.db")
    assert "stops with the job" in warning["message"]
    assert (f"avro-registry-sink registry serve --port 8081 --data {tmp_path / 'state' / 'registry.db'}"
            in warning["message"]) and "--registry http://127.0.0.1:8081" in warning["message"]
    with EmbeddedRegistry() as server:  # a registry of its own: no warning
        result = runner.invoke(app, _run(tree, tmp_path, "--registry", server.url, "--sink-uri",
                                         f"kafka://{bootstrap}/?protocol=avro"))
    assert '"warning"' not in result.stderr, result.stderr
