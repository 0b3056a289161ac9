"""redact: the one place that masks secrets in URLs, text, mappings and log records."""

from __future__ import annotations

import io
import json
import logging

import pytest
from pydantic import SecretStr

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.kafka.options import kafka_options
from avro_registry_sink.ops.progress import JobTotals, JsonLogProgress
from avro_registry_sink.redact import (
    MASK,
    RedactFilter,
    guard_loggers,
    is_secret_name,
    redact_mapping,
    redact_text,
    redact_url,
    secret_values,
)
from avro_registry_sink.settings.config import RegistryConfig, SinkConfig, parse_sink_uri


@pytest.mark.parametrize(("url", "want"), [
    ("http://user:S3cret@reg:8081/x", "http://user:***@reg:8081/x"),
    ("kafka://jo:S3cret@k1:9092,k2:9092/t?protocol=avro", "kafka://jo:***@k1:9092,k2:9092/t?protocol=avro"),
    ("kafka://k:9092/t?sasl-user=bob&sasl-password=p%26w&key-password=x", "kafka://k:9092/t?sasl-user=bob&sasl-password=***&key-password=***"),
    ("http://only-user@reg/", "http://only-user@reg/"),
    ("file:///tmp/out?protocol=avro", "file:///tmp/out?protocol=avro"),
])
def test_redact_url(url: str, want: str) -> None:
    assert redact_url(url) == want


def test_redact_text_masks_urls_pairs_pem_and_known_values() -> None:
    text = ("registry 'https://a:pw1@r' failed; sasl.jaas.config=... password=\"p\\\"w\" token: abc "
            "and S3cret-Value and S3cret%2BV -----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----")
    out = redact_text(text, secrets=["S3cret-Value", "S3cret+V"])
    for secret in ("pw1", 'p\\"w', "abc", "S3cret-Value", "S3cret%2BV", "MIIB"):
        assert secret not in out, secret
    assert "https://a:***@r" in out and "token: ***" in out


def test_secret_values_walks_models_and_mappings() -> None:
    cfg = SinkConfig(registry=RegistryConfig(urls=("http://r",), username="u", password=SecretStr("Basic-1"),
                                             bearer_token=None),
                     kafka=kafka_options({"sasl-mechanism": "plain", "sasl-user": "u", "sasl-password": "Sasl-1"}))
    assert secret_values(cfg, {"sasl.password": "Conf-1", "client.id": "not-secret"}) == {"Basic-1", "Sasl-1", "Conf-1"}


def test_redact_mapping_masks_secret_named_keys() -> None:
    data = {"sasl-password": "x1", "bearer_token": "x2", "nested": {"ssl.key.password": "x3", "list": ["http://u:x4@h"]},
            "user": "bob", "enable": True}
    out = redact_mapping(data)
    assert out == {"sasl-password": MASK, "bearer_token": MASK, "nested": {"ssl.key.password": MASK,
                   "list": ["http://u:***@h"]}, "user": "bob", "enable": True}
    assert is_secret_name("sasl-oauth-client-secret") and not is_secret_name("sasl-user")


def test_filter_masks_log_records(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("tests.redact")
    logger.addFilter(RedactFilter(["Known-Secret"]))
    guard_loggers("tests.redact")  # adds nothing: a filter is there already
    assert sum(isinstance(f, RedactFilter) for f in logger.filters) == 1
    with caplog.at_level(logging.INFO, logger="tests.redact"):
        logger.info("login %s with password=%s", "Known-Secret", "other")
    assert caplog.records[-1].getMessage() == "login *** with password=***"


def test_config_errors_never_echo_url_passwords() -> None:
    with pytest.raises(ConfigError) as err:
        parse_sink_uri("kafkaa://jo:S3cret@host/?protocol=avro")
    assert "S3cret" not in str(err.value) and "jo:***@host" in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_sink_uri("kafka://k:9092/t?protocol=avro&schema-registry=ftp://user:S3cret@reg")
    assert "S3cret" not in str(err.value) and "ftp://user:***@reg" in str(err.value)


def test_json_progress_masks_the_start_event_and_the_error() -> None:
    out = io.StringIO()
    progress = JsonLogProgress(out)
    progress.start({"source": "canal-json+kafka://u:S3cret@k/t", "sink": "kafka://k", "sasl-password": "S3cret"})
    progress.finish(JobTotals(), RuntimeError("login failed: password=S3cret"))
    assert "S3cret" not in out.getvalue()
    start, finish = (json.loads(line) for line in out.getvalue().splitlines())
    assert start["source"] == "canal-json+kafka://u:***@k/t" and finish["error"] == "login failed: password=***"
