"""The real Kafka broker of ``scripts/kafka.sh`` (KRaft, single node) works end to end with confluent-kafka.

Creates a 3-partition topic with the AdminClient, produces 100 keyed messages with an idempotent producer
using the Java-compatible ``murmur2_random`` partitioner, consumes them back in a consumer group and checks
keys, values, partitions and offsets against the delivery reports; also that the broker auto-creates
topics with ``num.partitions=3``.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.servers import ensure_kafka

pytestmark = pytest.mark.kafka

PARTITIONS = 3
MESSAGES = 100
KEYS = 17


def java_partition(key: bytes, partitions: int) -> int:
    """The Java producer's default partition for a key: ``toPositive(Utils.murmur2(key)) % partitions``."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(key)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= key[tail + 2] << 16
    if rest >= 2:
        h ^= key[tail + 1] << 8
    if rest >= 1:
        h ^= key[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def test_java_partition_matches_kafka_utils_murmur2() -> None:
    # Values from org.apache.kafka.common.utils.Utils (kafka-clients 4.1.1) via jshell.
    assert [java_partition(k, 3) for k in (b"21", b"foobar", b"abc", b"a-little-bit-long-string")] == [0, 0, 0, 2]
    assert [java_partition(k, 3) for k in (b"key-0", b"key-16", b"")] == [1, 1, 0]


@pytest.fixture(scope="module")
def bootstrap() -> str:
    return ensure_kafka()


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def topic(admin: AdminClient) -> Iterator[str]:
    name = f"it-broker-{uuid.uuid4().hex[:12]}"
    yield name
    admin.delete_topics([name], operation_timeout=30)[name].exception(timeout=60)


def produce(bootstrap: str, topic: str) -> dict[int, tuple[bytes, bytes, int, int]]:
    """Produce MESSAGES keyed messages; return seq -> (key, value, partition, offset) from the delivery reports."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",  # the Java producer's partitioning of keyed messages
            "linger.ms": 5,
        }
    )
    delivered: dict[int, tuple[bytes, bytes, int, int]] = {}
    errors: list[KafkaError] = []

    def reporter(seq: int) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(err)
            else:
                delivered[seq] = (msg.key(), msg.value(), msg.partition(), msg.offset())

        return on_delivery

    for seq in range(MESSAGES):
        key = f"key-{seq % KEYS}".encode()
        producer.produce(topic, key=key, value=f"value-{seq}".encode(), headers=[("seq", str(seq).encode())],
                         on_delivery=reporter(seq))
        producer.poll(0)
    assert producer.flush(60) == 0, "messages still queued after flush"
    assert errors == []
    return delivered


def consume(bootstrap: str, topic: str) -> list[Message]:
    """All messages of ``topic`` through a fresh consumer group, then 2 s more to see there are no extras."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"it-broker-{uuid.uuid4().hex[:12]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    received: list[Message] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        quiet_until: float | None = None
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                received.append(msg)
            if len(received) >= MESSAGES:
                quiet_until = quiet_until or time.monotonic() + 2
                if time.monotonic() >= quiet_until:
                    break
        total = 0
        for partition in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            total += high - low
        assert total == MESSAGES, "the log holds duplicates or lost messages"
        consumer.commit(asynchronous=False)  # the group coordinator (__consumer_offsets, RF 1) works
    finally:
        consumer.close()
    return received


def test_idempotent_keyed_round_trip(bootstrap: str, admin: AdminClient, topic: str) -> None:
    created = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                                  operation_timeout=30)
    created[topic].result(timeout=60)
    assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == PARTITIONS

    delivered = produce(bootstrap, topic)
    assert sorted(delivered) == list(range(MESSAGES))

    received = consume(bootstrap, topic)
    assert len(received) == MESSAGES
    by_seq = {int(dict(m.headers() or [])["seq"]): m for m in received}
    assert sorted(by_seq) == list(range(MESSAGES)), "a message was lost or consumed twice"

    partitions_of_key: dict[bytes, set[int]] = defaultdict(set)
    offsets_of_key: dict[bytes, list[int]] = defaultdict(list)
    for seq in range(MESSAGES):
        msg = by_seq[seq]
        key, value, partition, offset = delivered[seq]
        assert (msg.key(), msg.value()) == (f"key-{seq % KEYS}".encode(), f"value-{seq}".encode())
        assert (msg.key(), msg.value(), msg.partition(), msg.offset()) == (key, value, partition, offset)
        assert partition == java_partition(key, PARTITIONS)
        partitions_of_key[key].add(partition)
        offsets_of_key[key].append(offset)

    assert len(partitions_of_key) == KEYS
    assert all(len(parts) == 1 for parts in partitions_of_key.values()), "a key landed in two partitions"
    assert all(offs == sorted(offs) for offs in offsets_of_key.values()), "per-key order was not kept"
    assert {p for parts in partitions_of_key.values() for p in parts} == set(range(PARTITIONS))
    for partition in range(PARTITIONS):  # offsets are dense from 0: idempotence wrote no duplicates
        offsets = sorted(m.offset() for m in received if m.partition() == partition)
        assert offsets == list(range(len(offsets)))


def test_auto_created_topic_has_three_partitions(bootstrap: str, admin: AdminClient, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, key=b"k", value=b"v")
    assert producer.flush(60) == 0
    assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == PARTITIONS


def test_the_kafka_sink_makes_one_admin_client_a_run(bootstrap: str, monkeypatch) -> None:
    """check(), the exactly-once start (control topic) and each batch's topics share the first connect's client."""
    from avro_registry_sink.kafka import client as kafka_client
    from avro_registry_sink.spark.sinks import sinks

    made: list[object] = []
    real = kafka_client.connect

    def counted(*args: object, **kwargs: object) -> tuple[object, object]:
        made.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kafka_client, "connect", counted)  # refresh()'s
    monkeypatch.setattr(sinks, "connect", counted)
    run = uuid.uuid4().hex[:8]
    sink = sinks.KafkaSink([bootstrap], producer="confluent", delivery="exactly-once", control_topic=f"ctl-{run}")
    try:
        sink.check()
        for batch in range(3):
            assert sink.prepare({f"one-admin-{run}-{batch}": 2}) == {f"one-admin-{run}-{batch}": 2}
    finally:
        sink.close()
    assert len(made) == 1


def test_topics_the_sink_creates_are_hosted_by_their_leaders_when_prepare_returns(bootstrap: str) -> None:
    """The metadata names a new topic's partitions before their leader hosts them; a produce in that window can
    stall two minutes (KAFKA-15591). prepare() returns only when every new partition answers as its leader."""
    from confluent_kafka.admin import OffsetSpec

    from avro_registry_sink.spark.sinks.sinks import KafkaSink

    run = uuid.uuid4().hex[:8]
    topics = {f"hosted-{run}-{i:03d}": 3 for i in range(100)}
    sink = KafkaSink([bootstrap], producer="confluent")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        assert sink.prepare(topics) == topics
        answers = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(3)},
                                     request_timeout=30)
        refused = []
        for tp, future in answers.items():
            try:
                assert future.result().offset == 0
            except Exception as exc:  # noqa: BLE001 - the broker's refusal, named in the assertion
                refused.append(f"{tp.topic}[{tp.partition}]: {exc}")
        assert not refused, f"{len(refused)} of 300 partitions not hosted yet, e.g. {refused[:3]}"
    finally:
        sink.close()
        for future in admin.delete_topics(list(topics)).values():
            future.result()
