"""A failed Spark Kafka write is reported by the Kafka client's own exception when the chain has it."""

from __future__ import annotations

from avro_registry_sink.spark.sinks.sinks import _kafka_cause


class _Java:
    def __init__(self, text: str, cause: _Java | None = None) -> None:
        self.text, self.cause = text, cause

    def toString(self) -> str:  # noqa: N802 - the py4j proxy's Java name
        return self.text

    def getCause(self) -> _Java | None:  # noqa: N802
        return self.cause


class _Py4JError(Exception):
    def __init__(self, java: _Java) -> None:
        super().__init__("An error occurred while calling o1.save.")
        self.java_exception = java


def test_the_kafka_exception_in_the_java_chain_is_named():
    chain = _Java("org.apache.spark.SparkException: Job aborted", _Java(
        "org.apache.kafka.common.errors.RecordTooLargeException: The message is 2500141 bytes"))
    assert _kafka_cause(_Py4JError(chain)) == "RecordTooLargeException: The message is 2500141 bytes"


def test_without_a_kafka_exception_the_first_part_of_the_error_is_kept():
    error = RuntimeError("Job aborted due to stage failure: UnknownReason Driver stacktrace: at a.b.c")
    text = _kafka_cause(error)
    assert text.startswith("Job aborted due to stage failure: UnknownReason") and "Driver stacktrace" not in text
    assert "executor log" in text
