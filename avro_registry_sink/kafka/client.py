"""confluent-kafka clients built from :class:`KafkaOptions`, and the one place that explains their errors.

* :func:`client_conf` - librdkafka settings for a producer, admin client or consumer, with the client's
  log lines and error callbacks going to a :mod:`logging` logger whose records are redacted (librdkafka
  otherwise prints to stderr as it likes).
* :func:`connect` - an admin client that has really talked to the cluster: the first metadata request is
  retried in one-second steps, and an authentication or TLS failure ends it at once (seconds, not the
  client's own minutes-long retrying) with a :class:`KafkaConnectionError` naming the settings to check.
* :func:`explain` - a librdkafka error (code and text) as a sentence naming the TiCDC option involved.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from avro_registry_sink.errors import AvroSinkError
from avro_registry_sink.kafka.options import KafkaOptions, librdkafka_conf
from avro_registry_sink.redact import RedactFilter, redact_text, secret_values

__all__ = ["KafkaConnectionError", "client_conf", "connect", "explain", "kafka_logger", "refresh", "wait_hosted"]

LOGGER_NAME = "avro_registry_sink.kafka"


class KafkaConnectionError(AvroSinkError):
    """The Kafka cluster cannot be reached or refuses the connection (wrong credentials, untrusted CA ...)."""


def kafka_logger(opts: KafkaOptions | None = None, conf: Mapping[str, Any] | None = None) -> logging.Logger:
    """The logger librdkafka writes to: records carry no secret of ``opts`` or ``conf``; warnings and up are
    shown (by the root handlers, else Python's last-resort stderr handler)."""
    logger = logging.getLogger(LOGGER_NAME)
    secrets = secret_values(opts, conf or {})
    for old in [f for f in logger.filters if isinstance(f, RedactFilter)]:
        secrets |= set(old.secrets)
        logger.removeFilter(old)
    logger.addFilter(RedactFilter(secrets))
    if not logger.handlers:
        # Shown where the application's logging goes, but never dumped on stderr by Python's last-resort
        # handler: connection problems surface as one explained error instead.
        logger.addHandler(logging.NullHandler())
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    return logger


def client_conf(brokers: str, opts: KafkaOptions, role: str = "producer") -> dict[str, Any]:
    """Settings for a confluent-kafka ``Producer`` / ``AdminClient`` / ``Consumer`` (``role``), logs redacted."""
    conf: dict[str, Any] = {"bootstrap.servers": brokers, **librdkafka_conf(opts, role)}
    conf["logger"] = kafka_logger(opts, conf)
    return conf


#: librdkafka error names that no retry can fix: the settings are wrong.
_FATAL = {"_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
          "CLUSTER_AUTHORIZATION_FAILED", "UNSUPPORTED_SASL_MECHANISM", "ILLEGAL_SASL_STATE"}
#: Transport errors that are TLS failures (a refused client certificate, a handshake with a plaintext port).
_TLS_FAILURE = re.compile(r"SSL handshake failed|ssl/tls alert|certificate", re.IGNORECASE)


def _is_fatal(name: str, text: str) -> bool:
    return name in _FATAL or (name == "_TRANSPORT" and bool(_TLS_FAILURE.search(text)))


def explain(name: str, text: str, brokers: str, opts: KafkaOptions) -> str:
    """One sentence for a librdkafka error ``name`` (``_AUTHENTICATION`` ...) and its text, naming the options."""
    text = redact_text(" ".join(text.split()), secret_values(opts))
    where = f"Kafka at {brokers} ({opts.security_protocol.lower()})"
    if "connecting to a PLAINTEXT broker listener" in text or ("SSL handshake failed" in text
                                                                 and "closed by peer" in text):
        return (f"{where}: the listener does not speak TLS, but enable-tls is on (or ca/cert/key are given): "
                f"point the sink at a TLS listener or drop enable-tls. Client error: {text}")
    if name == "_SSL" or _TLS_FAILURE.search(text):
        return (f"{where}: the TLS handshake failed: check 'ca' (the CA that signed the broker's certificate), "
                f"'cert' and 'key' (a client certificate the broker trusts), or insecure-skip-verify. "
                f"Client error: {text}")
    if name in ("_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED") or "SASL" in text:
        return (f"{where}: SASL authentication failed: check sasl-mechanism, sasl-user and sasl-password "
                f"(and that the listener has SASL enabled). Client error: {text}")
    if "AUTHORIZATION" in name:
        return f"{where}: not authorised: the user named by sasl-user lacks permissions. Client error: {text}"
    return (f"{where} is not reachable: {text.rstrip('.')}. If the listener uses TLS or SASL, set enable-tls / ca / cert / "
            "key or sasl-mechanism / sasl-user / sasl-password to match it.")


#: Transport errors that say no broker is there (rather than slow): the port refuses, the name does not resolve.
_NOBODY_THERE = re.compile(r"Connection refused|Failed to resolve|Name or service not known|No address", re.IGNORECASE)


def connect(brokers: str, opts: KafkaOptions, *, timeout: float | None = None,
            refused_after: float | None = None) -> tuple[Any, Any]:
    """An ``AdminClient`` and the cluster metadata it read; fails fast on a settings problem (see module docs).

    ``timeout`` (default: ``dial-timeout`` plus ``read-timeout``) bounds the wait for a cluster that does
    not answer at all; ``refused_after`` (seconds) ends it sooner when every broker refuses the connection or
    cannot be resolved (a wrong host or port: no retry within the timeout would change that).
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[tuple[str, str]] = []
    conf = client_conf(brokers, opts, "admin")
    conf["error_cb"] = lambda err: errors.append((err.name(), err.str()))
    admin = AdminClient(conf)
    budget = timeout if timeout is not None else opts.dial_timeout + opts.read_timeout
    started = time.monotonic()
    deadline = started + budget
    last = ""
    while True:
        try:
            return admin, admin.list_topics(timeout=1.0)
        except KafkaException as exc:
            last = str(exc.args[0].str() if exc.args else exc)
        admin.poll(0)  # serves error_cb
        fatal = [e for e in errors if _is_fatal(*e)]
        if fatal:
            raise KafkaConnectionError(explain(*fatal[0], brokers, opts), brokers=brokers) from None
        transport = [e for e in errors if e[0] != "_ALL_BROKERS_DOWN"]
        nobody = (refused_after is not None and time.monotonic() - started >= refused_after and transport
                  and all(_NOBODY_THERE.search(text) for _, text in transport))
        if nobody or time.monotonic() >= deadline:
            detail = next((e for e in reversed(errors) if e[0] != "_ALL_BROKERS_DOWN"), None)
            name, text = detail or ("_TRANSPORT", f"no answer within {budget:g} s ({last})")
            raise KafkaConnectionError(explain(name, text, brokers, opts), brokers=brokers) from None


def refresh(admin: Any, brokers: str, opts: KafkaOptions) -> tuple[Any, Any]:
    """Fresh cluster metadata through ``admin`` (an ``AdminClient`` from :func:`connect`), else a new
    :func:`connect`: a client is made once per run rather than once per step (making one and reading its first
    metadata took 35-40 ms against a local broker; another read through it takes a round trip)."""
    if admin is not None:
        from confluent_kafka import KafkaException

        try:
            return admin, admin.list_topics(timeout=opts.dial_timeout + opts.read_timeout)
        except KafkaException:  # the cluster went away meanwhile: connect() says why, or reconnects
            pass
    return connect(brokers, opts)


def wait_hosted(admin: Any, created: Mapping[str, int], timeout: float) -> None:
    """Wait until the leader of every partition of the topics just ``created`` (topic -> partition count) hosts
    it, i.e. answers ListOffsets, for at most ``timeout`` seconds.

    The cluster's metadata names a new topic's partitions before their leader has created their logs (0.4 s for
    150 partitions on the local broker; 2 s for 300 in a benchmark run). An idempotent producer that writes in
    that window can have its first request refused (NOT_LEADER_OR_FOLLOWER) and a later one appended; the first
    one's retries are then refused as out of order until ``delivery.timeout.ms`` (KAFKA-15591; the broker-side
    fix, apache/kafka#23234, was merged in August 2026), so the batch fails after two minutes with its later
    records written. A partition not hosted yet answers with one of several errors (NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH, ... on a busy broker), which librdkafka does not mark retriable: every error is asked
    again until ``timeout``, except those that no wait changes (not authorised, not supported), which end the
    wait quietly, as the timeout does (the write then goes ahead as it would have)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    waiting = {TopicPartition(t, p) for t, n in created.items() for p in range(n)}
    final = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
             KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE, KafkaError._NOT_IMPLEMENTED}
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        try:
            answers = admin.list_offsets({tp: OffsetSpec.latest() for tp in waiting},
                                         request_timeout=max(1.0, deadline - time.monotonic()))
        except (KafkaException, ValueError, TypeError):  # not supported here
            return
        for tp, future in answers.items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args and exc.args[0].code() in final:
                    return
                continue
            waiting.discard(tp)
        if waiting:
            time.sleep(0.05)
