"""RegistryClient against respx: requests on the wire, answers parsed, errors translated, retries, cache."""

from __future__ import annotations

import base64
import datetime
import json
import pickle
import ssl
import threading

import certifi
import httpx
import pytest
import respx
from pydantic import SecretStr

from avro_registry_sink import errors
from avro_registry_sink.registry.client import ACCEPT, MEDIA_TYPE, USER_AGENT, RegistryClient
from avro_registry_sink.registry.models import (
    CompatibilityLevel,
    CompatibilityResult,
    Mode,
    RegisteredSchema,
    Schema,
)
from avro_registry_sink.settings.config import RegistryConfig

BASE = "http://registry:8081"
BASE2 = "http://registry-2:8081"
SCHEMA = '{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}'
PASSWORD = "s3cr3t-Pa55word"
TOKEN = "tok-abcdef-123456"


@pytest.fixture
def sr():
    """respx router for BASE with named routes for the common endpoints (confluent conftest pattern)."""
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.post("/subjects/orders-value/versions", name="register").respond(200, json={"id": 7})
        router.get("/schemas/ids/7", name="schema_by_id").respond(200, json={"schema": SCHEMA})
        router.get("/", name="root").respond(200, json={})
        yield router


@pytest.fixture
def sleeps():
    return []


def make_client(sleeps=None, **overrides):
    config = RegistryConfig(**{"urls": (BASE,), "max_retries": 3, "retry_backoff": 0.2, "retry_backoff_max": 5.0, **overrides})
    return RegistryClient(config, sleep=(sleeps.append if sleeps is not None else _no_sleep))


def _no_sleep(seconds):
    raise AssertionError(f"unexpected sleep({seconds})")


@pytest.fixture
def client(sleeps):
    with make_client(sleeps) as c:
        yield c


def body_of(request: httpx.Request):
    return json.loads(request.content) if request.content else None


# -- every method's request and response ---------------------------------------------------------

METHOD_CASES = [
    # (id, call, http method, path (raw), query, body, answer, expected result)
    ("ping", lambda c: c.ping(), "GET", "/", {}, None, {}, None),
    ("register", lambda c: c.register("orders-value", SCHEMA), "POST", "/subjects/orders-value/versions", {},
     {"schema": SCHEMA}, {"id": 7}, 7),
    ("register-rich", lambda c: c.register("orders-value", SCHEMA), "POST", "/subjects/orders-value/versions", {},
     {"schema": SCHEMA}, {"id": 8, "version": 2, "schema": SCHEMA, "schemaType": "AVRO", "guid": "x", "ts": 1}, 8),
    ("lookup", lambda c: c.lookup("orders-value", SCHEMA, deleted=True), "POST", "/subjects/orders-value",
     {"deleted": "true"}, {"schema": SCHEMA}, {"subject": "orders-value", "version": 2, "id": 7, "schema": SCHEMA},
     RegisteredSchema(subject="orders-value", version=2, id=7, schema=SCHEMA)),
    ("get_schema", lambda c: c.get_schema(7), "GET", "/schemas/ids/7", {}, None,
     {"schema": SCHEMA, "maxId": 9}, Schema(schema=SCHEMA, schema_type="AVRO")),
    ("get_schema-json", lambda c: c.get_schema(8), "GET", "/schemas/ids/8", {}, None,
     {"schema": "{}", "schemaType": "JSON", "references": [{"name": "n", "subject": "s", "version": 1}]},
     Schema(schema="{}", schema_type="JSON", references=[{"name": "n", "subject": "s", "version": 1}])),
    ("get_subjects", lambda c: c.get_subjects(), "GET", "/subjects", {}, None, ["a-value", "b-key"], ["a-value", "b-key"]),
    ("get_subjects-filtered", lambda c: c.get_subjects(deleted=True, prefix="orders"), "GET", "/subjects",
     {"deleted": "true", "subjectPrefix": "orders"}, None, ["orders-value"], ["orders-value"]),
    ("get_versions", lambda c: c.get_versions("orders-value"), "GET", "/subjects/orders-value/versions", {}, None,
     [1, 2], [1, 2]),
    ("get_versions-deleted", lambda c: c.get_versions("orders-value", deleted=True), "GET",
     "/subjects/orders-value/versions", {"deleted": "true"}, None, [1, 2, 3], [1, 2, 3]),
    ("get_version", lambda c: c.get_version("orders-value", 2), "GET", "/subjects/orders-value/versions/2", {}, None,
     {"subject": "orders-value", "version": 2, "id": 7, "schema": SCHEMA, "schemaType": "AVRO", "guid": "g"},
     RegisteredSchema(subject="orders-value", version=2, id=7, schema=SCHEMA)),
    ("get_latest", lambda c: c.get_latest("orders-value"), "GET", "/subjects/orders-value/versions/latest", {}, None,
     {"subject": "orders-value", "version": 3, "id": 9, "schema": SCHEMA},
     RegisteredSchema(subject="orders-value", version=3, id=9, schema=SCHEMA)),
    ("delete_subject", lambda c: c.delete_subject("orders-value"), "DELETE", "/subjects/orders-value", {}, None,
     [1, 2], [1, 2]),
    ("delete_subject-permanent", lambda c: c.delete_subject("orders-value", permanent=True), "DELETE",
     "/subjects/orders-value", {"permanent": "true"}, None, [1, 2], [1, 2]),
    ("delete_version", lambda c: c.delete_version("orders-value", 2), "DELETE", "/subjects/orders-value/versions/2",
     {}, None, 2, 2),
    ("delete_version-permanent", lambda c: c.delete_version("orders-value", "latest", permanent=True), "DELETE",
     "/subjects/orders-value/versions/latest", {"permanent": "true"}, None, 3, 3),
    ("test_compatibility", lambda c: c.test_compatibility("orders-value", SCHEMA), "POST",
     "/compatibility/subjects/orders-value/versions/latest", {"verbose": "true"}, {"schema": SCHEMA},
     {"is_compatible": False, "messages": ["READER_FIELD_MISSING_DEFAULT_VALUE"]},
     CompatibilityResult(is_compatible=False, messages=["READER_FIELD_MISSING_DEFAULT_VALUE"])),
    ("test_compatibility-v1-quiet", lambda c: c.test_compatibility("orders-value", SCHEMA, 1, verbose=False), "POST",
     "/compatibility/subjects/orders-value/versions/1", {}, {"schema": SCHEMA}, {"is_compatible": True},
     CompatibilityResult(is_compatible=True, messages=[])),
    ("test_compatibility_all", lambda c: c.test_compatibility_all("orders-value", SCHEMA), "POST",
     "/compatibility/subjects/orders-value/versions", {"verbose": "true"}, {"schema": SCHEMA},
     {"is_compatible": True, "messages": []}, CompatibilityResult(is_compatible=True)),
    ("get_config-global", lambda c: c.get_config(), "GET", "/config", {}, None,
     {"compatibilityLevel": "BACKWARD", "normalize": False}, CompatibilityLevel.BACKWARD),
    ("get_config-subject", lambda c: c.get_config("orders-value", default_to_global=True), "GET",
     "/config/orders-value", {"defaultToGlobal": "true"}, None, {"compatibilityLevel": "full_transitive"},
     CompatibilityLevel.FULL_TRANSITIVE),
    ("set_config-global", lambda c: c.set_config("full"), "PUT", "/config", {}, {"compatibility": "FULL"},
     {"compatibility": "FULL"}, CompatibilityLevel.FULL),
    ("set_config-subject", lambda c: c.set_config(CompatibilityLevel.NONE, "orders-value"), "PUT",
     "/config/orders-value", {}, {"compatibility": "NONE"}, {"compatibility": "NONE"}, CompatibilityLevel.NONE),
    ("delete_config", lambda c: c.delete_config("orders-value"), "DELETE", "/config/orders-value", {}, None,
     {"compatibilityLevel": "FULL"}, CompatibilityLevel.FULL),
    ("get_mode-global", lambda c: c.get_mode(), "GET", "/mode", {}, None, {"mode": "READWRITE"}, Mode.READWRITE),
    ("get_mode-subject", lambda c: c.get_mode("orders-value", default_to_global=True), "GET", "/mode/orders-value",
     {"defaultToGlobal": "true"}, None, {"mode": "READONLY"}, Mode.READONLY),
    ("set_mode", lambda c: c.set_mode("import", force=True), "PUT", "/mode", {"force": "true"}, {"mode": "IMPORT"},
     {"mode": "IMPORT"}, Mode.IMPORT),
    ("set_mode-subject", lambda c: c.set_mode(Mode.READONLY, "orders-value"), "PUT", "/mode/orders-value", {},
     {"mode": "READONLY"}, {"mode": "READONLY"}, Mode.READONLY),
]


@pytest.mark.parametrize(
    ("call", "method", "path", "query", "body", "answer", "expected"),
    [case[1:] for case in METHOD_CASES],
    ids=[case[0] for case in METHOD_CASES],
)
def test_method_request_and_response(client, call, method, path, query, body, answer, expected):
    with respx.mock(base_url=BASE) as router:
        route = router.route(method=method, path=path, name="call").respond(200, json=answer)
        result = call(client)
    assert route.call_count == 1
    request = route.calls.last.request
    assert request.method == method
    assert request.url.raw_path.split(b"?")[0] == path.encode()
    assert dict(request.url.params) == query
    assert body_of(request) == body
    assert request.headers["Accept"] == ACCEPT
    assert request.headers["User-Agent"] == USER_AGENT == request.headers["Confluent-Client-Version"]
    assert USER_AGENT.startswith("avro-registry-sink/")
    if body is None:
        assert "Content-Type" not in request.headers
    else:
        assert request.headers["Content-Type"] == MEDIA_TYPE
    assert result == expected


def test_subject_with_slash_and_space_is_percent_encoded(client):
    with respx.mock(base_url=BASE) as router:
        route = router.post("/subjects/db/orders v2-value/versions", name="register").respond(200, json={"id": 3})
        version = router.get("/subjects/db/orders v2-value/versions/latest", name="latest").respond(
            200, json={"subject": "db/orders v2-value", "version": 1, "id": 3, "schema": SCHEMA}
        )
        assert client.register("db/orders v2-value", SCHEMA) == 3
        assert client.get_latest("db/orders v2-value").subject == "db/orders v2-value"
    assert route.calls.last.request.url.raw_path == b"/subjects/db%2Forders%20v2-value/versions"
    assert version.calls.last.request.url.raw_path == b"/subjects/db%2Forders%20v2-value/versions/latest"


@pytest.mark.parametrize(
    ("config_normalize", "argument", "sent"),
    [(False, None, {}), (False, True, {"normalize": "true"}), (True, None, {"normalize": "true"}), (True, False, {})],
)
def test_normalize_query_parameter(sr, sleeps, config_normalize, argument, sent):
    with make_client(sleeps, normalize=config_normalize) as client:
        client.register("orders-value", SCHEMA, normalize=argument)
        lookup = sr.post("/subjects/orders-value", name="lookup").respond(
            200, json={"subject": "orders-value", "version": 1, "id": 7, "schema": SCHEMA}
        )
        client.lookup("orders-value", SCHEMA, normalize=argument)
    assert dict(sr["register"].calls.last.request.url.params) == sent
    assert dict(lookup.calls.last.request.url.params) == sent


def test_missing_schema_type_means_avro_and_unknown_fields_are_ignored(client, sr):
    sr.get("/schemas/ids/11", name="bare").respond(200, json={"schema": '"string"', "guid": "u", "ts": 5, "new": [1]})
    schema = client.get_schema(11)
    assert schema.schema_type == "AVRO" and schema.references == [] and schema.schema == '"string"'


def test_unexpected_success_body_is_a_registry_error(client, sr):
    sr.get("/subjects", name="subjects").respond(200, text="<html>proxy login</html>")
    with pytest.raises(errors.RegistryError, match=r"unexpected answer while listing subjects \(HTTP 200\).*proxy login") as info:
        client.get_subjects()
    assert type(info.value) is errors.RegistryError and info.value.status_code == 200


def test_invalid_level_or_mode_is_refused_before_any_request(client, sr):
    with pytest.raises(errors.ConfigError, match="valid values are NONE, BACKWARD"):
        client.set_config("SIDEWAYS")
    with pytest.raises(errors.ConfigError, match="valid values are READWRITE"):
        client.set_mode("WRITEONLY")
    assert client.cache_info().http_calls == 0


# -- error translation ---------------------------------------------------------------------------


def _status_for(code: int) -> int:
    return code if code < 1000 else code // 100


@pytest.mark.parametrize("code", sorted(errors.REGISTRY_ERROR_CODES), ids=str)
def test_each_error_code_maps_to_its_class(client, code):
    expected = errors.REGISTRY_ERROR_CODES[code]
    status = _status_for(code)
    with respx.mock(base_url=BASE) as router:
        route = router.get("/subjects/orders-value/versions/2", name="version").respond(
            status, json={"error_code": code, "message": f"registry says {code}"}
        )
        with pytest.raises(errors.RegistryError) as info:
            client.get_version("orders-value", 2)
    err = info.value
    assert type(err) is expected
    assert route.call_count == 1  # 4xx are not retried
    assert (err.status_code, err.error_code, err.subject, err.version) == (status, code, "orders-value", 2)
    assert err.registry_message == f"registry says {code}"
    text = str(err)
    for part in (f"HTTP {status}", f"error_code {code}", f"registry says {code}", "version 2", "'orders-value'", BASE):
        assert part in text
    assert pickle.loads(pickle.dumps(err)).error_code == code


@pytest.mark.parametrize("code", [409, 40901])
def test_incompatible_schema_carries_the_registry_reasons(client, code):
    reasons = (
        "Schema being registered is incompatible with an earlier schema for subject \"orders-value\", details: "
        "[{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at path '/fields/1' in the "
        "new schema has no default value and is missing in the old schema'}, {oldSchemaVersion: 1}]"
    )
    with respx.mock(base_url=BASE) as router:
        router.post("/subjects/orders-value/versions", name="register").respond(409, json={"error_code": code, "message": reasons})
        with pytest.raises(errors.IncompatibleSchema) as info:
            client.register("orders-value", SCHEMA)
    err = info.value
    assert err.reasons == reasons and err.context["reasons"] == reasons
    assert (err.status_code, err.error_code, err.subject, err.operation) == (409, code, "orders-value", "register")
    text = str(err)
    assert "incompatible while registering a schema under subject 'orders-value'" in text
    assert f"HTTP 409, error_code {code}" in text and "READER_FIELD_MISSING_DEFAULT_VALUE" in text
    assert "test_compatibility_all" in text  # the way out
    assert client.cache_info().registered == 0  # failures are not cached


def test_get_schema_error_names_the_schema_id(client):
    with respx.mock(base_url=BASE) as router:
        router.get("/schemas/ids/42", name="by_id").respond(404, json={"error_code": 40403, "message": "Schema 42 not found"})
        with pytest.raises(errors.SchemaNotFound, match=r"fetching schema id 42: Schema 42 not found\.") as info:
            client.get_schema(42)
    assert info.value.schema_id == 42


@pytest.mark.parametrize(
    ("status", "content", "expected"),
    [
        (404, b"<html><body>Not Found</body></html>", errors.RegistryError),
        (422, b"not json at all", errors.InvalidSchema),
        (409, b"", errors.IncompatibleSchema),
        (401, b'{"message": "Unauthorized"}', errors.RegistryError),
    ],
)
def test_unparsable_error_body(client, status, content, expected):
    with respx.mock(base_url=BASE) as router:
        router.get("/subjects/orders-value/versions", name="versions").respond(status, content=content)
        with pytest.raises(errors.RegistryError) as info:
            client.get_versions("orders-value")
    err = info.value
    assert type(err) is expected and err.error_code is None and err.status_code == status
    assert "no error_code" in str(err)
    if content.startswith(b"{"):
        assert "Unauthorized" in err.registry_message
    else:
        assert err.registry_message.startswith(f"HTTP {status} ")
        assert (content.decode() or "(empty body)") in err.registry_message


def test_long_error_body_is_cut_to_an_excerpt(client):
    with respx.mock(base_url=BASE) as router:
        router.get("/subjects", name="subjects").respond(404, text="x" * 5000)
        with pytest.raises(errors.RegistryError) as info:
            client.get_subjects()
    assert len(str(info.value)) < 500


def test_hint_for_subject_level_config(client):
    with respx.mock(base_url=BASE) as router:
        router.get("/config/orders-value", name="config").respond(
            404, json={"error_code": 40408, "message": "Subject 'orders-value' does not have subject-level compatibility configured"}
        )
        with pytest.raises(errors.SubjectConfigNotFound, match="default_to_global=True"):
            client.get_config("orders-value")


# -- retries and fail-over -----------------------------------------------------------------------


def _assert_backoff(sleeps, count, backoff=0.2, cap=5.0):
    assert len(sleeps) == count
    for attempt, waited in enumerate(sleeps):
        assert 0 <= waited <= min(backoff * 2**attempt, cap)


@pytest.mark.parametrize(
    "failure",
    [
        httpx.Response(503, json={"error_code": 50003, "message": "Error while forwarding the request to the leader"}),
        httpx.Response(429, text="slow down"),
        httpx.Response(408, text="timeout"),
        httpx.Response(500, json={"error_code": 50001, "message": "store error"}),
        httpx.Response(502),
        httpx.Response(504),
        httpx.ConnectError("connection refused"),
        httpx.ReadTimeout("read timed out"),
    ],
    ids=["503", "429", "408", "500", "502", "504", "connect", "timeout"],
)
def test_retries_then_succeeds(client, sleeps, failure):
    with respx.mock(base_url=BASE) as router:
        route = router.post("/subjects/orders-value/versions", name="register")
        route.side_effect = [failure, failure, httpx.Response(200, json={"id": 5})]
        assert client.register("orders-value", SCHEMA) == 5
    assert route.call_count == 3
    _assert_backoff(sleeps, 2)
    assert client.cache_info().http_calls == 3


def test_backoff_is_capped(sleeps):
    with make_client(sleeps, max_retries=6, retry_backoff=1.0, retry_backoff_max=3.0) as client, respx.mock(base_url=BASE) as router:
        router.get("/subjects", name="subjects").respond(503)
        with pytest.raises(errors.RegistryUnavailable):
            client.get_subjects()
    _assert_backoff(sleeps, 6, backoff=1.0, cap=3.0)


def test_retries_exhausted_on_transport_errors_names_every_url(sleeps):
    with make_client(sleeps, urls=(BASE, BASE2), max_retries=2) as client, respx.mock(assert_all_called=True) as router:
        first = router.get(f"{BASE}/subjects/orders-value/versions/latest", name="first").mock(
            side_effect=httpx.ConnectError("connection refused")
        )
        second = router.get(f"{BASE2}/subjects/orders-value/versions/latest", name="second").mock(
            side_effect=httpx.ConnectTimeout("timed out")
        )
        with pytest.raises(errors.RegistryUnavailable) as info:
            client.get_latest("orders-value")
    err = info.value
    assert first.call_count == 3 and second.call_count == 3
    assert len(sleeps) == 4  # 2 per URL; none before the fail-over or after the last attempt
    text = str(err)
    assert BASE in text and BASE2 in text and "6 attempts" in text and "ConnectTimeout" in text
    assert "fetching version latest of subject 'orders-value'" in text
    assert isinstance(err.__cause__, httpx.ConnectTimeout)
    assert err.urls == (BASE, BASE2) and err.status_code is None and err.retryable


def test_retries_exhausted_on_status_keeps_the_registry_answer(client, sleeps):
    with respx.mock(base_url=BASE) as router:
        route = router.post("/subjects/orders-value/versions", name="register").respond(
            503, json={"error_code": 50003, "message": "Error while forwarding the request to the leader"}
        )
        with pytest.raises(errors.RegistryUnavailable) as info:
            client.register("orders-value", SCHEMA)
    assert route.call_count == 4
    _assert_backoff(sleeps, 3)
    err = info.value
    assert (err.status_code, err.error_code) == (503, 50003)
    assert "HTTP 503 (error_code 50003)" in str(err) and "forwarding the request to the leader" in str(err)
    assert BASE in str(err) and "4 attempts" in str(err)


def test_fails_over_to_the_next_url(sleeps):
    with make_client(sleeps, urls=(BASE, BASE2), max_retries=1) as client, respx.mock() as router:
        down = router.post(f"{BASE}/subjects/orders-value/versions", name="down").respond(503)
        up = router.post(f"{BASE2}/subjects/orders-value/versions", name="up").respond(200, json={"id": 12})
        assert client.register("orders-value", SCHEMA) == 12
    assert down.call_count == 2 and up.call_count == 1
    assert len(sleeps) == 1
    assert body_of(up.calls.last.request) == {"schema": SCHEMA}


def test_no_fail_over_for_a_refusal(sleeps):
    with make_client(sleeps, urls=(BASE, BASE2)) as client, respx.mock(assert_all_called=False) as router:
        first = router.get(f"{BASE}/subjects/x/versions", name="first").respond(404, json={"error_code": 40401, "message": "Subject 'x' not found."})
        second = router.get(f"{BASE2}/subjects/x/versions", name="second").respond(200, json=[1])
        with pytest.raises(errors.SubjectNotFound):
            client.get_versions("x")
    assert first.call_count == 1 and second.call_count == 0 and sleeps == []


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [(404, 40401, errors.SubjectNotFound), (422, 42201, errors.InvalidSchema), (401, 401, errors.RegistryError),
     (403, 40301, errors.RegistryError), (501, 501, errors.RegistryUnavailable)],
)
def test_no_retry_on_non_retryable_status(client, sleeps, status, code, expected):
    with respx.mock(base_url=BASE) as router:
        route = router.post("/subjects/orders-value/versions", name="register").respond(status, json={"error_code": code, "message": "no"})
        with pytest.raises(expected):
            client.register("orders-value", SCHEMA)
    assert route.call_count == 1 and sleeps == []


def test_max_retries_zero_makes_one_attempt(sr, sleeps):
    with make_client(sleeps, max_retries=0) as client:
        sr["register"].respond(503)
        with pytest.raises(errors.RegistryUnavailable, match="1 attempt\\)"):
            client.register("orders-value", SCHEMA)
    assert sr["register"].call_count == 1 and sleeps == []


# -- authentication and secrets ------------------------------------------------------------------


def _basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_basic_auth_from_config(sr):
    with make_client(username="alice", password=SecretStr(PASSWORD)) as client:
        client.ping()
    assert sr["root"].calls.last.request.headers["Authorization"] == _basic("alice", PASSWORD)


def test_basic_auth_from_url_userinfo_is_decoded_and_stripped(sr):
    with make_client(urls=("http://al%40ice:p%3Ass%2Fword@registry:8081/",)) as client:
        assert client.urls == (BASE,)
        client.ping()
    request = sr["root"].calls.last.request
    assert request.headers["Authorization"] == _basic("al@ice", "p:ss/word")
    assert request.url.userinfo == b""


def test_bearer_token(sr):
    with make_client(bearer_token=SecretStr(TOKEN)) as client:
        client.ping()
        assert TOKEN not in repr(client) and "bearer" in repr(client)
    assert sr["root"].calls.last.request.headers["Authorization"] == f"Bearer {TOKEN}"


def test_no_auth_header_without_credentials(client, sr):
    client.ping()
    assert "Authorization" not in sr["root"].calls.last.request.headers


def test_basic_and_bearer_together_are_refused():
    with pytest.raises(errors.ConfigError, match="only one of"):
        make_client(username="alice", password=SecretStr(PASSWORD), bearer_token=SecretStr(TOKEN))


@pytest.mark.parametrize(
    "credentials",
    [
        {"username": "alice", "password": SecretStr(PASSWORD)},
        {"urls": (f"http://alice:{PASSWORD}@registry:8081",)},
        {"bearer_token": SecretStr(PASSWORD)},
    ],
    ids=["config", "url", "bearer"],
)
def test_credentials_never_reach_messages_or_reprs(sleeps, credentials):
    encoded = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    with make_client(sleeps, max_retries=1, **credentials) as client:
        assert PASSWORD not in repr(client) and PASSWORD not in str(client)
        with respx.mock(base_url=BASE) as router:
            # A misbehaving proxy echoing the credential back must not leak it either.
            router.get("/subjects", name="subjects").respond(401, json={"error_code": 40101, "message": f"bad password {PASSWORD}"})
            router.get("/subjects/x/versions", name="versions").mock(side_effect=httpx.ConnectError(f"refused {PASSWORD}"))
            caught = []
            for call in (client.get_subjects, lambda: client.get_versions("x")):
                with pytest.raises(errors.RegistryError) as info:
                    call()
                caught.append(info.value)
    for err in caught:
        for text in (str(err), repr(err), repr(err.context), str(pickle.loads(pickle.dumps(err)))):
            assert PASSWORD not in text and encoded not in text
        assert "**********" in str(err)


# -- cache ---------------------------------------------------------------------------------------


def test_register_cache_hit_makes_no_request(client, sr):
    assert client.register("orders-value", SCHEMA) == 7
    assert client.register("orders-value", SCHEMA) == 7
    assert sr["register"].call_count == 1
    info = client.cache_info()
    assert (info.hits, info.misses, info.http_calls, info.registered) == (1, 1, 1, 1)


def test_register_cache_keys_on_subject_exact_text_and_normalize(client, sr):
    sr.post("/subjects/orders-key/versions", name="key").respond(200, json={"id": 8})
    client.register("orders-value", SCHEMA)
    client.register("orders-value", SCHEMA + " ")  # other text: the registry decides
    client.register("orders-value", SCHEMA, normalize=True)
    assert client.register("orders-key", SCHEMA) == 8
    assert sr["register"].call_count == 3 and sr["key"].call_count == 1
    before = client.cache_info().http_calls
    for text in (SCHEMA, SCHEMA + " "):
        client.register("orders-value", text)
    client.register("orders-value", SCHEMA, normalize=True)
    client.register("orders-key", SCHEMA)
    assert client.cache_info().http_calls == before  # steady state: zero HTTP calls


def test_get_schema_is_cached_by_id(client, sr):
    first = client.get_schema(7)
    assert client.get_schema(7) is first
    assert sr["schema_by_id"].call_count == 1
    assert client.cache_info().schemas == 1


def test_delete_forgets_the_subject_registrations(client, sr):
    sr.delete("/subjects/orders-value", name="delete").respond(200, json=[1])
    client.register("orders-value", SCHEMA)
    client.delete_subject("orders-value")
    client.register("orders-value", SCHEMA)
    assert sr["register"].call_count == 2


def test_clear_cache(client, sr):
    client.register("orders-value", SCHEMA)
    client.clear_cache()
    client.register("orders-value", SCHEMA)
    assert sr["register"].call_count == 2


def test_cache_is_thread_safe(client, sr):
    client.register("orders-value", SCHEMA)
    barrier = threading.Barrier(8)

    def work():
        barrier.wait()
        for _ in range(200):
            assert client.register("orders-value", SCHEMA) == 7

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = client.cache_info()
    assert info.hits == 1600 and info.misses == 1 and sr["register"].call_count == 1


# -- construction: URLs, timeout, TLS ------------------------------------------------------------


def test_no_url_is_a_config_error():
    with pytest.raises(errors.ConfigError, match="at least one schema registry URL"):
        RegistryClient(RegistryConfig())


def test_custom_transport_and_timeout():
    seen = []

    def handler(request):
        seen.append(request)
        return httpx.Response(200, json=[1])

    with RegistryClient(RegistryConfig(urls=(BASE + "/",), timeout=2.5), transport=httpx.MockTransport(handler)) as client:
        assert client.get_versions("s") == [1]
    assert str(seen[0].url) == f"{BASE}/subjects/s/versions"
    assert seen[0].extensions["timeout"] == {"connect": 2.5, "read": 2.5, "write": 2.5, "pool": 2.5}


def test_base_url_with_path_prefix():
    seen = []
    transport = httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(200, json={}))
    with RegistryClient(RegistryConfig(urls=("https://host/sr/",)), transport=transport) as client:
        client.ping()
    assert str(seen[0].url) == "https://host/sr/"


def _tls_of(config):
    from avro_registry_sink.registry.client import _tls_verify

    return _tls_verify(config)


def test_tls_ca_bundle_builds_a_context():
    context = _tls_of(RegistryConfig(urls=("https://h",), ca_bundle=certifi.where()))
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED
    assert _tls_of(RegistryConfig(urls=("https://h",))) is True
    assert _tls_of(RegistryConfig(urls=("https://h",), verify=False)) is False


def test_plain_http_registries_build_no_tls_context():
    assert _tls_of(RegistryConfig(urls=("http://a:8081", "HTTP://b:8081"))) is False
    assert _tls_of(RegistryConfig(urls=("http://a:8081", "https://b:8081"))) is True  # one TLS URL: verified
    with RegistryClient(RegistryConfig(urls=("http://a:8081",))) as client:  # no CA bundle read (35-40 ms)
        assert client._http._transport._pool._ssl_context.cert_store_stats()["x509_ca"] == 0
    with RegistryClient(RegistryConfig(urls=("https://a:8081",))) as client:
        assert client._http._transport._pool._ssl_context.cert_store_stats()["x509_ca"] > 0


def test_tls_bad_paths_are_config_errors(tmp_path):
    with pytest.raises(errors.ConfigError, match="CA bundle"):
        _tls_of(RegistryConfig(urls=("https://h",), ca_bundle=str(tmp_path / "missing.pem")))
    with pytest.raises(errors.ConfigError, match="client certificate"):
        _tls_of(RegistryConfig(urls=("https://h",), client_cert=str(tmp_path / "missing.pem")))
    with pytest.raises(errors.ConfigError, match="client_key without client_cert"):
        _tls_of(RegistryConfig(urls=("https://h",), client_key=str(tmp_path / "k.pem")))


def test_tls_client_certificate_is_loaded(tmp_path):
    crypto = pytest.importorskip("cryptography")
    del crypto
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "client.pem", tmp_path / "client.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    context = _tls_of(RegistryConfig(urls=("https://h",), client_cert=str(cert_path), client_key=str(key_path)))
    assert isinstance(context, ssl.SSLContext)
    with RegistryClient(RegistryConfig(urls=("https://h",), client_cert=str(cert_path), client_key=str(key_path))) as client:
        assert client.urls == ("https://h",)


# -- the data-contract probe: a version registered with a rule set, read back ----------------------------------

PROBE = r"/(subjects|config)/avro-registry-sink-contract-probe-[0-9a-f]{12}"
PROBE_RULE = {"name": "avroRegistrySinkProbe", "kind": "TRANSFORM", "mode": "UPGRADE", "type": "JSONATA", "expr": "$"}
PROBE_VERSION = {"subject": "p", "version": 1, "id": 41, "schema": "{}", "metadata": {"properties": {
    "major_version": "1"}}, "ruleSet": {"migrationRules": [PROBE_RULE]}}


def _probe_registry(router, version: dict) -> dict[str, respx.Route]:
    """A registry that passes the config half of the probe and answers the probe version with ``version``."""
    missing = httpx.Response(404, json={"error_code": 40401, "message": "Subject not found"})
    config = {"compatibilityLevel": "BACKWARD", "compatibilityGroup": "major_version",
              "defaultRuleSet": {"migrationRules": [PROBE_RULE]}}
    return {
        "metadata": router.route(method="GET", path__regex=PROBE + "/metadata$").mock(
            side_effect=[missing, httpx.Response(200, json=version)]),
        "put_config": router.route(method="PUT", path__regex=PROBE + "$").respond(200, json=config),
        "get_config": router.route(method="GET", path__regex=PROBE + "$").respond(200, json=config),
        "delete_config": router.route(method="DELETE", path__regex=r"/config/.*probe.*$").respond(200, json=config),
        "register": router.route(method="POST", path__regex=PROBE + "/versions$").respond(200, json={"id": 41,
                                                                                                  "version": 1}),
        "version": router.route(method="GET", path__regex=PROBE + "/versions/1$").respond(200, json=version),
        "delete_subject": router.route(method="DELETE", path__regex=r"/subjects/.*probe.*$").respond(200, json=[1]),
    }


def test_probe_registers_a_version_with_a_rule_set_and_reads_it_back(sr, client):
    routes = _probe_registry(sr, PROBE_VERSION)
    assert client.data_contracts_unsupported() is None
    body = body_of(routes["register"].calls.last.request)
    assert body["ruleSet"] == {"migrationRules": [PROBE_RULE]} and body["metadata"] == {
        "properties": {"major_version": "1"}}
    deletes = [dict(call.request.url.params) for call in routes["delete_subject"].calls]
    assert deletes == [{}, {"permanent": "true"}]  # the probe subject removed: soft, then permanent
    assert routes["delete_config"].called


def test_probe_refuses_a_registry_that_drops_version_rule_sets(sr, client):
    routes = _probe_registry(sr, {k: v for k, v in PROBE_VERSION.items() if k != "ruleSet"})
    reason = client.data_contracts_unsupported()
    assert reason is not None and "dropped the rule set of a schema version" in reason
    assert "'avroRegistrySinkProbe'" in reason and "no rule set" in reason and "schema id 41" in reason
    assert len(routes["delete_subject"].calls) == 2  # cleaned up all the same


def test_probe_refuses_a_registry_that_drops_version_metadata(sr, client):
    _probe_registry(sr, {k: v for k, v in PROBE_VERSION.items() if k != "metadata"})
    reason = client.data_contracts_unsupported()
    assert reason is not None and "metadata properties {'major_version': '1'}" in reason


def test_probe_reports_a_refused_probe_version(sr, client):
    routes = _probe_registry(sr, PROBE_VERSION)
    routes["register"].respond(422, json={"error_code": 42210, "message": "Invalid rule set"})
    reason = client.data_contracts_unsupported()
    assert reason is not None and "HTTP 422, error_code 42210: Invalid rule set" in reason
