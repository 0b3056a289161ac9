"""The notebook API with a registry it cannot reach: refused within seconds (one request per URL with a short
timeout, not the job's 60 s budget for a registry restarting), in the notebook's terms: the call, the URL, the
subject or table, what to do; nothing about batches or restarts. An explicit RegistryConfig keeps its own
timeout and retries."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from avro_registry_sink.errors import RegistryUnavailable
from avro_registry_sink.settings.config import RegistryConfig
from avro_registry_sink.spark.functions import (
    NOTEBOOK_REGISTRY_TIMEOUT,
    _notebook_registry,
    from_flat_avro,
    to_flat_avro,
)

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture()
def silent_registry() -> Iterator[str]:
    """A registry that accepts connections and never answers (a hung host behind a load balancer)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def _assert_notebook_terms(message: str, call: str, url: str) -> None:
    assert message.startswith(f"{call} could not reach the schema registry at {url}"), message
    assert "then call " + call + " again" in message
    for word in ("batch", "restart", "rerun", "checkpoint"):
        assert word not in message.lower(), (word, message)


def test_a_refused_registry_fails_from_flat_avro_at_once(spark):
    url = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(RegistryUnavailable) as info:
        from_flat_avro("value", registry=url, subject="shop_orders-value")
    assert time.monotonic() - started < 2
    _assert_notebook_terms(info.value.message, "from_flat_avro", url)
    assert "for subject 'shop_orders-value'" in info.value.message
    assert "Connection refused" in info.value.message
    assert info.value.context["subject"] == "shop_orders-value"


def test_a_registry_that_never_answers_fails_within_the_notebook_timeout(spark, silent_registry):
    started = time.monotonic()
    with pytest.raises(RegistryUnavailable) as info:
        from_flat_avro("value", registry=silent_registry, subject="shop_orders-value", major=1)
    took = time.monotonic() - started
    assert NOTEBOOK_REGISTRY_TIMEOUT - 0.5 < took < NOTEBOOK_REGISTRY_TIMEOUT + 2, took
    _assert_notebook_terms(info.value.message, "from_flat_avro", silent_registry)


def test_an_explicit_registry_config_keeps_its_timeout_and_retries(spark, silent_registry):
    assert _notebook_registry("http://a:1, http://b:2").model_dump(include={"urls", "timeout", "max_retries"}) == {
        "urls": ("http://a:1", "http://b:2"), "timeout": NOTEBOOK_REGISTRY_TIMEOUT, "max_retries": 0}
    patient = RegistryConfig(urls=(silent_registry,), timeout=0.3, max_retries=2, retry_backoff=0.01)
    assert _notebook_registry(patient) == patient
    started = time.monotonic()
    with pytest.raises(RegistryUnavailable, match=r"\(3 attempts\)"):
        from_flat_avro("value", registry=patient, subject="shop_orders-value")
    assert 0.9 < time.monotonic() - started < 3


def test_a_refused_registry_fails_to_flat_avro_at_once_naming_the_table(spark):
    """Before: 60.8 s of retries, then 'Nothing of this batch was emitted; a restart resumes ...'."""
    url = f"http://127.0.0.1:{_closed_port()}"
    df = spark.createDataFrame([(1, "a")], "id INT, note STRING")
    started = time.monotonic()
    with pytest.raises(RegistryUnavailable) as info:
        to_flat_avro(df, table="shop.orders", key=["id"], registry=url)
    assert time.monotonic() - started < 2
    _assert_notebook_terms(info.value.message, "to_flat_avro", url)
    assert "for table shop.orders:" in info.value.message
    assert "subject 'shop_orders-" in info.value.message  # the registry client's own words: which request failed
    sink_uri = f"kafka://127.0.0.1:9/?protocol=avro&schema-registry={url}"
    with pytest.raises(RegistryUnavailable, match=r"^to_flat_avro could not reach"):
        to_flat_avro(df, table="shop.orders", key=["id"], sink_uri=sink_uri)
