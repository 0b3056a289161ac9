"""The embedded registry when exposed: basic auth, TLS, request-size and nesting limits, non-finite defaults,
a large registration not stalling other requests, and a bad-request suite that never gets a 500.

Every registry here is a real ``EmbeddedRegistry`` over real HTTP(S); the certificates are made by the test.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from avro_registry_sink.errors import ConfigError, RegistryError
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import BasicAuthUsers, EmbeddedRegistry, TlsFiles, exposure_warning
from avro_registry_sink.registry.embedded.store import MAX_SCHEMA_DEPTH_LIMIT
from avro_registry_sink.settings.config import RegistryConfig
from tests.support.pki import Pki, make_pki
from tests.support.servers import wait_for_answer

pytestmark = pytest.mark.integration

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
USER, PASSWORD = "alice", "Pa55-w0rd:with:colons"
LIMIT = 256 * 1024  # request-size limit of the bad-request registry
DEPTH = 40  # schema depth limit of the bad-request registry
ROW = json.dumps({"type": "record", "name": "Row", "fields": [{"name": "a", "type": "long"}]})


def users() -> BasicAuthUsers:
    return BasicAuthUsers({USER: PASSWORD})


def array_nest(levels: int, leaf: str = '"string"') -> str:
    """``levels`` arrays around ``leaf``: JSON depth == ``levels``."""
    text = leaf
    for _ in range(levels):
        text = '{"type":"array","items":%s}' % text
    return text


def record_nest(levels: int) -> str:
    """Records nested through a field ``levels`` times: JSON depth == 3 * levels - 2 (+1 for the leaf)."""
    text = '"long"'
    for i in range(levels):
        text = '{"type":"record","name":"R%d","fields":[{"name":"f","type":%s}]}' % (i, text)
    return text


def union_nest(levels: int) -> str:
    """Maps of nullable unions: two JSON levels per map."""
    text = '"long"'
    for _ in range(levels):
        text = '{"type":"map","values":["null",%s]}' % text
    return text


def record_with(field_type: Any, default_json: str) -> str:
    """A record whose one field has a default written verbatim as JSON text (NaN and Infinity included)."""
    return '{"type":"record","name":"D","fields":[{"name":"x","type":%s,"default":%s}]}' % (
        json.dumps(field_type),
        default_json,
    )


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


# -- the bad-request suite ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded() -> Iterator[EmbeddedRegistry]:
    """A registry with basic auth, a 256 KiB request limit and depth 40, holding ``s-value`` v1 (id 1)."""
    with EmbeddedRegistry(users=users(), max_request_bytes=LIMIT, max_schema_depth=DEPTH) as registry:
        assert registry.url is not None
        with httpx.Client(base_url=registry.url, auth=(USER, PASSWORD), timeout=30) as client:
            assert client.post("/subjects/s-value/versions", json={"schema": ROW}).json()["id"] == 1
        yield registry


def schema_body(schema: str, **extra: Any) -> dict[str, Any]:
    return {"json": {"schema": schema, **extra}}


def raw(content: bytes | str, content_type: str = MEDIA_TYPE) -> dict[str, Any]:
    return {"content": content, "headers": {"Content-Type": content_type}}


def _chunks(total: int) -> Iterator[bytes]:
    chunk = b" " * 65536
    for _ in range(total // len(chunk)):
        yield chunk


REG = "/subjects/new-value/versions"
DEEP_JSON = "[" * 5000 + "]" * 5000

# (id, method, path, request kwargs, expected HTTP status, expected error_code)
BAD_REQUESTS: list[tuple[str, str, str, dict[str, Any], int, int]] = [
    # malformed request bodies
    ("body-not-json", "POST", REG, raw("{"), 400, 400),
    ("body-truncated", "POST", REG, raw('{"schema": "\\"string\\"'), 400, 400),
    ("body-not-utf8", "POST", REG, raw(b"\xff\xfe{}"), 400, 400),
    ("body-array", "POST", REG, raw("[1, 2]"), 422, 422),
    ("body-string", "POST", REG, raw('"string"'), 422, 422),
    ("body-deeply-nested", "POST", REG, raw('{"schema": "\\"string\\"", "metadata": %s}' % DEEP_JSON), 400, 400),
    # wrong types in the body
    ("schema-missing", "POST", REG, {"json": {}}, 422, 42201),
    ("schema-empty", "POST", REG, schema_body("  "), 422, 42201),
    ("schema-an-object", "POST", REG, {"json": {"schema": {"type": "string"}}}, 422, 42201),
    ("schema-a-number", "POST", REG, {"json": {"schema": 5}}, 422, 42201),
    ("schema-not-json", "POST", REG, schema_body("{not json"), 422, 42201),
    ("schema-type-protobuf", "POST", REG, schema_body('"string"', schemaType="PROTOBUF"), 422, 42201),
    ("schema-type-number", "POST", REG, schema_body('"string"', schemaType=5), 422, 42201),
    ("id-a-string", "POST", REG, schema_body('"string"', id="7"), 422, 422),
    ("version-a-float", "POST", REG, schema_body('"string"', version=1.5), 422, 422),
    ("version-not-next", "POST", "/subjects/s-value/versions", schema_body('"string"', version=7), 422, 42201),
    ("id-outside-import-mode", "POST", REG, schema_body('"string"', id=5), 422, 42205),
    # invalid schemas and names
    ("unknown-type-name", "POST", REG, schema_body('{"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]}'), 422, 42201),
    ("bad-record-name", "POST", REG, schema_body('{"type":"record","name":"1R","fields":[]}'), 422, 42201),
    ("bad-field-name", "POST", REG, schema_body('{"type":"record","name":"R","fields":[{"name":"a-b","type":"int"}]}'), 422, 42201),
    ("bad-namespace", "POST", REG, schema_body('{"type":"record","name":"R","namespace":"a..b","fields":[]}'), 422, 42201),
    ("duplicate-field", "POST", REG, schema_body('{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"a","type":"int"}]}'), 422, 42201),
    ("duplicate-enum-symbol", "POST", REG, schema_body('{"type":"enum","name":"E","symbols":["A","A"]}'), 422, 42201),
    ("record-without-fields", "POST", REG, schema_body('{"type":"record","name":"R"}'), 422, 42201),
    ("nested-union", "POST", REG, schema_body('["null",["int","long"]]'), 422, 42201),
    ("wrong-default-type", "POST", REG, schema_body(record_with("string", "5")), 422, 42201),
    ("int-default-out-of-range", "POST", REG, schema_body(record_with("int", "4294967296")), 422, 42201),
    # non-finite defaults
    ("default-NaN-literal", "POST", REG, schema_body(record_with("double", "NaN")), 422, 42201),
    ("default-Infinity-literal", "POST", REG, schema_body(record_with("double", "Infinity")), 422, 42201),
    ("default-minus-Infinity-literal", "POST", REG, schema_body(record_with("float", "-Infinity")), 422, 42201),
    ("default-NaN-string-double", "POST", REG, schema_body(record_with("double", '"NaN"')), 422, 42201),
    ("default-Infinity-string-float", "POST", REG, schema_body(record_with("float", '"-Infinity"')), 422, 42201),
    ("default-overflowing-number", "POST", REG, schema_body(record_with("double", "1e999")), 422, 42201),
    ("default-NaN-in-array", "POST", REG, schema_body(record_with({"type": "array", "items": "double"}, "[1.5, NaN]")), 422, 42201),
    ("default-NaN-in-union", "POST", REG, schema_body(record_with(["double", "null"], "NaN")), 422, 42201),
    ("NaN-in-custom-property", "POST", REG, schema_body('{"type":"string","x.weight":NaN}'), 422, 42201),
    ("compat-NaN-default", "POST", "/compatibility/subjects/s-value/versions/latest", schema_body(record_with("double", "NaN")), 422, 42201),
    # nesting beyond the limit (40): every shape, every endpoint that parses
    ("deep-arrays", "POST", REG, schema_body(array_nest(DEPTH + 1)), 422, 42201),
    ("deep-records", "POST", REG, schema_body(record_nest(15)), 422, 42201),
    ("deep-map-unions", "POST", REG, schema_body(union_nest(25)), 422, 42201),
    ("deep-custom-property", "POST", REG, schema_body('{"type":"string","x":%s}' % ("[" * 60 + "]" * 60)), 422, 42201),
    ("deep-beyond-json-decoder", "POST", REG, schema_body(DEEP_JSON), 422, 42201),
    ("deep-lookup", "POST", "/subjects/s-value", schema_body(array_nest(200)), 422, 42201),
    ("deep-compatibility", "POST", "/compatibility/subjects/s-value/versions", schema_body(array_nest(200)), 422, 42201),
    # references
    ("references-not-a-list", "POST", REG, schema_body('"string"', references={"name": "x"}), 422, 42201),
    ("reference-without-subject", "POST", REG, schema_body('"string"', references=[{"name": "x"}]), 422, 42201),
    ("reference-unknown-subject", "POST", REG, schema_body('"string"', references=[{"name": "x", "subject": "nope", "version": 1}]), 422, 42201),
    ("reference-unknown-version", "POST", REG, schema_body('"string"', references=[{"name": "Row", "subject": "s-value", "version": 9}]), 422, 42201),
    ("reference-bad-version", "POST", REG, schema_body('"string"', references=[{"name": "Row", "subject": "s-value", "version": "x"}]), 422, 42201),
    # unknown subjects, versions and ids
    ("unknown-subject-versions", "GET", "/subjects/nope/versions", {}, 404, 40401),
    ("unknown-subject-latest", "GET", "/subjects/nope/versions/latest", {}, 404, 40401),
    ("unknown-version", "GET", "/subjects/s-value/versions/99", {}, 404, 40402),
    ("version-zero", "GET", "/subjects/s-value/versions/0", {}, 422, 42202),
    ("version-negative", "GET", "/subjects/s-value/versions/-2", {}, 422, 42202),
    ("version-word", "GET", "/subjects/s-value/versions/earliest", {}, 422, 42202),
    ("version-too-large", "GET", "/subjects/s-value/versions/2147483648", {}, 422, 42202),
    ("version-decimal", "GET", "/subjects/s-value/versions/1.5", {}, 422, 42202),
    ("unknown-id", "GET", "/schemas/ids/999", {}, 404, 40403),
    ("negative-id", "GET", "/schemas/ids/-1", {}, 404, 40403),
    ("id-not-a-number", "GET", "/schemas/ids/abc", {}, 404, 404),
    ("unknown-id-subjects", "GET", "/schemas/ids/999/subjects", {}, 404, 40403),
    ("lookup-unknown-subject", "POST", "/subjects/nope", schema_body(ROW), 404, 40401),
    ("lookup-unknown-schema", "POST", "/subjects/s-value", schema_body('"string"'), 404, 40403),
    ("delete-unknown-subject", "DELETE", "/subjects/nope", {}, 404, 40401),
    ("permanent-delete-live-version", "DELETE", "/subjects/s-value/versions/1?permanent=true", {}, 404, 40407),
    ("compat-unknown-version", "POST", "/compatibility/subjects/s-value/versions/99", schema_body(ROW), 404, 40402),
    ("subject-config-unset", "GET", "/config/nope", {}, 404, 40408),
    ("subject-mode-unset", "GET", "/mode/nope", {}, 404, 40409),
    ("delete-unset-subject-config", "DELETE", "/config/nope", {}, 404, 40401),
    # compatibility levels and modes
    ("level-unknown", "PUT", "/config", {"json": {"compatibility": "SIDEWAYS"}}, 422, 42203),
    ("level-a-number", "PUT", "/config/s-value", {"json": {"compatibility": 5}}, 422, 42203),
    ("level-missing", "PUT", "/config/s-value", {"json": {}}, 422, 42203),
    ("mode-unknown", "PUT", "/mode", {"json": {"mode": "FAST"}}, 422, 42204),
    ("mode-forward-on-subject", "PUT", "/mode/s-value", {"json": {"mode": "FORWARD"}}, 422, 42204),
    ("import-mode-with-subjects", "PUT", "/mode", {"json": {"mode": "IMPORT"}}, 422, 42205),
    # invalid subjects
    ("subject-reserved", "POST", "/subjects/__GLOBAL/versions", schema_body('"string"'), 422, 42208),
    ("subject-control-character", "POST", "/subjects/a%01b/versions", schema_body('"string"'), 422, 42208),
    # methods, paths, media types
    ("method-not-allowed", "PATCH", "/subjects", {}, 405, 405),
    ("method-put-on-versions", "PUT", "/subjects/s-value/versions", {}, 405, 405),
    ("unknown-path", "GET", "/nope", {}, 404, 404),
    ("path-too-long", "GET", "/subjects/s-value/versions/1/extra", {}, 404, 404),
    ("content-type-unsupported", "POST", REG, raw('{"schema": "\\"string\\""}', "text/plain"), 415, 415),
    ("accept-unsatisfiable", "GET", "/subjects", {"headers": {"Accept": "text/html"}}, 406, 406),
    # request size
    ("body-over-limit", "POST", REG, raw(json.dumps({"schema": json.dumps({"type": "string", "doc": "x" * LIMIT})})), 413, 413),
    ("chunked-body-over-limit", "POST", REG, {"content": _chunks(4 * LIMIT), "headers": {"Content-Type": MEDIA_TYPE}}, 413, 413),
]

BAD_AUTH: list[tuple[str, dict[str, str]]] = [
    ("no-credentials", {}),
    ("wrong-password", basic(USER, "wrong")),
    ("unknown-user", basic("mallory", PASSWORD)),
    ("password-of-another-scheme", {"Authorization": f"Bearer {PASSWORD}"}),
    ("malformed-base64", {"Authorization": "Basic %%%not-base64"}),
    ("no-colon", {"Authorization": "Basic " + base64.b64encode(USER.encode()).decode()}),
    ("empty-basic", {"Authorization": "Basic"}),
]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_bad_request_gets_a_4xx_with_confluents_error_code(
    guarded: EmbeddedRegistry, method: str, path: str, kwargs: dict[str, Any], status: int, code: int
) -> None:
    with httpx.Client(base_url=guarded.url or "", auth=(USER, PASSWORD), timeout=60) as client:
        response = client.request(method, path, **kwargs)
        assert (response.status_code, response.json()["error_code"]) == (status, code), response.text[:500]
        assert response.json()["message"]
        # the registry is unharmed and unchanged: nothing of the bad request was registered
        assert client.get("/subjects").json() == ["s-value"]
        assert client.get("/subjects/s-value/versions").json() == [1]


@pytest.mark.parametrize("headers", [case[1] for case in BAD_AUTH], ids=[case[0] for case in BAD_AUTH])
def test_bad_credentials_get_401_with_confluents_body_and_no_secret(
    guarded: EmbeddedRegistry, headers: dict[str, str]
) -> None:
    with httpx.Client(base_url=guarded.url or "", timeout=30) as client:
        for method, path, body in (("GET", "/subjects", None), ("POST", REG, {"schema": ROW})):
            response = client.request(method, path, headers=headers, json=body)
            assert response.status_code == 401
            assert response.json() == {"error_code": 401, "message": "Unauthorized"}
            assert response.headers["www-authenticate"].startswith('Basic realm="SchemaRegistry"')
            assert PASSWORD not in response.text


def test_the_suite_has_at_least_fifty_distinct_cases() -> None:
    ids = [case[0] for case in BAD_REQUESTS] + [case[0] for case in BAD_AUTH]
    assert len(ids) == len(set(ids)) >= 50


def test_auth_is_checked_before_the_size_of_the_body(guarded: EmbeddedRegistry) -> None:
    big = json.dumps({"schema": json.dumps({"type": "string", "doc": "x" * LIMIT})})
    with httpx.Client(base_url=guarded.url or "", timeout=30) as client:
        response = client.post(REG, content=big, headers={"Content-Type": MEDIA_TYPE})
        assert response.status_code == 401


def test_a_body_just_under_the_limit_is_accepted(guarded: EmbeddedRegistry) -> None:
    schema = json.dumps({"type": "string", "doc": "x" * (LIMIT - 1024)})
    with httpx.Client(base_url=guarded.url or "", auth=(USER, PASSWORD), timeout=30) as client:
        response = client.post("/subjects/under-limit-value/versions", json={"schema": schema})
        assert response.status_code == 200, response.text[:300]
        client.delete("/subjects/under-limit-value")
        client.delete("/subjects/under-limit-value", params={"permanent": "true"})


# -- nesting: up to the limit works everywhere, beyond is a 422 -------------------------------------


@pytest.mark.parametrize("shape", ["arrays", "records", "map-unions"])
def test_schemas_at_the_highest_depth_limit_register_and_check_without_recursion_errors(shape: str) -> None:
    depth = MAX_SCHEMA_DEPTH_LIMIT
    make = {"arrays": (array_nest, 1), "records": (record_nest, 3), "map-unions": (union_nest, 2)}[shape]
    nest, per_level = make
    levels = (depth - 1) // per_level if shape == "records" else depth // per_level
    v1 = nest(levels)
    assert len(v1) and json.loads(v1)
    with EmbeddedRegistry(max_schema_depth=depth) as registry, httpx.Client(base_url=registry.url or "", timeout=120) as client:
        assert client.put("/config/deep-value", json={"compatibility": "FULL_TRANSITIVE"}).status_code == 200
        first = client.post("/subjects/deep-value/versions", json={"schema": v1})
        assert first.status_code == 200, first.text[-300:]
        v2 = v1.replace('"long"', '"string"').replace('"string"', '"bytes"', 1)
        checked = client.post("/compatibility/subjects/deep-value/versions", json={"schema": v2}, params={"verbose": "true"})
        assert checked.status_code == 200 and "is_compatible" in checked.json(), checked.text[-300:]
        assert client.post("/subjects/deep-value", json={"schema": v1}).json()["version"] == 1
        deeper = nest(levels + 2)
        refused = client.post("/subjects/deep-value/versions", json={"schema": deeper})
        assert (refused.status_code, refused.json()["error_code"]) == (422, 42201)
        assert f"the limit is {depth}" in refused.json()["message"]


def test_depth_limit_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="max_schema_depth"):
        EmbeddedRegistry(max_schema_depth=MAX_SCHEMA_DEPTH_LIMIT + 1).start()
    with pytest.raises(ConfigError, match="--max-request-bytes"):
        EmbeddedRegistry(max_request_bytes=0).start()


def test_finite_defaults_still_register() -> None:
    with EmbeddedRegistry() as registry, httpx.Client(base_url=registry.url or "", timeout=30) as client:
        for i, (field_type, default) in enumerate(
            [("double", "1.5e300"), ("float", '"3.5"'), ("double", "-0.0"), ({"type": "array", "items": "double"}, "[1, 2.5]")]
        ):
            response = client.post(f"/subjects/finite-{i}/versions", json={"schema": record_with(field_type, default)})
            assert response.status_code == 200, response.text


# -- a large registration does not stall other requests ---------------------------------------------


def wide_record(columns: int, extra: dict[str, Any] | None = None) -> str:
    fields: list[dict[str, Any]] = [
        {"name": f"column_{i}", "type": ["null", {"type": "string", "connect.parameters": {"tidb_type": "VARCHAR"}}],
         "default": None}
        for i in range(columns)
    ]
    if extra:
        fields.append(extra)
    return json.dumps({"type": "record", "name": "Wide", "namespace": "default.big", "fields": fields})


def test_a_large_registration_does_not_stall_concurrent_reads() -> None:
    """While a wide schema (8k columns, about 1 MB) is parsed and checked against its previous version,
    reads of other subjects and ids keep being answered: reads issued after the registration's body was
    fully sent complete before its answer arrives."""
    columns = 8_000
    with EmbeddedRegistry() as registry, httpx.Client(base_url=registry.url or "", timeout=300) as setup:
        assert setup.post("/subjects/small-value/versions", json={"schema": ROW}).status_code == 200
        setup.put("/config/wide-value", json={"compatibility": "FULL_TRANSITIVE"})
        assert setup.post("/subjects/wide-value/versions", json={"schema": wide_record(columns)}).status_code == 200
        v2 = wide_record(columns, {"name": "added", "type": "long", "default": 0})

        body_sent = threading.Event()
        done: dict[str, Any] = {}

        def trace(event: str, info: dict[str, Any]) -> None:
            if event == "http11.send_request_body.complete":
                body_sent.set()

        def register() -> None:
            with httpx.Client(base_url=registry.url or "", timeout=300) as client:
                response = client.post(
                    "/subjects/wide-value/versions", json={"schema": v2}, extensions={"trace": trace}
                )
            done["response"] = response
            done["at"] = time.monotonic()

        worker = threading.Thread(target=register)
        worker.start()
        assert body_sent.wait(120)
        reads: list[tuple[float, float]] = []  # (started, finished) of reads issued after the body was sent
        with httpx.Client(base_url=registry.url or "", timeout=300) as reader:
            while worker.is_alive() and len(reads) < 1000:
                started = time.monotonic()
                latest = reader.get("/subjects/small-value/versions/latest")
                by_id = reader.get("/schemas/ids/1")
                assert latest.status_code == by_id.status_code == 200
                reads.append((started, time.monotonic()))
        worker.join()
        assert done["response"].status_code == 200, done["response"].text[:300]
        assert done["response"].json()["version"] == 2
        answered = done["at"]
        before = [r for r in reads if r[1] < answered]
        latencies = sorted(end - start for start, end in reads)
        print(
            f"\nwide registration: {len(v2) / 1e6:.1f} MB; {len(before)} read pairs answered while it ran; "
            f"read latency median {latencies[len(latencies) // 2] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms"
        )
        assert len(before) >= 10


def test_racing_registrations_are_each_checked_against_what_was_committed_first() -> None:
    """X and Y are each BACKWARD-compatible with v1 but not with each other: whichever commits first, the other
    must be refused (its check, done without the lock, is redone when the subject changed meanwhile)."""
    # 1,500 columns, so both registrations are being checked at the same time
    base = [{"name": f"c{i}", "type": "string"} for i in range(1500)]
    v1 = json.dumps({"type": "record", "name": "R", "fields": base})
    x = json.dumps({"type": "record", "name": "R", "fields": [*base, {"name": "b", "type": "int", "default": 0}]})
    y = json.dumps({"type": "record", "name": "R", "fields": [*base, {"name": "b", "type": "string", "default": ""}]})
    with EmbeddedRegistry() as registry:
        for round_ in range(4):
            subject = f"race-{round_}-value"
            with httpx.Client(base_url=registry.url or "", timeout=60) as client:
                assert client.post(f"/subjects/{subject}/versions", json={"schema": v1}).status_code == 200
            barrier = threading.Barrier(2)
            statuses: list[int] = []

            def post(schema: str, subject: str = subject, barrier: threading.Barrier = barrier,
                     statuses: list[int] = statuses) -> None:
                with httpx.Client(base_url=registry.url or "", timeout=60) as client:
                    barrier.wait()
                    statuses.append(client.post(f"/subjects/{subject}/versions", json={"schema": schema}).status_code)

            threads = [threading.Thread(target=post, args=(schema,)) for schema in (x, y)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(statuses) == [200, 409]


# -- TLS and basic auth with real clients -----------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure(pki: Pki) -> Iterator[EmbeddedRegistry]:
    """HTTPS with a test-made CA, client certificates required, and basic auth."""
    tls = TlsFiles(str(pki.server_cert), str(pki.server_key), client_ca=str(pki.ca_cert))
    with EmbeddedRegistry(users=users(), tls=tls) as registry:
        yield registry


def test_url_is_https(secure: EmbeddedRegistry) -> None:
    assert (secure.url or "").startswith("https://127.0.0.1:")


def test_product_client_over_tls_with_basic_auth(secure: EmbeddedRegistry, pki: Pki) -> None:
    def config(password: str) -> RegistryConfig:
        return RegistryConfig(
            urls=(secure.url or "",),
            username=USER,
            password=password,
            ca_bundle=str(pki.ca_cert),
            client_cert=str(pki.client_cert),
            client_key=str(pki.client_key),
            max_retries=0,
        )

    with RegistryClient(config(PASSWORD)) as client:
        schema_id = client.register("tls-product-value", ROW)
        assert client.get_schema(schema_id).schema == client.get_latest("tls-product-value").schema
        assert "tls-product-value" in client.get_subjects()
    with RegistryClient(config("not-it")) as client, pytest.raises(RegistryError) as caught:
        client.get_subjects()
    assert caught.value.status_code == 401
    assert "not-it" not in str(caught.value) and PASSWORD not in str(caught.value)


def test_confluent_client_over_tls_with_basic_auth(secure: EmbeddedRegistry, pki: Pki) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    conf = {
        "url": secure.url,
        "basic.auth.user.info": f"{USER}:{PASSWORD}",
        "ssl.ca.location": str(pki.ca_cert),
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
        "timeout": 30,
    }
    client = SchemaRegistryClient(conf)
    try:
        schema_id = client.register_schema("tls-confluent-value", Schema(ROW, "AVRO"))
        assert client.get_schema(schema_id).schema_str == client.get_latest_version("tls-confluent-value").schema.schema_str
    finally:
        client.close()
    bad = SchemaRegistryClient({**conf, "basic.auth.user.info": f"{USER}:nope", "max.retries": 0})
    try:
        with pytest.raises(SchemaRegistryError) as caught:
            bad.get_subjects()
        assert (caught.value.http_status_code, caught.value.error_code) == (401, 401)
    finally:
        bad.close()


def test_tls_refuses_clients_without_a_certificate_or_trust(secure: EmbeddedRegistry, pki: Pki) -> None:
    with httpx.Client(verify=ssl.create_default_context(cafile=str(pki.ca_cert)), timeout=10) as no_client_cert, pytest.raises(httpx.HTTPError):
        no_client_cert.get(f"{secure.url}/subjects", auth=(USER, PASSWORD))
    with httpx.Client(timeout=10) as untrusting, pytest.raises(httpx.ConnectError):
        untrusting.get(f"{secure.url}/subjects", auth=(USER, PASSWORD))
    plain = (secure.url or "").replace("https://", "http://")
    with httpx.Client(timeout=10) as cleartext, pytest.raises(httpx.HTTPError):
        cleartext.get(f"{plain}/subjects", auth=(USER, PASSWORD))


def test_bad_tls_files_are_refused_before_serving(tmp_path: Path, pki: Pki) -> None:
    with pytest.raises(ConfigError, match="--tls-cert"):
        EmbeddedRegistry(tls=TlsFiles(str(tmp_path / "missing.pem"), str(pki.server_key))).start()
    with pytest.raises(ConfigError, match="key must match"):
        EmbeddedRegistry(tls=TlsFiles(str(pki.server_cert), str(pki.client_key))).start()


def test_users_are_read_from_entries_and_files_without_echoing_passwords(tmp_path: Path) -> None:
    users_file = tmp_path / "users"
    users_file.write_text("# registry users\nalice:pw:with:colons\n\nbob: spaced pw \n")
    table = BasicAuthUsers(BasicAuthUsers.read_file(users_file))
    assert table.names == ["alice", "bob"]
    assert table.check("alice", "pw:with:colons") and table.check("bob", " spaced pw ")
    assert not table.check("alice", "pw") and not table.check("carol", "pw:with:colons")
    assert "pw" not in repr(table)
    with pytest.raises(ConfigError) as caught:
        BasicAuthUsers.parse_entries(["alice:ok", "S3cretWithoutName"], source="--user")
    assert "S3cret" not in str(caught.value) and "entry 2" in str(caught.value)


def test_exposure_warning() -> None:
    tls = TlsFiles("c.pem", "k.pem")
    assert exposure_warning("127.0.0.1", None, None) is None
    assert exposure_warning("::1", None, None) is None
    assert exposure_warning("localhost", None, None) is None
    assert "without authentication" in (exposure_warning("0.0.0.0", None, None) or "")
    assert "clear text" in (exposure_warning("0.0.0.0", users(), None) or "")
    assert exposure_warning("0.0.0.0", users(), tls) is None


# -- the command -------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--tls-cert", "x.pem"], "--tls-key"),
        (["--tls-client-ca", "ca.pem"], "--tls-client-ca"),
        (["--tls-cert", "nope.pem", "--tls-key", "nope-key.pem"], "no such file"),
        (["--users-file", "/nonexistent/users"], "users file"),
        (["--user", "S3cretNoColon"], "NAME:PASSWORD"),
        (["--max-request-bytes", "0"], "--max-request-bytes"),
        (["--max-schema-depth", "5000"], "--max-schema-depth"),
        (["--data", __file__ + "/registry.db", "--port", "0"], "--data"),  # under a file: cannot be made
        (["--host", "192.0.2.1", "--port", "0"], "Cannot listen on 192.0.2.1"),  # TEST-NET: not this machine's
    ],
)
def test_serve_refuses_bad_options_with_one_line_and_exit_2(args: list[str], fragment: str) -> None:
    from typer.testing import CliRunner

    from avro_registry_sink.cli import app

    result = CliRunner().invoke(app, ["registry", "serve", *args])
    assert result.exit_code == 2, result.output
    assert fragment in result.output
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("error: ") and all(line.startswith("warning: ") for line in lines[:-1])
    assert "S3cret" not in result.output and "Traceback" not in result.output


def test_serve_refuses_a_taken_port_with_one_line_and_exit_2() -> None:
    from typer.testing import CliRunner

    from avro_registry_sink.cli import app

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["registry", "serve", "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: Cannot listen on 127.0.0.1:{port}") and len(result.output.splitlines()) == 1


def test_serve_command_with_auth_and_tls_end_to_end(pki: Pki, tmp_path: Path) -> None:
    users_file = tmp_path / "users"
    users_file.write_text(f"{USER}:{PASSWORD}\n")
    port = _free_port()
    command = [
        sys.executable, "-m", "avro_registry_sink.cli", "registry", "serve", "--host", "0.0.0.0", "--port", str(port),
        "--users-file", str(users_file), "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key),
        "--max-request-bytes", "4096",
    ]
    env = {**os.environ, "AVRO_SINK_REGISTRY_USERS": "bob:env-password"}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as server:
        try:
            trust = ssl.create_default_context(cafile=str(pki.ca_cert))
            with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=trust, timeout=10) as client:
                wait_for_answer(client, server)
                assert client.get("/subjects").status_code == 401
                assert client.get("/subjects", auth=(USER, PASSWORD)).json() == []
                assert client.get("/subjects", auth=("bob", "env-password")).json() == []
                big = client.post(REG, auth=(USER, PASSWORD), json={"schema": json.dumps({"type": "string", "doc": "x" * 5000})})
                assert (big.status_code, big.json()["error_code"]) == (413, 413)
        finally:
            server.terminate()
            _, stderr = server.communicate(timeout=30)
    assert PASSWORD not in stderr and "env-password" not in stderr
    assert "warning" not in stderr.lower()  # auth over TLS: nothing to warn about


def test_serve_command_warns_when_exposed_without_auth() -> None:
    port = _free_port()
    command = [sys.executable, "-m", "avro_registry_sink.cli", "registry", "serve", "--host", "0.0.0.0", "--port", str(port)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as server:
        try:
            assert server.stderr is not None
            first = server.stderr.readline()
        finally:
            server.terminate()
            server.communicate(timeout=30)
    assert first.startswith("warning: the registry listens on 0.0.0.0 without authentication")


def test_a_deep_body_is_refused_whatever_the_recursion_limit(guarded: EmbeddedRegistry) -> None:
    # another library of the process may raise the limit (the whole suite did): the depth is counted, not caught
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        with httpx.Client(base_url=guarded.url or "", auth=(USER, PASSWORD), timeout=60) as client:
            response = client.post(REG, content='{"schema": "\\"string\\"", "metadata": %s}' % DEEP_JSON,
                                   headers={"Content-Type": "application/json"})
    finally:
        sys.setrecursionlimit(previous)
    assert (response.status_code, response.json()["error_code"]) == (400, 400), response.text[:300]
    assert "deeper than 1000 levels" in response.json()["message"]
