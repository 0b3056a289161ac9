"""One filesystem layer for everything the job reads and writes outside Kafka: storage URIs.

A storage URI is written as TiCDC's storage sink takes it, or as Hadoop names the same place:

=====================================================  ==============================================
TiCDC (``sink-uri`` of a storage sink)                 Hadoop (what Spark reads)
=====================================================  ==============================================
``s3://bucket/prefix?endpoint=..&access-key=..``        ``s3a://bucket/prefix`` + ``fs.s3a.bucket.<b>.*``
``gcs://bucket/prefix`` / ``gs://bucket/prefix``        ``gs://bucket/prefix`` + ``fs.gs.*``
``azure://container/prefix?account-name=..``           ``abfss://container@<account>.dfs.core.windows.net/prefix``
``file:///abs/path`` or a plain path                   ``file:///abs/path``
(not a TiCDC sink)                                     ``hdfs://namenode:8020/path``
=====================================================  ==============================================

Hadoop URIs (``s3a://``, ``gs://``, ``abfs://``, ``abfss://``, ``hdfs://``) are accepted too; their
credentials come from the environment (AWS/Google/Azure default chains) or from Spark's
``spark.hadoop.*`` settings. TiCDC's parameters are normalised as TiCDC does (lower case, ``_`` ->
``-``) and checked by name: an unknown one is refused with the closest valid name, ``access-key``
without ``secret-access-key`` (or the reverse) is refused, and TiCDC's own sink parameters
(``protocol``, ``flush-interval``, ...) are accepted and ignored, so the sink URI can be copied as it is.

:meth:`StorageURI.hadoop_conf` maps the parameters onto Hadoop settings for Spark (per bucket, so a
source and a checkpoint on two stores do not mix credentials); :class:`StoreFS` gives the driver
list / read / exists / atomic write / delete through ``pyarrow.fs`` with the same parameters, and
:meth:`StoreFS.probe` checks the store before any Spark work (as TiCDC probes it when a changefeed is
created). ``str(uri)`` never shows credentials.

>>> uri = parse_storage_uri("s3://logs/cdc?endpoint=http://127.0.0.1:9000&access-key=AK&secret-access-key=SK")
>>> uri.hadoop_uri("shop/orders")
's3a://logs/cdc/shop/orders'
>>> str(uri)
's3://logs/cdc?access-key=***&endpoint=http://127.0.0.1:9000&secret-access-key=***'
>>> uri.hadoop_conf()["fs.s3a.bucket.logs.path.style.access"]
'true'
"""

from __future__ import annotations

import contextlib
import difflib
import os
import posixpath
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from avro_registry_sink.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from pyarrow.fs import FileSystem

__all__ = [
    "HADOOP_SCHEMES",
    "SECRET_PARAMETERS",
    "STORE_PARAMETERS",
    "TICDC_SINK_PARAMETERS",
    "StorageURI",
    "StoreFS",
    "hadoop_settings",
    "is_storage_uri",
    "parse_storage_uri",
]

#: The store each URI scheme names (TiCDC's and Hadoop's spellings).
STORE_OF_SCHEME: dict[str, str] = {
    "file": "file", "local": "file", "storage": "file",
    "s3": "s3", "s3a": "s3", "s3n": "s3",
    "gcs": "gcs", "gs": "gcs",
    "azure": "azure", "azblob": "azure", "abfs": "azure", "abfss": "azure",
    "hdfs": "hdfs",
}
#: Schemes in Hadoop's spelling (their parameters live in Spark's Hadoop settings, not in the URI).
HADOOP_SCHEMES = frozenset({"s3a", "s3n", "abfs", "abfss", "hdfs"})

#: TiCDC's storage parameters per store, each with the Hadoop setting it becomes (``None``: no Hadoop
#: equivalent; accepted for TiCDC compatibility and used by the driver-side client where it can).
#: S3 settings are per bucket: ``fs.s3a.bucket.<bucket>.<name>``; Azure ones per account.
STORE_PARAMETERS: dict[str, dict[str, str | None]] = {
    "s3": {
        "access-key": "access.key",
        "secret-access-key": "secret.key",
        "session-token": "session.token",
        "endpoint": "endpoint",
        "region": "endpoint.region",
        "force-path-style": "path.style.access",
        "role-arn": "assumed.role.arn",
        "external-id": "assumed.role.external.id",
        "sse": "encryption.algorithm",
        "sse-kms-key-id": "encryption.key",
        "storage-class": "create.storage.class",
        "acl": "acl.default",
        "profile": None,
        "provider": None,
        "use-accelerate-endpoint": None,
        "object-lock-enabled": None,
    },
    "gcs": {
        "credentials-file": "fs.gs.auth.service.account.json.keyfile",
        "endpoint": "fs.gs.storage.root.url",
        "storage-class": None,
        "predefined-acl": None,
    },
    "azure": {
        "account-name": None,
        "account-key": "fs.azure.account.key.{host}",
        "sas-token": "fs.azure.sas.fixed.token.{host}",
        "endpoint": None,
        "access-tier": None,
        "encryption-scope": None,
        "encryption-key": None,
    },
    "file": {},
    "hdfs": {},
}
#: TiCDC's own storage-sink parameters: not about the store, accepted so a sink URI can be copied.
TICDC_SINK_PARAMETERS = frozenset({
    "protocol", "worker-count", "flush-interval", "file-size", "enable-tidb-extension", "file-index-digit",
    "date-separator", "enable-partition-separator", "file-cleanup-cron-spec", "file-expiration-days",
    "flush-concurrency", "output-column-id", "csv-delimiter", "csv-quote", "csv-null", "csv-include-commit-ts",
    "avro-decimal-handling-mode", "avro-bigint-unsigned-handling-mode", "content-compatible", "max-message-bytes",
})
#: Parameters never shown (``str(uri)``, logs, errors).
SECRET_PARAMETERS = frozenset({"access-key", "secret-access-key", "session-token", "account-key", "sas-token",
                               "encryption-key", "external-id"})
_SSE_ALGORITHMS = {"AES256": "SSE-S3", "aws:kms": "SSE-KMS"}
#: Stores where an object is visible only once complete: a plain write is already atomic.
_ATOMIC_PUT = frozenset({"s3", "gcs", "azure"})


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def is_storage_uri(text: str) -> bool:
    """Whether ``text`` names a place this layer handles (a plain path counts).

    >>> is_storage_uri("s3://b/p"), is_storage_uri("/tmp/x"), is_storage_uri("kafka://h:9092/t")
    (True, True, False)
    """
    if "://" not in text:
        return True
    return urlsplit(text).scheme.lower() in STORE_OF_SCHEME


def _parse_bool(name: str, value: str, option: str, text: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "t"):
        return True
    if lowered in ("false", "0", "f"):
        return False
    raise ConfigError(f"Invalid value {value!r} for parameter {name!r} of {option} {_redact(text)!r}: expected "
                      "true or false.", option=option, parameter=name, value=value)


def _redact(text: str) -> str:
    """``text`` with the values of secret parameters replaced by ``***`` (any URI: safe for messages)."""
    if "?" not in text:
        return text
    head, _, query = text.partition("?")
    parts = []
    for piece in query.split("&"):
        name, sep, _value = piece.partition("=")
        parts.append(f"{name}=***" if sep and _norm(unquote(name)) in SECRET_PARAMETERS else piece)
    return head + "?" + "&".join(parts)


_HADOOP_GLOB = re.compile(r"([\\*?\[\]{}])")  # Hadoop's glob characters, escaped in file paths


@dataclass(frozen=True)
class StorageURI:
    """A parsed storage URI: which store, the bucket (container, namenode), the path, the parameters.

    ``path`` is a posix path: the key prefix inside the bucket without a leading ``/`` for object
    stores, an absolute path for ``file`` and ``hdfs``. ``params`` holds the store parameters only
    (normalised names), never TiCDC's sink parameters.
    """

    store: str
    scheme: str
    bucket: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    account: str = ""  # Azure: the storage account (from account-name or the abfs host)
    extra: tuple[tuple[str, str], ...] = field(default=(), compare=False)  # non-store parameters kept for callers

    # -- naming --------------------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self.store == "file"

    @property
    def parameters(self) -> dict[str, str]:
        return dict(self.params)

    def child(self, *parts: str) -> StorageURI:
        """The URI of a path below this one (``parts`` are posix segments or relative paths)."""
        rel = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
        if not rel:
            return self
        path = posixpath.join(self.path, rel) if self.path else rel
        return replace(self, path=path)

    def parent(self) -> StorageURI:
        return replace(self, path=posixpath.dirname(self.path.rstrip("/")))

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    def hadoop_uri(self, relative: str = "") -> str:
        """The URI Spark (Hadoop's FileSystem) uses for this place, or for ``relative`` below it."""
        path = self.child(relative).path if relative else self.path
        if self.store == "file":
            return "file://" + quote(path)
        if self.store == "hdfs":
            return f"hdfs://{self.bucket}{quote(path)}"
        key = quote(path)
        if self.store == "s3":
            return f"s3a://{self.bucket}/{key}".rstrip("/")
        if self.store == "gcs":
            return f"gs://{self.bucket}/{key}".rstrip("/")
        scheme = "abfs" if self.scheme == "abfs" else "abfss"
        return f"{scheme}://{self.bucket}@{self._azure_host()}/{key}".rstrip("/")

    def spark_path(self, relative: str = "") -> str:
        """The path of one file for Spark's batch readers (``spark.read...load``): the Hadoop URI with the
        path as it is (Hadoop quotes it itself, so a quoted ``%E8`` would be quoted twice) and Hadoop's glob
        characters escaped (a table named ``a[1]`` is a name, not a pattern).

        >>> parse_storage_uri("/in").spark_path("shop/订单/CDC1.csv")
        'file:///in/shop/订单/CDC1.csv'
        >>> parse_storage_uri("s3://b/in").spark_path("s/a[1]/CDC1.csv")
        's3a://b/in/s/a\\\\[1\\\\]/CDC1.csv'
        """
        path = self.child(relative).path if relative else self.path
        raw = _HADOOP_GLOB.sub(r"\\\1", path)
        if self.store == "file":
            return "file://" + raw
        if self.store == "hdfs":
            return f"hdfs://{self.bucket}{raw}"
        raw = raw.lstrip("/")
        if self.store == "s3":
            return f"s3a://{self.bucket}/{raw}".rstrip("/")
        if self.store == "gcs":
            return f"gs://{self.bucket}/{raw}".rstrip("/")
        scheme = "abfs" if self.scheme == "abfs" else "abfss"
        return f"{scheme}://{self.bucket}@{self._azure_host()}/{raw}".rstrip("/")

    def _azure_host(self) -> str:
        endpoint = self.parameters.get("endpoint")
        if endpoint:  # a custom (e.g. emulator or sovereign cloud) endpoint: its dfs host
            host = urlsplit(endpoint).netloc or endpoint
            return host.replace(".blob.", ".dfs.")
        return f"{self.account}.dfs.core.windows.net"

    def __str__(self) -> str:
        """The URI as written by the user's conventions, credentials replaced by ``***``."""
        if self.store == "file":
            return self.path
        if self.scheme in HADOOP_SCHEMES or self.store == "hdfs":
            base = self.hadoop_uri()
        else:
            base = f"{self.scheme}://{self.bucket}/{self.path}".rstrip("/")
        if not self.params:
            return base
        query = "&".join(f"{k}={'***' if k in SECRET_PARAMETERS else v}" for k, v in self.params)
        return f"{base}?{query}"

    def relative(self, uri: str) -> str:
        """The posix path of ``uri`` (as Spark lists it: ``file:/x``, ``s3a://b/k``) relative to this place.

        >>> parse_storage_uri("s3://b/root").relative("s3a://b/root/shop/t/1/CDC1.csv")
        'shop/t/1/CDC1.csv'
        >>> parse_storage_uri("/data/in").relative("file:/data/in/a%20b/x.json")
        'a b/x.json'
        """
        if "://" in uri or uri.startswith("file:"):
            split = urlsplit(uri)
            path = unquote(split.path)
            if self.store in ("s3", "gcs", "azure"):
                path = path.lstrip("/")
        else:
            path = uri if self.store in ("file", "hdfs") else uri.lstrip("/")
        root = self.path.rstrip("/")
        if self.store in ("file", "hdfs"):
            path = posixpath.normpath(path)
            root = posixpath.normpath(root or "/")
        if root in ("", "/"):
            return path.lstrip("/")
        if path == root:
            return ""
        if not path.startswith(root + "/"):
            raise ConfigError(f"{uri!r} is not under {str(self)!r}.", option="source", value=uri)
        return path[len(root) + 1:]

    # -- Hadoop --------------------------------------------------------------------------------------

    def hadoop_conf(self) -> dict[str, str]:
        """Hadoop settings (without ``spark.hadoop.``) that give Spark this URI's store and credentials.

        >>> parse_storage_uri("s3://b/p?region=eu-west-1").hadoop_conf()["fs.s3a.bucket.b.endpoint.region"]
        'eu-west-1'
        """
        params = self.parameters
        conf: dict[str, str] = {}
        if self.store == "s3":
            prefix = f"fs.s3a.bucket.{self.bucket}."
            for name, value in params.items():
                key = STORE_PARAMETERS["s3"].get(name)
                if key is None:
                    continue
                if name == "sse":
                    value = _SSE_ALGORITHMS.get(value, value)
                conf[prefix + key] = value
            conf[prefix + "path.style.access"] = "true" if self._path_style() else "false"
            endpoint = params.get("endpoint")
            if endpoint:
                conf[prefix + "connection.ssl.enabled"] = "true" if endpoint.lower().startswith("https") else "false"
                # S3-compatible stores ignore the region, but without one the SDK probes for it (instance
                # metadata, with timeouts) before every new client
                conf.setdefault(prefix + "endpoint.region", "us-east-1")
                # not every S3-compatible store implements DeleteObjects (S3Proxy answers 501): the
                # committer's cleanup of a written batch deletes object by object there
                conf[prefix + "multiobjectdelete.enable"] = "false"
            if "access-key" in params:
                provider = ("org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider" if "session-token" in params
                            else "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider")
                conf[prefix + "aws.credentials.provider"] = provider
            elif "role-arn" in params:
                conf[prefix + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider"
        elif self.store == "gcs":
            if "credentials-file" in params:
                conf["fs.gs.auth.type"] = "SERVICE_ACCOUNT_JSON_KEYFILE"
                conf["fs.gs.auth.service.account.json.keyfile"] = params["credentials-file"]
            if "endpoint" in params:
                conf["fs.gs.storage.root.url"] = params["endpoint"]
        elif self.store == "azure":
            host = self._azure_host()
            if "account-key" in params:
                conf[f"fs.azure.account.key.{host}"] = params["account-key"]
            elif "sas-token" in params:
                conf[f"fs.azure.account.auth.type.{host}"] = "SAS"
                conf[f"fs.azure.sas.token.provider.type.{host}"] = (
                    "org.apache.hadoop.fs.azurebfs.sas.FixedSASTokenProvider")
                conf[f"fs.azure.sas.fixed.token.{host}"] = params["sas-token"]
        return conf

    def _path_style(self) -> bool:
        """TiCDC's ``force-path-style``: default true, false for AWS itself unless given explicitly."""
        params = self.parameters
        if "force-path-style" in params:
            return params["force-path-style"] == "true"
        endpoint = params.get("endpoint", "")
        aws = not endpoint or "amazonaws.com" in endpoint or params.get("provider") == "aws" or "role-arn" in params
        if params.get("provider") in ("alibaba", "netease", "tencent") or params.get("use-accelerate-endpoint") == "true":
            return False
        return not aws

    # -- driver-side access --------------------------------------------------------------------------

    def filesystem(self) -> StoreFS:
        """Driver-side access to this place (:class:`StoreFS`)."""
        return StoreFS(self)


def parse_storage_uri(text: str, *, option: str = "source", allowed: frozenset[str] = frozenset()) -> StorageURI:
    """Parse a storage URI (module docs); ``allowed`` names extra, non-store parameters the caller reads.

    Raises :class:`ConfigError` naming ``option`` and the parameter for an unknown scheme or parameter,
    a missing bucket, half a key pair, a bad boolean or an endpoint without a scheme.

    >>> parse_storage_uri("gcs://b/p").hadoop_uri()
    'gs://b/p'
    >>> parse_storage_uri("s3://b/p?acess-key=x")
    Traceback (most recent call last):
    ...
    avro_registry_sink.errors.ConfigError: Unknown parameter 'acess-key' in --source 's3://b/p?acess-key=x': did you mean 'access-key'? The s3 parameters are: access-key, acl, endpoint, external-id, force-path-style, object-lock-enabled, profile, provider, region, role-arn, secret-access-key, session-token, sse, sse-kms-key-id, storage-class, use-accelerate-endpoint.
    """
    flag = option if option.startswith("-") else f"--{option}"
    if "://" not in text:
        if not text.strip():
            raise ConfigError(f"Empty {flag}: give a directory or a storage URI.", option=option, value=text)
        return StorageURI(store="file", scheme="file", bucket="", path=str(Path(text).expanduser().resolve()))
    split = urlsplit(text)
    scheme = split.scheme.lower()
    store = STORE_OF_SCHEME.get(scheme)
    if store is None:
        choices = ", ".join(sorted(STORE_OF_SCHEME))
        raise ConfigError(f"Unknown storage scheme {scheme!r} in {flag} {_redact(text)!r}; valid schemes: {choices}.",
                          option=option, value=scheme)
    # TiCDC: names lower-cased, "_" -> "-"; a literal "+" is kept (parse_qsl would turn it into a space)
    raw = parse_qsl(split.query.replace("+", "%2B"), keep_blank_values=True)
    known = STORE_PARAMETERS[store]
    params: dict[str, str] = {}
    extra: dict[str, str] = {}
    for name, value in raw:
        key = _norm(name)
        if key in known:
            params[key] = value
        elif key in TICDC_SINK_PARAMETERS:
            continue
        elif name in allowed or key in allowed:
            extra[name] = value
        else:
            valid = sorted(set(known) | set(allowed))
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            listing = f"The {store} parameters are: {', '.join(valid)}." if valid else (
                f"A {store} URI takes no parameters.")
            raise ConfigError(f"Unknown parameter {name!r} in {flag} {_redact(text)!r}: {hint}{listing}",
                              option=option, parameter=name)
    path = unquote(split.path)
    account = ""
    if store == "file":
        path = unquote(split.netloc + split.path) if scheme != "file" else path
        if not path:
            raise ConfigError(f"Invalid {flag} {_redact(text)!r}: no directory.", option=option, value=text)
        return StorageURI(store="file", scheme="file", bucket="", path=str(Path(path).expanduser().resolve()),
                          extra=tuple(extra.items()))
    bucket = unquote(split.netloc)
    if store == "hdfs":
        return StorageURI(store="hdfs", scheme="hdfs", bucket=bucket, path=posixpath.normpath(path or "/"),
                          params=tuple(sorted(params.items())), extra=tuple(extra.items()))
    if "@" in bucket:  # abfs(s)://container@account.dfs.core.windows.net
        bucket, _, host = bucket.partition("@")
        account = host.split(".", 1)[0]
    if not bucket:
        raise ConfigError(f"Please specify the bucket for {store} in {flag} {_redact(text)!r}.", option=option,
                          parameter="bucket")
    if store == "azure":
        account = params.get("account-name") or account or os.environ.get("AZURE_STORAGE_ACCOUNT", "")
        if not account:
            raise ConfigError(f"{flag} {_redact(text)!r}: an Azure URI needs the storage account: add "
                              "account-name=... (or set AZURE_STORAGE_ACCOUNT).", option=option,
                              parameter="account-name")
    for a, b in (("access-key", "secret-access-key"), ("secret-access-key", "access-key")):
        if a in params and b not in params:
            raise ConfigError(f"{flag} {_redact(text)!r} gives {a} but not {b}: give both (or neither, to use the "
                              "environment's credentials).", option=option, parameter=b)
    for name in ("force-path-style", "use-accelerate-endpoint", "object-lock-enabled"):
        if name in params:
            params[name] = "true" if _parse_bool(name, params[name], flag, text) else "false"
    endpoint = params.get("endpoint")
    if endpoint is not None and "://" not in endpoint:
        raise ConfigError(f"Invalid endpoint {endpoint!r} in {flag} {_redact(text)!r}: scheme not found in endpoint "
                          "(write e.g. http://127.0.0.1:9000).", option=option, parameter="endpoint")
    if "sse" in params and params["sse"] not in _SSE_ALGORITHMS:
        raise ConfigError(f"Invalid sse {params['sse']!r} in {flag} {_redact(text)!r}; valid: AES256, aws:kms.",
                          option=option, parameter="sse")
    return StorageURI(store=store, scheme=scheme, bucket=bucket, path=path.strip("/"),
                      params=tuple(sorted(params.items())), account=account, extra=tuple(extra.items()))


# --------------------------------------------------------------------------------------------------
# Driver-side access


def _pyarrow_fs(uri: StorageURI) -> tuple[FileSystem, str]:
    """The pyarrow filesystem of ``uri`` and the root path in its terms."""
    from pyarrow import fs

    params = uri.parameters
    if uri.store == "file":
        return fs.LocalFileSystem(), uri.path
    if uri.store == "s3":
        kwargs: dict[str, Any] = {}
        endpoint = params.get("endpoint")
        if endpoint:
            split = urlsplit(endpoint)
            kwargs["endpoint_override"] = split.netloc + split.path.rstrip("/")
            kwargs["scheme"] = split.scheme or "https"
            # S3-compatible stores (S3Proxy, MinIO, Ceph, ...) may reject the SDK's newer default checksums
            os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
            os.environ.setdefault("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_required")
        if "access-key" in params:
            kwargs.update(access_key=params["access-key"], secret_key=params["secret-access-key"],
                          session_token=params.get("session-token"))
        elif "role-arn" in params:
            kwargs.update(role_arn=params["role-arn"], external_id=params.get("external-id"))
        if params.get("region"):
            kwargs["region"] = params["region"]
        elif endpoint:
            kwargs["region"] = "us-east-1"  # any region signs for a custom endpoint; avoids a lookup
        kwargs["force_virtual_addressing"] = not uri._path_style()
        if params.get("profile"):
            os.environ.setdefault("AWS_PROFILE", params["profile"])
        return fs.S3FileSystem(**kwargs), f"{uri.bucket}/{uri.path}".rstrip("/")
    if uri.store == "gcs":
        kwargs = {}
        if params.get("endpoint"):
            split = urlsplit(params["endpoint"])
            kwargs.update(endpoint_override=split.netloc, scheme=split.scheme or "https")
        if params.get("credentials-file"):
            os.environ.setdefault("GOOGLE_APPLICATION_CREDENTIALS", params["credentials-file"])
        return fs.GcsFileSystem(**kwargs), f"{uri.bucket}/{uri.path}".rstrip("/")
    if uri.store == "azure":
        kwargs = {"account_name": uri.account}
        if params.get("account-key"):
            kwargs["account_key"] = params["account-key"]
        if params.get("sas-token"):
            kwargs["sas_token"] = params["sas-token"]
        if params.get("endpoint"):
            split = urlsplit(params["endpoint"])
            kwargs.update(blob_storage_authority=split.netloc, blob_storage_scheme=split.scheme or "https")
        return fs.AzureFileSystem(**kwargs), f"{uri.bucket}/{uri.path}".rstrip("/")
    host, _, port = uri.bucket.partition(":")
    return fs.HadoopFileSystem(host or "default", int(port or 8020)), uri.path


#: What a store's error text says, and the parameter to name when the user has to fix it.
#: The first entry whose words occur decides, so the order matters: a store that cannot be reached says so
#: in a text that also names the bucket and key it wanted ("... in bucket 'b': AWS Error NETWORK_CONNECTION
#: ... Could not connect to server"), and that is no missing bucket.
_STORE_FAILURES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("NETWORK_CONNECTION", "Connection refused", "Could not connect", "Couldn't connect", "Failed to connect",
      "resolve", "Couldn't", "timed out", "Timeout", "connect"), "endpoint",
     "the store cannot be reached: check endpoint (and region)"),
    (("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden", "403", "credentials",
      "AuthorizationFailure", "AuthenticationFailed"),
     "access-key",
     "the store refused the credentials: check access-key and secret-access-key (or the environment's credentials)"),
    (("NoSuchBucket", "Bucket", "ContainerNotFound", "does not exist"), "bucket", "the bucket (container) does not exist"),
)


def _store_error(uri: StorageURI, action: str, exc: BaseException, option: str) -> ConfigError:
    """One place that turns a store's error into a :class:`ConfigError` naming the parameter to fix."""
    text = " ".join(str(exc).split())
    for needles, parameter, meaning in _STORE_FAILURES:
        if any(n.lower() in text.lower() for n in needles):
            return ConfigError(f"Cannot {action} {str(uri)!r} (--{option}): {meaning} ({text[:300]}).",
                               option=option, parameter=parameter)
    return ConfigError(f"Cannot {action} {str(uri)!r} (--{option}): {text[:300]}", option=option)


class StoreFS:
    """Driver-side list / read / exists / atomic write / delete below one :class:`StorageURI`.

    Paths are posix paths relative to the URI. Object stores make an object visible only when it is
    complete, so a write there is atomic as it is; local and HDFS writes go to a temporary name that is
    renamed over the target.

    >>> # fs = parse_storage_uri("s3://b/ck?endpoint=http://127.0.0.1:9000&access-key=a&secret-access-key=s").filesystem()
    >>> # fs.write_bytes("job.json", b"{}"); fs.read_bytes("job.json")
    """

    def __init__(self, uri: StorageURI, *, option: str = "source") -> None:
        self.uri = uri
        self.option = option
        self._fs: FileSystem | None = None
        self._root = ""

    def __repr__(self) -> str:
        return f"StoreFS({str(self.uri)!r})"

    def __getstate__(self) -> dict[str, Any]:  # pyarrow filesystems are rebuilt where they are used
        return {"uri": self.uri, "option": self.option, "_fs": None, "_root": ""}

    @property
    def fs(self) -> FileSystem:
        if self._fs is None:
            self._fs, self._root = _pyarrow_fs(self.uri)
        return self._fs

    def _path(self, relative: str = "") -> str:
        self.fs  # noqa: B018 - sets _root
        rel = relative.strip("/")
        return f"{self._root}/{rel}" if rel else self._root

    def _guard(self, action: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _store_error(self.uri, action, exc, self.option) from None

    def probe(self) -> None:
        """Check that the store answers with these credentials (list the root): :class:`ConfigError` if not."""
        from pyarrow import fs

        def run() -> None:
            info = self.fs.get_file_info(self._path())
            if self.uri.store in _ATOMIC_PUT and info.type == fs.FileType.NotFound:
                # a prefix that holds nothing yet is fine, but the bucket itself must exist
                bucket = self.fs.get_file_info(self.uri.bucket)
                if bucket.type == fs.FileType.NotFound:
                    raise OSError(f"NoSuchBucket: {self.uri.bucket}")

        try:
            self._guard("reach", run)
        except FileNotFoundError as exc:
            raise _store_error(self.uri, "reach", OSError(f"NoSuchBucket: {exc}"), self.option) from None

    def list_files(self, relative: str = "") -> list[str]:
        """Every file below ``relative`` (recursive), as sorted paths relative to the URI."""
        return [path for path, _ in self.list_files_stamped(relative)]

    def list_files_stamped(self, relative: str = "") -> list[tuple[str, tuple[int | None, int | None]]]:
        """:meth:`list_files` with each file's (size, modification time in ns) as the listing gives them
        (``None`` where the store does not say): a file rewritten in place gets another stamp."""
        from pyarrow import fs

        base = self._path(relative)
        selector = fs.FileSelector(base, recursive=True, allow_not_found=True)
        infos = self._guard("list", lambda: self.fs.get_file_info(selector))
        root = self._root.rstrip("/")
        out: list[tuple[str, tuple[int | None, int | None]]] = []
        for info in infos:
            if info.type != fs.FileType.File:
                continue
            path = info.path
            if root and path.startswith(root + "/"):
                path = path[len(root) + 1:]
            elif not root:
                path = path.lstrip("/")
            name = posixpath.basename(path)
            if name.startswith(".") and name.endswith(".tmp"):
                continue  # an unfinished write (see open_write)
            out.append((path, (info.size, info.mtime_ns)))
        # some stores list a "directory" as an object too: keep only names no other name lies under
        stamps = dict(out)
        names = sorted(stamps)
        return [(p, stamps[p]) for i, p in enumerate(names)
                if not (i + 1 < len(names) and names[i + 1].startswith(p + "/"))]

    def exists(self, relative: str) -> bool:
        from pyarrow import fs

        info = self._guard("read", lambda: self.fs.get_file_info(self._path(relative)))
        return info.type == fs.FileType.File

    def is_dir(self, relative: str) -> bool:
        """Whether ``relative`` is a directory (object stores: a prefix some object lies under)."""
        from pyarrow import fs

        info = self._guard("read", lambda: self.fs.get_file_info(self._path(relative)))
        return info.type == fs.FileType.Directory

    def read_bytes(self, relative: str) -> bytes:
        """The bytes of a file; :class:`FileNotFoundError` when there is none."""
        def run() -> bytes:
            with self.fs.open_input_stream(self._path(relative)) as fh:
                return fh.read()

        return self._guard("read", run)

    def read_text(self, relative: str, encoding: str = "utf-8") -> str:
        return self.read_bytes(relative).decode(encoding)

    @contextlib.contextmanager
    def open_write(self, relative: str) -> Iterator[Any]:
        """A binary stream that becomes the file ``relative`` when the block ends without an error.

        Readers see the old content or the new one, never a part: the data goes to a hidden temporary
        name first (``.<name>.<random>.tmp``) and is then renamed over the target (an atomic rename
        locally and on HDFS; a server-side copy on object stores, whose objects appear only whole). On
        an error nothing is published and the temporary file is removed.
        """
        target = self._path(relative)
        parent = posixpath.dirname(target)
        if self.uri.store not in _ATOMIC_PUT:
            self._guard("create", lambda: self.fs.create_dir(parent, recursive=True))
        temp = f"{parent}/.{posixpath.basename(target)}.{uuid.uuid4().hex[:8]}.tmp"
        stream = self._guard("write", lambda: self.fs.open_output_stream(temp))
        try:
            yield stream
            self._guard("write", stream.close)
        except BaseException:
            with contextlib.suppress(Exception):
                stream.close()
            with contextlib.suppress(Exception):
                self.fs.delete_file(temp)
            raise
        if self.uri.store == "file":
            os.replace(temp, target)  # atomic even when the target exists
        else:
            self._guard("write", lambda: self.fs.move(temp, target))

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Write a whole file so that readers see the old content or the new one, never a part."""
        with self.open_write(relative) as fh:
            fh.write(data)

    def write_text(self, relative: str, text: str, encoding: str = "utf-8") -> None:
        self.write_bytes(relative, text.encode(encoding))

    def delete(self, relative: str) -> None:
        """Remove a file (no error when it is already gone)."""
        def run() -> None:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(self._path(relative))

        self._guard("delete", run)

    def make_dirs(self, relative: str = "") -> None:
        """Create the directory (a no-op on object stores, which have none)."""
        if self.uri.store not in _ATOMIC_PUT:
            self._guard("create", lambda: self.fs.create_dir(self._path(relative), recursive=True))


def hadoop_settings(uris: list[StorageURI] | tuple[StorageURI, ...]) -> dict[str, str]:
    """The Hadoop settings of several URIs together (a source, a checkpoint, a file sink)."""
    conf: dict[str, str] = {}
    for uri in uris:
        conf.update(uri.hadoop_conf())
    return conf

