"""Pre-flight probes: everything a command will reach is asked once, quickly, before any work (and before
Spark starts), so a wrong port, host or password is one line naming the setting within seconds, not the
clients' minutes of retrying.

* :func:`probe_registry`: ``GET /subjects`` on the registry (its URLs in fail-over order), with the configured
  credentials and TLS files, a few seconds' timeout and no retries: unreachable, refused credentials, or an
  answer that is no Confluent-compatible registry's.
* :func:`probe_kafka`: a metadata request to the brokers (:func:`~avro_registry_sink.kafka.client.connect`),
  giving up after a few seconds when every broker refuses the connection or cannot be resolved.
* :func:`check_topics`: a Kafka source's topics exist on its cluster (else a :class:`MissingTopics` naming them,
  the brokers and the existing topics whose names are close), from the metadata :func:`probe_kafka` read.

Object stores are probed where their URIs are parsed (:meth:`~avro_registry_sink.storage_fs.StoreFS.probe`).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from avro_registry_sink.errors import AvroSinkError, ConfigError, RegistryError, RegistryUnavailable
from avro_registry_sink.kafka.options import KafkaOptions
from avro_registry_sink.redact import redact_url
from avro_registry_sink.settings.config import RegistryConfig

# Imported inside functions, for start-up: the registry's HTTP client and librdkafka load only for the
# probe that uses them.

__all__ = ["PROBE_TIMEOUT", "MissingTopics", "PreflightError", "check_topics", "probe_kafka", "probe_registry"]

#: Seconds a probe waits for an answer (a registry's HTTP request; Kafka brokers that refuse connections).
PROBE_TIMEOUT = 5.0


class PreflightError(AvroSinkError):
    """A registry, Kafka cluster or store a command needs does not answer, or refuses us."""


class MissingTopics(ConfigError):
    """Topics a Kafka source subscribes to do not exist on its cluster (a user error: exit 2)."""


def probe_registry(config: RegistryConfig, *, setting: str = "--registry", timeout: float = PROBE_TIMEOUT) -> None:
    """Ask the registry of ``config`` for its subjects; :class:`PreflightError` naming ``setting`` if it cannot
    answer. Nothing to do for the embedded registry (no URL)."""
    if config.is_embedded:
        return
    from avro_registry_sink.registry.client import RegistryClient

    urls = ", ".join(redact_url(u) for u in config.urls)
    quick = config.model_copy(update={"max_retries": 0, "timeout": min(config.timeout, timeout)})
    try:
        with RegistryClient(quick) as client:
            client.get_subjects()
    except RegistryUnavailable as exc:
        status = exc.context.get("status_code")
        cause = exc.__cause__
        why = (f"answered HTTP {status}" if status is not None
               else f"{type(cause).__name__}: {str(cause).rstrip('.') or 'no answer'}" if cause is not None
               else "no answer")
        raise PreflightError(f"The schema registry at {urls} ({setting}) is unreachable: {why} (within "
                             f"{quick.timeout:g} s). Check the URL's host and port.", setting=setting) from None
    except RegistryError as exc:
        status = exc.context.get("status_code")
        if status in (401, 403):
            raise PreflightError(
                f"The schema registry at {urls} ({setting}) refused the credentials (HTTP {status}): check the "
                "user:password in the URL, or username/password or bearer_token under [registry] in --config.",
                setting=setting) from None
        raise PreflightError(
            f"The schema registry at {urls} ({setting}) answered HTTP {status} to GET /subjects: is this the URL of "
            "a Confluent-compatible registry API (Apicurio's is .../apis/ccompat/v7)?", setting=setting) from None
    except AvroSinkError as exc:  # a CA bundle or client certificate that cannot be loaded
        raise PreflightError(f"The schema registry at {urls} ({setting}): {exc}", setting=setting) from None


def probe_kafka(brokers: tuple[str, ...] | list[str], opts: KafkaOptions, *, setting: str,
                refused_after: float = 3.0) -> Any:
    """Connect to the Kafka cluster; :class:`PreflightError` naming ``setting`` if it refuses or does not answer
    (a connection refused by every broker gives up after ``refused_after`` seconds). Returns the cluster's
    metadata (confluent-kafka's ``ClusterMetadata``: its ``topics``)."""
    from avro_registry_sink.kafka.client import KafkaConnectionError, connect

    try:
        return connect(",".join(brokers), opts, refused_after=refused_after)[1]
    except KafkaConnectionError as exc:
        raise PreflightError(f"{setting}: {exc}", setting=setting) from None


#: Existing topics a missing topic's error lists in full when the cluster has no more than this many.
_LISTED_TOPICS = 12


def check_topics(listed: Sequence[str], topics: Sequence[str], *, brokers: str, setting: str = "--source") -> None:
    """:class:`MissingTopics` when a topic of ``topics`` is not among the cluster's ``listed`` topics: one sentence
    naming each missing topic, the brokers, and the existing topics that are close (``difflib``), or all of them
    when there are few (internal ``__`` topics left out).

    >>> check_topics(["shop-orders", "crm"], ["shop-orders"], brokers="k:9092")
    >>> check_topics(["shop-orders", "crm"], ["shop-ordrs"], brokers="k:9092")
    Traceback (most recent call last):
    ...
    avro_registry_sink.preflight.MissingTopics: --source: topic 'shop-ordrs' (did you mean 'shop-orders'?) does not exist on Kafka at k:9092. Its topics: crm, shop-orders. Nothing was started and no checkpoint created: correct the topic in --source (or create it) and run again.
    """
    missing = [t for t in dict.fromkeys(topics) if t not in set(listed)]
    if not missing:
        return
    names = sorted(t for t in listed if not t.startswith("__"))
    parts = []
    for topic in missing:
        near = difflib.get_close_matches(topic, names, n=3, cutoff=0.6)
        parts.append(f"{topic!r}" + (f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""))
    listing = (f"Its topics: {', '.join(names)}." if len(names) <= _LISTED_TOPICS
               else f"It has {len(names)} topics." if names else "It has no topics.")
    what, verb = ("topic", "does") if len(missing) == 1 else ("topics", "do")
    raise MissingTopics(f"{setting}: {what} {', '.join(parts)} {verb} not exist on Kafka at {brokers}. {listing} "
                        f"Nothing was started and no checkpoint created: correct the topic in {setting} (or "
                        "create it) and run again.", option=setting.lstrip("-"), value=", ".join(missing))
