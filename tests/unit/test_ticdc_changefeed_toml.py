"""TiCDC's documented changefeed TOML, pasted whole (tests/data/ticdc_changefeed_v8.1.toml: every key of the
changefeed-config page of TiCDC v8.1): every key is in the key table, the refused ones come in one error with
their reasons, and what is left parses into settings."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.settings.config import PartitionStrategy, load_config, parse_sink_uri, settings_from_mapping
from avro_registry_sink.settings.ticdc_keys import Place, Status, check_toml, lookup, toml_problems

PAGE = Path(__file__).parents[1] / "data" / "ticdc_changefeed_v8.1.toml"

#: The keys issue 38 found answered with "Unknown key" (one run each).
ONCE_UNKNOWN = ("memory-quota", "check-gc-safe-point", "enable-sync-point", "sync-point-interval",
                "sync-point-retention", "bdr-mode", "sql-mode", "changefeed-error-stuck-duration",
                "mounter.worker-num", "scheduler.enable-table-across-nodes", "scheduler.region-threshold",
                "scheduler.write-key-threshold", "sink.safe-mode")


def _keys(data, prefix=""):
    """The dotted path of each key of a TOML document; a table in the key table counts as one key."""
    for name, value in data.items():
        path = f"{prefix}{name}"
        if lookup(path, Place.TOML) is not None or not isinstance(value, dict | list):
            yield path
        if isinstance(value, dict):
            yield from _keys(value, path + ".")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                yield from _keys(item, path + ".")


def _page():
    return tomllib.loads(PAGE.read_text(encoding="utf-8"))


def test_every_key_of_the_page_is_in_the_key_table():
    keys = set(_keys(_page()))
    assert len(keys) >= 109, len(keys)  # the page's whole block, not a sample
    missing = sorted(k for k in keys if lookup(k, Place.TOML) is None
                     and lookup(k.rsplit(".", 1)[0], Place.TOML) is None)
    assert not missing
    assert not [p for p in toml_problems(_page()) if str(p).startswith("Unknown")]


def test_the_pasted_page_is_one_error_naming_every_refused_key_with_its_reason():
    refused = sorted({k for k in _keys(_page()) if (row := lookup(k, Place.TOML)) and row.status is Status.REFUSED})
    assert refused == ["enable-old-value", "filter.event-filters", "filter.ignore-txn-start-ts",
                       "sink.dispatchers.index", "sink.kafka-config.glue-schema-registry-config"]

    with pytest.raises(ConfigError) as info:
        load_config(config_file=PAGE, environ={})

    message = str(info.value)
    assert message.startswith(f"5 settings in settings file {str(PAGE)!r} are refused; fix them all, then rerun:")
    assert "\n" not in message and message.count(str(PAGE)) == 1
    assert sorted(info.value.options) == refused
    for name in refused:
        assert f"'{name}' is not supported: {lookup(name, Place.TOML).note}" in message


def test_the_page_without_its_refused_keys_parses_into_settings():
    data = _page()
    for name in ("enable-old-value",):
        del data[name]
    del data["filter"]["ignore-txn-start-ts"], data["filter"]["event-filters"]
    del data["sink"]["kafka-config"]["glue-schema-registry-config"]
    for rule in data["sink"]["dispatchers"]:
        rule.pop("index", None)

    check_toml(data)
    config = settings_from_mapping(data)

    assert config.protocol == "avro"  # protocol = "canal-json" describes the input; the output is Avro
    assert config.filter_rules == ("*.*", "!test.*") and not config.case_sensitive
    assert [d.partition for d in config.dispatchers][-1] is PartitionStrategy.TS
    assert len(config.column_selectors) == 4
    assert config.kafka.sasl_mechanism.upper() == "OAUTHBEARER"


@pytest.mark.parametrize("name", ONCE_UNKNOWN)
def test_keys_once_unknown_are_accepted_with_a_reason(name):
    row = lookup(name, Place.TOML)
    assert row is not None and row.status is Status.ACCEPTED and len(row.note) > 30
    value = [p for p in _keys(_page()) if p == name]
    assert value, f"{name} is not in the page's data file"


def test_all_unknown_keys_in_one_error_and_a_suggestion_only_when_close(tmp_path):
    path = tmp_path / "cf.toml"
    path.write_text("sync-point-intervall = '5m'\nfrobnicate = 1\nsafe-mode = true\n[sink]\nprotocl = 'avro'\n")

    with pytest.raises(ConfigError) as info:
        load_config(config_file=path, environ={})

    message = str(info.value)
    assert message.startswith("4 settings in settings file")
    assert "(1) Unknown key 'sync-point-intervall': did you mean 'sync-point-interval'?" in message
    assert "(2) Unknown key 'frobnicate': docs/settings.md lists every valid one." in message
    assert "(3) Unknown key 'safe-mode': did you mean 'sink.safe-mode'?" in message
    assert "(4) Unknown key 'sink.protocl': did you mean 'sink.protocol'?" in message
    assert "did you mean ''" not in message and "did you mean None" not in message


def test_unknown_key_far_from_any_is_named_without_a_guess(tmp_path):
    path = tmp_path / "cf.toml"
    path.write_text("sync-point-frequency = '5m'\n")
    with pytest.raises(ConfigError) as info:
        load_config(config_file=path, environ={})
    assert "did you mean" not in str(info.value) and info.value.suggestion is None


def test_the_storage_changefeeds_own_toml_describes_the_source(tmp_path):
    """The TOML of the storage changefeed that wrote the tree: its protocol and [sink.csv] describe the input."""
    path = tmp_path / "storage-changefeed.toml"
    path.write_text("[sink]\nprotocol = 'csv'\ndate-separator = 'day'\nenable-partition-separator = true\n"
                    "terminator = '\\r\\n'\n[sink.csv]\ndelimiter = '|'\nquote = '\"'\nnull = '\\N'\n"
                    "include-commit-ts = true\n[sink.cloud-storage-config]\nworker-count = 8\nflush-interval = '5s'\n")

    config = load_config(config_file=path, environ={})

    assert config.protocol == "avro"
    for protocol in ("canal-json", "CSV", "debezium", "avro", "flat-avro"):
        path.write_text(f"[sink]\nprotocol = '{protocol}'\n")
        assert load_config(config_file=path, environ={}).protocol == "avro"


def test_a_protocol_neither_input_nor_output_names_both_roles(tmp_path):
    path = tmp_path / "cf.toml"
    path.write_text("[sink]\nprotocol = 'open-protocol'\n")
    with pytest.raises(ConfigError, match=r"either the output's \(\"avro\" or \"flat-avro\"\) or, in the TOML of "
                                          r"the changefeed that wrote the input, that changefeed's \(\"csv\", "
                                          r"\"canal-json\", \"debezium\"\)"):
        load_config(config_file=path, environ={})


def test_the_sink_uri_protocol_is_the_outputs_only():
    with pytest.raises(ConfigError, match="this sink writes Avro"):
        parse_sink_uri("kafka://k:9092/t?protocol=csv")


def test_the_cli_answers_the_pasted_page_with_one_line_and_exit_2():
    from typer.testing import CliRunner

    from avro_registry_sink.cli import app

    ddl = Path(__file__).parents[1] / "data" / "cli_orders.sql"
    result = CliRunner().invoke(app, ["schemas", "--ddl", str(ddl), "--config", str(PAGE)])

    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: 5 settings in settings file"), lines
    assert "(5) Key 'sink.kafka-config.glue-schema-registry-config' is not supported" in lines[0]
