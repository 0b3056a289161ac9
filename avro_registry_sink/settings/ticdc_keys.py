"""Every TiCDC sink-URI parameter, changefeed TOML key and ``cdc cli`` flag, and what this product does with it.

One table, :data:`KEYS`: each key is

* **honoured** - read and applied (the note says where);
* **default only** - the value TiCDC uses by default is what this product does, so it is accepted; any other
  value is refused with the reason (e.g. ``force-replicate = true``: TiCDC itself refuses it with Avro);
* **accepted** - read and validated, with no effect on the output (the note says why, e.g. a TiCDC writer
  setting of the storage sink this product reads);
* **refused** - a :class:`ConfigError` naming the key and the reason.

Keys that are in no row are refused too, with the closest valid name (``enable-tidb-extention`` ->
``enable-tidb-extension``): TiCDC ignores unknown URI parameters silently, which hides typos. The documentation's (docs/settings.md)
key table is generated from this one (``python -m avro_registry_sink.settings.ticdc_keys``) and a test keeps them equal.

>>> closest("enable-tidb-extention", Place.URI)
'enable-tidb-extension'
>>> lookup("sink.column-selectors", Place.TOML).status.value
'honoured'
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from avro_registry_sink.errors import ConfigError, shown_value


class Status(str, Enum):
    HONOURED = "honoured"
    DEFAULT_ONLY = "default only"
    ACCEPTED = "accepted"
    REFUSED = "refused"


class Place(str, Enum):
    URI = "sink URI"
    TOML = "TOML"
    FLAG = "CLI flag"


@dataclass(frozen=True)
class TiCDCKey:
    """One key: ``name`` as TiCDC spells it (TOML keys as dotted paths, flags with their dashes)."""

    name: str
    place: Place
    status: Status
    note: str
    #: DEFAULT_ONLY: the accepted values (compared case-insensitively; booleans as Go parses them).
    accepted: tuple[Any, ...] = ()
    #: URI parameters: the sink schemes the key belongs to.
    schemes: tuple[str, ...] = ("kafka", "file")


_H, _D, _A, _R = Status.HONOURED, Status.DEFAULT_ONLY, Status.ACCEPTED, Status.REFUSED
_KAFKA = ("kafka",)
_KAFKA_OPTIONS = "Kafka client settings (kafka_options.KafkaOptions)"
_NOT_AVRO = "applies to TiCDC's {} protocol only; this sink writes avro"
_NEWARCH = "TiCDC new-architecture parameter for the {} protocol; this sink writes avro"
_TIDB_ONLY = "{} works with a TiDB downstream only (TiCDC's docs); TiCDC ignores it for Kafka and storage sinks too"
_SIMPLE_ONLY = "bootstrap messages of TiCDC's simple protocol; avro has none (TiCDC ignores it for avro too)"
_PULSAR = ("authentication-token", "token-from-file", "basic-user-name", "basic-password", "auth-tls-certificate-path",
           "auth-tls-private-key-path", "tls-trust-certs-file-path", "oauth2.oauth2-issuer-url",
           "oauth2.oauth2-audience", "oauth2.oauth2-private-key", "oauth2.oauth2-client-id", "oauth2.oauth2-scope",
           "pulsar-producer-cache-size", "compression-type", "connection-timeout", "operation-timeout",
           "batching-max-messages", "batching-max-publish-delay", "send-timeout", "output-raw-change-event")


def _uri(name: str, status: Status, note: str, *accepted: Any, schemes: tuple[str, ...] = ("kafka", "file")) -> TiCDCKey:
    return TiCDCKey(name, Place.URI, status, note, tuple(accepted), schemes)


def _toml(name: str, status: Status, note: str, *accepted: Any) -> TiCDCKey:
    return TiCDCKey(name, Place.TOML, status, note, tuple(accepted))


def _flag(name: str, status: Status, note: str) -> TiCDCKey:
    return TiCDCKey(name, Place.FLAG, status, note)


#: Encoding parameters valid in the URI, in ``[sink.kafka-config.codec-config]`` and in this product's settings.
_CODEC = (
    ("enable-tidb-extension", _H, "adds _tidb_op, _tidb_commit_ts, _tidb_commit_physical_time (EncodingOptions)"),
    ("avro-decimal-handling-mode", _H, "precise | string (EncodingOptions)"),
    ("avro-bigint-unsigned-handling-mode", _H, "long | string (EncodingOptions)"),
    ("avro-enable-watermark", _D, "TiCDC test-only watermark events; none are written", False),
    ("max-batch-size", _D, _NOT_AVRO.format("open-protocol/craft"), 16),
    ("encoding-format", _D, _NOT_AVRO.format("simple"), "json"),
)

_KAFKA_KEYS = (
    ("replication-factor", "replication factor of the topics the sink creates"),
    ("kafka-version", "TiCDC's sarama version hint; checked for its format"),
    ("kafka-client-id", "client.id of the producers"),
    ("compression", "compression.type of the producers"),
    ("required-acks", "acks of the producers"),
    ("auto-create-topic", "create missing topics or fail"),
    ("dial-timeout", "connection timeout"),
    ("read-timeout", "request timeout"),
    ("write-timeout", "delivery timeout"),
    ("enable-tls", "TLS to the brokers"),
    ("ca", "TLS CA file"),
    ("cert", "TLS client certificate"),
    ("key", "TLS client key"),
    ("key-password", "password of an encrypted TLS key (this product's; never shown)"),
    ("insecure-skip-verify", "TLS without certificate verification"),
    ("sasl-mechanism", "plain, scram-sha-256, scram-sha-512"),
    ("sasl-user", "SASL user"),
    ("sasl-password", "SASL password (never shown)"),
)
_GSSAPI = ("sasl-gssapi-auth-type", "sasl-gssapi-keytab-path", "sasl-gssapi-kerberos-config-path",
           "sasl-gssapi-service-name", "sasl-gssapi-user", "sasl-gssapi-password", "sasl-gssapi-realm",
           "sasl-gssapi-disable-pafxfast")
_OAUTH = ("sasl-oauth-client-id", "sasl-oauth-client-secret", "sasl-oauth-token-url", "sasl-oauth-scopes",
          "sasl-oauth-grant-type", "sasl-oauth-audience")

#: This product's own settings-file keys (top level or under ``[sink]``), beside TiCDC's.
PRODUCT_KEYS = ("sink-uri", "schema-registry", "protocol", "subject-naming", "partition-num", "max-message-bytes",
                "auto-register",
                "on-incompatible",
                "delivery", "control-topic", "transaction-timeout",
                "metrics-port", "stop-timeout",
                *(name for name, *_ in _CODEC))

KEYS: tuple[TiCDCKey, ...] = (
    # -- sink URI (kafka:// and this product's file://) ------------------------------------------------
    _uri("protocol", _H, "avro or flat-avro; any other protocol is refused"),
    _uri("schema-registry", _H, "registry URL(s), user:password@ allowed (RegistryConfig)"),
    *(_uri(name, status, note, *acc) for name, status, note, *acc in _CODEC),
    _uri("partition-num", _H, "partitions of created topics (file sink: partition files per topic)"),
    _uri("max-message-bytes", _H, "records over the limit (key + value + 36) go to the dead-letter file"),
    _uri("subject-naming", _H, "this product's: topic (Confluent) | ticdc (`.` -> `_`)"),
    *(_uri(name, _H, note + f" ({_KAFKA_OPTIONS})", schemes=_KAFKA) for name, note in _KAFKA_KEYS),
    *(_uri(name, _R, "GSSAPI/Kerberos is not supported by this product's Kafka clients", schemes=_KAFKA)
      for name in _GSSAPI),
    *(_uri(name, _R, "TiCDC reads it from [sink.kafka-config] only; put it in the --config file", schemes=_KAFKA)
      for name in _OAUTH),
    _uri("max-retry", _A, "the producers are idempotent and retry until their delivery timeout (write-timeout)",
         schemes=_KAFKA),
    _uri("transaction-atomicity", _D, "TiCDC refuses table-level atomicity for Kafka too", "none", ""),
    _uri("only-output-updated-columns", _D, _NOT_AVRO.format("canal-json/open-protocol"), False),
    _uri("content-compatible", _D, _NOT_AVRO.format("canal-json"), False),
    _uri("debezium-disable-schema", _D, _NOT_AVRO.format("debezium"), False),
    _uri("avro-include-before-value", _R, _NEWARCH.format("debezium-avro")),
    _uri("debezium-include-start-ts", _R, _NEWARCH.format("debezium")),
    _uri("output-row-key", _R, _NEWARCH.format("canal-json")),
    _uri("worker-count", _R, "TiCDC storage-sink writer setting; the file sink writes one file per topic "
         "partition and batch", schemes=("file",)),
    _uri("flush-interval", _R, "TiCDC storage-sink writer setting; the file sink writes once per batch",
         schemes=("file",)),
    _uri("file-size", _R, "TiCDC storage-sink writer setting; the file sink writes one file per topic partition "
         "and batch", schemes=("file",)),
    # -- changefeed TOML: top level, filter, integrity, consistent -----------------------------------------
    _toml("case-sensitive", _H, "filter rules, dispatcher and column-selector matchers (default false)"),
    _toml("force-replicate", _D, "tables without a handle key cannot be written as Avro (TiCDC: 'force-replicate "
          "must be disabled, when using avro protocol')", False),
    _toml("enable-old-value", _R, "removed in TiCDC v7.4.0 (its strict decoder refuses it too); old values are "
          "always read"),
    _toml("memory-quota", _A, "memory of TiCDC's sink manager in a capture server; Spark's executor memory "
          "(spark.executor.memory) bounds this job's"),
    _toml("ignore-ineligible-table", _A, "TiCDC's changefeed create skips tables without a primary or not-null "
          "unique key instead of asking; such tables are in no changefeed output this product reads"),
    _toml("check-gc-safe-point", _A, "TiCDC checks its start-ts against TiKV's GC safe point; this product reads "
          "what the changefeed wrote, not TiKV"),
    _toml("enable-sync-point", _A, _TIDB_ONLY.format("Syncpoint (snapshots aligned in a TiDB downstream)")),
    _toml("sync-point-interval", _A, _TIDB_ONLY.format("Syncpoint")),
    _toml("sync-point-retention", _A, _TIDB_ONLY.format("Syncpoint")),
    _toml("bdr-mode", _A, _TIDB_ONLY.format("bi-directional replication")),
    _toml("sql-mode", _A, "TiCDC parses upstream DDL with it; the changefeed's output (schema files, "
          "canal-json/debezium messages) carries the parsed columns, and --tables DDL is read as TiDB's default "
          "mode does"),
    _toml("changefeed-error-stuck-duration", _A, "how long a TiCDC changefeed retries internal errors; here a "
          "failed batch stops the job (exit 1, nothing of the batch committed) and a rerun resumes"),
    _toml("mounter.worker-num", _A, "TiCDC's threads decoding TiKV key-values; the inputs here are decoded "
          "already, by Spark's tasks"),
    *(_toml(f"scheduler.{name}", _A, "how TiCDC spreads tables over its capture nodes; Spark spreads the "
            "input over its tasks") for name in ("enable-table-across-nodes", "region-threshold",
                                                  "write-key-threshold")),
    _toml("filter.rules", _H, "TiCDC's table-filter syntax; tables filtered out are skipped and counted"),
    _toml("filter.event-filters", _R, "SQL-expression event filters are not supported; use filter.rules"),
    _toml("filter.ignore-txn-start-ts", _R, "the inputs carry commit ts only, not transaction start ts"),
    _toml("integrity.integrity-check-level", _D, "checksums are not verified: none", "none"),
    _toml("integrity.corruption-handle-level", _A, "has no effect while integrity-check-level is none"),
    _toml("consistent.level", _D, "the redo log is TiCDC's own: none", "none"),
    *(_toml(f"consistent.{name}", _A, "redo-log setting; no effect while consistent.level is none")
      for name in ("storage", "flush-interval", "encoding-worker-num", "flush-worker-num", "max-log-size",
                   "meta-flush-interval", "use-file-backend", "memory-usage", "compression",
                   "flush-concurrency")),
    # -- [sink] ----------------------------------------------------------------------------------------------
    _toml("sink.protocol", _H, "avro or flat-avro: the output's; csv, canal-json or debezium: the protocol of "
          "the changefeed that wrote the input (the storage changefeed's own TOML), the output being Avro; "
          "open-protocol, canal, maxwell, craft, simple are refused (no such input is read)"),
    _toml("sink.safe-mode", _A, "MySQL sink only (REPLACE INTO instead of INSERT); TiCDC's Kafka and storage "
          "sinks ignore it too"),
    _toml("sink.transaction-atomicity", _D, "TiCDC refuses table-level atomicity for Kafka too", "none", ""),
    _toml("sink.schema-registry", _H, "registry URL(s); --schema-registry and the URI win"),
    _toml("sink.dispatchers", _H, "topic and partition rules, first match wins"),
    _toml("sink.dispatchers.matcher", _H, "TiCDC's table-filter syntax"),
    _toml("sink.dispatchers.topic", _H, "{schema}/{table} expression or a fixed topic"),
    _toml("sink.dispatchers.partition", _H, "default | index-value (rowid) | table | ts | columns"),
    _toml("sink.dispatchers.dispatcher", _H, "the old name of partition (TiCDC < v6.1); not both in one rule"),
    _toml("sink.dispatchers.columns", _H, "columns hashed by partition = 'columns'"),
    _toml("sink.dispatchers.index", _R, "index-value dispatch by a named index: table definitions here carry "
          "no index names; leave it out to hash the handle key"),
    _toml("sink.column-selectors", _H, "columns left out of schemas and records; a primary or unique key must "
          "remain"),
    _toml("sink.column-selectors.matcher", _H, "TiCDC's table-filter syntax; the first matching selector applies"),
    _toml("sink.column-selectors.columns", _H, "column-filter rules: matched columns are kept, `!` drops"),
    _toml("sink.terminator", _H, "record separator of the storage source's CSV files"),
    _toml("sink.date-separator", _D, "the storage source recognises day (YYYY-MM-DD) and month (YYYY-MM) "
          "directories by name; year directories would read as partition numbers", "day", "month", "none"),
    _toml("sink.enable-partition-separator", _A, "the storage source finds partition directories itself"),
    _toml("sink.file-index-digit", _A, "the storage source reads file numbers of any width"),
    _toml("sink.enable-kafka-sink-v2", _D, "TiCDC's kafka-go producer; this product uses librdkafka or Spark's "
          "Kafka client", False),
    _toml("sink.encoder-concurrency", _A, "TiCDC's encoder threads; Spark parallelises encoding"),
    _toml("sink.only-output-updated-columns", _D, _NOT_AVRO.format("canal-json/open-protocol"), False),
    _toml("sink.delete-only-output-handle-key-columns", _D, _NOT_AVRO.format("open/canal/maxwell/craft"), False),
    _toml("sink.content-compatible", _D, _NOT_AVRO.format("canal-json"), False),
    _toml("sink.debezium-disable-schema", _D, _NOT_AVRO.format("debezium"), False),
    _toml("sink.debezium.output-old-value", _D, _NOT_AVRO.format("debezium"), True),
    _toml("sink.open.output-old-value", _D, _NOT_AVRO.format("open-protocol"), True),
    *(_toml(f"sink.{name}", _A, _SIMPLE_ONLY) for name in ("send-bootstrap-interval-in-sec",
                                                           "send-bootstrap-in-msg-count",
                                                           "send-bootstrap-to-all-partition")),
    *(_toml(f"sink.csv.{name}", _H, "CSV settings of the storage source (CsvOptions)")
      for name in ("delimiter", "quote", "null", "include-commit-ts", "binary-encoding-method", "output-old-value",
                   "output-handle-key", "output-field-header")),
    *(_toml(f"sink.cloud-storage-config.{name}", _A, "TiCDC storage-sink writer setting; no effect on reading")
      for name in ("worker-count", "flush-interval", "file-size", "flush-concurrency", "file-expiration-days",
                   "file-cleanup-cron-spec", "output-column-id")),
    _toml("sink.cloud-storage-config.output-raw-change-event", _D, "handle-key updates are split into delete + "
          "insert, as TiCDC does by default", False),
    # -- [sink.kafka-config] ----------------------------------------------------------------------------------
    *(_toml(f"sink.kafka-config.{name}", _H, note + f" ({_KAFKA_OPTIONS})") for name, note in (
        ("partition-num", "partitions of created topics"),
        ("max-message-bytes", "records over the limit go to the dead-letter file"),
        *_KAFKA_KEYS)),
    _toml("sink.kafka-config.max-retry", _A, "the producers are idempotent and retry until their delivery timeout"),
    *(_toml(f"sink.kafka-config.{name}", _R, "GSSAPI/Kerberos is not supported by this product's Kafka clients")
      for name in _GSSAPI),
    *(_toml(f"sink.kafka-config.{name}", _H, f"SASL/OAUTHBEARER ({_KAFKA_OPTIONS})") for name in _OAUTH),
    _toml("sink.kafka-config.output-raw-change-event", _D, "handle-key updates are split into delete + insert, "
          "as TiCDC does by default", False),
    *(_toml(f"sink.kafka-config.codec-config.{name}", status, note, *acc) for name, status, note, *acc in _CODEC),
    _toml("sink.kafka-config.large-message-handle.large-message-handle-option", _D, "TiCDC refuses large-message "
          "handling with avro; oversized records go to the dead-letter file", "none"),
    *(_toml(f"sink.kafka-config.large-message-handle.{name}", _R, "large-message handling (claim-check) is not "
            "available with avro, in TiCDC either")
      for name in ("claim-check-storage-uri", "large-message-handle-compression", "claim-check-raw-value")),
    _toml("sink.kafka-config.glue-schema-registry-config", _R, "AWS Glue Schema Registry is not supported; use a "
          "Confluent-compatible registry (schema-registry)"),
    # -- [sink.pulsar-config] ---------------------------------------------------------------------------------
    *(_toml(f"sink.pulsar-config.{name}", _A, "Pulsar sink setting; this product writes Kafka and files (TiCDC's "
            "Kafka sink ignores it too)") for name in _PULSAR),
    # -- this product's settings-file keys -----------------------------------------------------------------
    *(_toml(name, _H, "this product's settings file (top level or [sink])") for name in PRODUCT_KEYS),
    _toml("dispatchers", _H, "this product's settings file: same as sink.dispatchers"),
    _toml("column-selectors", _H, "this product's settings file: same as sink.column-selectors"),
    _toml("registry", _H, "this product's settings file: RegistryConfig fields (urls, username, password, ...)"),
    _toml("csv", _H, "this product's settings file: same as [sink.csv]"),
    # -- cdc cli changefeed create flags -----------------------------------------------------------------------
    _flag("--sink-uri", _H, "every command"),
    _flag("--config", _H, "every command: the changefeed TOML (strict: unknown keys refused)"),
    _flag("--schema-registry", _H, "alias of --registry; the URI's schema-registry wins, as in TiCDC"),
    _flag("--opts", _R, "removed in TiCDC v6.2; give registry=... as --schema-registry"),
    *(_flag(name, _R, "TiCDC changefeed bookkeeping; this product's progress lives in --checkpoint")
      for name in ("--changefeed-id", "-c", "--namespace", "-n", "--start-ts", "--target-ts", "--no-confirm",
                   "--disable-gc-check")),
    *(_flag(name, _R, "reaches the TiCDC server or PD, which this product does not use (Kafka TLS is "
            "enable-tls/ca/cert/key in the sink URI)")
      for name in ("--server", "--pd", "--ca", "--cert", "--key", "--user", "--password")),
    *(_flag(name, _R, "TiCDC server internals with no counterpart here")
      for name in ("--sort-engine", "--sort-dir", "--tz", "--upstream-pd", "--upstream-ca", "--upstream-cert",
                   "--upstream-key")),
)

_BY_PLACE: dict[Place, dict[str, TiCDCKey]] = {place: {} for place in Place}
for _key in KEYS:
    _BY_PLACE[_key.place][_key.name] = _key
_TOML_TABLES = {k.rsplit(".", i)[0] for k in _BY_PLACE[Place.TOML] for i in range(1, k.count(".") + 1)}

#: Valid TOML names for suggestions: TiCDC's, and this product's keys at the top level and in [sink].
_TOML_CANDIDATES = sorted({k.name for k in KEYS if k.place is Place.TOML and k.status is not Status.REFUSED}
                          | {f"sink.{name}" for name in PRODUCT_KEYS})

_GO_BOOLS = {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}


def lookup(name: str, place: Place) -> TiCDCKey | None:
    """The row of a key, or ``None`` when TiCDC (and this product) has no such key."""
    return _BY_PLACE[place].get(name)


def closest(name: str, place: Place, candidates: Iterable[str] | None = None) -> str | None:
    """The valid name closest to ``name`` (difflib), if any is close enough."""
    names = list(candidates) if candidates is not None else [
        k.name for k in KEYS if k.place is place and k.status is not Status.REFUSED]
    found = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return found[0] if found else None


def _same(value: Any, accepted: Any) -> bool:
    if isinstance(accepted, bool):
        if isinstance(value, bool):
            return value is accepted
        return _GO_BOOLS.get(str(value).lower()) is accepted
    return str(value).lower() == str(accepted).lower()


def _unknown(kind: str, name: str, place: Place, candidates: Iterable[str] | None = None,
             where: str = "") -> ConfigError:
    near = closest(name, place, candidates)
    hint = f"did you mean {near!r}? " if near else ""
    return ConfigError(
        f"Unknown {kind} {name!r}{where}: {hint}docs/settings.md lists every valid one.",
        option=name, suggestion=near,
    )


def closest_toml_key(path: str, candidates: Iterable[str] = ()) -> str | None:
    """The valid TOML key closest to ``path``: a close spelling in the same table, else the same key name in
    another table (``safe-mode`` -> ``sink.safe-mode``); ``None`` rather than a far guess.

    >>> closest_toml_key("sink.protocl"), closest_toml_key("safe-mode"), closest_toml_key("sync-point-intervals")
    ('sink.protocol', 'sink.safe-mode', 'sync-point-interval')
    >>> closest_toml_key("sync-point-frequency") is None
    True
    """
    names = list(candidates) or _TOML_CANDIDATES
    table, _, leaf = path.rpartition(".")
    siblings = {name.rpartition(".")[2]: name for name in names if name.rpartition(".")[0] == table}
    near = difflib.get_close_matches(leaf, list(siblings), n=1, cutoff=0.8)
    if near:
        return siblings[near[0]]
    elsewhere = sorted((name for name in names if name.rpartition(".")[2] == leaf), key=len)
    return elsewhere[0] if elsewhere else None


def check_key(key: TiCDCKey, value: Any, *, kind: str, where: str = "") -> None:
    """Refuse a REFUSED key, or a DEFAULT_ONLY key with another value; anything else passes."""
    if key.status is Status.REFUSED:
        raise ConfigError(f"{kind.capitalize()} {key.name!r}{where} is not supported: {key.note}.", option=key.name)
    if key.status is Status.DEFAULT_ONLY and not any(_same(value, a) for a in key.accepted):
        shown = " or ".join(shown_value(a) for a in key.accepted if a != "")
        raise ConfigError(
            f"Invalid value {shown_value(value)} for {kind} {key.name!r}{where}: only {shown} is supported ({key.note}).",
            option=key.name, value=value, choices=list(key.accepted),
        )


def check_uri_params(query: Mapping[str, Any], *, scheme: str) -> None:
    """Check every parameter of a sink URI against :data:`KEYS` (refused, default-only or unknown)."""
    valid = [k.name for k in _BY_PLACE[Place.URI].values() if scheme in k.schemes and k.status is not Status.REFUSED]
    for name, value in query.items():
        key = lookup(name, Place.URI)
        if key is None:
            raise _unknown("sink URI parameter", name, Place.URI, valid)
        if scheme not in key.schemes:
            raise ConfigError(
                f"Sink URI parameter {name!r} belongs to {' and '.join(s + '://' for s in key.schemes)} sinks, not "
                f"{scheme}://.", option=name,
            )
        check_key(key, value, kind="sink URI parameter")


def toml_problems(data: Mapping[str, Any], *, source: str = "settings file") -> list[ConfigError]:
    """Every key of a settings file (TiCDC changefeed TOML or this product's layout) that is refused, unknown or
    holds a value only the default of which is supported, in file order: one :class:`ConfigError` each.

    ``[registry]`` and ``[csv]`` values are checked by their own models afterwards.
    """
    problems: list[ConfigError] = []
    _walk(data, "", f" in {source}", problems)
    return problems


def check_toml(data: Mapping[str, Any], *, source: str = "settings file") -> None:
    """Raise one :class:`ConfigError` naming every refused or unknown key of a settings file with its reason
    (:func:`toml_problems`), so that one edit fixes them all."""
    raise_all(toml_problems(data, source=source), source=source)


def raise_all(problems: list[ConfigError], *, source: str = "settings file") -> None:
    """Nothing for no problem, the problem itself for one, else one :class:`ConfigError` listing them all
    (numbered, each with its reason); its ``problems`` attribute holds the single errors."""
    if not problems:
        return
    if len(problems) == 1:
        raise problems[0]
    where = f" in {source}"
    listed = " ".join(f"({n}) {str(p).replace(where, '')}" for n, p in enumerate(problems, 1))
    raise ConfigError(
        f"{len(problems)} settings{where} are refused; fix them all, then rerun: {listed}",
        option=getattr(problems[0], "option", None), options=[getattr(p, "option", None) for p in problems],
        problems=problems,
    )


#: This product's top-level tables that hold the same keys as TiCDC's ``[sink]`` ones.
_SAME_AS_SINK = {"dispatchers": "sink.dispatchers", "column-selectors": "sink.column-selectors", "csv": "sink.csv"}


def _walk(data: Mapping[str, Any], prefix: str, where: str, problems: list[ConfigError]) -> None:
    for name, value in data.items():
        path = f"{prefix}{name}"
        key = lookup(path, Place.TOML)
        if key is None and prefix == "sink." and name in PRODUCT_KEYS:
            key = lookup(name, Place.TOML)  # this product's keys are accepted in [sink] too
        if path == "registry" and isinstance(value, Mapping):
            continue  # RegistryConfig names its own bad fields
        if key is not None:
            try:
                check_key(key, value, kind="key", where=where)
            except ConfigError as exc:
                problems.append(exc)
            if key.status is Status.REFUSED:
                continue  # one reason for the key, not one more for each key under it
        elif path not in _TOML_TABLES:
            near = closest_toml_key(path)
            hint = f"did you mean {near!r}? " if near else ""
            problems.append(ConfigError(f"Unknown key {path!r}{where}: {hint}docs/settings.md lists every valid "
                                        "one.", option=path, suggestion=near))
            continue
        child = _SAME_AS_SINK.get(path, path) + "."
        if isinstance(value, Mapping):
            _walk(value, child, where, problems)
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for item in value:
                _walk(item, child, where, problems)


def refused_flag(flag: str) -> TiCDCKey | None:
    """The row of a TiCDC CLI flag this product refuses (``--start-ts``), else ``None``."""
    key = lookup(flag.split("=", 1)[0], Place.FLAG)
    return key if key is not None and key.status is Status.REFUSED else None


def markdown_table() -> str:
    """The documentation's (docs/settings.md) table of keys (kept equal to it by a test)."""
    lines = ["| where | key | status | what this product does |", "| --- | --- | --- | --- |"]
    for key in KEYS:
        note = key.note
        if key.status is Status.DEFAULT_ONLY:
            shown = ", ".join(str(a).lower() if isinstance(a, bool) else str(a) for a in key.accepted if a != "")
            note = f"only `{shown}`: {note}"
        if key.place is Place.URI and key.schemes != ("kafka", "file"):
            note = f"{'/'.join(key.schemes)} only; {note}"
        lines.append(f"| {key.place.value} | `{key.name}` | {key.status.value} | {note.replace('|', '&#124;')} |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    print(markdown_table())
