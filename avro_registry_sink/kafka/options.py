"""Kafka transport settings as TiCDC spells them, and what each Kafka client needs to hear of them.

:class:`KafkaOptions` holds every Kafka-transport key of a TiCDC sink URI (``kafka://...?enable-tls=true&
sasl-mechanism=scram-sha-256&sasl-user=...``) and of the changefeed TOML's ``[sink.kafka-config]``: TLS
(``enable-tls``, ``ca``, ``cert``, ``key``, ``insecure-skip-verify``, plus ``key-password`` for an encrypted
key), SASL (``sasl-mechanism``, ``sasl-user``, ``sasl-password``, the TOML-only ``sasl-oauth-*``) and the
producer/topic keys (``kafka-client-id``, ``required-acks``, ``compression``, ``replication-factor``,
``auto-create-topic``, ``kafka-version``, ``dial-/read-/write-timeout``). :func:`kafka_options` parses them
with TiCDC's rules and messages; the renderers translate the model for the three clients that use it:

* :func:`librdkafka_conf` - confluent-kafka's producer, admin client and consumer;
* :func:`spark_kafka_options` - Spark's Kafka source and sink (the Java client, ``kafka.``-prefixed):
  PEM material is passed inline (``ssl.truststore.certificates``, ``ssl.keystore.key`` - the key decrypted
  with ``key-password`` on the driver), so executors need no files, and SASL goes in ``sasl.jaas.config``;
* :func:`topic_settings` - what a created topic gets.

Secrets (``sasl-password``, ``key-password``, ``sasl-oauth-client-secret``) are :class:`SecretStr` and are
revealed only inside the rendered client settings.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr

from avro_registry_sink.errors import ConfigError, shown_value

__all__ = [
    "DEFAULT_KAFKA",
    "KAFKA_KEYS",
    "Compression",
    "KafkaOptions",
    "SaslMechanism",
    "kafka_options",
    "librdkafka_conf",
    "spark_kafka_options",
    "topic_settings",
]


class SaslMechanism(str, Enum):
    """``sasl-mechanism`` values this sink supports (TiCDC accepts them case-insensitively)."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"


class Compression(str, Enum):
    """``compression``: the producer's ``compression.type``."""

    NONE = "none"
    GZIP = "gzip"
    SNAPPY = "snappy"
    LZ4 = "lz4"
    ZSTD = "zstd"


class KafkaOptions(BaseModel):
    """Every Kafka-transport setting of a sink or a Kafka changelog source (see the module docs).

    >>> opts = kafka_options({"sasl-mechanism": "scram-sha-256", "sasl-user": "bob", "sasl-password": "pw"})
    >>> librdkafka_conf(opts)["security.protocol"], opts.sasl_password
    ('sasl_plaintext', SecretStr('**********'))
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # TLS. ``enable_tls`` None = not given (then ca+cert+key switch TLS on, as in TiCDC).
    enable_tls: bool | None = None
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    key_password: SecretStr | None = None
    insecure_skip_verify: bool = False
    # SASL
    sasl_mechanism: SaslMechanism | None = None
    sasl_user: str | None = None
    sasl_password: SecretStr | None = None
    sasl_oauth_client_id: str | None = None
    sasl_oauth_client_secret: SecretStr | None = None
    sasl_oauth_token_url: str | None = None
    sasl_oauth_scopes: tuple[str, ...] = ()
    sasl_oauth_grant_type: str = "client_credentials"
    sasl_oauth_audience: str | None = None
    # Producer and topics
    client_id: str | None = None
    required_acks: int = -1
    compression: Compression = Compression.NONE
    replication_factor: int | None = None  # None: the broker's default.replication.factor
    auto_create_topic: bool = True
    kafka_version: str | None = None  # validated; the clients negotiate versions with the broker
    dial_timeout: float = 10.0
    read_timeout: float = 10.0
    write_timeout: float = 10.0

    @property
    def tls(self) -> bool:
        """Whether connections use TLS (``enable-tls=true``, or ca+cert+key given without it)."""
        if self.enable_tls is not None:
            return self.enable_tls
        return self.ca is not None and self.cert is not None and self.key is not None

    @property
    def security_protocol(self) -> str:
        """Kafka's ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        if self.sasl_mechanism is None:
            return "SSL" if self.tls else "PLAINTEXT"
        return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"

    @property
    def is_idempotent(self) -> bool:
        """The producers are idempotent only with ``required-acks=-1`` (Kafka's rule for idempotence)."""
        return self.required_acks == -1

    def describe(self) -> dict[str, Any]:
        """A secret-free summary for logs and the start event."""
        out: dict[str, Any] = {"security": self.security_protocol.lower()}
        if self.tls:
            out["tls"] = {"ca": self.ca, "cert": self.cert, "key": self.key,
                          "insecure-skip-verify": self.insecure_skip_verify}
        if self.sasl_mechanism is not None:
            out["sasl"] = {"mechanism": self.sasl_mechanism.value, "user": self.sasl_user}
        out["required-acks"] = self.required_acks
        out["compression"] = self.compression.value
        return out


DEFAULT_KAFKA = KafkaOptions()


# --------------------------------------------------------------------------------------------------
# Parsing: one table of TiCDC key -> (field, parser). Parsers take (key, raw value) and raise ConfigError.

_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
             "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def _invalid(key: str, value: Any, why: str, **context: Any) -> ConfigError:
    shown = "<secret>" if key in _SECRET_KEYS else shown_value(value)
    return ConfigError(f"Invalid value {shown} for option {key!r}: {why}", option=key,
                       value=None if key in _SECRET_KEYS else value, **context)


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    try:
        return _GO_BOOLS[str(value)]
    except KeyError:
        raise _invalid(key, value, "valid values are true or false.") from None


def _text(key: str, value: Any) -> str:
    return str(value)


def _secret(key: str, value: Any) -> SecretStr:
    return value if isinstance(value, SecretStr) else SecretStr(str(value))


def _path(key: str, value: Any) -> str:
    text = str(value)
    if not Path(text).is_file():
        raise _invalid(key, text, "no such file (the path is read where the job runs).")
    return text


def _int(key: str, value: Any, *, minimum: int, maximum: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise _invalid(key, value, f"expected a whole number from {minimum} to {maximum}.") from None
    if not minimum <= number <= maximum:
        raise _invalid(key, value, f"expected a whole number from {minimum} to {maximum}.")
    return number


def _sasl_mechanism(key: str, value: Any) -> SaslMechanism:
    name = str(value).upper()
    if name == "GSSAPI":
        raise _invalid(key, value, "GSSAPI (Kerberos) is not supported by this sink; valid values are plain, "
                       "scram-sha-256, scram-sha-512 or oauthbearer.", choices=_MECHANISM_CHOICES)
    for member in SaslMechanism:
        if member.value == name:
            return member
    raise _invalid(key, value, f"unknown {value} SASL mechanism; valid values are plain, scram-sha-256, "
                   "scram-sha-512 or oauthbearer (case-insensitive).", choices=_MECHANISM_CHOICES)


_MECHANISM_CHOICES = ["plain", "scram-sha-256", "scram-sha-512", "oauthbearer"]


def _required_acks(key: str, value: Any) -> int:
    try:
        number = int(str(value))
    except ValueError:
        number = None
    if number not in (0, 1, -1):
        raise _invalid(key, value, f"invalid required acks {value}, only support these values: 0(NoResponse),"
                       "1(WaitForLocal) and -1(WaitForAll).", choices=[0, 1, -1])
    return number  # type: ignore[return-value]


def _compression(key: str, value: Any) -> Compression:
    name = str(value).lower()
    for member in Compression:
        if member.value == name:
            return member
    raise _invalid(key, value, "valid values are none, gzip, snappy, lz4 or zstd.", choices=[m.value for m in Compression])


_CLIENT_ID = re.compile(r"[A-Za-z0-9._-]+")


def _client_id(key: str, value: Any) -> str:
    text = str(value)
    if not _CLIENT_ID.fullmatch(text):
        raise _invalid(key, value, f"invalid kafka client ID '{text}' (letters, digits, '.', '_' and '-' only).")
    return text


_KAFKA_VERSION = re.compile(r"(0\.\d+\.\d+\.\d+|[1-9]\d*\.\d+\.\d+)")


def _kafka_version(key: str, value: Any) -> str:
    text = str(value)
    if not _KAFKA_VERSION.fullmatch(text):
        raise _invalid(key, value, "invalid kafka version (expected e.g. 2.4.0 or 0.10.2.1).")
    return text


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(key: str, value: Any) -> float:
    """A Go duration (``10s``, ``1m30s``, ``500ms``) in seconds; must be positive."""
    text = str(value)
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text or total <= 0:
        raise _invalid(key, value, "expected a positive Go duration such as 10s, 500ms or 1m30s.")
    return total


def _scopes(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(s for s in (p.strip() for p in value.split(",")) if s)
    return tuple(str(s) for s in value)


def _oauth_secret(key: str, value: Any) -> SecretStr:
    text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        raise _invalid(key, value, "OAuth2 client secret is not base64 encoded.") from None
    return SecretStr(text)


#: TiCDC key -> (KafkaOptions field, parser).
_KEYS: dict[str, tuple[str, Any]] = {
    "enable-tls": ("enable_tls", _bool),
    "ca": ("ca", _path),
    "cert": ("cert", _path),
    "key": ("key", _path),
    "key-password": ("key_password", _secret),
    "insecure-skip-verify": ("insecure_skip_verify", _bool),
    "sasl-mechanism": ("sasl_mechanism", _sasl_mechanism),
    "sasl-user": ("sasl_user", _text),
    "sasl-password": ("sasl_password", _secret),
    "sasl-oauth-client-id": ("sasl_oauth_client_id", _text),
    "sasl-oauth-client-secret": ("sasl_oauth_client_secret", _oauth_secret),
    "sasl-oauth-token-url": ("sasl_oauth_token_url", _text),
    "sasl-oauth-scopes": ("sasl_oauth_scopes", _scopes),
    "sasl-oauth-grant-type": ("sasl_oauth_grant_type", _text),
    "sasl-oauth-audience": ("sasl_oauth_audience", _text),
    "kafka-client-id": ("client_id", _client_id),
    "required-acks": ("required_acks", _required_acks),
    "compression": ("compression", _compression),
    "replication-factor": ("replication_factor", lambda k, v: _int(k, v, minimum=1, maximum=32767)),
    "auto-create-topic": ("auto_create_topic", _bool),
    "kafka-version": ("kafka_version", _kafka_version),
    "dial-timeout": ("dial_timeout", _duration),
    "read-timeout": ("read_timeout", _duration),
    "write-timeout": ("write_timeout", _duration),
}

#: The TiCDC keys :func:`kafka_options` reads (sink-URI query or ``[sink.kafka-config]``).
KAFKA_KEYS: frozenset[str] = frozenset(_KEYS)

_SECRET_KEYS = frozenset({"sasl-password", "key-password", "sasl-oauth-client-secret"})
_OAUTH_REQUIRED = ("sasl-oauth-client-id", "sasl-oauth-client-secret", "sasl-oauth-token-url")


def kafka_options(params: Mapping[str, Any], base: KafkaOptions = DEFAULT_KAFKA) -> KafkaOptions:
    """Apply TiCDC's Kafka keys found in ``params`` (other keys are left alone) on top of ``base``.

    The result is checked as TiCDC checks it: ``ca``, ``cert`` and ``key`` all or none, not with
    ``enable-tls=false``; ``sasl-user`` and ``sasl-password`` for PLAIN/SCRAM; the three ``sasl-oauth-*``
    keys together, and only with ``oauthbearer``.

    >>> kafka_options({"required-acks": "1", "compression": "ZSTD", "protocol": "avro"}).compression.value
    'zstd'
    """
    updates: dict[str, Any] = {}
    for key, raw in params.items():
        rule = _KEYS.get(key)
        if rule is None or raw is None:
            continue
        field, parser = rule
        updates[field] = parser(key, raw)
    options = base.model_copy(update=updates) if updates else base
    _check(options)
    return options


def _check(opts: KafkaOptions) -> None:
    files = {"ca": opts.ca, "cert": opts.cert, "key": opts.key}
    given = [k for k, v in files.items() if v is not None]
    if given and len(given) != 3:
        missing = ", ".join(k for k in files if k not in given)
        raise ConfigError(f"Invalid TLS settings: ca, cert and key files should all be supplied (missing: {missing}).",
                          option=missing.split(",")[0])
    if given and opts.enable_tls is False:
        raise ConfigError("Invalid TLS settings: credential files are supplied, but 'enable-tls' is set to false.",
                          option="enable-tls")
    if opts.key_password is not None and opts.key is None:
        raise ConfigError("Option 'key-password' needs 'key' (with 'ca' and 'cert').", option="key-password")
    mechanism = opts.sasl_mechanism
    if mechanism in (SaslMechanism.PLAIN, SaslMechanism.SCRAM_SHA_256, SaslMechanism.SCRAM_SHA_512):
        for key, value in (("sasl-user", opts.sasl_user), ("sasl-password", opts.sasl_password)):
            if not value:
                raise ConfigError(f"Option {key!r} is required with sasl-mechanism={mechanism.value.lower()}.",
                                  option=key)
    oauth = {"sasl-oauth-client-id": opts.sasl_oauth_client_id,
             "sasl-oauth-client-secret": opts.sasl_oauth_client_secret,
             "sasl-oauth-token-url": opts.sasl_oauth_token_url}
    if any(oauth.values()) or mechanism is SaslMechanism.OAUTHBEARER:
        absent = [k for k in _OAUTH_REQUIRED if not oauth[k]]
        if absent:
            raise ConfigError(f"OAuth2 settings need {', '.join(_OAUTH_REQUIRED)} together (missing: "
                              f"{', '.join(absent)}).", option=absent[0])
        if mechanism is not SaslMechanism.OAUTHBEARER:
            raise ConfigError("sasl-oauth-* settings need sasl-mechanism = 'OAUTHBEARER'.", option="sasl-mechanism")


# --------------------------------------------------------------------------------------------------
# Renderers


def _reveal(secret: SecretStr | None) -> str:
    return secret.get_secret_value() if secret is not None else ""


def _oauth_client_secret(opts: KafkaOptions) -> str:
    # TiCDC takes the client secret base64-encoded and sends the decoded text.
    return base64.b64decode(_reveal(opts.sasl_oauth_client_secret)).decode("utf-8")


def librdkafka_conf(opts: KafkaOptions, role: str = "producer") -> dict[str, Any]:
    """confluent-kafka settings (``role``: ``producer``, ``admin`` or ``consumer``), without ``bootstrap.servers``.

    >>> librdkafka_conf(KafkaOptions(required_acks=1))["acks"]
    '1'
    """
    conf: dict[str, Any] = {
        "security.protocol": opts.security_protocol.lower(),
        "socket.connection.setup.timeout.ms": int(opts.dial_timeout * 1000),
        "socket.timeout.ms": int(max(opts.read_timeout, opts.write_timeout) * 1000),
    }
    if opts.client_id:
        conf["client.id"] = opts.client_id
    if opts.tls:
        if opts.ca:
            conf["ssl.ca.location"] = opts.ca
            conf["ssl.certificate.location"] = opts.cert
            conf["ssl.key.location"] = opts.key
        if opts.key_password is not None:
            conf["ssl.key.password"] = _reveal(opts.key_password)
        if opts.insecure_skip_verify:
            conf["enable.ssl.certificate.verification"] = False
            conf["ssl.endpoint.identification.algorithm"] = "none"
    if opts.sasl_mechanism is not None:
        conf["sasl.mechanism"] = opts.sasl_mechanism.value
        if opts.sasl_mechanism is SaslMechanism.OAUTHBEARER:
            conf.update({
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": opts.sasl_oauth_client_id,
                "sasl.oauthbearer.client.secret": _oauth_client_secret(opts),
                "sasl.oauthbearer.token.endpoint.url": opts.sasl_oauth_token_url,
            })
            if opts.sasl_oauth_scopes:
                conf["sasl.oauthbearer.scope"] = " ".join(opts.sasl_oauth_scopes)
            if opts.sasl_oauth_audience:
                conf["sasl.oauthbearer.extensions"] = f"audience={opts.sasl_oauth_audience}"
        else:
            conf["sasl.username"] = opts.sasl_user
            conf["sasl.password"] = _reveal(opts.sasl_password)
    if role == "producer":
        conf["acks"] = "all" if opts.required_acks == -1 else str(opts.required_acks)
        conf["enable.idempotence"] = opts.is_idempotent
        conf["compression.type"] = opts.compression.value
    return conf


def _jaas_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_JAAS_MODULES = {
    SaslMechanism.PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    SaslMechanism.SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SaslMechanism.SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SaslMechanism.OAUTHBEARER: "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


def _pkcs8(key_pem: bytes, password: SecretStr | None) -> str:
    """The private key as unencrypted PKCS#8 PEM, the form every Java client reads (some JDKs cannot open
    PBES2-encrypted keys); it travels only inline in the client's settings, masked as a password there."""
    from cryptography.hazmat.primitives import serialization

    secret = _reveal(password).encode() if password is not None else None
    try:
        key = serialization.load_pem_private_key(key_pem, password=secret)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"Cannot read the TLS private key of option 'key' ({type(exc).__name__}): wrong "
                          "'key-password', or not a PEM private key.", option="key") from None
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def spark_kafka_options(opts: KafkaOptions, role: str = "producer") -> dict[str, str]:
    """Options for Spark's Kafka source (``role="consumer"``) or sink, ``kafka.``-prefixed.

    PEM files are read here (on the driver) and passed inline, so executors need no copies of them.

    >>> spark_kafka_options(KafkaOptions(sasl_mechanism="PLAIN", sasl_user="u", sasl_password="p"))["kafka.sasl.mechanism"]
    'PLAIN'
    """
    conf: dict[str, str] = {
        "security.protocol": opts.security_protocol,
        "socket.connection.setup.timeout.ms": str(int(opts.dial_timeout * 1000)),
        "request.timeout.ms": str(int(max(opts.read_timeout, opts.write_timeout) * 1000)),
    }
    if opts.client_id:
        conf["client.id"] = opts.client_id
    if opts.tls:
        if opts.ca:
            conf["ssl.truststore.type"] = "PEM"
            conf["ssl.truststore.certificates"] = Path(opts.ca).read_text()
            conf["ssl.keystore.type"] = "PEM"
            conf["ssl.keystore.certificate.chain"] = Path(opts.cert).read_text()  # type: ignore[arg-type]
            conf["ssl.keystore.key"] = _pkcs8(Path(opts.key).read_bytes(), opts.key_password)  # type: ignore[arg-type]
        if opts.insecure_skip_verify:
            # The Java client can only skip the host name check; the chain is still verified.
            conf["ssl.endpoint.identification.algorithm"] = ""
    if opts.sasl_mechanism is not None:
        conf["sasl.mechanism"] = opts.sasl_mechanism.value
        module = _JAAS_MODULES[opts.sasl_mechanism]
        if opts.sasl_mechanism is SaslMechanism.OAUTHBEARER:
            args = {"clientId": opts.sasl_oauth_client_id or "", "clientSecret": _oauth_client_secret(opts)}
            if opts.sasl_oauth_scopes:
                args["scope"] = " ".join(opts.sasl_oauth_scopes)
            conf["sasl.login.callback.handler.class"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler")
            conf["sasl.oauthbearer.token.endpoint.url"] = opts.sasl_oauth_token_url or ""
        else:
            args = {"username": opts.sasl_user or "", "password": _reveal(opts.sasl_password)}
        conf["sasl.jaas.config"] = f"{module} required " + " ".join(
            f"{k}={_jaas_quote(v)}" for k, v in args.items()) + ";"
    if role == "producer":
        conf["acks"] = "all" if opts.required_acks == -1 else str(opts.required_acks)
        conf["enable.idempotence"] = "true" if opts.is_idempotent else "false"
        conf["compression.type"] = opts.compression.value
    return {f"kafka.{k}": v for k, v in conf.items()}


def topic_settings(opts: KafkaOptions) -> dict[str, Any]:
    """How missing topics are created: ``replication_factor`` (-1: the broker's default) and ``create``."""
    return {"replication_factor": opts.replication_factor or -1, "create": opts.auto_create_topic}
