"""``status``'s backlog of a Kafka source against the real broker: a 2-partition topic with messages produced to
each partition, and a checkpoint whose last committed batch's offsets (``spark/offsets/<batch>``, Spark's Kafka
source's ``{topic: {partition: offset}}``) took some of them; the backlog is each partition's end offset less the
committed offset (a partition the offsets do not name: from its first offset), per topic in total."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from avro_registry_sink.ops.status import read_status
from tests.support.servers import ensure_kafka

pytestmark = pytest.mark.kafka

NOW = 1_800_000_000.0


def test_the_backlog_is_the_end_offsets_less_the_committed_offsets_per_partition_and_topic(tmp_path):
    bootstrap = ensure_kafka()
    topic = f"status-backlog-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in ((0, 5), (1, 3)):
        for n in range(count):
            producer.produce(topic, value=f"m{n}".encode(), partition=partition)
    assert producer.flush(30) == 0

    ck = tmp_path / "ck"
    for d in ("spark/commits", "spark/offsets"):
        (ck / d).mkdir(parents=True)
    (ck / "job.json").write_text(json.dumps({"source": f"canal-json+kafka://{bootstrap}/{topic}"}))
    (ck / "spark/offsets/0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0}\n'
                                        + json.dumps({topic: {"0": 2}}))  # partition 1 not yet read
    (ck / "spark/commits/0").write_text('v1\n{"nextBatchWatermarkMs":0}')

    status = read_status(ck, now=NOW)
    assert status.backlog == {"kind": "kafka", "source": f"canal-json+kafka://{bootstrap}/{topic}", "messages": 6,
                              "topics": {topic: {"messages": 6, "partitions": {"0": 3, "1": 3}}}}
    assert status.verdict == "healthy"
    behind = read_status(ck, max_backlog=5, now=NOW)
    assert behind.verdict == "behind"
    assert behind.reasons == [f"topic {topic} has 6 messages past the last committed batch (over --max-backlog 5)"]

    # a topic the cluster does not list is said so; --source names the brokers and topics the run was given
    other = f"{topic}-missing"
    status = read_status(ck, source=f"debezium-json+kafka://{bootstrap}/{topic},{other}", now=NOW)
    assert status.backlog["topics"][topic]["messages"] == 6
    assert status.backlog["topics"][other] == {"messages": None,
                                               "unknown": f"the cluster at {bootstrap} does not list topic {other!r}"}
    admin.delete_topics([topic])
