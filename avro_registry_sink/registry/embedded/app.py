"""Confluent Schema Registry's REST API over a :class:`RegistryStore`, as a Starlette ASGI app.

Transport behaviour follows Confluent (reference §1): request bodies may be
``application/vnd.schemaregistry.v1+json``, ``application/vnd.schemaregistry+json``, ``application/json``,
``application/octet-stream`` or untyped (anything else on POST/PUT → 415); responses are
``application/vnd.schemaregistry.v1+json``; errors are ``{"error_code", "message"}``; boolean query
parameters are case-insensitive (confluent-kafka-python sends ``True``/``False``); unknown body fields
and query parameters are ignored. Subjects travel percent-encoded and may contain ``/``, so routing
runs on the raw path and the subject converter decodes its segment.

Safe to expose (:mod:`.guard`): optional basic auth and a request-size limit answer before the body is read.
Every answer to a bad request is a 4xx with Confluent's error code. Decoding a large body, the store's
work and encoding a large answer run in worker threads, so the event loop keeps serving other requests.

>>> from avro_registry_sink.registry.embedded import RegistryStore, create_app
>>> app = create_app(RegistryStore.open(None))
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, unquote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from avro_registry_sink.errors import RegistryError, StateError
from avro_registry_sink.registry.embedded.canonical import json_depth
from avro_registry_sink.registry.embedded.contracts import CONFIG_CONTRACT_FIELDS
from avro_registry_sink.registry.embedded.guard import (
    DEFAULT_MAX_REQUEST_BYTES,
    BasicAuthUsers,
    RequestTooLarge,
    checked_request_limit,
    guard_app,
)
from avro_registry_sink.registry.embedded.store import RegistryStore

__all__ = ["MEDIA_TYPE", "create_app"]

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
_CONSUMED = frozenset(
    {MEDIA_TYPE, "application/vnd.schemaregistry+json", "application/json", "application/octet-stream"}
)
_PRODUCED = frozenset({MEDIA_TYPE, "application/vnd.schemaregistry+json", "application/json"})
_ACCEPT_ANY = frozenset({"*/*", "application/*"})
# Characters left alone when the raw request path is made routable (existing %XX escapes included).
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
# Bodies and answers larger than this are decoded/encoded in a worker thread rather than on the event loop.
_THREAD_JSON_BYTES = 64 * 1024
#: container levels of a request body, as Jackson's default StreamReadConstraints (Confluent's registry refuses
#: deeper bodies with a 400); checked by counting, since the recursion limit depends on what else runs here
_MAX_BODY_DEPTH = 1000


class _SubjectConvertor(Convertor[str]):
    """One raw path segment, percent-decoded: ``a%2Fb`` is the subject ``a/b``."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return unquote(value)

    def to_string(self, value: str) -> str:
        return quote(value, safe="")


register_url_convertor("registry_subject", _SubjectConvertor())


class _RawPathMiddleware:
    """Route on the still-encoded path, so an encoded ``/`` inside a subject stays inside its segment."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path")
            path = quote(raw, safe=_PATH_SAFE) if raw else quote(scope["path"], safe="/")
            scope = {**scope, "path": path, "raw_path": raw or path.encode("ascii")}
        await self.app(scope, receive, send)


class _HttpError(Exception):
    """A JAX-RS-level failure: ``error_code`` is the HTTP status, as Confluent answers them."""

    def __init__(self, status: int, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_code = error_code if error_code is not None else status


def _json(content: Any, status: int = 200) -> Response:
    return JSONResponse(content, status_code=status, media_type=MEDIA_TYPE)


def _render(content: Any) -> bytes:
    # As JSONResponse renders; done in the worker thread for answers that may be large.
    return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def _error(status: int, error_code: int, message: str) -> Response:
    return _json({"error_code": error_code, "message": message}, status)


def _flag(request: Request, name: str) -> bool:
    # JAX-RS Boolean.valueOf: "true" in any case is true, everything else false.
    return request.query_params.get(name, "").strip().lower() == "true"


def _int_param(request: Request, name: str, default: int) -> int:
    try:
        return int(request.query_params.get(name, default))
    except ValueError:
        return default


def _check_accept(request: Request) -> None:
    accept = request.headers.get("accept")
    if not accept:
        return
    for part in accept.split(","):
        media = part.split(";", 1)[0].strip().lower()
        if not media or media in _PRODUCED or media in _ACCEPT_ANY:
            return
    raise _HttpError(406, "HTTP 406 Not Acceptable")


async def _body(request: Request) -> dict[str, Any]:
    content_type = request.headers.get("content-type")
    if content_type:
        media = content_type.split(";", 1)[0].strip().lower()
        if media not in _CONSUMED:
            raise _HttpError(415, "HTTP 415 Unsupported Media Type")
    raw = await request.body()
    if not raw.strip():
        return {}
    body = await run_in_threadpool(_decode, raw) if len(raw) > _THREAD_JSON_BYTES else _decode(raw)
    if not isinstance(body, dict):
        raise _HttpError(422, f"Request body must be a JSON object, not {type(body).__name__}")
    return body


def _decode(raw: bytes) -> Any:
    too_deep = _HttpError(400, f"Unrecognized JSON in request body: nested deeper than {_MAX_BODY_DEPTH} levels")
    try:
        body = json.loads(raw)
    except RecursionError:
        raise too_deep from None
    except ValueError as exc:  # includes bodies that are not UTF-8
        raise _HttpError(400, f"Unrecognized JSON in request body: {exc}") from None
    if raw.count(b"[") + raw.count(b"{") > _MAX_BODY_DEPTH and json_depth(body) > _MAX_BODY_DEPTH:
        raise too_deep
    return body


def _optional_int(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _HttpError(422, f'"{key}" must be an integer, not {json.dumps(value)}')
    return value


def _schema_args(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": body.get("schema"),
        "schema_type": body.get("schemaType"),
        "references": body.get("references"),
        "metadata": body.get("metadata"),
        "rule_set": body.get("ruleSet"),
    }


Handler = Callable[[Request, RegistryStore], Awaitable[Response]]


def _endpoint(store: RegistryStore, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Content negotiation, error translation and the store handed to ``handler``."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            _check_accept(request)
            return await handler(request, store)
        except RegistryError as exc:
            return _error(exc.status_code or 500, exc.error_code or exc.status_code or 500, exc.message)
        except _HttpError as exc:
            return _error(exc.status, exc.error_code, exc.message)
        except RequestTooLarge as exc:  # a body without Content-Length ran past the limit while read
            return _error(413, 413, str(exc))
        except RecursionError:  # the depth limits keep this out of reach; never a 500 all the same
            return _error(422, 42201, "Invalid schema: nested too deeply")
        except StateError as exc:  # the SQLite file: locked for too long, or damaged (one line, no stack)
            log.error("embedded registry: %s %s failed: %s", request.method, request.url.path, exc)
            locked = getattr(exc, "problem", None) == "locked"
            return _error(500, 50002 if locked else 50001, exc.message)  # Confluent's store timeout / store error
        except Exception as exc:  # the registry answers 500 with a body rather than dropping the connection
            log.exception("embedded registry: %s %s failed", request.method, request.url.path)
            return _error(500, 500, f"Internal error: {type(exc).__name__}: {exc}")

    return endpoint


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    # The store is synchronous (SQLite, a lock); keep it off the event loop.
    return run_in_threadpool(fn, *args, **kwargs)


async def _call_json(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Response:
    """``fn``'s result as the JSON answer, computed and encoded in a worker thread."""

    def work() -> bytes:
        return _render(fn(*args, **kwargs))

    return Response(await run_in_threadpool(work), media_type=MEDIA_TYPE)


def _schema_id(request: Request) -> int:
    raw = request.path_params["schema_id"]
    try:
        return int(raw)
    except ValueError:
        raise _HttpError(404, "HTTP 404 Not Found") from None


def _listing(request: Request) -> dict[str, Any]:
    """The deleted filters and paging of the list endpoints (subjects, versions)."""
    return {"deleted": _flag(request, "deleted"), "deleted_only": _flag(request, "deletedOnly"),
            "offset": _int_param(request, "offset", 0), "limit": _int_param(request, "limit", -1)}


def _subject_version(request: Request) -> tuple[str, str]:
    return request.path_params["subject"], request.path_params["version"]


# -- handlers ----------------------------------------------------------------------------------------


async def _root(request: Request, store: RegistryStore) -> Response:
    return _json({})


async def _schema_types(request: Request, store: RegistryStore) -> Response:
    return _json(["AVRO"])


async def _contexts(request: Request, store: RegistryStore) -> Response:
    return _json(["."])


async def _cluster_id(request: Request, store: RegistryStore) -> Response:
    return _json({"scope": {"path": [], "clusters": {"schema-registry-cluster": "embedded"}}})


async def _register(request: Request, store: RegistryStore) -> Response:
    body = await _body(request)
    return await _call_json(
        store.register,
        request.path_params["subject"],
        **_schema_args(body),
        schema_id=_optional_int(body, "id"),
        version=_optional_int(body, "version"),
        normalize=_flag(request, "normalize"),
    )


async def _lookup(request: Request, store: RegistryStore) -> Response:
    body = await _body(request)
    return await _call_json(
        store.lookup,
        request.path_params["subject"],
        **_schema_args(body),
        normalize=_flag(request, "normalize"),
        deleted=_flag(request, "deleted"),
    )


async def _list_subjects(request: Request, store: RegistryStore) -> Response:
    return await _call_json(
        store.list_subjects,
        prefix=request.query_params.get("subjectPrefix") or None,
        **_listing(request),
    )


async def _list_versions(request: Request, store: RegistryStore) -> Response:
    return await _call_json(
        store.list_versions,
        request.path_params["subject"],
        deleted_as_negative=_flag(request, "deletedAsNegative"),
        **_listing(request),
    )


async def _get_version(request: Request, store: RegistryStore) -> Response:
    return await _call_json(store.get_version, *_subject_version(request), deleted=_flag(request, "deleted"))


async def _get_version_schema(request: Request, store: RegistryStore) -> Response:
    result = await _call(store.get_version, *_subject_version(request), deleted=_flag(request, "deleted"))
    return Response(result["schema"], media_type=MEDIA_TYPE)


async def _latest_with_metadata(request: Request, store: RegistryStore) -> Response:
    # key=k1&value=v1&key=k2&value=v2: paired by position, extra keys or values ignored (as Confluent)
    pairs = list(zip(request.query_params.getlist("key"), request.query_params.getlist("value"), strict=False))
    return await _call_json(store.latest_with_metadata, request.path_params["subject"], pairs,
                            deleted=_flag(request, "deleted"))


async def _referenced_by(request: Request, store: RegistryStore) -> Response:
    return await _call_json(store.referenced_by, *_subject_version(request))


async def _delete_version(request: Request, store: RegistryStore) -> Response:
    return await _call_json(store.delete_version, *_subject_version(request), permanent=_flag(request, "permanent"))


async def _delete_subject(request: Request, store: RegistryStore) -> Response:
    return await _call_json(store.delete_subject, request.path_params["subject"], permanent=_flag(request, "permanent"))


async def _get_schema(request: Request, store: RegistryStore) -> Response:
    return await _call_json(store.get_schema, _schema_id(request), fetch_max_id=_flag(request, "fetchMaxId"))


async def _get_schema_text(request: Request, store: RegistryStore) -> Response:
    result = await _call(store.get_schema, _schema_id(request))
    return Response(result["schema"], media_type=MEDIA_TYPE)


async def _schema_subjects(request: Request, store: RegistryStore) -> Response:
    return await _call_json(store.subjects_for_id, _schema_id(request), deleted=_flag(request, "deleted"))


async def _schema_versions(request: Request, store: RegistryStore) -> Response:
    return await _call_json(store.versions_for_id, _schema_id(request), deleted=_flag(request, "deleted"))


async def _compatibility(request: Request, store: RegistryStore) -> Response:
    body = await _body(request)
    return await _call_json(
        store.check_compatibility,
        request.path_params["subject"],
        **_schema_args(body),
        version=request.path_params.get("version"),
        normalize=_flag(request, "normalize"),
        verbose=_flag(request, "verbose"),
    )


async def _get_config(request: Request, store: RegistryStore) -> Response:
    return await _call_json(
        store.get_config, request.path_params.get("subject"), default_to_global=_flag(request, "defaultToGlobal")
    )


async def _put_config(request: Request, store: RegistryStore) -> Response:
    body = await _body(request)
    # PUT takes "compatibility" (GET answers "compatibilityLevel"); newer clients may send either.
    level = body.get("compatibility", body.get("compatibilityLevel"))
    contract = {key: body[key] for key in CONFIG_CONTRACT_FIELDS if key in body}
    return await _call_json(store.set_config, request.path_params.get("subject"), level, normalize=body.get("normalize"),
                            contract=contract)


async def _delete_config(request: Request, store: RegistryStore) -> Response:
    return await _call_json(store.delete_config, request.path_params.get("subject"))


async def _get_mode(request: Request, store: RegistryStore) -> Response:
    return await _call_json(
        store.get_mode, request.path_params.get("subject"), default_to_global=_flag(request, "defaultToGlobal")
    )


async def _put_mode(request: Request, store: RegistryStore) -> Response:
    body = await _body(request)
    return await _call_json(
        store.set_mode, request.path_params.get("subject"), body.get("mode"), force=_flag(request, "force")
    )


async def _delete_mode(request: Request, store: RegistryStore) -> Response:
    return await _call_json(store.delete_mode, request.path_params["subject"])


_SUBJECT = "{subject:registry_subject}"
_ROUTES: list[tuple[str, Handler, list[str]]] = [
    ("/", _root, ["GET"]),
    ("/schemas/types", _schema_types, ["GET"]),
    ("/contexts", _contexts, ["GET"]),
    ("/v1/metadata/id", _cluster_id, ["GET"]),
    ("/subjects", _list_subjects, ["GET"]),
    (f"/subjects/{_SUBJECT}", _lookup, ["POST"]),
    (f"/subjects/{_SUBJECT}", _delete_subject, ["DELETE"]),
    (f"/subjects/{_SUBJECT}/versions", _register, ["POST"]),
    (f"/subjects/{_SUBJECT}/metadata", _latest_with_metadata, ["GET"]),
    (f"/subjects/{_SUBJECT}/versions", _list_versions, ["GET"]),
    (f"/subjects/{_SUBJECT}/versions/{{version}}", _get_version, ["GET"]),
    (f"/subjects/{_SUBJECT}/versions/{{version}}", _delete_version, ["DELETE"]),
    (f"/subjects/{_SUBJECT}/versions/{{version}}/schema", _get_version_schema, ["GET"]),
    (f"/subjects/{_SUBJECT}/versions/{{version}}/referencedby", _referenced_by, ["GET"]),
    ("/schemas/ids/{schema_id}", _get_schema, ["GET"]),
    ("/schemas/ids/{schema_id}/schema", _get_schema_text, ["GET"]),
    ("/schemas/ids/{schema_id}/subjects", _schema_subjects, ["GET"]),
    ("/schemas/ids/{schema_id}/versions", _schema_versions, ["GET"]),
    (f"/compatibility/subjects/{_SUBJECT}/versions", _compatibility, ["POST"]),
    (f"/compatibility/subjects/{_SUBJECT}/versions/{{version}}", _compatibility, ["POST"]),
    ("/config", _get_config, ["GET"]),
    ("/config", _put_config, ["PUT"]),
    ("/config", _delete_config, ["DELETE"]),
    (f"/config/{_SUBJECT}", _get_config, ["GET"]),
    (f"/config/{_SUBJECT}", _put_config, ["PUT"]),
    (f"/config/{_SUBJECT}", _delete_config, ["DELETE"]),
    ("/mode", _get_mode, ["GET"]),
    ("/mode", _put_mode, ["PUT"]),
    (f"/mode/{_SUBJECT}", _get_mode, ["GET"]),
    (f"/mode/{_SUBJECT}", _put_mode, ["PUT"]),
    (f"/mode/{_SUBJECT}", _delete_mode, ["DELETE"]),
]


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    phrase = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, str(exc.detail))
    return _error(exc.status_code, exc.status_code, f"HTTP {exc.status_code} {phrase}")


def create_app(
    store: RegistryStore,
    *,
    users: BasicAuthUsers | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
) -> Starlette:
    """A Starlette app serving Confluent's Schema Registry REST API from ``store``.

    With ``users`` every request needs HTTP basic auth (401 otherwise); bodies above ``max_request_bytes``
    are refused with 413 before they are read. The caller owns ``store`` (close it after the server stops).
    """
    max_request_bytes = checked_request_limit(max_request_bytes)
    # Starlette dispatches one path to the first route whose methods match, and 405 only when none does,
    # so the same path may appear once per method.
    from avro_registry_sink.registry.embedded.metrics import RegistryMetrics

    metrics = RegistryMetrics()  # GET /metrics: Prometheus's text format
    routes = [Route(path, metrics.wrap(_endpoint(store, handler), handler.__name__.lstrip("_")), methods=methods)
              for path, handler, methods in _ROUTES]
    routes.append(Route("/metrics", metrics.endpoint, methods=["GET"]))
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(guard_app, users=users, max_request_bytes=max_request_bytes),  # type: ignore[arg-type]
            Middleware(_RawPathMiddleware),
        ],
        exception_handlers={HTTPException: _http_exception},
    )
    app.state.store = store
    app.state.metrics = metrics
    return app
