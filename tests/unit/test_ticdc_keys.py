"""Every TiCDC sink-URI parameter, changefeed TOML key and CLI flag is honoured or refused by name.

TiCDC's documented sink URIs and changefeed TOML (``docs.pingcap.com/tidb/stable/ticdc-sink-to-kafka``,
``ticdc-changefeed-config``, and the fact sheet's examples) are pasted unchanged: for each key the product
either applies it or raises a ConfigError that names it; unknown keys come with the closest valid name.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.settings.config import (
    DecimalMode,
    PartitionStrategy,
    SubjectNaming,
    load_config,
    parse_sink_uri,
    settings_from_mapping,
)
from avro_registry_sink.settings.ticdc_keys import KEYS, Place, Status, check_toml, lookup, markdown_table

README = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_readme_key_table_is_the_data_table():
    text = README.read_text(encoding="utf-8")
    start = text.index("<!-- ticdc-keys:start -->") + len("<!-- ticdc-keys:start -->")
    end = text.index("<!-- ticdc-keys:end -->")
    assert text[start:end].strip() == markdown_table(), "regenerate with: python -m avro_registry_sink.settings.ticdc_keys"


def test_every_key_has_a_reason_and_names_are_unique():
    seen = set()
    for key in KEYS:
        assert key.note, key.name
        assert (key.place, key.name) not in seen, key.name
        seen.add((key.place, key.name))
        if key.status is Status.DEFAULT_ONLY:
            assert key.accepted, key.name


# -- sink URI --------------------------------------------------------------------------------------

#: A valid value of every URI parameter (what TiCDC's docs show).
URI_SAMPLES = {
    "protocol": "avro", "schema-registry": "http://127.0.0.1:8081", "enable-tidb-extension": "true",
    "avro-decimal-handling-mode": "string", "avro-bigint-unsigned-handling-mode": "string",
    "avro-enable-watermark": "false", "max-batch-size": "16", "encoding-format": "json",
    "partition-num": "6", "max-message-bytes": "67108864", "subject-naming": "ticdc",
    "replication-factor": "1", "kafka-version": "2.4.0", "kafka-client-id": "cdc_1", "max-retry": "5",
    "compression": "lz4", "required-acks": "-1", "auto-create-topic": "true", "dial-timeout": "10s",
    "read-timeout": "10s", "write-timeout": "10s", "enable-tls": "true",
    # TLS files are all-or-none, SASL credentials go with a mechanism (TiCDC's checks)
    "ca": "{d}/ca.pem&cert={d}/c.pem&key={d}/k.pem", "cert": "{d}/c.pem&ca={d}/ca.pem&key={d}/k.pem",
    "key": "{d}/k.pem&ca={d}/ca.pem&cert={d}/c.pem", "key-password": "pw&ca={d}/ca.pem&cert={d}/c.pem&key={d}/k.pem",
    "insecure-skip-verify": "false", "sasl-mechanism": "scram-sha-256&sasl-user=alice&sasl-password=alice-secret",
    "sasl-user": "alice&sasl-mechanism=plain&sasl-password=x",
    "sasl-password": "alice-secret&sasl-mechanism=scram-sha-256&sasl-user=alice", "transaction-atomicity": "none", "only-output-updated-columns": "false",
    "content-compatible": "false", "debezium-disable-schema": "false",
    "sasl-gssapi-auth-type": "user", "sasl-gssapi-keytab-path": "/k", "sasl-gssapi-kerberos-config-path": "/krb5",
    "sasl-gssapi-service-name": "kafka", "sasl-gssapi-user": "alice", "sasl-gssapi-password": "x",
    "sasl-gssapi-realm": "EXAMPLE.COM", "sasl-gssapi-disable-pafxfast": "false",
    "avro-include-before-value": "true", "debezium-include-start-ts": "true", "output-row-key": "true",
    "worker-count": "16", "flush-interval": "5s", "file-size": "1048576",
    "sasl-oauth-client-id": "c", "sasl-oauth-client-secret": "cHc=", "sasl-oauth-token-url": "http://t",
    "sasl-oauth-scopes": "s", "sasl-oauth-grant-type": "client_credentials", "sasl-oauth-audience": "a",
}
#: What an honoured parameter changes in the SinkConfig (the rest belong to the Kafka client settings).
URI_EFFECTS = {
    "schema-registry": lambda c: c.registry.urls == ("http://127.0.0.1:8081",),
    "enable-tidb-extension": lambda c: c.encoding.enable_tidb_extension,
    "avro-decimal-handling-mode": lambda c: c.encoding.decimal_mode is DecimalMode.STRING,
    "avro-bigint-unsigned-handling-mode": lambda c: c.encoding.bigint_unsigned_mode.value == "string",
    "partition-num": lambda c: c.partition_num == 6,
    "max-message-bytes": lambda c: c.max_message_bytes == 67108864,
    "subject-naming": lambda c: c.subject_naming is SubjectNaming.TICDC,
    "protocol": lambda c: c.protocol == "avro",
    "replication-factor": lambda c: c.kafka.replication_factor == 1,
    "kafka-client-id": lambda c: c.kafka.client_id == "cdc_1",
    "compression": lambda c: c.kafka.compression.value == "lz4",
    "required-acks": lambda c: c.kafka.required_acks == -1,
    "enable-tls": lambda c: c.kafka.enable_tls is True,
    "ca": lambda c: [Path(p).name for p in (c.kafka.ca, c.kafka.cert, c.kafka.key)] == ["ca.pem", "c.pem", "k.pem"],
    "sasl-mechanism": lambda c: c.kafka.sasl_mechanism.value.lower() == "scram-sha-256",
    "sasl-password": lambda c: c.kafka.sasl_password.get_secret_value() == "alice-secret",
}


@pytest.mark.parametrize("key", [k for k in KEYS if k.place is Place.URI], ids=lambda k: k.name)
def test_each_uri_parameter_is_honoured_or_refused_by_name(key, tmp_path):
    assert key.name in URI_SAMPLES, f"add a sample value for {key.name}"
    for name in ("ca.pem", "c.pem", "k.pem"):
        (tmp_path / name).write_text("-----BEGIN CERTIFICATE-----\n")
    scheme = key.schemes[0]
    base = "kafka://127.0.0.1:9092/t" if scheme == "kafka" else "file:///tmp/out"
    uri = f"{base}?protocol=avro&{key.name}={URI_SAMPLES[key.name].format(d=tmp_path)}"
    if key.status is Status.REFUSED:
        with pytest.raises(ConfigError, match=re.escape(repr(key.name))):
            parse_sink_uri(uri)
        return
    config = parse_sink_uri(uri)
    if key.name in URI_EFFECTS:
        assert URI_EFFECTS[key.name](config), key.name
    if key.status is Status.DEFAULT_ONLY:
        other = "true" if key.accepted[0] is False else "something-else"
        with pytest.raises(ConfigError, match=re.escape(repr(key.name)) + ".*only"):
            parse_sink_uri(f"{base}?protocol=avro&{key.name}={other}")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("kafka://k:9092/t?protocol=avro&enable-tidb-extention=true",
         "Unknown sink URI parameter 'enable-tidb-extention': did you mean 'enable-tidb-extension'?"),
        ("kafka://k:9092/t?protocol=avro&partition_num=3", "did you mean 'partition-num'?"),
        ("kafka://k:9092/t?protocol=avro&avro-decimal-handling=string", "did you mean 'avro-decimal-handling-mode'?"),
        ("file:///tmp/x?protocol=avro&sasl-user=bob", "'sasl-user' belongs to kafka:// sinks, not file://"),
        ("kafka://k:9092/t?protocol=avro&transaction-atomicity=table", "'transaction-atomicity': only 'none'"),
        ("kafka://k:9092/t?protocol=avro&worker-count=4", "belongs to file:// sinks"),
        ("kafka://k:9092/t?protocol=canal-json", "valid values are \"avro\" or \"flat-avro\""),
    ],
)
def test_uri_refusals_name_the_key(uri, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_sink_uri(uri)


def test_repeated_uri_key_keeps_its_first_value_as_ticdc():
    cfg = parse_sink_uri("kafka://k:9092/t?protocol=avro&partition-num=2&partition-num=5")
    assert cfg.partition_num == 2


#: Sink URIs from TiCDC's documentation and the fact sheet, unchanged.
DOCUMENTED_URIS = [
    "kafka://127.0.0.1:9092/topic-name?protocol=canal-json&kafka-version=2.4.0&partition-num=6"
    "&max-message-bytes=67108864&replication-factor=1",
    "kafka://127.0.0.1:9092/topic-name?protocol=avro&replication-factor=3",
    "kafka://127.0.0.1:9092/cdc-test?kafka-version=2.4.0&protocol=avro&partition-num=6&max-message-bytes=67108864"
    "&replication-factor=1&enable-tidb-extension=true&avro-decimal-handling-mode=string"
    "&avro-bigint-unsigned-handling-mode=string",
    "kafka://127.0.0.1:9092/topic-name?protocol=avro&enable-tls=true&ca=/root/ca.pem&cert=/root/client.pem"
    "&key=/root/client-key.pem",
    "kafka://127.0.0.1:9092/topic-name?protocol=avro&sasl-mechanism=scram-sha-256&sasl-user=alice"
    "&sasl-password=alice-secret",
    "kafka://127.0.0.1:9092/topic-name?protocol=avro&sasl-mechanism=gssapi&sasl-gssapi-auth-type=user"
    "&sasl-gssapi-kerberos-config-path=/etc/krb5.conf&sasl-gssapi-service-name=kafka&sasl-gssapi-user=alice"
    "&sasl-gssapi-password=alice-secret&sasl-gssapi-realm=example.com",
    "kafka://127.0.0.1:9092/topic-name?protocol=avro&transaction-atomicity=table",
    "kafka://h1:9092,h2:9092/cdc?protocol=flat-avro&enable-tidb-extension=true"
    "&schema-registry=http://user:pass@127.0.0.1:8081",
]


@pytest.mark.parametrize("uri", DOCUMENTED_URIS)
def test_documented_sink_uris_each_key_honoured_or_refused_by_name(uri):
    """The URI as pasted; while it is refused, the error names one of its keys (a refused key, or a value this
    product refuses: another protocol, a TLS file that is not there, GSSAPI), that key is taken out and the
    rest is tried again; what remains is honoured."""
    split = urlsplit(uri)
    params = parse_qsl(split.query)
    for name, _ in params:
        assert lookup(name, Place.URI) is not None, f"{name} is missing from the key table"
    refused = []
    while True:
        query = "&".join(f"{k}={v}" for k, v in params)
        try:
            config = parse_sink_uri(f"{split.scheme}://{split.netloc}{split.path}?{query}")
            break
        except ConfigError as exc:
            named = [k for k, _ in params if repr(k) in str(exc)]
            assert named, str(exc)
            refused.append(named[0])
            params = [(k, v) for k, v in params if k != named[0]]
            if named[0] == "protocol":
                params.append(("protocol", "avro"))
    assert config.protocol == "avro"
    for name, _ in params:
        assert lookup(name, Place.URI).status is not Status.REFUSED, name


# -- changefeed TOML --------------------------------------------------------------------------------

#: A changefeed file in TiCDC's documented layout (ticdc-changefeed-config), with the fact sheet's examples.
DOCUMENTED_TOML = """
case-sensitive = false
force-replicate = false

[filter]
rules = ['*.*', '!test.*']

[[filter.event-filters]]
matcher = ["test.worker"]
ignore-event = ["insert"]
ignore-sql = ["^drop", "add column"]

[sink]
protocol = "avro"
schema-registry = "http://127.0.0.1:8081"
dispatchers = [
    {matcher = ['test1.*', 'test2.*'], topic = "Topic expression 1", partition = "index-value"},
    {matcher = ['test3.*', 'test4.*'], topic = "Topic expression 2", partition = "index-value", index = "index1"},
    {matcher = ['test1.*', 'test5.*'], topic = "Topic expression 3", partition = "table"},
    {matcher = ['test6.*'], partition = "columns", columns = ['a', 'b']},
    {matcher = ['db.*'], topic = "{schema}_{table}", partition = "ts"},
]
column-selectors = [
    {matcher = ['test.t1'], columns = ['a', 'b']},
    {matcher = ['test.*'], columns = ["*", "!b"]},
]
terminator = "\\r\\n"
date-separator = 'day'
enable-partition-separator = true
delete-only-output-handle-key-columns = false
only-output-updated-columns = false
content-compatible = false

[sink.csv]
delimiter = ','
quote = '"'
null = '\\N'
include-commit-ts = false
binary-encoding-method = 'base64'

[sink.kafka-config]
partition-num = 3
replication-factor = 1
compression = "lz4"
sasl-mechanism = "OAUTHBEARER"
sasl-oauth-client-id = "producer-kafka"
sasl-oauth-client-secret = "cHJvZHVjZXIta2Fma2E="
sasl-oauth-token-url = "http://127.0.0.1:4444/oauth2/token"
sasl-oauth-scopes = ["producer.kafka", "consumer.kafka"]

[sink.kafka-config.codec-config]
enable-tidb-extension = true
avro-decimal-handling-mode = "string"
avro-bigint-unsigned-handling-mode = "string"
avro-enable-watermark = false

[sink.kafka-config.large-message-handle]
large-message-handle-option = "none"

[sink.kafka-config.glue-schema-registry-config]
region = "us-west-1"
registry-name = "ticdc-test"

[sink.cloud-storage-config]
worker-count = 8
flush-interval = "5s"
file-size = 67108864
output-column-id = false

[consistent]
level = "none"
max-log-size = 64
flush-interval = 2000
storage = ""

[integrity]
integrity-check-level = "none"
corruption-handle-level = "warn"
"""


KEYS_IN_TOML = ("sasl-oauth-client-id", "sasl-oauth-client-secret", "sasl-oauth-token-url")


def _leaves(data, prefix=()):
    """(path, value) of each leaf key; a list of tables counts as one key per table key."""
    for name, value in data.items():
        path = (*prefix, name)
        if isinstance(value, dict):
            yield from _leaves(value, path)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                for inner, inner_value in item.items():
                    yield (*path, inner), (path, item, inner, inner_value)
        else:
            yield path, value


def _nest(path, value):
    out = value
    for name in reversed(path):
        out = {name: out}
    return out


def test_documented_changefeed_toml_each_key_honoured_or_refused_by_name():
    data = tomllib.loads(DOCUMENTED_TOML)
    seen = set()
    for path, value in _leaves(data):
        if isinstance(value, tuple):  # a key of one table in an array: check that table alone
            table_path, item, _, _ = value
            single = _nest(table_path, [item])
        else:
            single = _nest(path, value)
        name = ".".join(path)
        key = lookup(name, Place.TOML) or lookup(".".join(path[:-1]), Place.TOML)
        assert key is not None, f"{name} is missing from the key table"
        seen.add(name)
        try:
            check_toml(single)
            settings_from_mapping(single)
        except ConfigError as exc:  # names this key, or the keys TiCDC requires with it (oauth settings)
            named = {name, ".".join(path[:-1]), path[-1], *KEYS_IN_TOML}
            assert any(n in str(exc) for n in named) or "dispatcher" in str(exc), (name, str(exc))
    assert {"filter.rules", "sink.column-selectors.columns", "sink.dispatchers.partition"} <= seen


def test_whole_documented_toml_is_refused_naming_the_first_unsupported_key(tmp_path):
    path = tmp_path / "changefeed.toml"
    path.write_text(DOCUMENTED_TOML)
    with pytest.raises(ConfigError, match=r"'filter.event-filters'.*not supported"):
        load_config(config_file=path, environ={})


def test_supported_subset_of_documented_toml_is_applied(tmp_path):
    data = tomllib.loads(DOCUMENTED_TOML)
    del data["filter"]["event-filters"]
    del data["sink"]["kafka-config"]["glue-schema-registry-config"]
    data["sink"]["dispatchers"] = [d for d in data["sink"]["dispatchers"] if "index" not in d and " " not in
                                   d.get("topic", "")]
    check_toml(data)
    cfg = settings_from_mapping(data)
    assert cfg.filter_rules == ("*.*", "!test.*") and not cfg.case_sensitive
    assert [s.columns for s in cfg.column_selectors] == [("a", "b"), ("*", "!b")]
    assert [d.partition for d in cfg.dispatchers] == [PartitionStrategy.COLUMNS, PartitionStrategy.TS]
    assert cfg.encoding.enable_tidb_extension and cfg.encoding.decimal_mode is DecimalMode.STRING
    assert cfg.registry.urls == ("http://127.0.0.1:8081",)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[sink]\nenable-tidb-extention = true\n", "Unknown key 'sink.enable-tidb-extention'"),
        ("[sink]\nprotocl = 'avro'\n", "did you mean 'sink.protocol'?"),
        ("[sink.kafka-config.codec-config]\navro-decimal-handling = 'string'\n",
         "did you mean 'sink.kafka-config.codec-config.avro-decimal-handling-mode'?"),
        ("enable-old-value = true\n", "'enable-old-value' in settings file .* is not supported: removed in TiCDC v7.4.0"),
        ("force-replicate = true\n", "force-replicate must be disabled, when using avro protocol"),
        ("[sink]\nprotocol = 'maxwell'\n", "either the output's \\(\"avro\" or \"flat-avro\"\\) or.*\"csv\""),
        ("[filter]\nrules = ['db-1.*']\n", "Invalid filter.rules rule 'db-1.\\*'"),
        ("[[sink.dispatchers]]\nmatcher = ['*.*']\ndispatcher = 'ts'\npartition = 'ts'\n",
         "dispatcher and partition cannot be configured both"),
        ("[[sink.dispatchers]]\nmatcher = ['*.*']\npartition = 'commit_ts'\n", "did you mean 'ts'?"),
        ("[[sink.dispatchers]]\nmatcher = ['*.*']\npartition = 'columns'\n", "no columns = \\[...\\] to hash"),
        ("[[sink.column-selectors]]\nmatcher = ['*.*']\ncolums = ['a']\n",
         "did you mean 'sink.column-selectors.columns'?"),
        ("[sink]\ndate-separator = 'year'\n", "'sink.date-separator'.*only 'day' or 'month' or 'none'"),
        ("[consistent]\nlevel = 'eventual'\n", "'consistent.level'.*only 'none'"),
    ],
)
def test_toml_refusals_name_the_key(tmp_path, toml, message):
    path = tmp_path / "cf.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=message):
        load_config(config_file=path, environ={})


def test_old_dispatcher_key_and_rowid_alias(tmp_path):
    path = tmp_path / "cf.toml"
    path.write_text("[sink]\ndispatchers = [{matcher = ['shop.*'], dispatcher = 'ts'},"
                    " {matcher = ['crm.*'], partition = 'RowID'}, {matcher = ['*.*'], dispatcher = 'Table'}]\n")
    cfg = load_config(config_file=path, environ={})
    assert [d.partition for d in cfg.dispatchers] == [PartitionStrategy.TS, PartitionStrategy.INDEX_VALUE,
                                                      PartitionStrategy.TABLE]
