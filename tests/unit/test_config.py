from __future__ import annotations

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.settings.config import (
    BigintUnsignedMode,
    DecimalMode,
    PartitionStrategy,
    SubjectNaming,
    encoding_options,
    load_config,
    parse_sink_uri,
)


def test_full_sink_uri():
    cfg = parse_sink_uri(
        "kafka://k1:9092,k2:9092/my-topic?protocol=flat-avro&enable-tidb-extension=true"
        "&avro-decimal-handling-mode=string&avro-bigint-unsigned-handling-mode=long"
        "&schema-registry=http://user:p%40ss@reg:8081&partition-num=6&subject-naming=ticdc"
    )
    assert cfg.brokers == ("k1:9092", "k2:9092") and cfg.default_topic == "my-topic" and cfg.protocol == "avro"
    assert cfg.encoding.enable_tidb_extension and cfg.encoding.decimal_mode is DecimalMode.STRING
    assert cfg.encoding.bigint_unsigned_mode is BigintUnsignedMode.LONG
    assert cfg.registry.urls == ("http://reg:8081",)
    assert cfg.registry.username == "user" and cfg.registry.password.get_secret_value() == "p@ss"
    assert "p@ss" not in repr(cfg)
    assert cfg.partition_num == 6 and cfg.subject_naming is SubjectNaming.TICDC


@pytest.mark.parametrize("protocol", ["avro", "flat-avro", "AVRO", "Flat-Avro"])
def test_protocols(protocol):
    assert parse_sink_uri(f"kafka://k:9092/t?protocol={protocol}").protocol == "avro"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("protocol=canal-json", "'protocol'.*\"avro\" or \"flat-avro\""),
        ("protocol=avro&enable-tidb-extension=yes", "'enable-tidb-extension'.*true or false"),
        ("protocol=avro&avro-decimal-handling-mode=Precise", "'avro-decimal-handling-mode'.*\"precise\" or \"string\".*case-sensitive"),
        ("protocol=avro&avro-bigint-unsigned-handling-mode=int", "'avro-bigint-unsigned-handling-mode'.*\"long\" or \"string\""),
        ("protocol=avro&schema-registry=ftp://x", "'schema-registry'"),
        ("protocol=avro&partition-num=0", "'partition-num'"),
    ],
)
def test_invalid_options_name_option_value_and_choices(query, message):
    with pytest.raises(ConfigError, match=message):
        parse_sink_uri(f"kafka://k:9092/t?{query}")


def test_empty_mode_keeps_default_like_ticdc():
    assert encoding_options({"avro-decimal-handling-mode": ""}).decimal_mode is DecimalMode.PRECISE


def test_bad_scheme():
    with pytest.raises(ConfigError, match="kafka://, file:// or a storage URI"):
        parse_sink_uri("mysql://x/")


def test_toml_env_uri_and_flags_precedence(tmp_path):
    toml = tmp_path / "sink.toml"
    toml.write_text(
        """
[sink]
protocol = "avro"
enable-tidb-extension = true
avro-decimal-handling-mode = "string"
[[sink.dispatchers]]
matcher = ["shop.*"]
topic = "{schema}_{table}"
partition = "table"
[registry]
timeout = 3.5
"""
    )
    cfg = load_config(config_file=toml, environ={})
    assert cfg.encoding.enable_tidb_extension and cfg.encoding.decimal_mode is DecimalMode.STRING
    assert cfg.dispatchers[0].partition is PartitionStrategy.TABLE and cfg.dispatchers[0].matcher == ("shop.*",)
    assert cfg.registry.timeout == 3.5
    env = {"AVRO_SINK_AVRO_DECIMAL_HANDLING_MODE": "precise", "AVRO_SINK_ENABLE_TIDB_EXTENSION": "false"}
    cfg = load_config(config_file=toml, environ=env)
    assert cfg.encoding.decimal_mode is DecimalMode.PRECISE and not cfg.encoding.enable_tidb_extension
    cfg = load_config(config_file=toml, environ=env, sink_uri="kafka://k:9092/t?protocol=avro&enable-tidb-extension=true")
    assert cfg.encoding.enable_tidb_extension
    cfg = load_config(config_file=toml, environ=env, sink_uri="kafka://k:9092/t?protocol=avro&enable-tidb-extension=true",
                      overrides={"enable-tidb-extension": "false"})
    assert not cfg.encoding.enable_tidb_extension


def test_bad_toml_and_dispatcher(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[dispatchers]]\nmatcher=['*.*']\npartition='random'\n")
    with pytest.raises(ConfigError, match=r"'partition'.*index-value"):
        load_config(config_file=bad, environ={})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(config_file=tmp_path / "missing.toml", environ={})


def test_models_are_frozen_and_pickle():
    import pickle

    cfg = parse_sink_uri("kafka://k:9092/t?protocol=avro&schema-registry=http://u:pw@r:1")
    with pytest.raises(Exception):  # noqa: B017 - any refusal of the assignment (pydantic's own error type)
        cfg.encoding.decimal_mode = DecimalMode.STRING  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(cfg)) == cfg
