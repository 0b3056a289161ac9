"""Integration fixtures: schema registries over real HTTP.

``registry_url`` is ``AVRO_SINK_TEST_REGISTRY_URL`` when set (a real Confluent registry, or Apicurio's
``.../apis/ccompat/v7``), else the embedded registry (in memory) served from a thread for the session.

Modules marked ``every_registry`` (the registry contract suite) run each test once per registry instead:

* ``embedded``: the embedded registry, always; it answers as Confluent does.
* ``apicurio``: a real Apicurio Registry 3 from ``tests.support.servers.ensure_apicurio`` (``scripts/apicurio.sh``),
  started once for the session and stopped at exit (``APICURIO_URL`` reuses one you run). Skipped with the
  reason when this machine has no Java 21+ or Maven, or the download fails, or ``AVRO_SINK_TEST_APICURIO=0``.
* ``external``: ``AVRO_SINK_TEST_REGISTRY_URL``, when set. Its flavour is ``apicurio`` when the URL has
  ``/apis/ccompat/``, else ``confluent``; ``AVRO_SINK_TEST_REGISTRY_FLAVOUR`` overrides that.

Where Apicurio's Confluent-compatible API answers differently from Confluent, the answer of each flavour is in
``KNOWN_DEVIATIONS`` (summarised in ``REGISTRIES.md``); a test asks ``registry_flavour.expect(key)``, so it
asserts Confluent's exact answer on Confluent-flavoured registries and Apicurio's real one on Apicurio.

Tests register under unique subject names from ``subject``/``new_subject`` and clean up after
themselves (soft + permanent delete, subject config removed), so the suite can run against a shared
registry. Tests must not change global config or mode of ``registry_url``; the embedded-only tests
start their own registries for that.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from avro_registry_sink.registry.embedded import EmbeddedRegistry
from tests.support.servers import (
    REPO,
    ServerUnavailable,
    ensure_apicurio,
    start_apicurio_in_background,
)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
REGISTRY_URL_ENV = "AVRO_SINK_TEST_REGISTRY_URL"
REGISTRY_FLAVOUR_ENV = "AVRO_SINK_TEST_REGISTRY_FLAVOUR"  # confluent | apicurio, for REGISTRY_URL_ENV
APICURIO_ENV = "AVRO_SINK_TEST_APICURIO"  # 0/false/no/off: skip the apicurio target

CONFLUENT = "confluent"
APICURIO = "apicurio"


# -- registry flavours --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deviation:
    """One behaviour where Apicurio's ccompat API differs from Confluent's, with each flavour's answer."""

    what: str
    confluent: Any
    apicurio: Any


GLOBAL = "global"  # a GET /config/{subject} answer: 200 with the global level in "compatibilityLevel"

# Known deviations of Apicurio Registry's Confluent-compatible API (3.3.3, /apis/ccompat/v7, as started by
# scripts/apicurio.sh) from Confluent Schema Registry. Confluent's answers are its documented ones (the
# embedded registry copies them); Apicurio's were checked against a live 3.3.3. Error answers are
# (HTTP status, error_code). Keep tests/integration/REGISTRIES.md in step.
KNOWN_DEVIATIONS: dict[str, Deviation] = {
    "invalid_version": Deviation(
        "GET /subjects/{s}/versions/{v} with an invalid version v (0, -2, 'earliest')",
        confluent={"0": (422, 42202), "-2": (422, 42202), "earliest": (422, 42202)},
        # treated as a version that does not exist; a negative other than -1 even as an unknown subject
        apicurio={"0": (404, 40402), "-2": (404, 40401), "earliest": (404, 40402)},
    ),
    "delete_state_status": Deviation(
        "HTTP status of the delete state errors 40405 (subject not soft-deleted before permanent delete), "
        "40406 (version already soft-deleted), 40407 (version not soft-deleted before permanent delete)",
        confluent=404,
        apicurio=409,  # error_code unchanged; 40404 (subject already soft-deleted) stays 404 on both
    ),
    "verbose_compatibility_messages": Deviation(
        "POST /compatibility/subjects/{s}/versions[/{v}]?verbose=true lists the reasons in `messages`",
        confluent=True,
        apicurio=False,  # the body is only {"is_compatible": ...}
    ),
    "subject_config_unset": Deviation(
        "GET /config/{s} when s has no subject-level compatibility: for an s without versions / with versions",
        confluent={"unknown": (404, 40408), "registered": (404, 40408)},
        apicurio={"unknown": (404, 40401), "registered": GLOBAL},  # falls back to the global level
    ),
    "default_to_global_for_unknown_subject": Deviation(
        "GET /config/{s}?defaultToGlobal=true for an s without versions",
        confluent=GLOBAL,
        apicurio=(404, 40401),
    ),
    "lower_case_level_names": Deviation(
        "PUT /config/{s} accepts level names in any case ('full'), stored upper-case",
        confluent=True,
        apicurio=False,  # 422 42203 "Invalid compatibility level: full"
    ),
    "data_contracts": Deviation(
        "data contracts: schema metadata and ruleSet kept per version, compatibilityGroup, default/override "
        "metadata and rule sets in the config, GET /subjects/{s}/metadata (what a consumer pinned with "
        "use.latest.with.metadata reads)",
        # kept: metadata/ruleSet come back with the version; metadata: GET /subjects/{unknown}/metadata?key=..&value=..;
        # group: PUT /config/{s} {"compatibilityGroup", "defaultRuleSet"}
        confluent={"kept": True, "metadata": (404, 40401), "group": 200},
        # 3.3.3, checked live: a registration with metadata and ruleSet succeeds ({"id": N}) and drops both;
        # GET .../metadata is 204 with no body (a stub, issue #9708); the config PUT is 500 "Name is null"
        apicurio={"kept": False, "metadata": 204, "group": (500, 0)},
    ),
    "default_compatibility": Deviation(
        "global compatibility level of a fresh registry (GET /config)",
        confluent="BACKWARD",
        apicurio="NONE",
    ),
}


@dataclass(frozen=True)
class RegistryFlavour:
    """Whose behaviour a registry has: ``confluent`` (Confluent, the embedded registry) or ``apicurio``."""

    name: str

    def expect(self, key: str) -> Any:
        """This flavour's answer for the behaviour ``key`` of ``KNOWN_DEVIATIONS``."""
        return getattr(KNOWN_DEVIATIONS[key], self.name)


@dataclass(frozen=True)
class RegistryTarget:
    """A registry the tests talk to."""

    name: str  # the test id: embedded, apicurio, external
    url: str
    flavour: RegistryFlavour
    pristine: bool  # started by this session with product defaults (its global config was never changed)


def external_flavour(url: str) -> str:
    flavour = os.environ.get(REGISTRY_FLAVOUR_ENV, "").strip().lower()
    if flavour:
        if flavour not in (CONFLUENT, APICURIO):
            raise pytest.UsageError(f"{REGISTRY_FLAVOUR_ENV} must be {CONFLUENT} or {APICURIO}, not {flavour!r}")
        return flavour
    return APICURIO if "/apis/ccompat/" in url else CONFLUENT


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "every_registry: run each test against every registry (embedded, Apicurio, AVRO_SINK_TEST_REGISTRY_URL)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("every_registry") and "registry_target" in metafunc.fixturenames:
        names = ["embedded", "apicurio"] + (["external"] if os.environ.get(REGISTRY_URL_ENV) else [])
        metafunc.parametrize("registry_target", names, indirect=True, ids=names)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test that failed on the session's Apicurio gets the tail of Apicurio's log in its report (CI keeps no
    other trace of what the registry was doing)."""
    report = yield
    callspec = getattr(item, "callspec", None)
    if report.failed and callspec is not None and callspec.params.get("registry_target") == APICURIO:
        log = REPO / ".cache" / "apicurio" / "run" / "apicurio.log"
        if log.is_file():
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
            report.sections.append(("Apicurio log (last 40 lines)", "\n".join(tail)))
    return report


def apicurio_disabled() -> bool:
    return os.environ.get(APICURIO_ENV, "").strip().lower() in ("0", "false", "no", "off")


def pytest_collection_finish(session: pytest.Session) -> None:
    """When a selected test runs on Apicurio, launch its start now, so the JVM boots while other tests run.

    Not in a pytest-xdist worker: each worker collects every test, and only the one that runs this directory
    (one unit of work, tests/conftest.py) may start the registry, and stop it when its session ends.
    """
    if session.config.option.collectonly or apicurio_disabled() or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if any(getattr(item, "callspec", None) and item.callspec.params.get("registry_target") == "apicurio"
           for item in session.items):
        start_apicurio_in_background()


def record(name: str, *fields: dict[str, Any], namespace: str | None = None) -> str:
    """An Avro record schema as text."""
    schema: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        schema["namespace"] = namespace
    schema["fields"] = list(fields)
    return json.dumps(schema)


class RegistryHttp:
    """Thin helpers over ``httpx.Client`` that speak Confluent paths; every call returns the response."""

    def __init__(self, client: httpx.Client, registry: EmbeddedRegistry | None = None) -> None:
        self.client = client
        self.registry = registry  # set when the test started this registry itself

    def stop(self) -> None:
        """Close the client and stop the registry this test started (e.g. to restart on the same file)."""
        self.client.close()
        if self.registry is not None:
            self.registry.stop()

    @staticmethod
    def s(subject: str) -> str:
        return quote(subject, safe="")

    def register(self, subject: str, schema: str, **params: Any) -> httpx.Response:
        return self.client.post(f"/subjects/{self.s(subject)}/versions", json={"schema": schema}, params=params)

    def register_id(self, subject: str, schema: str) -> int:
        response = self.register(subject, schema)
        assert response.status_code == 200, response.text
        return int(response.json()["id"])

    def lookup(self, subject: str, schema: str, **params: Any) -> httpx.Response:
        return self.client.post(f"/subjects/{self.s(subject)}", json={"schema": schema}, params=params)

    def versions(self, subject: str, **params: Any) -> httpx.Response:
        return self.client.get(f"/subjects/{self.s(subject)}/versions", params=params)

    def version(self, subject: str, version: int | str, **params: Any) -> httpx.Response:
        return self.client.get(f"/subjects/{self.s(subject)}/versions/{version}", params=params)

    def schema_by_id(self, schema_id: int, suffix: str = "", **params: Any) -> httpx.Response:
        return self.client.get(f"/schemas/ids/{schema_id}{suffix}", params=params)

    def subjects(self, **params: Any) -> httpx.Response:
        return self.client.get("/subjects", params=params)

    def delete_subject(self, subject: str, permanent: bool = False) -> httpx.Response:
        params = {"permanent": "true"} if permanent else {}
        return self.client.delete(f"/subjects/{self.s(subject)}", params=params)

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> httpx.Response:
        params = {"permanent": "true"} if permanent else {}
        return self.client.delete(f"/subjects/{self.s(subject)}/versions/{version}", params=params)

    def compatibility(
        self, subject: str, schema: str, version: int | str | None = None, **params: Any
    ) -> httpx.Response:
        path = f"/compatibility/subjects/{self.s(subject)}/versions"
        if version is not None:
            path += f"/{version}"
        return self.client.post(path, json={"schema": schema}, params=params)

    def get_config(self, subject: str | None = None, **params: Any) -> httpx.Response:
        path = "/config" if subject is None else f"/config/{self.s(subject)}"
        return self.client.get(path, params=params)

    def put_config(self, subject: str | None, level: str) -> httpx.Response:
        path = "/config" if subject is None else f"/config/{self.s(subject)}"
        return self.client.put(path, json={"compatibility": level})

    def delete_config(self, subject: str | None = None) -> httpx.Response:
        path = "/config" if subject is None else f"/config/{self.s(subject)}"
        return self.client.delete(path)


def registry_client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30.0, headers={"Content-Type": MEDIA_TYPE, "Accept": MEDIA_TYPE})


def cleanup_subjects(http: RegistryHttp, subjects: list[str]) -> None:
    for name in subjects:
        http.delete_subject(name)
        http.delete_subject(name, permanent=True)
        http.delete_config(name)


@pytest.fixture(scope="session")
def embedded_registry_url() -> Iterator[str]:
    """The session's embedded registry (in memory), started on first use."""
    with EmbeddedRegistry() as registry:
        assert registry.url is not None
        yield registry.url


@pytest.fixture(scope="session")
def apicurio_registry_url() -> str:
    """The ccompat base URL of the session's Apicurio (launched after collection), stopped when the session exits.

    Skips (once: pytest keeps the outcome for the session) when Apicurio cannot run on this machine.
    """
    if apicurio_disabled():
        pytest.skip(f"Apicurio disabled by {APICURIO_ENV}")
    try:
        return ensure_apicurio()
    except ServerUnavailable as exc:
        pytest.skip(f"Apicurio Registry unavailable: {exc}")


@pytest.fixture
def registry_target(request: pytest.FixtureRequest) -> RegistryTarget:
    """The registry of this test: the parameter of an ``every_registry`` test, else the default one."""
    name = getattr(request, "param", None)
    external = os.environ.get(REGISTRY_URL_ENV, "").strip().rstrip("/")
    if name is None:
        name = "external" if external else "embedded"
    if name == "embedded":
        url = request.getfixturevalue("embedded_registry_url")
        return RegistryTarget(name, url, RegistryFlavour(CONFLUENT), pristine=True)
    if name == "apicurio":
        url = request.getfixturevalue("apicurio_registry_url")
        pristine = not os.environ.get("APICURIO_URL", "").strip()  # else one somebody else runs
        return RegistryTarget(name, url, RegistryFlavour(APICURIO), pristine=pristine)
    assert name == "external" and external, name
    return RegistryTarget(name, external, RegistryFlavour(external_flavour(external)), pristine=False)


@pytest.fixture
def registry_url(registry_target: RegistryTarget) -> str:
    return registry_target.url


@pytest.fixture
def registry_flavour(registry_target: RegistryTarget) -> RegistryFlavour:
    """How the registry of this test behaves where Apicurio and Confluent differ (``KNOWN_DEVIATIONS``)."""
    return registry_target.flavour


@pytest.fixture
def is_embedded(registry_target: RegistryTarget) -> bool:
    """True when the test runs against the embedded registry (not an external one)."""
    return registry_target.name == "embedded"


@pytest.fixture
def sr(registry_url: str) -> Iterator[RegistryHttp]:
    with registry_client(registry_url) as client:
        yield RegistryHttp(client)


@pytest.fixture
def new_subject(request: pytest.FixtureRequest, sr: RegistryHttp) -> Iterator[Any]:
    """A factory of unique subject names (``<test>-<tag>-<uuid>-value``), all deleted after the test."""
    created: list[str] = []
    test = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:40]

    def make(tag: str = "s") -> str:
        name = f"it-{test}-{tag}-{uuid.uuid4().hex[:8]}-value"
        created.append(name)
        return name

    yield make
    cleanup_subjects(sr, created)


@pytest.fixture
def subject(new_subject: Any) -> str:
    """One unique subject name for the test."""
    return new_subject()


@pytest.fixture
def compat(sr: RegistryHttp) -> Iterator[Any]:
    """``compat(subject, level)`` sets a subject's compatibility; every touched subject is reset after."""
    touched: list[str] = []

    def set_level(subject: str, level: str) -> None:
        touched.append(subject)
        response = sr.put_config(subject, level)
        assert response.status_code == 200, response.text

    yield set_level
    for name in touched:
        sr.delete_config(name)


@pytest.fixture
def embedded() -> Iterator[Any]:
    """``embedded(data=None, **options) -> RegistryHttp`` on a new, private EmbeddedRegistry.

    For tests that need a fresh registry (ids from 1), global config or mode, or a restart
    (``http.stop()``); everything started is stopped after the test.
    """
    started: list[RegistryHttp] = []

    def start(data: str | None = None, **options: Any) -> RegistryHttp:
        registry = EmbeddedRegistry(data, **options)
        http = RegistryHttp(registry_client(registry.start()), registry)
        started.append(http)
        return http

    yield start
    for http in started:
        http.stop()
