"""Configuration: frozen pydantic models, and the readers for sink URIs, TOML files and the environment.

Where values come from, strongest first: command-line flags, the sink URI's query, environment
variables (``AVRO_SINK_*``), the TOML file, the defaults. Option names and their valid values are
TiCDC's (``enable-tidb-extension``, ``avro-decimal-handling-mode`` ...), checked case-sensitively as
TiCDC does; a bad value is a :class:`ConfigError` that names the option, the value and the choices.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, field_validator

from avro_registry_sink.errors import ConfigError, shown_value
from avro_registry_sink.kafka.options import DEFAULT_KAFKA, KAFKA_KEYS, KafkaOptions, _duration, kafka_options
from avro_registry_sink.redact import redact_url
from avro_registry_sink.storage_fs import STORE_OF_SCHEME, STORE_PARAMETERS, parse_storage_uri

# Imported inside functions, for start-up: every CLI command imports this module; the table filter and
# TiCDC's key tables load only where a configuration uses them.


class DecimalMode(str, Enum):
    """``avro-decimal-handling-mode``: DECIMAL as Avro ``bytes``+``decimal`` (precise) or as text."""

    PRECISE = "precise"
    STRING = "string"


class BigintUnsignedMode(str, Enum):
    """``avro-bigint-unsigned-handling-mode``: BIGINT UNSIGNED as (wrapping) ``long`` or as text."""

    LONG = "long"
    STRING = "string"


class SubjectNaming(str, Enum):
    """How subjects are named from topics.

    ``topic``: Confluent's TopicNameStrategy, ``<topic>-key`` / ``<topic>-value``.
    ``ticdc``: TiCDC's variant, with every ``.`` of the topic replaced by ``_`` first, for users who
    share a registry with a TiCDC changefeed.
    """

    TOPIC = "topic"
    TICDC = "ticdc"


class OnIncompatible(str, Enum):
    """What a table version whose schema its subject's compatibility level refuses does to the job.

    ``stop``: the batch fails with the registry's reasons (nothing of it is written). ``new-major``: the schema is
    registered in the same subject as the next major version (metadata ``major_version``; the subject's
    ``compatibilityGroup`` set to ``major_version`` the first time), with JSONata migration rules for consumers
    pinned to a major (see :mod:`avro_registry_sink.schema.migration`); the job goes on.
    """

    STOP = "stop"
    NEW_MAJOR = "new-major"


class DeliveryMode(str, Enum):
    """``delivery``: what a ``read_committed`` consumer of a Kafka sink sees of each source row.

    ``at-least-once``: every row, a batch rerun after a failure writing its records again. ``exactly-once``: every
    row once (Kafka transactions and commit tokens, :mod:`avro_registry_sink.kafka.delivery`). The file sink is exactly
    once either way.
    """

    AT_LEAST_ONCE = "at-least-once"
    EXACTLY_ONCE = "exactly-once"


class SinkKind(StrEnum):
    """Where a sink URI sends the records: a Kafka cluster (``kafka://``) or files (``file://`` or a storage URI).

    :func:`parse_sink_uri` is the one place a URI's scheme is read as text; everything after it compares
    :attr:`SinkConfig.scheme` with these members, and the sink of each kind is built from one table
    (:data:`~avro_registry_sink.spark.sinks.sinks.SINK_KINDS`).
    """

    KAFKA = "kafka"
    FILE = "file"


class PartitionStrategy(str, Enum):
    """Partition dispatch (TiCDC's MQ protocol): which rows land in the same partition.

    TiCDC also accepts ``rowid`` for ``index-value`` (see ``PARTITION_ALIASES``) and matches values
    case-insensitively.
    """

    DEFAULT = "default"  # index-value
    INDEX_VALUE = "index-value"  # hash of the handle-key values: per-row order kept
    TABLE = "table"  # hash of schema.table: per-table order kept
    TS = "ts"  # commit ts modulo partitions
    COLUMNS = "columns"  # hash of the named columns


#: Older TiCDC spellings of partition strategies.
PARTITION_ALIASES = {"rowid": PartitionStrategy.INDEX_VALUE}


class EncodingOptions(BaseModel):
    """The options that change the Avro schemas and bytes (TiCDC's codec options)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enable_tidb_extension: bool = False
    decimal_mode: DecimalMode = DecimalMode.PRECISE
    bigint_unsigned_mode: BigintUnsignedMode = BigintUnsignedMode.LONG


DEFAULT_ENCODING = EncodingOptions()


class RegistryConfig(BaseModel):
    """How to reach a Confluent-compatible schema registry. No URL means the embedded registry."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    urls: tuple[str, ...] = ()
    username: str | None = None
    password: SecretStr | None = None
    bearer_token: SecretStr | None = None
    ca_bundle: str | None = None
    verify: bool = True
    client_cert: str | None = None
    client_key: str | None = None
    timeout: float = 10.0
    max_retries: int = 3
    retry_backoff: float = 0.2
    retry_backoff_max: float = 5.0
    normalize: bool = False
    # The schema manager waits this long, in total, for an unreachable registry before a batch fails.
    unavailable_budget: float = 60.0
    # Embedded registry storage when no URL is given: a SQLite file, or None for in-memory.
    embedded_data: str | None = None
    # False: the job only looks up the ids of schemas registered already (Confluent's auto.register.schemas);
    # ``auto-register`` (TOML top level or [registry], AVRO_SINK_AUTO_REGISTER, --no-auto-register)
    auto_register: bool = True

    @field_validator("urls", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(u.strip() for u in value.split(",") if u.strip())
        return value

    @field_validator("urls")
    @classmethod
    def _check_urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            if urlsplit(url).scheme not in ("http", "https"):
                raise ValueError(f"schema-registry URL {redact_url(url)!r} must start with http:// or https://")
        return value

    @property
    def is_embedded(self) -> bool:
        return not self.urls


class DispatchRule(BaseModel):
    """A TiCDC dispatcher rule: tables matched by ``matcher`` go to ``topic``, partitioned by ``partition``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    matcher: tuple[str, ...] = ("*.*",)
    topic: str | None = None
    partition: PartitionStrategy = PartitionStrategy.DEFAULT
    columns: tuple[str, ...] = ()

    @field_validator("matcher", "columns", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value


class ColumnSelector(BaseModel):
    """A TiCDC column selector: for tables matched by ``matcher``, only columns matched by ``columns`` are kept."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    matcher: tuple[str, ...]
    columns: tuple[str, ...]

    @field_validator("matcher", "columns", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value


class SinkConfig(BaseModel):
    """Everything a job needs to know about where records go and how they are encoded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The kind of sink (the parsed URI's scheme; a storage URI is a ``file`` sink).
    scheme: SinkKind = SinkKind.FILE
    brokers: tuple[str, ...] = ()
    default_topic: str | None = None
    path: str | None = None
    protocol: str = "avro"
    encoding: EncodingOptions = DEFAULT_ENCODING
    registry: RegistryConfig = RegistryConfig()
    dispatchers: tuple[DispatchRule, ...] = ()
    subject_naming: SubjectNaming = SubjectNaming.TOPIC
    partition_num: int = 3
    max_message_bytes: int = 10 * 1024 * 1024
    # Kafka transport (TLS, SASL, producer and topic keys): the sink URI's query and [sink.kafka-config].
    kafka: KafkaOptions = DEFAULT_KAFKA
    #: ``[filter] rules`` (TiCDC's table-filter syntax) and ``case-sensitive``.
    filter_rules: tuple[str, ...] = ("*.*",)
    case_sensitive: bool = False
    column_selectors: tuple[ColumnSelector, ...] = ()
    #: ``on-incompatible``: a schema change the registry refuses stops the job, or becomes a new major version.
    on_incompatible: OnIncompatible = OnIncompatible.STOP
    #: ``delivery`` (``--delivery``, ``AVRO_SINK_DELIVERY``): ``at-least-once`` or ``exactly-once`` (Kafka
    #: transactions and commit tokens, :mod:`avro_registry_sink.kafka.delivery`); the file sink is exactly once either way.
    delivery: DeliveryMode = DeliveryMode.AT_LEAST_ONCE
    #: ``control-topic``: the compacted topic of the commit tokens (exactly-once delivery).
    control_topic: str = "_avro_registry_sink_commits"
    #: ``transaction-timeout`` (seconds): the producers' ``transaction.timeout.ms`` (exactly-once delivery).
    transaction_timeout: float = 60.0
    #: ``metrics-port`` (``run --metrics-port``, ``AVRO_SINK_METRICS_PORT``): the driver serves Prometheus metrics
    #: on this port (0: a free one); ``None``: no metrics (the default, and always in ``demo``).
    metrics_port: int | None = None
    #: ``stop-timeout`` (``run --stop-timeout``, ``AVRO_SINK_STOP_TIMEOUT``): seconds a stop by SIGINT or SIGTERM waits
    #: for the running batch to finish before abandoning it (not committed; the next run processes it again).
    stop_timeout: float = 30.0


#: ``delivery``: what a ``read_committed`` consumer of a Kafka sink sees of each source row.
DELIVERY_MODES = tuple(mode.value for mode in DeliveryMode)
#: The broker's default ``transaction.max.timeout.ms`` (15 min): a longer ``transaction-timeout`` is refused by it.
MAX_TRANSACTION_TIMEOUT = 900.0


# --------------------------------------------------------------------------------------------------
# Option parsing: one table of TiCDC option names -> (field path, parser).

_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
             "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def parse_bool(option: str, value: str | bool) -> bool:
    """Parse a boolean the way TiCDC (Go ``strconv.ParseBool``) does."""
    if isinstance(value, bool):
        return value
    try:
        return _GO_BOOLS[value]
    except KeyError:
        raise ConfigError(
            f"Invalid value {shown_value(value)} for option {option!r}: valid values are true or false.",
            option=option,
            value=value,
        ) from None


def _parse_choice(option: str, value: str, enum: type[Enum]) -> Any:
    for member in enum:
        if member.value == value:  # case-sensitive, as TiCDC
            return member
    choices = " or ".join(f'"{m.value}"' for m in enum)
    raise ConfigError(
        f"Invalid value {shown_value(value)} for option {option!r}: valid values are {choices} (case-sensitive).",
        option=option,
        value=value,
        choices=[m.value for m in enum],
    )


def parse_protocol(value: Any) -> str:
    """``avro`` and ``flat-avro`` are the same protocol (TiCDC lower-cases the name)."""
    lowered = value.lower() if isinstance(value, str) else None
    if lowered in ("avro", "flat-avro"):
        return "avro"
    raise ConfigError(
        f"Invalid value {shown_value(value)} for option 'protocol': this sink writes Avro, so valid values are "
        '"avro" or "flat-avro".',
        option="protocol",
        value=value,
        choices=["avro", "flat-avro"],
    )


#: ``protocol`` values of a settings file that describe the input: the protocol of the TiCDC changefeed that wrote
#: it (its own TOML, with ``[sink.csv]``, is the ``--config`` of a run reading its tree); the output stays Avro.
INPUT_PROTOCOLS = ("csv", "canal-json", "debezium")


def parse_settings_protocol(value: Any) -> str | None:
    """``protocol`` in a settings file: ``"avro"`` for the output's (avro, flat-avro), ``None`` for the input's
    (:data:`INPUT_PROTOCOLS`: the changefeed TOML that wrote the input); any other is refused naming both roles.

    >>> parse_settings_protocol("flat-avro"), parse_settings_protocol("CSV")
    ('avro', None)
    """
    lowered = value.lower() if isinstance(value, str) else None
    if lowered in INPUT_PROTOCOLS:
        return None
    if lowered in ("avro", "flat-avro"):
        return "avro"
    raise ConfigError(
        f"Invalid value {shown_value(value)} for option 'protocol': in a settings file it is either the output's "
        '("avro" or "flat-avro") or, in the TOML of the changefeed that wrote the input, that changefeed\'s ('
        + ", ".join(f'"{p}"' for p in INPUT_PROTOCOLS) + "); this product reads no other input and writes Avro.",
        option="protocol", value=value, choices=["avro", "flat-avro", *INPUT_PROTOCOLS],
    )


_ENCODING_OPTIONS: dict[str, tuple[str, Any]] = {
    "enable-tidb-extension": ("enable_tidb_extension", parse_bool),
    "avro-decimal-handling-mode": ("decimal_mode", lambda o, v: _parse_choice(o, v, DecimalMode)),
    "avro-bigint-unsigned-handling-mode": (
        "bigint_unsigned_mode",
        lambda o, v: _parse_choice(o, v, BigintUnsignedMode),
    ),
}


def encoding_options(values: Mapping[str, Any], base: EncodingOptions = DEFAULT_ENCODING) -> EncodingOptions:
    """Build :class:`EncodingOptions` from TiCDC option names; ``None`` and ``""`` keep the base value.

    >>> encoding_options({"avro-decimal-handling-mode": "string"}).decimal_mode.value
    'string'
    """
    updates: dict[str, Any] = {}
    for option, raw in values.items():
        if raw is None or raw == "":
            continue  # TiCDC ignores an empty mode value
        if option not in _ENCODING_OPTIONS:
            continue
        field, parser = _ENCODING_OPTIONS[option]
        updates[field] = parser(option, raw)
    return base.model_copy(update=updates)


def registry_config_from_url(url: str, base: RegistryConfig | None = None) -> RegistryConfig:
    """A registry URL list (comma-separated) with optional ``user:pass@`` userinfo (URL-encoded)."""
    base = base or RegistryConfig()
    urls: list[str] = []
    username, password = base.username, base.password
    for part in (u.strip() for u in url.split(",") if u.strip()):
        split = urlsplit(part)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ConfigError(
                f"Invalid value {redact_url(part)!r} for option 'schema-registry': expected an http:// or https:// URL.",
                option="schema-registry",
                value=redact_url(part),
            )
        if split.username is not None:
            username = unquote(split.username)
            password = SecretStr(unquote(split.password or ""))
            netloc = split.hostname + (f":{split.port}" if split.port else "")
            part = split._replace(netloc=netloc).geturl()
        urls.append(part.rstrip("/"))
    return base.model_copy(update={"urls": tuple(urls), "username": username, "password": password})


def _query(text: str) -> dict[str, str]:
    """A URI query as TiCDC reads it: a repeated key keeps its first value."""
    query: dict[str, str] = {}
    for name, value in parse_qsl(text, keep_blank_values=True):
        query.setdefault(name, value)
    return query


def parse_sink_uri(uri: str, base: SinkConfig | None = None) -> SinkConfig:
    """Parse a TiCDC-style sink URI.

    ``kafka://host:9092[,host2:9092]/topic?protocol=avro&enable-tidb-extension=true&...&schema-registry=http://...``
    or ``file:///path/to/dir?protocol=avro`` for the file sink. Every parameter is checked against
    :data:`avro_registry_sink.settings.ticdc_keys.KEYS`: unknown ones are refused with the closest valid name.
    """
    from avro_registry_sink.settings.ticdc_keys import check_uri_params

    base = base or SinkConfig()
    split = urlsplit(uri)
    scheme = split.scheme.lower()
    if scheme == "kafka+ssl":  # TiCDC accepts it but stays in plaintext: refused rather than silently insecure
        raise ConfigError(
            f"Invalid sink URI {redact_url(uri)!r}: kafka+ssl:// does not turn TLS on (in TiCDC neither); write "
            "kafka://...?enable-tls=true (with ca, cert and key for a client certificate).",
            option="sink-uri", value=redact_url(uri), choices=["kafka", "file"],
        )
    if scheme != "kafka" and scheme not in STORE_OF_SCHEME:
        raise ConfigError(
            f"Invalid sink URI {redact_url(uri)!r}: the scheme must be kafka://, file:// or a storage URI (s3://, gcs://, "
            f"azure://, s3a://, gs://, abfss://, hdfs://), not {split.scheme!r}.",
            option="sink-uri",
            value=redact_url(uri),
        )
    query = _query(split.query)
    store_params: dict[str, str] = {}
    if scheme != "kafka":  # the file sink's store parameters (endpoint, credentials) stay with its location
        known = STORE_PARAMETERS[STORE_OF_SCHEME[scheme]]
        store_params = {k: v for k, v in query.items() if k.lower().replace("_", "-") in known}
        query = {k: v for k, v in query.items() if k not in store_params}
    check_uri_params(query, scheme="kafka" if scheme == "kafka" else "file")
    update: dict[str, Any] = {"scheme": SinkKind.KAFKA if scheme == "kafka" else SinkKind.FILE}
    if "protocol" not in query and base.protocol is None:
        raise ConfigError("The sink URI needs protocol=avro (or flat-avro).", option="protocol")
    if "protocol" in query:
        update["protocol"] = parse_protocol(query["protocol"])
    if scheme == "kafka":
        # TiCDC ignores user-info in a Kafka URI (credentials go in sasl-user / sasl-password).
        brokers = tuple(b for b in split.netloc.rpartition("@")[2].split(",") if b)
        if not brokers:
            raise ConfigError(f"Invalid sink URI {redact_url(uri)!r}: no Kafka broker address.", option="sink-uri", value=redact_url(uri))
        update["brokers"] = brokers
        topic = unquote(split.path.lstrip("/"))
        update["default_topic"] = topic or None
    elif scheme == "file":
        update["path"] = unquote(split.path) or "."
    else:
        location = f"{split.scheme}://{split.netloc}{split.path}"
        update["path"] = location + ("?" + urlencode(store_params, safe=":/") if store_params else "")
        parse_storage_uri(update["path"], option="sink-uri")  # refused here, before any work
    update["encoding"] = encoding_options(query, base.encoding)
    if query.get("schema-registry"):
        update["registry"] = registry_config_from_url(query["schema-registry"], base.registry)
    if "partition-num" in query:
        update["partition_num"] = _parse_int("partition-num", query["partition-num"], minimum=1)
    if "max-message-bytes" in query:
        update["max_message_bytes"] = _parse_int("max-message-bytes", query["max-message-bytes"], minimum=1)
    if "subject-naming" in query:
        update["subject_naming"] = _parse_choice("subject-naming", query["subject-naming"], SubjectNaming)
    if scheme == "kafka":
        update["kafka"] = kafka_options(query, base.kafka)
    return base.model_copy(update=update)


def parse_partition(value: str, option: str = "partition") -> PartitionStrategy:
    """A dispatcher's ``partition`` (or old ``dispatcher``) value, case-insensitive as TiCDC; ``rowid`` is
    ``index-value``. TiCDC falls back to ``default`` with a warning; here a wrong value is refused."""
    import difflib

    lowered = str(value).lower()
    if lowered in PARTITION_ALIASES:
        return PARTITION_ALIASES[lowered]
    for member in PartitionStrategy:
        if member.value == lowered:
            return member
    choices = [m.value for m in PartitionStrategy] + list(PARTITION_ALIASES)
    near = ["ts"] if lowered.replace("-", "_") == "commit_ts" else difflib.get_close_matches(lowered, choices, n=1,
                                                                                          cutoff=0.5)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise ConfigError(
        f"Invalid value {shown_value(value)} for option {option!r}{hint}: valid values are " + ", ".join(choices) + ".",
        option=option, value=value, choices=choices,
    )


def _dispatch_rule(raw: Mapping[str, Any]) -> DispatchRule:
    from avro_registry_sink.routing.table_filter import TableFilter

    rule = dict(raw)
    if "dispatcher" in rule:
        if "partition" in rule:
            raise ConfigError(
                f"dispatcher and partition cannot be configured both for rule matcher {list(rule.get('matcher', []))}: "
                "'dispatcher' is the old name of 'partition'; keep one.",
                option="dispatchers.dispatcher",
            )
        rule["partition"] = parse_partition(rule.pop("dispatcher"), "dispatcher")
    elif "partition" in rule:
        rule["partition"] = parse_partition(rule["partition"])
    try:
        parsed = DispatchRule(**rule)
    except ValidationError as exc:
        raise ConfigError(f"Invalid dispatcher rule {dict(raw)!r}: {_first_error(exc)}", option="dispatchers") from None
    TableFilter.parse(parsed.matcher, option="dispatchers.matcher")
    if parsed.partition is PartitionStrategy.COLUMNS and not parsed.columns:
        raise ConfigError(
            f"Dispatcher rule for {list(parsed.matcher)} has partition = 'columns' but no columns = [...] to hash.",
            option="dispatchers.columns",
        )
    return parsed


def _column_selector(raw: Any) -> ColumnSelector:
    from avro_registry_sink.routing.table_filter import ColumnFilter, TableFilter

    if not isinstance(raw, Mapping):
        raise ConfigError(f"Invalid column selector {raw!r}: expected {{matcher = [...], columns = [...]}}.",
                          option="column-selectors")
    try:
        selector = ColumnSelector(**raw)
    except ValidationError as exc:
        raise ConfigError(f"Invalid column selector {dict(raw)!r}: {_first_error(exc)}",
                          option="column-selectors") from None
    TableFilter.parse(selector.matcher, option="column-selectors.matcher")
    ColumnFilter.parse(selector.columns, option="column-selectors.columns")
    return selector


_INTERVAL_UNITS = ("week", "day", "hour", "minute", "second", "millisecond", "microsecond")
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?((?:[+]?\d+(?:\.\d+)?\s+[a-z]+\s*)+)$", re.IGNORECASE)
_INTERVAL_PART = re.compile(r"([+]?\d+(?:\.\d+)?)\s+([a-z]+)", re.IGNORECASE)


_GO_DURATION = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+")
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_GO_UNIT_MICROS = {"ns": 0.001, "us": 1, "µs": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000}


def _go_duration_interval(text: str) -> str | None:
    """A Go duration (TiCDC's spelling: ``10s``, ``500ms``, ``1m30s``, ``1.5h``) as Spark's interval text, or
    ``None`` when ``text`` is not one."""
    if not _GO_DURATION.fullmatch(text):
        return None
    micros = round(sum(float(n) * _GO_UNIT_MICROS[u] for n, u in _GO_DURATION_PART.findall(text)))
    if micros % 1_000_000 == 0:
        return f"{micros // 1_000_000} seconds"
    if micros % 1_000 == 0:
        return f"{micros // 1_000} milliseconds"
    return f"{micros} microseconds"


def parse_trigger_interval(value: str, option: str = "--trigger-interval") -> str:
    """Check a micro-batch interval and return it as Spark's ``processingTime`` trigger reads it: Spark's
    own text ("10 seconds", "1 minute 30 seconds", "500 milliseconds") is kept, a Go duration as TiCDC's
    settings write them ("10s", "500ms", "1m30s") is converted; months and years are refused, as Spark
    refuses them.

    >>> parse_trigger_interval("1 minute 30 seconds"), parse_trigger_interval("1m30s"), parse_trigger_interval("500ms")
    ('1 minute 30 seconds', '90 seconds', '500 milliseconds')
    """
    import difflib

    go = _go_duration_interval((value or "").strip())
    if go is not None:
        return go
    found = _INTERVAL.match(value or "")
    problem = None if found else "expected a number and a unit"
    if found:
        for _, unit in _INTERVAL_PART.findall(found.group(1)):
            singular = unit.lower().removesuffix("s")
            if singular in ("month", "year"):
                problem = "Spark's processing-time trigger takes no months or years"
                break
            if singular not in _INTERVAL_UNITS:
                near = difflib.get_close_matches(singular, _INTERVAL_UNITS, n=1, cutoff=0.5)
                problem = f"unknown unit {unit!r}" + (f" (did you mean {near[0] + 's'!r}?)" if near else "")
                break
    if problem:
        raise ConfigError(
            f"Invalid value {value!r} for option {option!r}: {problem}; e.g. '10 seconds', '1 minute 30 seconds' "
            f"or '500 milliseconds' (units: {', '.join(_INTERVAL_UNITS)}), or a Go duration as TiCDC writes "
            "them: 10s, 500ms, 1m30s.",
            option=option, value=value, choices=list(_INTERVAL_UNITS),
        )
    return value


def _parse_int(option: str, value: str, *, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ConfigError(
            f"Invalid value {value!r} for option {option!r}: expected a whole number >= {minimum}.",
            option=option,
            value=value,
        )
    return number


# --------------------------------------------------------------------------------------------------
# TOML file and environment.

ENV_PREFIX = "AVRO_SINK_"


def load_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a settings file; TiCDC's ``[sink]`` table layout is accepted as well as a flat one."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"Settings file {str(path)!r} does not exist.", option="config", value=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"Settings file {str(path)!r} is not valid TOML: {exc}", option="config") from None
    return data


def settings_from_mapping(data: Mapping[str, Any], base: SinkConfig | None = None) -> SinkConfig:
    """Apply a settings mapping (from TOML) to a :class:`SinkConfig`.

    TiCDC's changefeed layout (``case-sensitive``, ``[filter] rules``, ``[sink]`` with ``protocol``,
    ``schema-registry``, ``dispatchers``, ``column-selectors``,
    ``[sink.kafka-config.codec-config]``) and this product's flat one (``sink-uri``, ``schema-registry``,
    ``subject-naming``, ``partition-num``, ``[[dispatchers]]``, ``[registry]``) are both read. Which keys
    exist is :data:`avro_registry_sink.settings.ticdc_keys.KEYS` (checked by :func:`load_config` for files).
    """
    from avro_registry_sink.routing.table_filter import TableFilter

    base = base or SinkConfig()
    flat: dict[str, Any] = dict(data)
    sink = flat.pop("sink", None)
    if isinstance(sink, Mapping):
        codec = sink.get("kafka-config", {}).get("codec-config", {}) if isinstance(sink.get("kafka-config"), Mapping) else {}
        kafka_config: Mapping[str, Any] = sink["kafka-config"] if isinstance(sink.get("kafka-config"), Mapping) else {}
        flat = {**{k: v for k, v in sink.items() if k != "kafka-config"}, **codec,
                **{k: v for k, v in kafka_config.items() if k in KAFKA_KEYS or k in _KAFKA_CONFIG_OWN}, **flat}
    config = base
    if flat.get("sink-uri"):
        config = parse_sink_uri(str(flat["sink-uri"]), config)
    update: dict[str, Any] = {}
    encoding = encoding_options({k: (str(v).lower() if isinstance(v, bool) else v) for k, v in flat.items()}, config.encoding)
    update["encoding"] = encoding
    if "protocol" in flat and parse_settings_protocol(flat["protocol"]) is not None:
        update["protocol"] = "avro"  # csv/canal-json describe the input; the output is Avro either way
    registry = config.registry
    if isinstance(flat.get("registry"), Mapping):
        try:
            registry = RegistryConfig(**{**registry.model_dump(), **{k.replace("-", "_"): v for k, v in flat["registry"].items()}})
        except ValidationError as exc:
            raise ConfigError(f"Invalid [registry] settings: {_first_error(exc)}", option="registry") from None
    if flat.get("schema-registry"):
        registry = registry_config_from_url(str(flat["schema-registry"]), registry)
    if "auto-register" in flat:
        registry = registry.model_copy(update={"auto_register": parse_bool("auto-register", flat["auto-register"])})
    update["registry"] = registry
    update["kafka"] = kafka_options(flat, config.kafka)
    if "subject-naming" in flat:
        update["subject_naming"] = _parse_choice("subject-naming", str(flat["subject-naming"]), SubjectNaming)
    if "partition-num" in flat:
        update["partition_num"] = _parse_int("partition-num", str(flat["partition-num"]), minimum=1)
    if "on-incompatible" in flat:
        update["on_incompatible"] = _parse_choice("on-incompatible", str(flat["on-incompatible"]), OnIncompatible)
    if "max-message-bytes" in flat:
        update["max_message_bytes"] = _parse_int("max-message-bytes", str(flat["max-message-bytes"]), minimum=1)
    if "case-sensitive" in flat:
        update["case_sensitive"] = parse_bool("case-sensitive", flat["case-sensitive"])
    if "dispatchers" in flat:
        update["dispatchers"] = tuple(_dispatch_rule(raw) for raw in _tables_of(flat["dispatchers"], "dispatchers"))
    if "column-selectors" in flat:
        update["column_selectors"] = tuple(_column_selector(raw) for raw in
                                           _tables_of(flat["column-selectors"], "column-selectors"))
    if flat.get("delivery") is not None:
        update["delivery"] = parse_delivery(str(flat["delivery"]))
    if flat.get("control-topic") is not None:
        update["control_topic"] = parse_topic_name("control-topic", str(flat["control-topic"]))
    if flat.get("transaction-timeout") is not None:
        update["transaction_timeout"] = parse_transaction_timeout(flat["transaction-timeout"])
    if flat.get("metrics-port") is not None and str(flat["metrics-port"]).strip() != "":
        update["metrics_port"] = parse_metrics_port(flat["metrics-port"])
    if flat.get("stop-timeout") is not None and str(flat["stop-timeout"]).strip() != "":
        update["stop_timeout"] = parse_stop_timeout(flat["stop-timeout"])
    filter_table = flat.get("filter")
    if isinstance(filter_table, Mapping) and "rules" in filter_table:
        rules = filter_table["rules"]
        rules = [rules] if isinstance(rules, str) else list(rules or [])
        TableFilter.parse(rules, option="filter.rules")  # syntax errors now, not mid-run
        update["filter_rules"] = tuple(rules)
    return config.model_copy(update=update)


def parse_delivery(value: str) -> DeliveryMode:
    """``delivery``: one of :data:`DELIVERY_MODES` (case-sensitive, ``_`` taken for ``-``).

    >>> parse_delivery("exactly_once")
    <DeliveryMode.EXACTLY_ONCE: 'exactly-once'>
    """
    text = value.strip().replace("_", "-")
    if text not in DELIVERY_MODES:
        raise ConfigError(f"Invalid value {value!r} for option 'delivery': valid values are "
                          + " or ".join(DELIVERY_MODES) + ".", option="delivery", value=value,
                          choices=list(DELIVERY_MODES))
    return DeliveryMode(text)


def parse_metrics_port(value: Any) -> int:
    """``metrics-port``: a TCP port, 0 to 65535 (0: a free port, which the job's start line names).

    >>> parse_metrics_port("9464")
    9464
    """
    port = _parse_int("metrics-port", str(value).strip(), minimum=0)
    if port > 65535:
        raise ConfigError(f"Invalid value {value!r} for option 'metrics-port': a TCP port is 0 to 65535 "
                          "(0: a free one).", option="metrics-port", value=str(value))
    return port


def parse_stop_timeout(value: Any) -> float:
    """``stop-timeout``: seconds (a number) or a Go duration (``30s``, ``2m``), 0 or more (0: a running batch is
    abandoned at once).

    >>> parse_stop_timeout("2m"), parse_stop_timeout(12.5), parse_stop_timeout("0")
    (120.0, 12.5, 0.0)
    """
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        seconds = _duration("stop-timeout", text)
    if not seconds >= 0:
        raise ConfigError(f"Invalid value {value!r} for option 'stop-timeout': seconds (or a duration such as 30s), "
                          "0 or more.", option="stop-timeout", value=str(value))
    return seconds


_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def parse_topic_name(option: str, value: str) -> str:
    """A Kafka topic name (Kafka's rule: 1-249 of ``[A-Za-z0-9._-]``, not ``.`` or ``..``)."""
    if not _TOPIC_NAME.fullmatch(value) or value in (".", ".."):
        raise ConfigError(f"Invalid value {value!r} for option {option!r}: a Kafka topic name is 1-249 characters "
                          "of A-Z a-z 0-9 . _ -.", option=option, value=value)
    return value


def parse_transaction_timeout(value: Any) -> float:
    """``transaction-timeout``: a Go duration (``60s``, ``2m``) or milliseconds, 1 s to 15 min (the broker's
    default ``transaction.max.timeout.ms``; a longer one needs the broker's setting raised first, and is refused
    here).

    >>> parse_transaction_timeout("2m"), parse_transaction_timeout(30000)
    (120.0, 30.0)
    """
    text = str(value).strip()
    seconds = int(text) / 1000 if text.isdigit() else _duration("transaction-timeout", text)
    if not 1.0 <= seconds <= MAX_TRANSACTION_TIMEOUT:
        raise ConfigError(f"Invalid value {value!r} for option 'transaction-timeout': between 1s and 15m (the "
                          "broker's default transaction.max.timeout.ms); a transaction holds one task's write, "
                          "not a trigger interval.", option="transaction-timeout", value=str(value))
    return seconds


#: ``[sink.kafka-config]`` keys that are not Kafka-client settings (the rest are ``KAFKA_KEYS``).
_KAFKA_CONFIG_OWN = ("partition-num", "max-message-bytes")


def _tables_of(value: Any, option: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ConfigError(f"Invalid {option}: expected a list of tables ([[sink.{option}]] or [{{...}}, ...]), "
                          f"got {value!r}.", option=option)
    return value


def settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``AVRO_SINK_ENABLE_TIDB_EXTENSION=true`` -> ``{"enable-tidb-extension": "true"}`` and so on."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for key, value in environ.items():
        if key.startswith(ENV_PREFIX):
            out[key[len(ENV_PREFIX):].lower().replace("_", "-")] = value
    return out


def load_config(
    *,
    config_file: str | os.PathLike[str] | None = None,
    sink_uri: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> SinkConfig:
    """Build the effective :class:`SinkConfig`: defaults < TOML file < environment < sink URI < flags."""
    from avro_registry_sink.settings.ticdc_keys import raise_all, toml_problems

    config = SinkConfig()
    if config_file is not None:
        data = load_toml(config_file)
        source = f"settings file {str(config_file)!r}"
        problems = toml_problems(data, source=source)
        try:  # the values of the keys left: their errors join the keys' in one report
            config = settings_from_mapping(_without(data, [str(getattr(p, "option", "")) for p in problems]), config)
        except ConfigError as exc:
            problems.append(exc)
        raise_all(problems, source=source)
    env = settings_from_env(environ)
    if env:
        config = settings_from_mapping(env, config)
    if sink_uri:
        config = parse_sink_uri(sink_uri, config)
    if overrides:
        config = settings_from_mapping({k: v for k, v in overrides.items() if v is not None}, config)
    return config


def _without(data: Mapping[str, Any], paths: list[str]) -> dict[str, Any]:
    """``data`` without the keys at dotted ``paths`` (in every table of an array of tables on the way)."""

    def drop(node: Any, parts: list[str]) -> Any:
        if isinstance(node, list):
            return [drop(item, parts) for item in node]
        if not isinstance(node, Mapping) or parts[0] not in node:
            return node
        out = dict(node)
        if len(parts) == 1:
            del out[parts[0]]
        else:
            out[parts[0]] = drop(out[parts[0]], parts[1:])
        return out

    result = dict(data)
    for path in paths:
        result = drop(result, path.split("."))
    return result


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    return f"{where}: {err.get('msg')}" if where else str(err.get("msg"))


def default_state_dir() -> Path:
    """Where local runs keep their embedded registry, checkpoints and file sink output."""
    return Path(os.environ.get("AVRO_SINK_HOME", ".avro-registry-sink"))
