"""Secrets are never shown: a sentinel secret in every place a secret can be given, searched for everywhere.

The places: registry URL user-info, the ``[registry]`` basic-auth password and bearer token of a settings
file, ``sasl-password``, ``key-password`` (both the broker's real, random password, so the success paths
really use them), sink-URI user-info, and a wrong ``sasl-password``. The commands (``encode``, ``check``
and ``run``, in-process on the session SparkSession) run their success and failure paths: a job from a
canal-json topic on the TLS listener (client key encrypted) to Avro on the SCRAM listener with a bad
message (so a dead-letter file is written), wrong credentials, a registry URL with a bad scheme, an
unreachable registry, a sink URI with a bad scheme. Searched: every command's stdout and stderr, the
process's file descriptors 1 and 2 (the JVM, librdkafka), every log record, every file the runs wrote
(checkpoint, job.json, dead letters, state directory) and every record the job wrote to Kafka.

``registry serve`` likewise: its basic-auth passwords (users file, ``AVRO_SINK_REGISTRY_USERS``, ``--user``)
and its TLS key password are sentinels; the server is started as a process, answers an authenticated
request and refuses failed ones, is stopped, and is started again with a wrong key password and with a
taken port; its stdout, stderr and every file it wrote are searched.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.redact import MASK
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.registry.embedded.guard import BasicAuthUsers
from avro_registry_sink.sources.demo import generate_demo
from tests.integration.test_kafka_security import _consume, _create_topic, _options
from tests.support.job import canal_messages
from tests.support.servers import ensure_kafka_listeners, free_port, wait_for_answer
from tests.support.tls import make_tls_files

ORDERS = Path(__file__).parent.parent / "data" / "cli_orders.sql"
EVENT = {"schema": "shop", "table": "orders", "op": "insert", "commit_ts": 417318403368288260,
         "values": {"id": 1, "amount": "10.50", "status": "paid", "note": None, "blob": None}}


def _q(text: str) -> str:
    return quote(text, safe="")


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_no_secret_in_any_output_or_file(spark, tmp_path, capfd, caplog):
    from confluent_kafka import Producer

    from avro_registry_sink.kafka.client import client_conf

    caplog.set_level(logging.DEBUG)
    listeners = ensure_kafka_listeners()
    tag = uuid.uuid4().hex[:10]
    sentinels = {
        "registry URL user-info": f"RegUrl-{tag}",
        "[registry] password": f"Basic-{tag}",
        "[registry] bearer-token": f"Bearer-{tag}",
        "sink URI user-info": f"UriInfo-{tag}",
        "wrong sasl-password": f"WrongPw-{tag}",
        "wrong registry password": f"WrongReg-{tag}",
        "sasl-password / key-password": listeners.sasl_password,
    }
    inputs, work = tmp_path / "inputs", tmp_path / "work"  # inputs hold the secrets on purpose; work is searched
    inputs.mkdir()
    work.mkdir()
    events = inputs / "events.jsonl"
    events.write_text(json.dumps(EVENT) + "\n")
    registry = EmbeddedRegistry(users=BasicAuthUsers(BasicAuthUsers.parse_entries(
        [f"reg:{sentinels['registry URL user-info']}", f"u:{sentinels['[registry] password']}"], source="test")))
    url = registry.start()
    host = url.split("://", 1)[1]
    reg_url = f"http://reg:{sentinels['registry URL user-info']}@{host}"
    basic = inputs / "basic.toml"
    basic.write_text(f'[registry]\nurls = "{url}"\nusername = "u"\npassword = "{sentinels["[registry] password"]}"\n')
    bearer = inputs / "bearer.toml"
    bearer.write_text(f'[registry]\nbearer-token = "{sentinels["[registry] bearer-token"]}"\n')

    # A canal-json topic on the TLS listener, with one broken message (-> a dead-letter file).
    prefix = "x" + tag[:8]
    tls_query = (f"ca={_q(listeners.ca)}&cert={_q(listeners.cert)}&key={_q(listeners.key_encrypted)}"
                 f"&key-password={_q(listeners.key_password)}")
    tls_opts = _options(tls_query)
    source_topic = f"{prefix}_canal"
    _create_topic(listeners.tls, tls_opts, source_topic)
    manifest = generate_demo(inputs / "demo", rows_per_table=4)
    feeder = Producer(client_conf(listeners.tls, tls_opts, "producer"))
    for partition, _, message in canal_messages(manifest, partitions=3):
        feeder.produce(source_topic, value=message.encode(), partition=partition)
    feeder.produce(source_topic, value=b'{"database": "shop", "broken', partition=0)
    assert feeder.flush(30) == 0
    sasl_query = (f"sasl-mechanism=scram-sha-256&sasl-user={listeners.sasl_user}"
                  f"&sasl-password={_q(listeners.sasl_password)}")
    sink_uri = f"kafka://jo:{sentinels['sink URI user-info']}@{listeners.sasl}/?protocol=avro&{sasl_query}"
    run_args = ["run", "--source", f"canal-json+kafka://{listeners.tls}/{source_topic}?{tls_query}",
                "--available-now", "--progress", "json", "--registry", reg_url,
                "--state-dir", str(work / "state"), "--checkpoint", str(work / "checkpoint"),
                "--topic-rule", prefix + "_{schema}_{table}"]

    runner = CliRunner()
    outputs: list[str] = []

    def invoke(args: list[str], expect: int | tuple[int, ...]) -> str:
        result = runner.invoke(app, args)
        outputs.extend([result.stdout, result.stderr])
        assert result.exit_code in ((expect,) if isinstance(expect, int) else expect), (
            args[0], result.exit_code, result.stderr[-2000:])
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        return result.stderr

    try:
        invoke(["encode", "--ddl", str(ORDERS), "--events", str(events), "--config", str(basic)], 0)
        invoke(["check", "--ddl", str(ORDERS), "--registry", reg_url], 0)
        err = invoke(["encode", "--ddl", str(ORDERS), "--events", str(events), "--registry", reg_url.replace(
            "http://", "ftp://")], 2)
        assert f"ftp://reg:{MASK}@" in err
        err = invoke(["encode", "--ddl", str(ORDERS), "--events", str(events), "--config", str(bearer),
                      "--registry", url], (1, 2))  # a bearer token where basic auth is wanted: refused
        assert err.startswith("error:")
        wrong_reg = f"http://reg:{sentinels['wrong registry password']}@{host}"
        err = invoke(["check", "--ddl", str(ORDERS), "--registry", wrong_reg], (1, 2))
        assert err.startswith("error:")
        err = invoke([*run_args, "--sink-uri", f"bogus://jo:{sentinels['sink URI user-info']}@h/?protocol=avro"], 2)
        assert f"jo:{MASK}@h" in err
        wrong = sink_uri.replace(_q(listeners.sasl_password), sentinels["wrong sasl-password"])
        err = invoke([*run_args, "--sink-uri", wrong], 1)
        assert "SASL authentication failed: check sasl-mechanism, sasl-user and sasl-password" in err
        invoke([*run_args, "--sink-uri", sink_uri], 0)  # the good run: TLS source, SCRAM sink, a bad message
    finally:
        registry.stop()
    fd = capfd.readouterr()
    outputs.extend([fd.out, fd.err, caplog.text])

    dead = list((work / "checkpoint" / "dead-letter").glob("*.jsonl"))
    assert dead, "the broken message should have gone to a dead-letter file"
    assert (work / "checkpoint" / "job.json").is_file()
    written = [p for p in work.rglob("*") if p.is_file()]
    records = _consume(listeners.sasl, _options(sasl_query),
                       [f"{prefix}_{n.replace('.', '_')}" for n in ("crm.events", "shop.customers", "shop.orders")],
                       len(manifest.all_events))
    assert len(records) == len(manifest.all_events)

    for where, secret in sentinels.items():
        for i, text in enumerate(outputs):
            assert secret not in text and _q(secret) not in text, f"{where} shown in output #{i}: {text[:3000]}"
        for path in written:
            data = path.read_bytes()
            assert secret.encode() not in data, f"{where} written to {path}"
        for record in records:
            assert secret.encode() not in b"".join(x for x in record[1:] if isinstance(x, bytes)), where


def _serve(args: list[str], work: Path, name: str, env: dict[str, str]) -> subprocess.Popen:
    """``avro-registry-sink registry serve`` as its own process, stdout and stderr to files in ``work``."""
    command = [sys.executable, "-m", "avro_registry_sink.cli", "registry", "serve", *args]
    with open(work / f"{name}.out", "wb") as out, open(work / f"{name}.err", "wb") as err:
        return subprocess.Popen(command, stdout=out, stderr=err, env={**os.environ, **env}, cwd=work)


@pytest.mark.integration
def test_registry_serve_shows_no_secret(tmp_path):
    tag = uuid.uuid4().hex[:10]
    sentinels = {
        "users-file password": f"UsersFile-{tag}",
        "AVRO_SINK_REGISTRY_USERS password": f"EnvUser-{tag}",
        "--user password": f"ArgUser-{tag}",
        "TLS key password": f"KeyPw-{tag}",
        "wrong TLS key password": f"WrongKey-{tag}",
        "wrong password tried": f"Tried-{tag}",
    }
    inputs, work = tmp_path / "inputs", tmp_path / "work"  # inputs hold the secrets on purpose; work is searched
    work.mkdir()
    tls = make_tls_files(inputs / "tls", common_name="localhost", key_password=sentinels["TLS key password"])
    users = inputs / "users"
    users.write_text(f"alice:{sentinels['users-file password']}\n")
    port = free_port()
    args = ["--port", str(port), "--data", str(work / "registry.db"), "--users-file", str(users),
            "--user", f"carol:{sentinels['--user password']}", "--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
    env = {"AVRO_SINK_REGISTRY_USERS": f"bob:{sentinels['AVRO_SINK_REGISTRY_USERS password']}",
           "AVRO_SINK_REGISTRY_TLS_KEY_PASSWORD": sentinels["TLS key password"]}
    answers: list[str] = []

    server = _serve(args, work, "serve", env)
    try:
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=ssl.create_default_context(cafile=str(tls.ca)),
                          timeout=10) as client:
            wait_for_answer(client, server)
            good = client.post("/subjects/orders-value/versions", auth=("alice", sentinels["users-file password"]),
                               json={"schema": '{"type": "string"}'})
            assert good.status_code == 200, good.text
            for user in (("bob", sentinels["AVRO_SINK_REGISTRY_USERS password"]), ("carol", sentinels["--user password"])):
                assert client.get("/subjects", auth=user).json() == ["orders-value"]
            for auth in (("alice", sentinels["wrong password tried"]), ("mallory", sentinels["users-file password"]), None):
                refused = client.get("/subjects", auth=auth)
                assert refused.status_code == 401, refused.text
                answers.append(refused.text + json.dumps(dict(refused.headers)))
            answers.append(good.text + json.dumps(dict(good.headers)))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert (work / "registry.db").is_file()

    # The failure paths: a wrong key password, and a taken port (all secrets given again).
    wrong_key = _serve(args, work, "wrong-key", {**env, "AVRO_SINK_REGISTRY_TLS_KEY_PASSWORD": sentinels[
        "wrong TLS key password"]})
    assert wrong_key.wait(timeout=60) == 2
    assert (work / "wrong-key.err").read_text().startswith("error: ")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = _serve([*args[:1], str(taken.getsockname()[1]), *args[2:]], work, "port-taken", env)
        assert busy.wait(timeout=60) == 2
    assert (work / "port-taken.err").read_text().startswith("error: Cannot listen on")

    written = [p for p in work.rglob("*") if p.is_file()]
    assert {"serve.out", "serve.err", "wrong-key.err", "port-taken.err", "registry.db"} <= {p.name for p in written}
    for where, secret in sentinels.items():
        for path in written:
            assert secret.encode() not in path.read_bytes(), f"{where} written to {path.name}: {path.read_bytes()[-2000:]!r}"
        for text in answers:
            assert secret not in text, f"{where} in an HTTP answer: {text}"
