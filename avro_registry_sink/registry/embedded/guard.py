"""What stands in front of the embedded registry's routes: HTTP basic auth and the request-size limit.

Both answer before the request body is read, in Confluent's error shape (``{"error_code", "message"}``):

* **Basic auth** (optional): every request needs ``Authorization: Basic`` with a known user and password,
  else 401 ``{"error_code": 401, "message": "Unauthorized"}`` and a ``WWW-Authenticate`` challenge, as
  Confluent's registry answers with ``authentication.method=BASIC``. Passwords are kept only as salted
  digests and never appear in a message, a log line or a ``repr``.
* **Request-size limit**: a ``Content-Length`` above the limit is refused with 413 at once; a body sent
  without one (chunked) is counted as it arrives and refused as soon as it passes the limit.

>>> users = BasicAuthUsers(BasicAuthUsers.parse_entries(["alice:s3cret"], source="--user"))
>>> users.check("alice", "s3cret"), users.check("alice", "wrong"), users
(True, False, BasicAuthUsers(['alice']))
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from avro_registry_sink.errors import ConfigError

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "BasicAuthUsers", "RequestTooLarge", "checked_request_limit", "guard_app"]

#: 16 MiB: a schema of tens of thousands of columns fits; a runaway or hostile body does not.
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024
MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
REALM = "SchemaRegistry"


class RequestTooLarge(Exception):
    """A request body passed the limit while it was being read (no ``Content-Length`` to refuse it earlier)."""

    def __init__(self, limit: int) -> None:
        super().__init__(_too_large_message(limit))
        self.limit = limit


def _too_large_message(limit: int) -> str:
    return (
        f"Request body is larger than the limit of {limit} bytes; a larger schema needs a registry started with "
        "a higher --max-request-bytes"
    )


class BasicAuthUsers:
    """User names and salted password digests for HTTP basic auth; constant-time checks."""

    def __init__(self, passwords: Mapping[str, str]) -> None:
        self._salt = os.urandom(16)
        self._digests = {name: self._digest(password) for name, password in passwords.items()}

    def _digest(self, password: str) -> bytes:
        return hashlib.sha256(self._salt + password.encode("utf-8")).digest()

    @staticmethod
    def parse_entries(entries: Iterable[str], *, source: str) -> dict[str, str]:
        """``NAME:PASSWORD`` entries (split at the first colon) as a dict; a bad one raises ConfigError."""
        passwords: dict[str, str] = {}
        for number, entry in enumerate(entries, start=1):
            name, sep, password = entry.partition(":")
            name = name.strip()
            if not sep or not name or not password:
                # The entry itself is not echoed: it may be a password typed in the wrong place.
                raise ConfigError(
                    f"Invalid user entry {number} in {source}: expected NAME:PASSWORD with a non-empty name and "
                    "password.",
                    option=source,
                )
            passwords[name] = password
        return passwords

    @staticmethod
    def read_file(path: str | Path) -> dict[str, str]:
        """A file of ``NAME:PASSWORD`` lines (blank lines and ``#`` comments skipped) as a dict."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"Cannot read the users file {str(path)!r}: {exc.strerror}.", option="--users-file") from None
        lines = [line.rstrip("\r") for line in text.split("\n")]
        entries = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if not entries:
            raise ConfigError(
                f"The users file {str(path)!r} names no user (one NAME:PASSWORD per line).", option="--users-file"
            )
        return BasicAuthUsers.parse_entries(entries, source=f"the users file {str(path)!r}")

    @property
    def names(self) -> list[str]:
        return sorted(self._digests)

    def check(self, name: str, password: str) -> bool:
        """True if ``name`` is a user and ``password`` is theirs (compared in constant time)."""
        expected = self._digests.get(name)
        actual = self._digest(password)
        if expected is None:
            hmac.compare_digest(actual, actual)  # about the same work for an unknown name
            return False
        return hmac.compare_digest(expected, actual)

    def __len__(self) -> int:
        return len(self._digests)

    def __repr__(self) -> str:
        return f"BasicAuthUsers({self.names!r})"


def _credentials(scope: Scope) -> tuple[str, str] | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() != "basic":
                return None
            try:
                decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return None
            name, sep, password = decoded.partition(":")
            return (name, password) if sep else None
    return None


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", []):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_error(send: Send, status: int, message: str, extra_headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error_code": status, "message": message}).encode("utf-8")
    headers = [
        (b"content-type", MEDIA_TYPE.encode("ascii")),
        (b"content-length", str(len(body)).encode("ascii")),
        # The body was not read: the connection cannot carry another request.
        (b"connection", b"close"),
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Guard:
    def __init__(self, app: ASGIApp, users: BasicAuthUsers | None, max_request_bytes: int) -> None:
        self.app = app
        self.users = users
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.users is not None:
            creds = _credentials(scope)
            if creds is None or not self.users.check(*creds):
                challenge = f'Basic realm="{REALM}", charset="UTF-8"'.encode("ascii")
                await _send_error(send, 401, "Unauthorized", [(b"www-authenticate", challenge)])
                return
        limit = self.max_request_bytes
        length = _content_length(scope)
        if length is not None and length > limit:
            await _send_error(send, 413, _too_large_message(limit))
            return
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise RequestTooLarge(limit)
            return message

        await self.app(scope, counted_receive, send)


def checked_request_limit(max_request_bytes: object) -> int:
    """``max_request_bytes`` if it is a positive integer, else ConfigError naming the option."""
    if isinstance(max_request_bytes, bool) or not isinstance(max_request_bytes, int) or max_request_bytes < 1:
        raise ConfigError(
            f"Invalid request size limit {max_request_bytes!r} for option '--max-request-bytes': a positive number "
            "of bytes.",
            option="--max-request-bytes",
        )
    return max_request_bytes


def guard_app(app: ASGIApp, *, users: BasicAuthUsers | None, max_request_bytes: int) -> ASGIApp:
    """``app`` behind basic auth (when ``users`` is given) and the request-size limit."""
    return _Guard(app, users, checked_request_limit(max_request_bytes))
