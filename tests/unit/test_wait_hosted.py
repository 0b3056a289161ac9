"""``kafka_client.wait_hosted``: new partitions are asked again until their leader hosts them, whatever the
"not yet" error (the broker's own behaviour is checked in ``tests/integration/test_kafka_broker.py``)."""

from __future__ import annotations

from concurrent.futures import Future

from confluent_kafka import KafkaError, KafkaException

from avro_registry_sink.kafka.client import wait_hosted


class _Admin:
    """Answers ListOffsets from a script: per call, the error code of each partition still asked (None: hosted)."""

    def __init__(self, *answers: int | None) -> None:
        self.answers = list(answers)
        self.calls = 0

    def list_offsets(self, request, request_timeout):
        code = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        out = {}
        for tp in request:
            future: Future = Future()
            if code is None:
                future.set_result(0)
            else:
                future.set_exception(KafkaException(KafkaError(code)))
            out[tp] = future
        return out


def test_every_not_yet_error_is_asked_again_until_hosted():
    admin = _Admin(KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.UNKNOWN_LEADER_EPOCH,
                   KafkaError.LEADER_NOT_AVAILABLE, None)
    wait_hosted(admin, {"t": 3}, timeout=10)
    assert admin.calls == 4


def test_an_error_no_wait_changes_ends_the_wait_at_once():
    admin = _Admin(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    wait_hosted(admin, {"t": 3}, timeout=10)
    assert admin.calls == 1


def test_the_timeout_ends_the_wait():
    admin = _Admin(KafkaError.NOT_LEADER_FOR_PARTITION)
    wait_hosted(admin, {"t": 1}, timeout=0.3)
    assert 2 <= admin.calls <= 10
