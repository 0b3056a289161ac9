"""KafkaOptions: TiCDC's Kafka keys parsed with TiCDC's rules, and rendered for librdkafka and Spark's Java client."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.kafka.options import (
    Compression,
    KafkaOptions,
    SaslMechanism,
    kafka_options,
    librdkafka_conf,
    spark_kafka_options,
    topic_settings,
)
from avro_registry_sink.settings.config import load_config, parse_sink_uri, settings_from_mapping
from tests.support.tls import make_tls_files


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def _tls_params(tls) -> dict[str, str]:
    return {"ca": str(tls.ca), "cert": str(tls.cert), "key": str(tls.key)}


def test_defaults_are_plaintext_idempotent_and_uncompressed() -> None:
    opts = KafkaOptions()
    assert opts.security_protocol == "PLAINTEXT" and opts.is_idempotent
    conf = librdkafka_conf(opts)
    assert conf["security.protocol"] == "plaintext"
    assert conf["acks"] == "all" and conf["enable.idempotence"] is True and conf["compression.type"] == "none"
    assert conf["socket.connection.setup.timeout.ms"] == 10000
    assert "acks" not in librdkafka_conf(opts, "admin") and "acks" not in librdkafka_conf(opts, "consumer")
    assert topic_settings(opts) == {"replication_factor": -1, "create": True}


@pytest.mark.parametrize(("params", "protocol"), [
    ({"enable-tls": "true"}, "SSL"),
    ({"sasl-mechanism": "plain", "sasl-user": "u", "sasl-password": "p"}, "SASL_PLAINTEXT"),
    ({"enable-tls": "1", "sasl-mechanism": "SCRAM-SHA-512", "sasl-user": "u", "sasl-password": "p"}, "SASL_SSL"),
    ({"enable-tls": "false", "sasl-user": "u"}, "PLAINTEXT"),  # no mechanism: SASL stays off, as in TiCDC
])
def test_security_protocol(params: dict[str, str], protocol: str) -> None:
    assert kafka_options(params).security_protocol == protocol


def test_ca_cert_and_key_switch_tls_on_without_enable_tls(tls) -> None:
    opts = kafka_options(_tls_params(tls))
    assert opts.tls and opts.enable_tls is None
    conf = librdkafka_conf(opts)
    assert (conf["ssl.ca.location"], conf["ssl.certificate.location"], conf["ssl.key.location"]) == (
        str(tls.ca), str(tls.cert), str(tls.key))


@pytest.mark.parametrize(("params", "message"), [
    ({"ca": "CA"}, "ca, cert and key files should all be supplied (missing: cert, key)"),
    ({"ca": "CA", "cert": "CERT", "key": "KEY", "enable-tls": "false"},
     "credential files are supplied, but 'enable-tls' is set to false"),
    ({"enable-tls": "yes"}, "Invalid value 'yes' for option 'enable-tls': valid values are true or false."),
    ({"ca": "/nonexistent/ca.pem"}, "option 'ca': no such file"),
    ({"sasl-mechanism": "gssapi"}, "GSSAPI (Kerberos) is not supported"),
    ({"sasl-mechanism": "scram"}, "unknown scram SASL mechanism; valid values are plain, scram-sha-256"),
    ({"sasl-mechanism": "plain", "sasl-user": "u"}, "Option 'sasl-password' is required with sasl-mechanism=plain"),
    ({"required-acks": "2"}, "invalid required acks 2, only support these values: 0(NoResponse),1(WaitForLocal) "
                             "and -1(WaitForAll)"),
    ({"compression": "brotli"}, "valid values are none, gzip, snappy, lz4 or zstd"),
    ({"kafka-client-id": "my client"}, "invalid kafka client ID 'my client'"),
    ({"kafka-version": "latest"}, "invalid kafka version"),
    ({"replication-factor": "0"}, "option 'replication-factor': expected a whole number from 1 to 32767"),
    ({"dial-timeout": "10 seconds"}, "option 'dial-timeout': expected a positive Go duration"),
    ({"sasl-oauth-client-id": "c"}, "missing: sasl-oauth-client-secret, sasl-oauth-token-url"),
    ({"sasl-mechanism": "oauthbearer", "sasl-oauth-client-id": "c", "sasl-oauth-client-secret": "not base64!",
      "sasl-oauth-token-url": "https://idp/token"}, "OAuth2 client secret is not base64 encoded"),
])
def test_ticdc_validation_messages(tls, params: dict[str, str], message: str) -> None:
    files = {"CA": str(tls.ca), "CERT": str(tls.cert), "KEY": str(tls.key)}
    params = {k: files.get(v, v) for k, v in params.items()}
    with pytest.raises(ConfigError) as err:
        kafka_options(params)
    assert message in str(err.value)


def test_bad_secret_values_are_not_echoed() -> None:
    with pytest.raises(ConfigError) as err:
        kafka_options({"sasl-mechanism": "oauthbearer", "sasl-oauth-client-id": "c",
                       "sasl-oauth-client-secret": "Sentinel-Secret!", "sasl-oauth-token-url": "https://idp/token"})
    assert "Sentinel-Secret" not in str(err.value) and "<secret>" in str(err.value)


def test_producer_keys_render_for_both_clients() -> None:
    opts = kafka_options({"required-acks": "1", "compression": "ZSTD", "kafka-client-id": "cdc_1.a-b",
                          "replication-factor": "1", "auto-create-topic": "false", "kafka-version": "2.4.0",
                          "dial-timeout": "1m30s", "read-timeout": "500ms", "write-timeout": "2s"})
    assert opts.compression is Compression.ZSTD and not opts.is_idempotent
    conf = librdkafka_conf(opts)
    assert conf["acks"] == "1" and conf["enable.idempotence"] is False and conf["compression.type"] == "zstd"
    assert conf["client.id"] == "cdc_1.a-b" and conf["socket.connection.setup.timeout.ms"] == 90000
    assert conf["socket.timeout.ms"] == 2000
    spark = spark_kafka_options(opts)
    assert spark["kafka.acks"] == "1" and spark["kafka.enable.idempotence"] == "false"
    assert spark["kafka.compression.type"] == "zstd" and spark["kafka.client.id"] == "cdc_1.a-b"
    assert topic_settings(opts) == {"replication_factor": 1, "create": False}


@pytest.mark.parametrize("mechanism", ["plain", "scram-sha-256", "scram-sha-512"])
def test_sasl_renders_jaas_with_escaped_credentials(mechanism: str) -> None:
    opts = kafka_options({"sasl-mechanism": mechanism, "sasl-user": 'bo"b', "sasl-password": 'p\\w"d'})
    assert opts.sasl_mechanism is SaslMechanism(mechanism.upper())
    conf = librdkafka_conf(opts)
    assert (conf["sasl.mechanism"], conf["sasl.username"], conf["sasl.password"]) == (
        mechanism.upper(), 'bo"b', 'p\\w"d')
    spark = spark_kafka_options(opts, "consumer")
    module = "plain.PlainLoginModule" if mechanism == "plain" else "scram.ScramLoginModule"
    assert spark["kafka.sasl.jaas.config"] == (
        f'org.apache.kafka.common.security.{module} required username="bo\\"b" password="p\\\\w\\"d";')
    assert spark["kafka.security.protocol"] == "SASL_PLAINTEXT" and "kafka.acks" not in spark


def test_oauthbearer_from_toml_renders_oidc() -> None:
    cfg = settings_from_mapping({"sink": {"kafka-config": {
        "sasl-mechanism": "OAUTHBEARER", "sasl-oauth-client-id": "cid", "sasl-oauth-client-secret": "c2VjcmV0",
        "sasl-oauth-token-url": "https://idp.example/token", "sasl-oauth-scopes": ["a", "b"]}}})
    conf = librdkafka_conf(cfg.kafka)
    assert conf["sasl.oauthbearer.method"] == "oidc" and conf["sasl.oauthbearer.client.secret"] == "secret"
    assert conf["sasl.oauthbearer.scope"] == "a b"
    spark = spark_kafka_options(cfg.kafka)
    assert spark["kafka.sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/token"
    assert 'clientSecret="secret"' in spark["kafka.sasl.jaas.config"]


def test_spark_gets_pem_material_inline(tls) -> None:
    opts = kafka_options({**_tls_params(tls), "insecure-skip-verify": "true"})
    spark = spark_kafka_options(opts)
    assert spark["kafka.security.protocol"] == "SSL" and spark["kafka.ssl.truststore.type"] == "PEM"
    assert spark["kafka.ssl.truststore.certificates"] == tls.ca.read_text()
    assert spark["kafka.ssl.keystore.certificate.chain"] == tls.cert.read_text()
    assert spark["kafka.ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert spark["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert librdkafka_conf(opts)["enable.ssl.certificate.verification"] is False


def test_traditional_and_encrypted_keys_become_pkcs8_for_java(tmp_path: Path) -> None:
    plain = make_tls_files(tmp_path / "t", traditional_key=True)
    spark = spark_kafka_options(kafka_options(_tls_params(plain)))
    assert spark["kafka.ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY-----")
    locked = make_tls_files(tmp_path / "e", key_password="Pw-1", traditional_key=True)
    opts = kafka_options({**_tls_params(locked), "key-password": "Pw-1"})
    spark = spark_kafka_options(opts)
    assert spark["kafka.ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY-----")  # decrypted on the driver
    assert "kafka.ssl.key.password" not in spark
    assert serialization.load_pem_private_key(spark["kafka.ssl.keystore.key"].encode(), None).public_key() == (
        serialization.load_pem_private_key(locked.key.read_bytes(), b"Pw-1").public_key())
    assert librdkafka_conf(opts)["ssl.key.password"] == "Pw-1"
    with pytest.raises(ConfigError, match="wrong 'key-password'") as err:
        spark_kafka_options(kafka_options({**_tls_params(locked), "key-password": "Sentinel-wrong"}))
    assert "Sentinel-wrong" not in str(err.value)


def test_sink_uri_routes_kafka_keys_and_drops_user_info(tls) -> None:
    cfg = parse_sink_uri("kafka://jo:S3cret@k1:9092,k2:9092/t?protocol=avro&enable-tls=true"
                         "&sasl-mechanism=scram-sha-256&sasl-user=bob&sasl-password=pa%2Bss&required-acks=1")
    assert cfg.brokers == ("k1:9092", "k2:9092")
    assert cfg.kafka.security_protocol == "SASL_SSL" and cfg.kafka.required_acks == 1
    assert cfg.kafka.sasl_password is not None and cfg.kafka.sasl_password.get_secret_value() == "pa+ss"
    assert "S3cret" not in repr(cfg) and "pa+ss" not in repr(cfg)


def test_toml_kafka_config_and_uri_precedence(tmp_path: Path, tls) -> None:
    toml = tmp_path / "cf.toml"
    toml.write_text(
        '[sink]\nprotocol = "avro"\n[sink.kafka-config]\n'
        f'sasl-mechanism = "PLAIN"\nsasl-user = "toml-user"\nsasl-password = "toml-pw"\ncompression = "lz4"\n'
        f'ca = "{tls.ca}"\ncert = "{tls.cert}"\nkey = "{tls.key}"\n'
        '[sink.kafka-config.codec-config]\nenable-tidb-extension = true\n')
    cfg = load_config(config_file=toml, environ={}, sink_uri="kafka://k:9092/t?sasl-user=uri-user&compression=gzip")
    assert cfg.encoding.enable_tidb_extension
    assert cfg.kafka.sasl_user == "uri-user" and cfg.kafka.compression is Compression.GZIP
    assert cfg.kafka.security_protocol == "SASL_SSL" and cfg.kafka.ca == str(tls.ca)
    env = load_config(environ={"AVRO_SINK_SASL_MECHANISM": "plain", "AVRO_SINK_SASL_USER": "u",
                               "AVRO_SINK_SASL_PASSWORD": "from-env"})
    assert env.kafka.sasl_password is not None and env.kafka.sasl_password.get_secret_value() == "from-env"


def test_models_pickle_for_executors() -> None:
    import pickle

    opts = kafka_options({"sasl-mechanism": "plain", "sasl-user": "u", "sasl-password": "p"})
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_kafka_source_takes_ticdc_parameters_and_the_sink_settings_of_its_own_cluster() -> None:
    from avro_registry_sink.spark.sources.sources import parse_source

    spec = parse_source("canal-json+kafka://u:pw@k1:9092/cdc?sasl-mechanism=plain&sasl-user=a&sasl-password=b"
                        "&startingOffsets=latest")
    assert spec.brokers == ("k1:9092",) and spec.kafka.security_protocol == "SASL_PLAINTEXT"
    assert spec.options == {"startingOffsets": "latest"}  # the secrets stay in the model only
    sink = parse_sink_uri("kafka://k1:9092/?protocol=avro&sasl-mechanism=scram-sha-256&sasl-user=cdc&sasl-password=x")
    same = parse_source("canal-json+kafka://k1:9092/cdc?kafka-client-id=reader", sink)
    assert same.kafka.sasl_user == "cdc" and same.kafka.client_id == "reader"
    other = parse_source("canal-json+kafka://k2:9092/cdc", sink)
    assert other.kafka.security_protocol == "PLAINTEXT"
    with pytest.raises(ConfigError, match="unknown kerberos SASL mechanism"):
        parse_source("debezium-json+kafka://k2:9092/cdc?sasl-mechanism=kerberos")


def test_kafka_ssl_scheme_is_refused_instead_of_silently_plaintext() -> None:
    with pytest.raises(ConfigError, match=r"kafka\+ssl:// does not turn TLS on .*enable-tls=true") as err:
        parse_sink_uri("kafka+ssl://jo:S3cret@k:9093/t?protocol=avro")
    assert "S3cret" not in str(err.value)
