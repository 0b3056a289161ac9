"""Exactly-once delivery's pieces that need no broker: settings, tokens, the slice writer's Arrow helpers,
the failpoints the fault suite uses (the broker and Spark side: tests/spark/test_exactly_once.py)."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from avro_registry_sink import failpoints
from avro_registry_sink.cli import _JobArgs, app
from avro_registry_sink.errors import ConfigError
from avro_registry_sink.kafka.delivery import (
    Token,
    _headers_of,
    _partition_input,
    _values_of,
    resolved_record,
    token_key,
    transactional_id,
)
from avro_registry_sink.kafka.options import KafkaOptions
from avro_registry_sink.settings.config import load_config, parse_delivery, parse_transaction_timeout
from avro_registry_sink.settings.ticdc_keys import check_toml
from avro_registry_sink.spark.sinks.sinks import KafkaSink

runner = CliRunner()


# -- settings ----------------------------------------------------------------------------------------


def test_delivery_values():
    assert parse_delivery("exactly-once") == "exactly-once"
    assert parse_delivery("at_least_once") == "at-least-once"
    with pytest.raises(ConfigError, match="at-least-once or exactly-once"):
        parse_delivery("exactly-twice")


def test_transaction_timeout_is_a_duration_within_the_brokers_maximum():
    assert parse_transaction_timeout("90s") == 90.0
    assert parse_transaction_timeout(120000) == 120.0
    for bad in ("0s", "16m", "soon"):
        with pytest.raises(ConfigError, match="transaction-timeout"):
            parse_transaction_timeout(bad)


def test_delivery_from_toml_environment_and_flag(tmp_path):
    toml = tmp_path / "settings.toml"
    toml.write_text('delivery = "exactly-once"\n[sink]\ncontrol-topic = "ops.commits"\ntransaction-timeout = "2m"\n')
    check_toml({"delivery": "exactly-once", "sink": {"control-topic": "x", "transaction-timeout": "1m"}})
    config = load_config(config_file=toml, environ={})
    assert (config.delivery, config.control_topic, config.transaction_timeout) == ("exactly-once", "ops.commits", 120.0)
    assert load_config(config_file=toml, environ={"AVRO_SINK_DELIVERY": "at-least-once"}).delivery == "at-least-once"
    assert load_config(environ={"AVRO_SINK_DELIVERY": "exactly-once"}).delivery == "exactly-once"
    assert load_config(environ={}).delivery == "at-least-once"
    args = _JobArgs(source=str(tmp_path), config=toml, delivery="at-least-once", state_dir=tmp_path / "state")
    assert args.job_options().sink.delivery == "at-least-once"  # the flag wins


def test_a_bad_delivery_flag_exits_2(tmp_path):
    result = runner.invoke(app, ["run", "--source", str(tmp_path), "--delivery", "exactly-twice",
                                 "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2 and "exactly-once" in result.output


def test_exactly_once_takes_the_transactional_producer():
    sink = KafkaSink(["127.0.0.1:1"], delivery="exactly-once")  # no session: confluent-kafka's, in Python
    assert sink.producer == "confluent" and sink.exactly_once and "exactly once" in sink.description
    assert sink.transactions is not None and sink.transactions.in_python
    with pytest.raises(ConfigError, match="JVM slice writer, which cannot run here: no Spark session"):
        KafkaSink(["127.0.0.1:1"], delivery="exactly-once", producer="spark")
    with pytest.raises(ConfigError, match="required-acks=-1"):
        KafkaSink(["127.0.0.1:1"], delivery="exactly-once", kafka=KafkaOptions(required_acks=1))
    assert not KafkaSink(["127.0.0.1:1"], producer="confluent").exactly_once


# -- tokens and the resolved record -------------------------------------------------------------------


def test_token_round_trip_and_names():
    token = Token(query="q1", batch=7, writer=2, parts={"t": [0, 2]}, inputs={"t": {"": 449}}, rows=5)
    again = Token.from_json(token.to_json())
    assert again == token and again.part_set() == {("t", 0), ("t", 2)}
    assert transactional_id("q1", "w", 2) == "avro-registry-sink-q1-w2"
    assert token_key("q1", "r", 0) == "q1/r0"


def test_resolved_is_the_lowest_input_of_each_table():
    record = resolved_record("q", 3, {"shop.a": {"t/0000000000": 10, "t/0000000001": 7}, "shop.b": {}})
    assert record["tables"] == {"shop.a": 7} and record["batch"] == 3


# -- the slice writer's Arrow helpers ---------------------------------------------------------------------


def test_headers_of_a_list_of_structs():
    kind = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    column = pa.array([[{"key": "op", "value": b"c"}, {"key": "commit_ts", "value": b"9"}], None, []], kind)
    assert list(_headers_of(column)) == [[("op", b"c"), ("commit_ts", b"9")], None, None]
    assert list(_headers_of(column.slice(1))) == [None, None]
    assert list(_headers_of(pa.nulls(2, kind))) == [None, None]
    same = pa.array([[{"key": "op", "value": b"c"}, {"key": "commit_ts", "value": str(i).encode()}] for i in range(3)],
                    kind)
    assert list(_headers_of(same.slice(1))) == [[("op", b"c"), ("commit_ts", b"1")], [("op", b"c"), ("commit_ts", b"2")]]
    one = pa.array([[{"key": "op", "value": b"d"}]] * 2, kind)
    assert list(_headers_of(one)) == [[("op", b"d")], [("op", b"d")]]
    # rows of one commit ts and op share one list; a null value is kept
    rows = [("c", b"1"), ("c", b"1"), ("d", b"1"), ("c", None), ("c", b"2"), ("c", b"1")]
    mixed = pa.array([[{"key": "op", "value": op.encode()}, {"key": "commit_ts", "value": ts}] for op, ts in rows],
                     kind)
    got = list(_headers_of(mixed))
    assert got == [[("op", op.encode()), ("commit_ts", ts)] for op, ts in rows]
    assert got[0] is got[1] is got[5] and len({id(h) for h in got}) == 4


def test_values_of_a_column_repeat_one_value_or_list_each():
    assert list(_values_of(pa.array(["t", "t", "t"]))) == ["t", "t", "t"]
    assert list(_values_of(pa.array([1, 2, 1], pa.int32()))) == [1, 2, 1]
    assert list(_values_of(pa.array(["t", None]))) == ["t", None]
    assert list(_values_of(pa.array([], pa.string()))) == []


def test_inputs_of_rows():
    files = pa.array([f"{3:020d}/2024-05-01/{7:020d}", None])
    assert _partition_input(files, 20).to_pylist() == [f"{3:020d}", ""]
    assert _partition_input(pa.array(["src/0000000002"]), None).to_pylist() == ["src/0000000002"]
    assert _partition_input(pa.array(["a.json", "b.json"]), 0).to_pylist() == ["", ""]


# -- failpoints -----------------------------------------------------------------------------------------


def test_failpoints_raise_count_across_processes_and_read_a_spec_file(tmp_path, monkeypatch):
    counts = tmp_path / "counts"
    counts.mkdir()
    monkeypatch.setenv(failpoints.COUNTS_ENV, str(counts))
    monkeypatch.setenv(failpoints.ENV, "eos.produced=raise@2")
    failpoints.failpoint("eos.produced")
    with pytest.raises(failpoints.FailpointError, match="pass 2"):
        failpoints.failpoint("eos.produced")
    assert failpoints.passes("eos.produced") == 2 and (counts / "eos.produced").stat().st_size == 2
    spec = tmp_path / "spec"
    spec.write_text("")
    monkeypatch.setenv(failpoints.ENV, f"@{spec}")
    failpoints.failpoint("stage.encoded")  # an empty spec file: nothing
    assert failpoints.passes("stage.encoded") == 0
    spec.write_text("stage.encoded=pause")
    monkeypatch.setenv(failpoints.PAUSE_ENV, "0.01")
    started = time.monotonic()
    failpoints.failpoint("stage.encoded")
    assert (counts / "stage.encoded.paused").read_text() == str(os.getpid()) and time.monotonic() - started < 5
