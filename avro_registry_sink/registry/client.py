"""A sync client for Confluent-compatible schema registries, over :class:`httpx.Client`.

>>> from avro_registry_sink.settings.config import RegistryConfig
>>> with RegistryClient(RegistryConfig(urls=(url,))) as client:  # url, e.g. "http://localhost:8081"
...     client.register("orders-value", '{"type":"string"}')
1

(The method examples below run against a registry holding ``orders-key`` v1 ``"long"`` (id 2) and
``orders-value`` v1 ``"string"`` (id 1), v2 ``"bytes"`` (id 3).)

Behaviour follows ``shared/reference/schema-registry.md`` §7 (confluent-kafka-python):

* **Headers.** Every request sends ``Accept`` (the three registry JSON media types) and identifies the
  tool in ``User-Agent`` and ``Confluent-Client-Version``; requests with a body send
  ``Content-Type: application/vnd.schemaregistry.v1+json``. Subjects are percent-encoded in paths
  (``a/b`` travels as ``a%2Fb``); boolean query parameters are sent only when true, as ``true``.
* **Auth.** Basic auth from ``username``/``password`` (or ``user:pass@`` in a URL), or a bearer token.
  Credentials never appear in logs, exception messages or ``repr``.
* **Retries.** Transport errors and HTTP 408, 429, 500, 502, 503, 504 are retried up to
  ``max_retries`` times per URL with full-jitter backoff
  ``uniform(0, min(retry_backoff * 2**attempt, retry_backoff_max))``, then the next URL is tried.
  Any other error status is raised at once.
* **Errors.** One place (:meth:`RegistryClient._translate`) turns answers into the
  :mod:`avro_registry_sink.errors` tree via :func:`~avro_registry_sink.errors.registry_error_for`.
  Messages name the operation, subject, schema id or version, the HTTP status, the ``error_code`` and
  the registry's own message; the same facts are attributes (``status_code``, ``error_code``,
  ``subject``, ``schema_id``, ``version``, ``operation``, ``url``, ``urls``, ``registry_message``, and
  ``reasons`` on :class:`~avro_registry_sink.errors.IncompatibleSchema`).
* **Cache.** ``register`` answers are cached by (subject, SHA-256 of the exact schema text and data contract,
  normalize) and ``get_schema`` answers by id, so a steady state makes no HTTP call; see :meth:`cache_info`.
* **Data contracts.** ``register``/``lookup`` take ``metadata`` and ``rule_set`` (Confluent's JSON objects);
  versions and schemas carry them back; :meth:`get_latest_with_metadata`, :meth:`get_full_config` and
  :meth:`update_config` (``compatibilityGroup``, default/override metadata and rule sets);
  :meth:`data_contracts_unsupported` tells whether the registry keeps them at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from importlib import metadata
from typing import Any, Literal, NoReturn, TypeVar
from urllib.parse import quote, unquote, urlsplit

import httpx
from pydantic import TypeAdapter

from avro_registry_sink.errors import (
    ConfigError,
    IncompatibleSchema,
    OperationNotPermitted,
    RegistryError,
    RegistryUnavailable,
    SubjectConfigNotFound,
    SubjectModeNotFound,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
    registry_error_for,
)
from avro_registry_sink.registry.models import (
    CompatibilityLevel,
    CompatibilityResult,
    ErrorBody,
    Mode,
    ModeBody,
    RegisteredSchema,
    RegisterResponse,
    Schema,
    ServerConfig,
)
from avro_registry_sink.settings.config import RegistryConfig

__all__ = ["ACCEPT", "MEDIA_TYPE", "RETRYABLE_STATUS", "CacheInfo", "RegistryClient"]

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
# The retry policy of confluent-kafka-python (reference §7). This is an HTTP-status policy, not error
# translation: which exception an answer becomes is decided by ``registry_error_for`` alone.
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})

Version = int | Literal["latest"]
T = TypeVar("T")
E = TypeVar("E", bound=Enum)

# A short pointer to the way out, keyed by exception class (never by numeric code).
_HINTS: dict[type[RegistryError], str] = {
    IncompatibleSchema: "Check the subject's compatibility level (get_config) or try the schema with "
    "test_compatibility_all() first.",
    SubjectConfigNotFound: "Pass default_to_global=True to read the level in effect.",
    SubjectModeNotFound: "Pass default_to_global=True to read the mode in effect.",
    SubjectSoftDeleted: "Delete it again with permanent=True to remove it for good.",
    VersionSoftDeleted: "Delete it again with permanent=True to remove it for good.",
    SubjectNotSoftDeleted: "Soft-delete it first (permanent=False), then delete it with permanent=True.",
    VersionNotSoftDeleted: "Soft-delete it first (permanent=False), then delete it with permanent=True.",
    OperationNotPermitted: "Check the registry's mode (get_mode).",
}
_EXCERPT = 200
_MIN_REDACTED = 4  # shorter secrets are not scrubbed from text: that would mangle every message


def _client_version() -> str:
    try:
        return metadata.version("avro-registry-sink")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


USER_AGENT = f"avro-registry-sink/{_client_version()}"


@dataclass(frozen=True)
class CacheInfo:
    """Counters of a :class:`RegistryClient`: cache ``hits``/``misses`` (``register`` and
    ``get_schema``), ``http_calls`` (every request sent, retries included) and cached entries."""

    hits: int
    misses: int
    http_calls: int
    registered: int
    schemas: int


@dataclass(frozen=True)
class _Call:
    """What a request is for, to name it in error messages and attributes."""

    operation: str
    doing: str  # "registering a schema under subject 'x'"
    subject: str | None = None
    schema_id: int | None = None
    version: int | str | None = None


class _Failed(Exception):
    """Internal: a request ended without a usable answer. Only ``_translate`` sees it."""

    def __init__(
        self,
        *,
        urls: tuple[str, ...],
        attempts: int,
        response: httpx.Response | None = None,
        error: httpx.TransportError | None = None,
        unexpected: str | None = None,
        exhausted: bool = False,
    ) -> None:
        super().__init__()
        self.urls = urls
        self.attempts = attempts
        self.response = response
        self.error = error
        self.unexpected = unexpected  # a 2xx answer of the wrong shape: why it was refused
        self.exhausted = exhausted  # retryable outcomes on every URL until retries ran out


class _BearerAuth(httpx.Auth):
    """``Authorization: Bearer <token>``, added per request so it never sits in default headers."""

    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(token='**********')"


class RegistryClient:
    """A Confluent Schema Registry client: registration, lookups, deletes, compatibility, config, mode.

    ``transport`` replaces httpx's network transport (tests, in-process apps); ``sleep`` is called
    with each backoff delay (tests pass a recorder so they run instantly).

    >>> with RegistryClient(RegistryConfig(urls=(url,))) as other:  # url: the registry's base URL
    ...     other.get_subjects()
    ['orders-key', 'orders-value']
    """

    def __init__(
        self,
        config: RegistryConfig,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not config.urls:
            raise ConfigError(
                "RegistryClient needs at least one schema registry URL; to run against the embedded "
                "registry, open the client with avro_registry_sink.registry.connect.connect(config).",
                option="schema-registry",
            )
        self._config = config
        self._sleep = sleep
        urls: list[str] = []
        url_user: str | None = None
        url_password: str | None = None
        for raw in config.urls:
            url, user, password = _split_userinfo(raw)
            urls.append(url)
            if user is not None and url_user is None:
                url_user, url_password = user, password
        self._urls = tuple(urls)

        username = config.username if config.username is not None else url_user
        if config.username is not None:
            password = config.password.get_secret_value() if config.password is not None else ""
        else:
            password = url_password or ""
        token = config.bearer_token.get_secret_value() if config.bearer_token is not None else None
        if username is not None and token is not None:
            raise ConfigError(
                "The schema registry settings give both basic-auth credentials and a bearer token; "
                "set only one of username/password or bearer_token.",
                option="registry",
            )
        auth: httpx.Auth | None = None
        self._auth_kind = "none"
        if username is not None:
            auth, self._auth_kind = httpx.BasicAuth(username, password), "basic"
        elif token is not None:
            auth, self._auth_kind = _BearerAuth(token), "bearer"
        self._secrets = tuple(s for s in (password, token, url_password) if s and len(s) >= _MIN_REDACTED)

        self._http = httpx.Client(
            auth=auth,
            headers={"Accept": ACCEPT, "User-Agent": USER_AGENT, "Confluent-Client-Version": USER_AGENT},
            timeout=httpx.Timeout(config.timeout),
            verify=_tls_verify(config),
            transport=transport,
        )
        self._lock = threading.Lock()
        self._registered: dict[tuple[str, str, bool], RegisterResponse] = {}
        self._schemas: dict[int, Schema] = {}
        self._hits = 0
        self._misses = 0
        self._http_calls = 0
        #: Called after each request with its operation, seconds and error (``None``: answered), for the job's metrics.
        self.observer: Callable[[str, float, RegistryError | None], None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool.

        >>> client.close()
        """
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RegistryClient urls={self._urls!r} auth={self._auth_kind}>"

    @property
    def urls(self) -> tuple[str, ...]:
        """The registry base URLs, in fail-over order, without credentials."""
        return self._urls

    # -- cache ---------------------------------------------------------------------------------

    def cache_info(self) -> CacheInfo:
        """Counters for tests and benchmarks.

        >>> client.cache_info().http_calls
        0
        """
        with self._lock:
            return CacheInfo(self._hits, self._misses, self._http_calls, len(self._registered), len(self._schemas))

    def clear_cache(self) -> None:
        """Forget cached registrations and schemas (counters are kept).

        >>> client.clear_cache()
        """
        with self._lock:
            self._registered.clear()
            self._schemas.clear()

    def _forget_subject(self, subject: str) -> None:
        # After a delete, re-registering must reach the registry to make the version live again.
        with self._lock:
            for key in [k for k in self._registered if k[0] == subject]:
                del self._registered[key]

    # -- schemas -------------------------------------------------------------------------------

    def ping(self) -> None:
        """Check that the registry answers ``GET /`` with a JSON object; raise otherwise.

        >>> client.ping()
        """
        self._request(_Call("ping", "checking the registry is up"), "GET", "/", _parse_object)

    def register(self, subject: str, schema: str, *, normalize: bool | None = None,
                 metadata: Mapping[str, Any] | None = None, rule_set: Mapping[str, Any] | None = None) -> int:
        """Register ``schema`` (Avro JSON text) under ``subject`` and return its schema id.

        Idempotent on the registry; repeated calls with the same text are answered from the cache.
        ``normalize`` defaults to the config's ``normalize``. ``metadata``/``rule_set``: the version's data
        contract (Confluent's ``metadata`` and ``ruleSet`` objects); without them a Confluent registry gives the
        new version the latest version's.

        >>> client.register("orders-value", '{"type":"string"}')
        1
        """
        return self.register_full(subject, schema, normalize=normalize, metadata=metadata, rule_set=rule_set).id

    def register_full(self, subject: str, schema: str, *, normalize: bool | None = None,
                      metadata: Mapping[str, Any] | None = None,
                      rule_set: Mapping[str, Any] | None = None) -> RegisterResponse:
        """:meth:`register`, answering what the registry answered (``id``; ``version``, ``metadata``, ``ruleSet``
        from registries that say them). Cached like :meth:`register`.

        >>> client.register_full("orders-value", '{"type":"string"}').id
        1
        """
        norm = self._config.normalize if normalize is None else normalize
        contract = _contract_body(metadata, rule_set)
        key = (subject, _sha256(schema + (json.dumps(contract, sort_keys=True) if contract else "")), norm)
        with self._lock:
            cached = self._registered.get(key)
            if cached is not None:
                self._hits += 1
                return cached
            self._misses += 1
        answer = self._post_schema(
            _Call("register", f"registering a schema under subject {subject!r}", subject=subject),
            f"/subjects/{_q(subject)}/versions", _adapter(RegisterResponse), schema, normalize=norm, extra=contract,
        )
        with self._lock:
            self._registered[key] = answer
        return answer

    def lookup(
        self, subject: str, schema: str, *, deleted: bool = False, normalize: bool | None = None,
        metadata: Mapping[str, Any] | None = None, rule_set: Mapping[str, Any] | None = None,
    ) -> RegisteredSchema:
        """Find the version of ``subject`` holding ``schema`` (raises ``SchemaNotFound``/``SubjectNotFound``).

        >>> client.lookup("orders-value", '{"type":"string"}').version
        1
        """
        return self._post_schema(
            _Call("lookup", f"looking up a schema under subject {subject!r}", subject=subject),
            f"/subjects/{_q(subject)}", _adapter(RegisteredSchema), schema, normalize=normalize, deleted=deleted,
            extra=_contract_body(metadata, rule_set),
        )

    def get_latest_with_metadata(self, subject: str, properties: Mapping[str, str], *,
                                 deleted: bool = False) -> RegisteredSchema:
        """The newest version of ``subject`` whose metadata properties hold every pair of ``properties``
        (``GET /subjects/{s}/metadata?key=..&value=..``, what a consumer pinned with
        ``use.latest.with.metadata`` reads). Raises ``SubjectNotFound`` or ``SchemaNotFound`` (no such version).

        >>> client.get_latest_with_metadata("orders-value", {"major_version": "1"})  # doctest: +SKIP
        """
        params: list[tuple[str, str]] = []
        for name, value in properties.items():
            params += [("key", name), ("value", value)]
        if deleted:
            params.append(("deleted", "true"))
        wanted = ", ".join(f"{k}={v}" for k, v in properties.items())
        return self._request(
            _Call("get_latest_with_metadata", f"looking up the latest version of subject {subject!r} with "
                  f"metadata {wanted}", subject=subject),
            "GET", f"/subjects/{_q(subject)}/metadata", _adapter(RegisteredSchema), params=params,
        )

    def get_schema(self, schema_id: int) -> Schema:
        """The schema with a given id (cached: ids never change their schema).

        >>> client.get_schema(1).schema
        '"string"'
        """
        schema_id = _whole(schema_id, "schema_id")
        with self._lock:
            cached = self._schemas.get(schema_id)
            if cached is not None:
                self._hits += 1
                return cached
            self._misses += 1
        schema = self._request(
            _Call("get_schema", f"fetching schema id {schema_id}", schema_id=schema_id),
            "GET",
            f"/schemas/ids/{schema_id}",
            _adapter(Schema),
        )
        with self._lock:
            self._schemas[schema_id] = schema
        return schema

    # -- subjects and versions -----------------------------------------------------------------

    def get_subjects(self, *, deleted: bool = False, prefix: str | None = None) -> list[str]:
        """Subject names with a live version (``deleted=True``: soft-deleted ones too).

        >>> client.get_subjects(prefix="orders")
        ['orders-key', 'orders-value']
        """
        params = _flags(deleted=deleted)
        if prefix is not None:
            params["subjectPrefix"] = prefix
        return self._request(_Call("get_subjects", "listing subjects"), "GET", "/subjects", _adapter(list[str]), params=params)

    def get_versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        """Version numbers of ``subject``, ascending.

        >>> client.get_versions("orders-value")
        [1, 2]
        """
        return self._request(
            _Call("get_versions", f"listing the versions of subject {subject!r}", subject=subject),
            "GET",
            f"/subjects/{_q(subject)}/versions",
            _adapter(list[int]),
            params=_flags(deleted=deleted),
        )

    def get_version(self, subject: str, version: Version, *, deleted: bool = False) -> RegisteredSchema:
        """One version of ``subject`` (a number, or ``"latest"``).

        >>> client.get_version("orders-value", 2).id
        3
        """
        return self._request(
            _Call("get_version", f"fetching version {version} of subject {subject!r}", subject=subject, version=version),
            "GET",
            f"/subjects/{_q(subject)}/versions/{_q(str(version))}",
            _adapter(RegisteredSchema),
            params=_flags(deleted=deleted),
        )

    def get_latest(self, subject: str) -> RegisteredSchema:
        """The highest live version of ``subject``.

        >>> client.get_latest("orders-value").version
        2
        """
        return self.get_version(subject, "latest")

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft-delete ``subject`` (or, after a soft delete, ``permanent=True``); returns the versions.

        >>> client.delete_subject("orders-value")
        [1, 2]
        """
        how = "permanently deleting" if permanent else "deleting"
        try:
            return self._request(
                _Call("delete_subject", f"{how} subject {subject!r}", subject=subject),
                "DELETE",
                f"/subjects/{_q(subject)}",
                _adapter(list[int]),
                params=_flags(permanent=permanent),
            )
        finally:
            self._forget_subject(subject)

    def delete_version(self, subject: str, version: Version, *, permanent: bool = False) -> int:
        """Soft-delete one version (or, after a soft delete, ``permanent=True``); returns its number.

        >>> client.delete_version("orders-value", 1)
        1
        """
        how = "permanently deleting" if permanent else "deleting"
        try:
            return self._request(
                _Call("delete_version", f"{how} version {version} of subject {subject!r}", subject=subject, version=version),
                "DELETE",
                f"/subjects/{_q(subject)}/versions/{_q(str(version))}",
                _adapter(int),
                params=_flags(permanent=permanent),
            )
        finally:
            self._forget_subject(subject)

    # -- compatibility -------------------------------------------------------------------------

    def test_compatibility(
        self,
        subject: str,
        schema: str,
        version: Version = "latest",
        *,
        verbose: bool = True,
        normalize: bool | None = None,
    ) -> CompatibilityResult:
        """Check ``schema`` against one version of ``subject`` (an unknown subject is compatible).

        >>> client.test_compatibility("orders-value", '"string"').is_compatible
        True
        """
        return self._post_schema(
            _Call(
                "test_compatibility",
                f"testing a schema against version {version} of subject {subject!r}",
                subject=subject,
                version=version,
            ),
            f"/compatibility/subjects/{_q(subject)}/versions/{_q(str(version))}",
            _adapter(CompatibilityResult), schema, normalize=normalize, verbose=verbose,
        )

    def test_compatibility_all(
        self, subject: str, schema: str, *, verbose: bool = True, normalize: bool | None = None
    ) -> CompatibilityResult:
        """Check ``schema`` exactly as registration would (every version the level asks for).

        >>> client.test_compatibility_all("orders-value", '"string"').messages
        []
        """
        return self._post_schema(
            _Call("test_compatibility_all", f"testing a schema against subject {subject!r}", subject=subject),
            f"/compatibility/subjects/{_q(subject)}/versions", _adapter(CompatibilityResult), schema,
            normalize=normalize, verbose=verbose,
        )

    # -- config and mode -----------------------------------------------------------------------

    def get_config(self, subject: str | None = None, *, default_to_global: bool = False) -> CompatibilityLevel:
        """The compatibility level of ``subject`` (or the global one). A subject without its own level
        raises ``SubjectConfigNotFound`` unless ``default_to_global=True``.

        >>> client.get_config("orders-value", default_to_global=True)
        <CompatibilityLevel.BACKWARD: 'BACKWARD'>
        """
        return self._request(
            _Call("get_config", f"reading the compatibility level of {_scope(subject)}", subject=subject),
            "GET",
            _config_path("/config", subject),
            _parse_level,
            params=_flags(defaultToGlobal=default_to_global) if subject is not None else {},
        )

    def set_config(self, level: CompatibilityLevel | str, subject: str | None = None) -> CompatibilityLevel:
        """Set the compatibility level of ``subject`` (or the global one); returns the level set.

        >>> client.set_config("FULL", "orders-value")
        <CompatibilityLevel.FULL: 'FULL'>
        """
        level = _coerce(CompatibilityLevel, level, "level")
        return self._request(
            _Call("set_config", f"setting the compatibility level of {_scope(subject)} to {level.value}", subject=subject),
            "PUT",
            _config_path("/config", subject),
            _parse_level,
            body={"compatibility": level.value},
        )

    def delete_config(self, subject: str) -> CompatibilityLevel | None:
        """Remove ``subject``'s own level (it falls back to the global one); returns the removed level.

        >>> client.set_config("FULL", "orders-value")
        <CompatibilityLevel.FULL: 'FULL'>
        >>> client.delete_config("orders-value")
        <CompatibilityLevel.FULL: 'FULL'>
        """
        return self._request(
            _Call("delete_config", f"removing the compatibility level of {_scope(subject)}", subject=subject),
            "DELETE",
            _config_path("/config", subject),
            lambda content: _adapter(ServerConfig)(content).level,
        )

    def get_full_config(self, subject: str | None = None, *, default_to_global: bool = False) -> ServerConfig:
        """The whole config of ``subject`` (or the global one): level, ``normalize`` and the data-contract fields.

        >>> client.get_full_config("orders-value", default_to_global=True).level
        <CompatibilityLevel.BACKWARD: 'BACKWARD'>
        """
        return self._request(
            _Call("get_config", f"reading the config of {_scope(subject)}", subject=subject),
            "GET",
            _config_path("/config", subject),
            _adapter(ServerConfig),
            params=_flags(defaultToGlobal=default_to_global) if subject is not None else {},
        )

    def update_config(self, subject: str | None, fields: Mapping[str, Any]) -> ServerConfig:
        """Patch the config of ``subject`` (or the global one) with ``fields``, wire names as keys
        (``compatibility``, ``compatibilityGroup``, ``defaultMetadata``, ``overrideRuleSet`` ...): a field
        not given is kept, one given as ``None`` cleared. Returns the registry's echo.

        >>> client.update_config("orders-value", {"compatibilityGroup": "major_version"}).compatibility_group
        'major_version'
        """
        names = ", ".join(sorted(fields))
        return self._request(
            _Call("set_config", f"setting {names} of {_scope(subject)}", subject=subject),
            "PUT",
            _config_path("/config", subject),
            _adapter(ServerConfig),
            body=dict(fields),
        )

    def data_contracts_unsupported(self) -> str | None:
        """``None`` when the registry keeps data contracts (metadata, rule sets, compatibility groups) as
        Confluent's REST API documents them; else a sentence saying what it answered instead.

        Probes a subject of its own (``avro-registry-sink-contract-probe-<random>``): without versions,
        ``GET /subjects/{probe}/metadata`` must be a 404 "subject not found" (40401), and a
        ``compatibilityGroup`` and ``defaultRuleSet`` written to the probe's config must be read back (Confluent
        Community's registry accepts rule sets and drops them); then a probe version registered with metadata
        and a rule set must be read back with both (``GET /subjects/{probe}/versions/{v}``, and by its metadata
        as a pinned consumer finds it): a registry that keeps config rule sets but drops those of versions
        would otherwise pass, and every new major would lose its migration rules. The probe's config and
        subject are removed afterwards (soft, then permanent delete). ``RegistryUnavailable`` is raised, not
        reported.
        """
        import uuid

        probe = f"avro-registry-sink-contract-probe-{uuid.uuid4().hex[:12]}"
        rule = {"name": "avroRegistrySinkProbe", "kind": "TRANSFORM", "mode": "UPGRADE", "type": "JSONATA",
                "expr": "$"}
        try:
            self.get_latest_with_metadata(probe, {"major_version": "1"})
            return ("it answered GET /subjects/{subject}/metadata for a subject without versions with a schema "
                    "instead of 404/40401, so it does not look up versions by their metadata")
        except SubjectNotFound:
            pass
        except RegistryUnavailable:
            raise
        except RegistryError as exc:
            status = exc.context.get("status_code")
            if isinstance(status, int) and 200 <= status < 300:
                return (f"it answered GET /subjects/{{subject}}/metadata (what a consumer pinned with "
                        f"use.latest.with.metadata reads), for a subject without versions, with HTTP {status} and no "
                        "version (Confluent: 404/40401), so it looks no versions up by their metadata")
            return (f"it has no GET /subjects/{{subject}}/metadata (what a consumer pinned with "
                    f"use.latest.with.metadata reads): HTTP {status}, error_code "
                    f"{exc.context.get('error_code')}: {exc.context.get('registry_message') or exc.message}")
        try:
            self.update_config(probe, {"compatibilityGroup": "major_version",
                                       "defaultRuleSet": {"migrationRules": [rule]}})
            try:
                kept = self.get_full_config(probe)
            finally:
                with contextlib.suppress(RegistryError):
                    self.delete_config(probe)
        except RegistryUnavailable:
            raise
        except RegistryError as exc:
            return (f"it refused a config with compatibilityGroup and defaultRuleSet: HTTP "
                    f"{exc.context.get('status_code')}, error_code {exc.context.get('error_code')}: "
                    f"{exc.context.get('registry_message') or exc.message}")
        rules = (kept.default_rule_set or {}).get("migrationRules") or []
        if kept.compatibility_group != "major_version":
            return "it accepted a compatibilityGroup in a subject's config but did not keep it"
        if not any(isinstance(r, dict) and r.get("name") == rule["name"] for r in rules):
            return ("it accepted a rule set but dropped it (Confluent's Community edition does: rule sets need "
                    "Confluent Enterprise or Confluent Cloud)")
        return self._version_contract_unsupported(probe, rule)

    def _version_contract_unsupported(self, probe: str, rule: Mapping[str, Any]) -> str | None:
        """The version half of :meth:`data_contracts_unsupported`: a probe version registered with metadata and a
        rule set, read back by its number and by its metadata; the probe subject is deleted afterwards."""
        schema = '{"type":"record","name":"AvroRegistrySinkProbe","fields":[]}'
        properties = {"major_version": "1"}
        try:
            try:
                answer = self.register_full(probe, schema, metadata={"properties": properties},
                                            rule_set={"migrationRules": [dict(rule)]})
                kept = self.get_version(probe, answer.version if answer.version is not None else "latest")
                pinned = self.get_latest_with_metadata(probe, properties)
            finally:
                for permanent in (False, True):
                    with contextlib.suppress(RegistryError):
                        self.delete_subject(probe, permanent=permanent)
        except RegistryUnavailable:
            raise
        except RegistryError as exc:
            return (f"it refused or lost a schema version registered with metadata and a rule set (subject "
                    f"{probe!r}): HTTP {exc.context.get('status_code')}, error_code {exc.context.get('error_code')}: "
                    f"{exc.context.get('registry_message') or exc.message}")
        where = f"version {kept.version} of subject {probe!r} (schema id {kept.id})"
        if kept.properties.get("major_version") != "1":
            return (f"it registered a schema version with metadata properties {properties} but {where} came back "
                    f"with {kept.properties or 'none'}, so consumers pinned to a major version find nothing")
        names = [r.get("name") for r in (kept.rule_set or {}).get("migrationRules") or [] if isinstance(r, dict)]
        if rule["name"] not in names:
            return (f"it kept the rule set of a subject's config but dropped the rule set of a schema version: "
                    f"{where} was registered with migration rule {rule['name']!r} and came back with "
                    f"{'rules ' + ', '.join(map(str, names)) if names else 'no rule set'}, so every new major "
                    "version would lose its migration rules")
        if pinned.id != kept.id:
            return (f"GET /subjects/{{subject}}/metadata?key=major_version&value=1 (what a consumer pinned with "
                    f"use.latest.with.metadata reads) answered schema id {pinned.id}, not {where}")
        return None

    def get_mode(self, subject: str | None = None, *, default_to_global: bool = False) -> Mode:
        """The mode of ``subject`` (or the global one).

        >>> client.get_mode()
        <Mode.READWRITE: 'READWRITE'>
        """
        return self._request(
            _Call("get_mode", f"reading the mode of {_scope(subject)}", subject=subject),
            "GET",
            _config_path("/mode", subject),
            lambda content: _adapter(ModeBody)(content).mode,
            params=_flags(defaultToGlobal=default_to_global) if subject is not None else {},
        )

    def set_mode(self, mode: Mode | str, subject: str | None = None, *, force: bool = False) -> Mode:
        """Set the mode of ``subject`` (or the global one); ``force`` allows IMPORT with live subjects.

        >>> client.set_mode("READONLY", "orders-value")
        <Mode.READONLY: 'READONLY'>
        """
        mode = _coerce(Mode, mode, "mode")
        return self._request(
            _Call("set_mode", f"setting the mode of {_scope(subject)} to {mode.value}", subject=subject),
            "PUT",
            _config_path("/mode", subject),
            lambda content: _adapter(ModeBody)(content).mode,
            params=_flags(force=force),
            body={"mode": mode.value},
        )

    # -- transport -----------------------------------------------------------------------------

    def _request(
        self,
        call: _Call,
        method: str,
        path: str,
        parse: Callable[[bytes], T],
        *,
        params: Mapping[str, str] | list[tuple[str, str]] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> T:
        started, error = time.perf_counter(), None
        try:
            with self._translate(call):
                response, urls, attempts = self._send(method, path, params or {}, body)
                try:
                    return parse(response.content)
                except ValueError as exc:  # invalid JSON, or JSON of the wrong shape
                    raise _Failed(urls=urls, attempts=attempts, response=response,
                                  unexpected=_first_line(exc)) from None
        except RegistryError as exc:
            error = exc
            raise
        finally:
            if self.observer is not None:  # the job's metrics: every request, by operation, with its error
                self.observer(call.operation, time.perf_counter() - started, error)

    def _post_schema(self, call: _Call, path: str, parse: Callable[[bytes], T], schema: str, *,
                     normalize: bool | None, extra: Mapping[str, Any] | None = None, **flags: bool) -> T:
        """POST ``schema`` (registration, lookup, compatibility): ``normalize`` defaults to the config's;
        ``extra``: more body fields (``metadata``, ``ruleSet``)."""
        normalize = self._config.normalize if normalize is None else normalize
        return self._request(call, "POST", path, parse, params=_flags(normalize=normalize, **flags),
                             body={"schema": schema, **(extra or {})})

    def _send(
        self, method: str, path: str, params: Any,
        body: Mapping[str, Any] | None
    ) -> tuple[httpx.Response, tuple[str, ...], int]:
        """Send with retries per URL, then fail over; returns the 2xx response (or raises ``_Failed``)."""
        headers = {}
        content = None
        if body is not None:
            headers = {"Content-Type": MEDIA_TYPE, "Confluent-Accept-Unknown-Properties": "true"}
            content = json.dumps(body, separators=(",", ":")).encode()
        tried: list[str] = []
        attempts = 0
        last_response: httpx.Response | None = None
        last_error: httpx.TransportError | None = None
        for base in self._urls:
            tried.append(base)
            for attempt in range(self._config.max_retries + 1):
                if attempt:
                    self._sleep(self._backoff(attempt - 1))
                with self._lock:
                    self._http_calls += 1
                attempts += 1
                try:
                    response = self._http.request(method, base + path, params=params, content=content, headers=headers)
                except httpx.TransportError as exc:
                    log.info("Schema registry %s: %s %s failed (%s), attempt %d", base, method, path, type(exc).__name__, attempt + 1)
                    last_response, last_error = None, exc
                    continue
                if response.is_success:
                    return response, tuple(tried), attempts
                if response.status_code not in RETRYABLE_STATUS:
                    raise _Failed(urls=tuple(tried), attempts=attempts, response=response)
                log.info("Schema registry %s: %s %s answered HTTP %d, attempt %d", base, method, path, response.status_code, attempt + 1)
                last_response, last_error = response, None
        raise _Failed(urls=tuple(tried), attempts=attempts, response=last_response, error=last_error, exhausted=True)

    def _backoff(self, attempt: int) -> float:
        """Full jitter: ``uniform(0, min(retry_backoff * 2**attempt, retry_backoff_max))``."""
        cap = min(self._config.retry_backoff * 2**attempt, self._config.retry_backoff_max)
        return random.uniform(0, cap)

    @contextlib.contextmanager
    def _translate(self, call: _Call) -> Iterator[None]:
        """The one place where failed requests become :class:`RegistryError` subclasses."""
        try:
            yield
        except _Failed as failure:
            self._raise_registry_error(call, failure)

    def _raise_registry_error(self, call: _Call, failure: _Failed) -> NoReturn:
        context: dict[str, Any] = {
            "subject": call.subject,
            "schema_id": call.schema_id,
            "version": call.version,
            "operation": call.operation,
            "urls": failure.urls,
            "url": failure.urls[-1],
            "attempts": failure.attempts,
        }
        tried = f"tried {', '.join(failure.urls)} ({failure.attempts} attempt{'s' if failure.attempts != 1 else ''})"
        response = failure.response
        if response is None:  # every attempt on every URL failed in transport
            error = failure.error
            message = (
                f"Schema registry unreachable while {call.doing}: {tried}; "
                f"last error: {type(error).__name__}: {_first_line(error) or 'no detail'}."
            )
            raise RegistryUnavailable(self._redact(message), status_code=None, error_code=None, **context) from error

        status = response.status_code
        if failure.unexpected is not None:
            message = (
                f"Schema registry at {context['url']} gave an unexpected answer while {call.doing} "
                f"(HTTP {status}): {failure.unexpected}; body: {_excerpt(response)}."
            )
            raise RegistryError(self._redact(message), status_code=status, error_code=None, **context) from None

        body = _error_body(response)
        cls = registry_error_for(status, body.error_code)
        code = f"error_code {body.error_code}" if body.error_code is not None else "no error_code"
        said = _sentence(body.message)
        if failure.exhausted:
            message = f"Schema registry unavailable while {call.doing}: {tried}; last answer HTTP {status} ({code}): {said}"
        elif issubclass(cls, IncompatibleSchema):
            message = (
                f"Schema registry at {context['url']} rejected the schema as incompatible while {call.doing} "
                f"(HTTP {status}, {code}). Registry's reasons: {said}"
            )
            context["reasons"] = body.message
        else:
            message = f"Schema registry at {context['url']} answered HTTP {status} ({code}) while {call.doing}: {said}"
        hint = next((h for c, h in _HINTS.items() if issubclass(cls, c)), None)
        if hint:
            message = f"{message} {hint}"
        context["registry_message"] = self._redact(body.message)
        if "reasons" in context:
            context["reasons"] = self._redact(context["reasons"])
        raise cls(self._redact(message), status_code=status, error_code=body.error_code, **context) from None

    def _redact(self, text: str) -> str:
        """Belt and braces: a registry or proxy might echo a credential back."""
        for secret in self._secrets:
            text = text.replace(secret, "**********")
        return text


# -- helpers ---------------------------------------------------------------------------------------


def _q(segment: str) -> str:
    """Percent-encode one path segment: ``/`` and spaces included."""
    return quote(segment, safe="")


def _contract_body(metadata: Mapping[str, Any] | None, rule_set: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``metadata``/``ruleSet`` body fields of a registration or lookup (only those given)."""
    body: dict[str, Any] = {}
    if metadata is not None:
        body["metadata"] = dict(metadata)
    if rule_set is not None:
        body["ruleSet"] = dict(rule_set)
    return body


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _flags(**flags: bool) -> dict[str, str]:
    """Boolean query parameters, sent only when true (the registry's default is false)."""
    return {name: "true" for name, on in flags.items() if on}


def _scope(subject: str | None) -> str:
    return "the registry (global)" if subject is None else f"subject {subject!r}"


def _config_path(root: str, subject: str | None) -> str:
    return root if subject is None else f"{root}/{_q(subject)}"


def _whole(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"Invalid {name} {value!r}: expected a whole number.", option=name, value=value)
    return value


def _coerce(enum: type[E], value: E | str, name: str) -> E:
    try:
        return enum(value)
    except ValueError:
        choices = [m.value for m in enum]
        raise ConfigError(
            f"Invalid {name} {value!r}: valid values are {', '.join(choices)} (any case).",
            option=name,
            value=value,
            choices=choices,
        ) from None


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(tp: Any) -> Callable[[bytes], Any]:
    """A parser of JSON bytes into ``tp`` (raises ``ValueError`` on a mismatch)."""
    adapter = _ADAPTERS.get(tp)
    if adapter is None:
        adapter = _ADAPTERS.setdefault(tp, TypeAdapter(tp))
    return adapter.validate_json


def _parse_object(content: bytes) -> dict[str, Any]:
    return _adapter(dict[str, Any])(content)


def _parse_level(content: bytes) -> CompatibilityLevel:
    level = _adapter(ServerConfig)(content).level
    if level is None:
        raise ValueError("no compatibilityLevel in the answer")
    return level


def _error_body(response: httpx.Response) -> ErrorBody:
    """``{"error_code", "message"}``; anything else keeps the status and an excerpt of the body."""
    try:
        body = ErrorBody.model_validate_json(response.content)
    except ValueError:
        body = None
    if body is None or not body.message:
        return ErrorBody(
            error_code=body.error_code if body is not None else None,
            message=f"HTTP {response.status_code} {response.reason_phrase}: {_excerpt(response)}",
        )
    return body


def _excerpt(response: httpx.Response) -> str:
    text = " ".join(response.text.split())
    if not text:
        return "(empty body)"
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?", "]", ")")) else f"{text}."


def _first_line(exc: BaseException | None) -> str:
    return str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else ""


def _split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """``http://u:p@host/`` → (``http://host``, ``u``, ``p``), percent-decoded."""
    split = urlsplit(url.strip())
    url = url.strip().rstrip("/")
    if "@" not in split.netloc:
        return url, None, None
    userinfo, _, hostport = split.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return split._replace(netloc=hostport).geturl().rstrip("/"), unquote(user), unquote(password)


def _tls_verify(config: RegistryConfig) -> ssl.SSLContext | bool:
    """``verify`` for httpx: a bool, or an SSL context when a CA bundle or client certificate is set.

    httpx 0.28 deprecates ``verify=<path>`` and ``cert=``, so both go into one ``ssl.SSLContext``.
    ``verify=False`` turns verification off even when ``ca_bundle`` is set.
    """
    if config.client_key and not config.client_cert:
        raise ConfigError(
            "The schema registry settings give client_key without client_cert; set both or neither.",
            option="client_key",
        )
    if not config.client_cert and not (config.ca_bundle and config.verify):
        if all(url.lower().startswith("http://") for url in config.urls):
            # no TLS at all: httpx would still build the default context, reading the CA bundle (35-40 ms a client)
            return False
        return config.verify
    try:
        if config.ca_bundle and config.verify:
            if os.path.isdir(config.ca_bundle):
                context = ssl.create_default_context(capath=config.ca_bundle)
            else:
                context = ssl.create_default_context(cafile=config.ca_bundle)
        else:
            context = httpx.create_ssl_context(verify=config.verify)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"Cannot load the schema registry CA bundle {config.ca_bundle!r}: {exc}.",
            option="ca_bundle",
            value=config.ca_bundle,
        ) from None
    if config.client_cert:
        try:
            context.load_cert_chain(config.client_cert, config.client_key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"Cannot load the schema registry client certificate {config.client_cert!r}"
                f"{f' with key {config.client_key!r}' if config.client_key else ''}: {exc}.",
                option="client_cert",
                value=config.client_cert,
            ) from None
    return context

