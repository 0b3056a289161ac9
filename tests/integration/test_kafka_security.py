"""Kafka TLS and SASL as TiCDC spells them, against the real broker's TLS and SASL listeners.

``scripts/kafka.sh`` starts one broker with a plaintext, a TLS (client certificates required; a CA made
at start) and a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; a random password).

* The job reads a canal-json topic (Spark's Kafka source) and writes Avro (Spark's Kafka sink, or
  confluent-kafka's producer) through each listener, configured only by TiCDC's URI parameters
  (``enable-tls``/``ca``/``cert``/``key``[/``key-password``], ``sasl-mechanism``/``sasl-user``/
  ``sasl-password``); a consumer on the same listener reads every record back.
* confluent-kafka producer and consumer through every mechanism and key form.
* Wrong credentials, an untrusted CA, a plaintext client on the TLS listener and ``enable-tls=true``
  against the plaintext listener fail with an error naming the settings, never showing the secret.
"""

from __future__ import annotations

import uuid
from urllib.parse import quote

import pytest

from avro_registry_sink.kafka.client import KafkaConnectionError, client_conf, connect
from avro_registry_sink.kafka.options import kafka_options
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig, parse_sink_uri
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sinks.sinks import KafkaSink
from avro_registry_sink.spark.sources.sources import parse_source
from tests.support.job import canal_messages, expected_state, replay
from tests.support.servers import SecureListeners, ensure_kafka_listeners
from tests.support.tls import make_tls_files

pytestmark = [pytest.mark.kafka, pytest.mark.filterwarnings("ignore::FutureWarning")]

TABLES = ("crm.events", "shop.customers", "shop.orders")


@pytest.fixture(scope="module")
def listeners() -> SecureListeners:
    return ensure_kafka_listeners()


def _q(text: str) -> str:
    return quote(text, safe="")


def ticdc_params(listeners: SecureListeners, kind: str) -> tuple[str, str]:
    """(address, TiCDC query parameters) of a listener kind."""
    if kind == "tls":
        return listeners.tls, f"enable-tls=true&ca={_q(listeners.ca)}&cert={_q(listeners.cert)}&key={_q(listeners.key)}"
    if kind == "tls-encrypted-key":  # ca+cert+key switch TLS on by themselves (TiCDC's rule)
        return listeners.tls, (f"ca={_q(listeners.ca)}&cert={_q(listeners.cert)}&key={_q(listeners.key_encrypted)}"
                               f"&key-password={_q(listeners.key_password)}")
    mechanism = kind.removeprefix("sasl-")
    return listeners.sasl, (f"sasl-mechanism={mechanism}&sasl-user={_q(listeners.sasl_user)}"
                            f"&sasl-password={_q(listeners.sasl_password)}")


def _options(query: str):
    from urllib.parse import parse_qsl

    return kafka_options(dict(parse_qsl(query)))


def _create_topic(address: str, opts, topic: str, partitions: int = 3) -> None:
    from confluent_kafka.admin import NewTopic

    admin, _ = connect(address, opts)
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(30)


def _consume(address: str, opts, topics: list[str], expected: int, registry_url: str | None = None,
             timeout: float = 60.0) -> list:
    import time

    from confluent_kafka import DeserializingConsumer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    conf = {**client_conf(address, opts, "consumer"), "group.id": f"verify-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if registry_url:
        client = SchemaRegistryClient({"url": registry_url})
        conf.update({"key.deserializer": AvroDeserializer(client), "value.deserializer": AvroDeserializer(client)})
    consumer = DeserializingConsumer(conf)
    consumer.subscribe(topics)
    out: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.topic(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


@pytest.mark.spark
@pytest.mark.parametrize(("kind", "producer", "delivery"), [
    ("tls", "spark", "at-least-once"),
    ("tls-encrypted-key", "confluent", "at-least-once"),
    ("sasl-scram-sha-256", "confluent", "at-least-once"),
    ("sasl-scram-sha-512", "spark", "at-least-once"),
    ("tls", "spark", "exactly-once"),  # the JVM slice writer, with the Java client's TLS settings
    ("sasl-scram-sha-256", "spark", "exactly-once"),
])
def test_job_reads_and_writes_through_secure_listener(spark, listeners, tmp_path, kind, producer, delivery):
    from confluent_kafka import Producer

    address, query = ticdc_params(listeners, kind)
    opts = _options(query)
    prefix = "s" + uuid.uuid4().hex[:8]
    manifest = generate_demo(tmp_path / "demo", rows_per_table=4)
    source_topic = f"{prefix}_canal"
    _create_topic(address, opts, source_topic)
    feeder = Producer(client_conf(address, opts, "producer"))
    for partition, _, message in canal_messages(manifest, partitions=3):
        feeder.produce(source_topic, value=message.encode(), partition=partition)
    assert feeder.flush(30) == 0

    registry = EmbeddedRegistry()
    url = registry.start()
    try:
        sink = parse_sink_uri(f"kafka://{address}/?protocol=avro&partition-num=3&schema-registry={url}&{query}")
        sink = sink.model_copy(update={"delivery": delivery, "control_topic": f"{prefix}-commits"})
        result = run_job(spark, JobOptions(
            source=parse_source(f"canal-json+kafka://{address}/{source_topic}?{query}"),
            checkpoint=tmp_path / "checkpoint", sink=sink, topic_rule=prefix + "_{schema}_{table}",
            kafka_producer=producer,
        ))
        total = len(manifest.all_events)
        assert result.totals.rows == total and not result.bad_input
        assert {("spark", "at-least-once"): "Spark Kafka sink", ("confluent", "at-least-once"): "confluent-kafka producer",
                ("spark", "exactly-once"): "executors' JVM, exactly once"}[producer, delivery] in result.sink
        topics = [f"{prefix}_{name.replace('.', '_')}" for name in TABLES]
        records = _consume(address, opts, topics, total, registry_url=url)
        assert len(records) == total
        expected = expected_state(manifest)
        for name, topic in zip(TABLES, topics, strict=False):
            assert replay((k, v) for t, k, v in records if t == topic) == expected[name], name
        with RegistryClient(RegistryConfig(urls=(url,))) as client:
            assert sorted(s for s in client.get_subjects() if s.startswith(prefix)) == sorted(
                f"{t}-{part}" for t in topics for part in ("key", "value"))
    finally:
        registry.stop()


@pytest.mark.parametrize("kind", ["tls", "tls-encrypted-key", "sasl-plain", "sasl-scram-sha-256",
                                  "sasl-scram-sha-512"])
def test_confluent_clients_through_every_mechanism(listeners, kind):
    from confluent_kafka import Producer

    address, query = ticdc_params(listeners, kind)
    opts = _options(query)
    topic = f"m{uuid.uuid4().hex[:8]}"
    _create_topic(address, opts, topic, partitions=1)
    producer = Producer(client_conf(address, opts, "producer"))
    for i in range(3):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0
    got = _consume(address, opts, [topic], 3)
    assert [(k, v) for _, k, v in got] == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3)]


def _connect_error(address: str, query: str) -> str:
    with pytest.raises(KafkaConnectionError) as err:
        KafkaSink([address], kafka=_options(query), producer="confluent").check()
    return str(err.value)


def test_wrong_password_names_the_settings_and_hides_the_secret(listeners):
    secret = "Wrong-Sentinel-" + uuid.uuid4().hex
    for mechanism in ("scram-sha-256", "plain"):
        message = _connect_error(listeners.sasl, f"sasl-mechanism={mechanism}&sasl-user={listeners.sasl_user}"
                                                 f"&sasl-password={secret}")
        assert "SASL authentication failed: check sasl-mechanism, sasl-user and sasl-password" in message
        assert secret not in message and listeners.sasl_password not in message


def test_untrusted_ca_and_unknown_client_certificate_fail_the_handshake(listeners, tmp_path):
    other = make_tls_files(tmp_path / "other")  # a CA the broker never heard of, and a client cert it signed
    message = _connect_error(listeners.tls, f"ca={_q(str(other.ca))}&cert={_q(listeners.cert)}&key={_q(listeners.key)}")
    assert "the TLS handshake failed: check 'ca'" in message and "certificate verify failed" in message
    message = _connect_error(listeners.tls, f"ca={_q(listeners.ca)}&cert={_q(str(other.cert))}&key={_q(str(other.key))}")
    assert "TLS" in message and "'cert' and 'key'" in message


def test_enable_tls_against_a_plaintext_listener_fails_instead_of_writing_in_plaintext(listeners):
    message = _connect_error(listeners.plaintext, "enable-tls=true")
    assert "the listener does not speak TLS, but enable-tls is on" in message
    message = _connect_error(listeners.plaintext, "sasl-mechanism=plain&sasl-user=bob&sasl-password=x")
    assert "SASL authentication failed" in message


def test_plaintext_client_on_the_tls_listener_is_not_reachable(listeners):
    message = _connect_error(listeners.tls, "dial-timeout=2s&read-timeout=1s")
    assert "is not reachable" in message and "set enable-tls / ca / cert / key" in message
