"""The registry contract: what avro-registry-sink relies on from any Confluent-compatible registry.

Every test runs against the embedded registry, a real Apicurio Registry 3 (``/apis/ccompat/v7``, started
once per session; skipped only when it cannot run here) and ``AVRO_SINK_TEST_REGISTRY_URL`` when set (a
Confluent registry, say): see ``conftest.py``. Assertions stay on behaviour a client depends on (HTTP
status, ``error_code``, ids and versions), not on message text; exact texts are in
``test_embedded_registry.py``. Where Apicurio answers differently, ``registry_flavour.expect(key)`` gives
each flavour's answer from the documented table ``conftest.KNOWN_DEVIATIONS``: Confluent-flavoured
registries are held to Confluent's exact answer, Apicurio to what it really returns.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.every_registry]

INCOMPATIBLE_CODES = (409, 40901)  # CP <= 8.0.3 and Karapace answer 409, newer CP 40901


def record(*fields: dict[str, Any], name: str = "Row", namespace: str | None = "it.contract") -> str:
    schema: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        schema["namespace"] = namespace
    schema["fields"] = list(fields)
    return json.dumps(schema)


def f(name: str, type_: Any = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def error_code(response: Any) -> int:
    return int(response.json()["error_code"])


def same_schema(text_a: str, text_b: str) -> bool:
    return json.loads(text_a) == json.loads(text_b)


def answer(response: Any) -> Any:
    """``"global"`` for a 200 config answer, else (HTTP status, error_code): to compare with the deviation table."""
    if response.status_code == 200:
        return "global"
    return (response.status_code, error_code(response))


V1 = record(f("id", "long"), f("name"))
V2 = record(f("id", "long"), f("name"), f("email", ["null", "string"], default=None))
OTHER = record(f("sku"), name="Product")


# -- registration and identity ----------------------------------------------------------------------


def test_register_returns_an_id(sr, subject):
    response = sr.register(subject, V1)
    assert response.status_code == 200, response.text
    assert isinstance(response.json()["id"], int)


def test_reregistering_the_same_schema_is_idempotent(sr, subject):
    first = sr.register_id(subject, V1)
    assert sr.register_id(subject, V1) == first
    assert sr.versions(subject).json() == [1]


def test_reregistering_with_other_whitespace_and_key_order_is_idempotent(sr, subject):
    first = sr.register_id(subject, V1)
    reordered = json.dumps(
        {"fields": [{"type": "long", "name": "id"}, {"type": "string", "name": "name"}], "namespace": "it.contract",
         "name": "Row", "type": "record"},
        indent=2,
    )
    assert sr.register_id(subject, reordered) == first
    assert sr.versions(subject).json() == [1]


def test_same_schema_under_two_subjects_gets_one_id(sr, new_subject):
    key, value = new_subject("key"), new_subject("value")
    assert sr.register_id(key, OTHER) == sr.register_id(value, OTHER)


def test_a_changed_schema_gets_a_new_version_and_id(sr, subject):
    first = sr.register_id(subject, V1)
    second = sr.register_id(subject, V2)
    assert second != first
    assert sr.versions(subject).json() == [1, 2]
    # an older live version re-registered is still idempotent, with no compatibility check
    assert sr.register_id(subject, V1) == first
    assert sr.versions(subject).json() == [1, 2]


def test_lookup_finds_the_registered_version(sr, subject):
    schema_id = sr.register_id(subject, V1)
    sr.register_id(subject, V2)
    response = sr.lookup(subject, V1)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["subject"], body["version"], body["id"]) == (subject, 1, schema_id)
    assert same_schema(body["schema"], V1)


def test_lookup_of_an_unknown_schema_or_subject_is_404(sr, subject, new_subject):
    sr.register_id(subject, V1)
    missing_schema = sr.lookup(subject, OTHER)
    assert missing_schema.status_code == 404
    assert error_code(missing_schema) == 40403
    missing_subject = sr.lookup(new_subject("missing"), V1)
    assert missing_subject.status_code == 404
    assert error_code(missing_subject) == 40401


def test_schema_by_id(sr, subject):
    schema_id = sr.register_id(subject, V1)
    response = sr.schema_by_id(schema_id)
    assert response.status_code == 200, response.text
    body = response.json()
    assert same_schema(body["schema"], V1)
    assert body.get("schemaType", "AVRO") == "AVRO"  # omitted for AVRO by CP <= 7.x
    subjects = sr.schema_by_id(schema_id, "/subjects")
    assert subjects.status_code == 200
    assert subject in subjects.json()
    versions = sr.schema_by_id(schema_id, "/versions")
    assert versions.status_code == 200
    assert {"subject": subject, "version": 1} in versions.json()


def test_unknown_schema_id_is_404(sr):
    response = sr.schema_by_id(2**31 - 2)
    assert response.status_code == 404
    assert error_code(response) == 40403


def test_subjects_and_versions_listing(sr, subject, new_subject):
    sr.register_id(subject, V1)
    sr.register_id(subject, V2)
    listed = sr.subjects()
    assert listed.status_code == 200
    assert subject in listed.json()
    assert sr.versions(subject).json() == [1, 2]
    unknown = sr.versions(new_subject("missing"))
    assert unknown.status_code == 404
    assert error_code(unknown) == 40401


def test_get_version_latest_and_minus_one(sr, subject, registry_flavour):
    first = sr.register_id(subject, V1)
    second = sr.register_id(subject, V2)
    v1 = sr.version(subject, 1).json()
    assert (v1["subject"], v1["version"], v1["id"]) == (subject, 1, first)
    assert same_schema(v1["schema"], V1)
    for latest in ("latest", "-1"):
        body = sr.version(subject, latest).json()
        assert (body["version"], body["id"]) == (2, second)
    missing = sr.version(subject, 3)
    assert missing.status_code == 404
    assert error_code(missing) == 40402
    for bad, expected in registry_flavour.expect("invalid_version").items():  # Confluent: 422 42202
        invalid = sr.version(subject, bad)
        assert (invalid.status_code, error_code(invalid)) == expected, bad


# -- deletes --------------------------------------------------------------------------------------


def test_version_soft_then_permanent_delete(sr, subject, registry_flavour):
    state_error = registry_flavour.expect("delete_state_status")  # Confluent: 404
    first = sr.register_id(subject, V1)
    sr.register_id(subject, V2)

    soft = sr.delete_version(subject, 1)
    assert soft.status_code == 200
    assert soft.json() == 1
    assert sr.versions(subject).json() == [2]
    gone = sr.version(subject, 1)
    assert (gone.status_code, error_code(gone)) == (404, 40402)
    assert sr.version(subject, 1, deleted="true").status_code == 200
    assert sr.schema_by_id(first).status_code == 200  # soft-deleted schemas stay resolvable by id

    again = sr.delete_version(subject, 1)
    assert (again.status_code, error_code(again)) == (state_error, 40406)
    not_soft = sr.delete_version(subject, 2, permanent=True)
    assert (not_soft.status_code, error_code(not_soft)) == (state_error, 40407)

    hard = sr.delete_version(subject, 1, permanent=True)
    assert hard.status_code == 200
    assert hard.json() == 1
    purged = sr.version(subject, 1, deleted="true")
    assert (purged.status_code, error_code(purged)) == (404, 40402)
    assert sr.versions(subject).json() == [2]


def test_subject_soft_then_permanent_delete(sr, subject, registry_flavour):
    sr.register_id(subject, V1)
    sr.register_id(subject, V2)

    not_soft = sr.delete_subject(subject, permanent=True)
    state_error = registry_flavour.expect("delete_state_status")  # Confluent: 404
    assert (not_soft.status_code, error_code(not_soft)) == (state_error, 40405)

    soft = sr.delete_subject(subject)
    assert soft.status_code == 200
    assert soft.json() == [1, 2]
    assert subject not in sr.subjects().json()
    assert subject in sr.subjects(deleted="true").json()
    listing = sr.versions(subject)
    assert (listing.status_code, error_code(listing)) == (404, 40401)
    latest = sr.version(subject, "latest")
    assert (latest.status_code, error_code(latest)) == (404, 40401)
    again = sr.delete_subject(subject)
    assert (again.status_code, error_code(again)) == (404, 40404)

    hard = sr.delete_subject(subject, permanent=True)
    assert hard.status_code == 200
    assert sorted(hard.json()) == [1, 2]
    assert subject not in sr.subjects(deleted="true").json()
    unknown = sr.delete_subject(subject)
    assert (unknown.status_code, error_code(unknown)) == (404, 40401)


def test_numbering_continues_after_a_soft_subject_delete(sr, subject):
    sr.register_id(subject, V1)
    sr.register_id(subject, V2)
    assert sr.delete_subject(subject).status_code == 200
    third = record(f("id", "long"), f("name"), f("phone", ["null", "string"], default=None))
    response = sr.register(subject, third)
    assert response.status_code == 200, response.text
    assert sr.versions(subject).json() == [3]


# -- compatibility --------------------------------------------------------------------------------


NOT_NULL_ADDED = record(f("id", "long"), f("name"), f("age", "int"))


def test_compatibility_endpoint(sr, subject, new_subject, compat, registry_flavour):
    compat(subject, "BACKWARD")
    sr.register_id(subject, V1)

    ok = sr.compatibility(subject, V2, "latest")
    assert ok.status_code == 200, ok.text
    assert ok.json()["is_compatible"] is True

    bad = sr.compatibility(subject, NOT_NULL_ADDED, "latest", verbose="true")
    assert bad.status_code == 200, bad.text
    assert bad.json()["is_compatible"] is False
    if registry_flavour.expect("verbose_compatibility_messages"):
        assert bad.json()["messages"]  # the reasons, with verbose=true
    else:
        assert bad.json() == {"is_compatible": False}

    by_number = sr.compatibility(subject, NOT_NULL_ADDED, 1)
    assert by_number.json()["is_compatible"] is False
    all_versions = sr.compatibility(subject, NOT_NULL_ADDED)
    assert all_versions.status_code == 200
    assert all_versions.json()["is_compatible"] is False

    missing = sr.compatibility(subject, V2, 7)
    assert (missing.status_code, error_code(missing)) == (404, 40402)
    fresh = sr.compatibility(new_subject("fresh"), V2, "latest")
    assert fresh.status_code == 200
    assert fresh.json()["is_compatible"] is True


def test_subject_config(sr, subject, compat, registry_flavour):
    unset = registry_flavour.expect("subject_config_unset")["unknown"]  # Confluent: 404 40408
    assert answer(sr.get_config(subject)) == unset
    global_level = sr.get_config().json()["compatibilityLevel"]
    fallback = sr.get_config(subject, defaultToGlobal="true")
    assert answer(fallback) == registry_flavour.expect("default_to_global_for_unknown_subject")  # Confluent: global
    if fallback.status_code == 200:
        assert fallback.json()["compatibilityLevel"] == global_level

    if registry_flavour.expect("lower_case_level_names"):
        compat(subject, "full")  # level names are case-insensitive, stored upper-case
    else:
        lower = sr.put_config(subject, "full")
        assert (lower.status_code, error_code(lower)) == (422, 42203)
        compat(subject, "FULL")
    assert sr.get_config(subject).json()["compatibilityLevel"] == "FULL"
    echoed = sr.put_config(subject, "FORWARD_TRANSITIVE")
    assert echoed.status_code == 200
    assert echoed.json()["compatibility"] == "FORWARD_TRANSITIVE"  # PUT echoes "compatibility"
    assert sr.get_config(subject).json()["compatibilityLevel"] == "FORWARD_TRANSITIVE"  # GET says "...Level"

    invalid = sr.put_config(subject, "SIDEWAYS")
    assert (invalid.status_code, error_code(invalid)) == (422, 42203)

    assert sr.delete_config(subject).status_code == 200
    assert answer(sr.get_config(subject)) == unset


def test_config_of_a_registered_subject_without_its_own_level(sr, subject, registry_flavour):
    sr.register_id(subject, V1)
    global_level = sr.get_config().json()["compatibilityLevel"]
    unset = sr.get_config(subject)
    assert answer(unset) == registry_flavour.expect("subject_config_unset")["registered"]  # Confluent: 404 40408
    if unset.status_code == 200:
        assert unset.json()["compatibilityLevel"] == global_level
    fallback = sr.get_config(subject, defaultToGlobal="true")
    assert fallback.status_code == 200, fallback.text
    assert fallback.json()["compatibilityLevel"] == global_level


def test_global_default_compatibility(sr, registry_target, registry_flavour):
    if not registry_target.pristine:
        pytest.skip(f"{registry_target.name} registry: its global compatibility is its operator's choice")
    response = sr.get_config()
    assert response.status_code == 200, response.text
    assert response.json()["compatibilityLevel"] == registry_flavour.expect("default_compatibility")


def test_global_config_is_readable(sr):
    response = sr.get_config()
    assert response.status_code == 200
    assert response.json()["compatibilityLevel"] in (
        "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE",
    )


# -- the seed's Schema Tests (TiCDC avro design, "Schema Tests") ----------------------------------

TICDC_V1 = json.dumps(
    {
        "type": "record",
        "name": "orders",
        "namespace": "default.shop",
        "fields": [
            {"name": "id", "type": {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}},
            {"name": "note", "default": None,
             "type": ["null", {"type": "string", "connect.parameters": {"tidb_type": "TEXT"}}]},
        ],
    }
)


def _ticdc_with(extra_field: dict[str, Any]) -> str:
    schema = json.loads(TICDC_V1)
    schema["fields"].append(extra_field)
    return json.dumps(schema)


def test_seed_new_table_creates_a_fresh_subject(sr, subject):
    response = sr.register(subject, TICDC_V1)
    assert response.status_code == 200, response.text
    assert sr.versions(subject).json() == [1]
    assert subject in sr.subjects().json()


def test_seed_compatible_change_creates_a_new_version(sr, subject, compat):
    compat(subject, "BACKWARD")
    first = sr.register_id(subject, TICDC_V1)
    nullable = _ticdc_with(
        {"name": "amount", "default": None,
         "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]}
    )
    second = sr.register_id(subject, nullable)
    assert second != first
    assert sr.versions(subject).json() == [1, 2]


def test_seed_incompatible_change_is_refused_without_side_effects(sr, subject, compat):
    compat(subject, "BACKWARD")
    sr.register_id(subject, TICDC_V1)
    not_null = _ticdc_with({"name": "qty", "type": {"type": "int", "connect.parameters": {"tidb_type": "INT"}}})
    refused = sr.register(subject, not_null)
    assert refused.status_code == 409, refused.text
    assert error_code(refused) in INCOMPATIBLE_CODES
    assert sr.versions(subject).json() == [1]
    assert sr.lookup(subject, not_null).status_code == 404  # nothing of it was stored


# -- compatibility families, with and without _TRANSITIVE ------------------------------------------
# Each case is a chain (s1, s2, s3) where s2 is compatible with s1 and s3 with s2 (so the plain level
# accepts s3), but s3 is not compatible with s1 (so the _TRANSITIVE level refuses it).

CHAINS = {
    # Confluent AvroCompatibilityTest: s3 reads s2 data (s2 wrote f2) but not s1 data (no f2, no default).
    "BACKWARD": (
        record(f("f1")),
        record(f("f1"), f("f2", default="d")),
        record(f("f1"), f("f2")),
    ),
    # s1 keeps reading s2 (f2 dropped, s1 has a default) and s2 reads s3; s1 cannot read s3's int f2.
    "FORWARD": (
        record(f("f1"), f("f2", default="d")),
        record(f("f1")),
        record(f("f1"), f("f2", "int")),
    ),
    # Both directions: s2 drops f2, s3 brings it back as an int with a default; s1 and s3 disagree on f2.
    "FULL": (
        record(f("f1"), f("f2", default="d")),
        record(f("f1")),
        record(f("f1"), f("f2", "int", default=0)),
    ),
}


@pytest.mark.parametrize("family", sorted(CHAINS))
@pytest.mark.parametrize("transitive", [False, True], ids=["latest", "transitive"])
def test_compatibility_family(sr, subject, compat, family, transitive):
    level = f"{family}_TRANSITIVE" if transitive else family
    compat(subject, level)
    s1, s2, s3 = CHAINS[family]
    sr.register_id(subject, s1)
    sr.register_id(subject, s2)
    response = sr.register(subject, s3)
    if transitive:
        assert response.status_code == 409, response.text
        assert error_code(response) in INCOMPATIBLE_CODES
        assert sr.versions(subject).json() == [1, 2]
    else:
        assert response.status_code == 200, response.text
        assert sr.versions(subject).json() == [1, 2, 3]


INCOMPATIBLE_STEP = {
    "BACKWARD": (record(f("f1")), record(f("f1"), f("f2"))),  # new field without default
    "FORWARD": (record(f("f1"), f("f2")), record(f("f1"))),  # old schema needs f2, it has no default
    "FULL": (record(f("f1")), record(f("f1"), f("f2"))),
}


@pytest.mark.parametrize("family", sorted(INCOMPATIBLE_STEP))
def test_each_family_refuses_its_breaking_change(sr, subject, compat, family):
    compat(subject, family)
    old, new = INCOMPATIBLE_STEP[family]
    sr.register_id(subject, old)
    response = sr.register(subject, new)
    assert response.status_code == 409, response.text
    assert error_code(response) in INCOMPATIBLE_CODES


def test_none_accepts_anything(sr, subject, compat):
    compat(subject, "NONE")
    sr.register_id(subject, record(f("f1")))
    response = sr.register(subject, record(f("f1", "int"), f("f2")))
    assert response.status_code == 200, response.text


def test_soft_deleted_versions_take_no_part_in_compatibility(sr, subject, compat):
    compat(subject, "BACKWARD_TRANSITIVE")
    s1, s2, s3 = CHAINS["BACKWARD"]
    sr.register_id(subject, s1)
    sr.register_id(subject, s2)
    assert sr.register(subject, s3).status_code == 409
    assert sr.delete_version(subject, 1).status_code == 200
    response = sr.register(subject, s3)
    assert response.status_code == 200, response.text
    assert sr.versions(subject).json() == [2, 3]


def test_invalid_schema_is_422(sr, subject):
    for bad in ('{"type": "record", "name": "R"', '{"type": "no_such_type"}'):
        response = sr.register(subject, bad)
        assert response.status_code == 422, response.text
        assert error_code(response) == 42201


# -- data contracts: metadata, rule sets, compatibility groups ------------------------------------------
# Confluent's REST API (shared/reference/data-contracts.md). Apicurio's ccompat API has none of it: there the
# suite checks that the product's probe says so (``data_contracts``), and skips the rest.

MAJOR_1 = {"properties": {"major_version": "1"}}
MAJOR_2 = {"properties": {"major_version": "2"}}
RENAME_UP = "$merge([$sift($, function($v, $k) {$k != 'name'}), {'full_name': $.'name'}])"
RENAME_DOWN = "$merge([$sift($, function($v, $k) {$k != 'full_name'}), {'name': $.'full_name'}])"
RULES = {"migrationRules": [
    {"name": "upgrade_rename", "type": "JSONATA", "mode": "UPGRADE", "expr": RENAME_UP},
    {"name": "downgrade_rename", "type": "JSONATA", "mode": "DOWNGRADE", "expr": RENAME_DOWN},
]}
RENAMED = record(f("id", "long"), f("full_name"))


def _post(sr, subject: str, body: dict[str, Any], path: str = "/versions", **params: Any) -> Any:
    return sr.client.post(f"/subjects/{sr.s(subject)}{path}", json=body, params=params)


def _contracts(registry_flavour) -> None:
    if not registry_flavour.expect("data_contracts")["kept"]:
        pytest.skip("this registry keeps no data contracts (see REGISTRIES.md); test_data_contract_probe covers it")


def test_data_contract_probe(registry_url, registry_flavour):
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.settings.config import RegistryConfig

    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        reason = client.data_contracts_unsupported()
    if registry_flavour.expect("data_contracts")["kept"]:
        assert reason is None
    else:
        assert reason  # a sentence saying what the registry answered instead


def test_data_contract_answers(sr, subject, new_subject, registry_flavour):
    """What each flavour answers to the data-contract calls (recorded in REGISTRIES.md)."""
    want = registry_flavour.expect("data_contracts")
    registered = _post(sr, subject, {"schema": V1, "metadata": MAJOR_1, "ruleSet": RULES})
    assert registered.status_code == 200, registered.text
    version = sr.version(subject, 1).json()
    assert ("metadata" in version and "ruleSet" in version) == want["kept"]
    unknown = sr.client.get(f"/subjects/{sr.s(new_subject('none'))}/metadata",
                            params={"key": "major_version", "value": "1"})
    assert (unknown.status_code if unknown.status_code < 300 else (unknown.status_code, error_code(unknown))) \
        == want["metadata"]
    put = sr.client.put(f"/config/{sr.s(subject)}", json={"compatibilityGroup": "major_version",
                                                           "defaultRuleSet": RULES})
    assert (put.status_code if put.status_code < 300 else (put.status_code, error_code(put))) == want["group"]


def test_metadata_and_rule_set_are_stored_and_returned(sr, subject, registry_flavour):
    _contracts(registry_flavour)
    response = _post(sr, subject, {"schema": V1, "metadata": MAJOR_1, "ruleSet": RULES})
    assert response.status_code == 200, response.text
    schema_id = response.json()["id"]
    for answer_ in (sr.version(subject, 1).json(), sr.schema_by_id(schema_id).json()):
        assert answer_["metadata"]["properties"] == {"major_version": "1"}
        rules = answer_["ruleSet"]["migrationRules"]
        assert [r["name"] for r in rules] == ["upgrade_rename", "downgrade_rename"]
        assert rules[0]["kind"] == "TRANSFORM" and rules[0]["mode"] == "UPGRADE"  # kind defaulted as Confluent does
        assert rules[0]["expr"] == RENAME_UP


def test_metadata_is_part_of_the_identity_and_inherited(sr, subject, registry_flavour):
    _contracts(registry_flavour)
    first = _post(sr, subject, {"schema": V1, "metadata": MAJOR_1}).json()
    # same text, same metadata: the same version; no metadata: inherits the latest's, the same version too
    assert _post(sr, subject, {"schema": V1, "metadata": MAJOR_1}).json()["id"] == first["id"]
    assert sr.register_id(subject, V1) == first["id"]
    assert sr.versions(subject).json() == [1]
    # same text, other metadata: a new version with a new id
    other = _post(sr, subject, {"schema": V1, "metadata": {"properties": {"owner": "it"}}})
    assert other.status_code == 200, other.text
    assert other.json()["id"] != first["id"]
    assert sr.versions(subject).json() == [1, 2]


def test_a_rule_set_alone_makes_a_new_version_of_the_latest_schema(sr, subject, registry_flavour):
    _contracts(registry_flavour)
    sr.register_id(subject, V1)
    response = _post(sr, subject, {"ruleSet": RULES})
    assert response.status_code == 200, response.text
    latest = sr.version(subject, "latest").json()
    assert latest["version"] == 2 and same_schema(latest["schema"], V1)
    assert latest["ruleSet"]["migrationRules"][0]["name"] == "upgrade_rename"


def test_latest_with_metadata(sr, subject, new_subject, compat, registry_flavour):
    _contracts(registry_flavour)
    compat(subject, "NONE")
    _post(sr, subject, {"schema": V1, "metadata": {"properties": {"major_version": "1", "app": "a"}}})
    _post(sr, subject, {"schema": V2, "metadata": {"properties": {"major_version": "1", "app": "b"}}})
    _post(sr, subject, {"schema": RENAMED, "metadata": MAJOR_2})
    path = f"/subjects/{sr.s(subject)}/metadata"
    assert sr.client.get(path, params={"key": "major_version", "value": "1"}).json()["version"] == 2
    pairs = [("key", "major_version"), ("value", "1"), ("key", "app"), ("value", "a")]
    assert sr.client.get(path, params=pairs).json()["version"] == 1
    found = sr.client.get(path, params={"key": "major_version", "value": "2", "deleted": "True"}).json()
    assert (found["version"], found["metadata"]["properties"]) == (3, {"major_version": "2"})
    missing = sr.client.get(path, params={"key": "major_version", "value": "9"})
    assert (missing.status_code, error_code(missing)) == (404, 40403)
    unknown = sr.client.get(f"/subjects/{sr.s(new_subject('none'))}/metadata",
                            params={"key": "major_version", "value": "1"})
    assert (unknown.status_code, error_code(unknown)) == (404, 40401)


def test_compatibility_is_checked_within_a_compatibility_group(sr, subject, compat, registry_flavour):
    _contracts(registry_flavour)
    compat(subject, "BACKWARD")
    assert _post(sr, subject, {"schema": V1, "metadata": MAJOR_1}).status_code == 200
    breaking = {"schema": RENAMED, "metadata": MAJOR_2, "ruleSet": RULES}
    refused = _post(sr, subject, breaking)  # no group yet: every version is compared
    assert refused.status_code == 409, refused.text
    put = sr.client.put(f"/config/{sr.s(subject)}", json={"compatibilityGroup": "major_version"})
    assert put.status_code == 200, put.text
    assert sr.get_config(subject).json()["compatibilityGroup"] == "major_version"
    accepted = _post(sr, subject, breaking)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["version"] == 2
    # without metadata a registration inherits the latest's metadata and rules (major 2): even V1's own text is
    # then not version 1 (whose metadata differs) but a new schema checked in group 2, which it breaks
    inherited = sr.register(subject, V1)
    assert inherited.status_code == 409, inherited.text
    assert _post(sr, subject, {"schema": V1, "metadata": MAJOR_1}).json()["version"] == 1  # with its own: v1
    # in group 1 a compatible change is a new minor version there
    minor = _post(sr, subject, {"schema": V2, "metadata": MAJOR_1, "ruleSet": {}})
    assert minor.status_code == 200, minor.text
    assert sr.versions(subject).json() == [1, 2, 3]


def test_config_data_contract_fields(sr, subject, registry_flavour):
    _contracts(registry_flavour)
    sr.register_id(subject, V1)
    fields = {"compatibilityGroup": "major_version", "defaultMetadata": {"properties": {"owner": "it"}},
              "overrideRuleSet": {"domainRules": [{"name": "check", "type": "CEL", "mode": "WRITE",
                                                   "kind": "CONDITION", "expr": "message.id > 0"}]}}
    put = sr.client.put(f"/config/{sr.s(subject)}", json=fields)
    assert put.status_code == 200, put.text
    config = sr.get_config(subject).json()
    assert config["compatibilityGroup"] == "major_version"
    assert config["defaultMetadata"] == {"properties": {"owner": "it"}}
    assert config["overrideRuleSet"]["domainRules"][0]["name"] == "check"
    # defaults and overrides are merged into a registration
    created = _post(sr, subject, {"schema": V2, "metadata": {"properties": {"major_version": "1"}}}).json()
    assert created["metadata"]["properties"] == {"major_version": "1", "owner": "it"}
    assert created["ruleSet"]["domainRules"][0]["name"] == "check"
    # PUT patches: a field given as null is cleared, the others are kept
    assert sr.client.put(f"/config/{sr.s(subject)}", json={"defaultMetadata": None}).status_code == 200
    config = sr.get_config(subject).json()
    assert "defaultMetadata" not in config and config["compatibilityGroup"] == "major_version"


@pytest.mark.parametrize("rule", [
    {"name": "1st", "type": "JSONATA", "mode": "UPGRADE"},  # a name starts with a letter or _
    {"name": "up", "mode": "UPGRADE"},  # type is required
    {"name": "up", "type": "JSONATA", "mode": "WRITE"},  # a migration rule is UPGRADE, DOWNGRADE or UPDOWN
    {"name": "up", "type": "JSONATA", "mode": "UPGRADE", "onFailure": "ERROR,NONE"},  # a pair needs UPDOWN
])
def test_invalid_rules_are_422(sr, subject, registry_flavour, rule):
    _contracts(registry_flavour)
    response = _post(sr, subject, {"schema": V1, "ruleSet": {"migrationRules": [rule]}})
    assert (response.status_code, error_code(response)) == (422, 42210), response.text
    assert sr.versions(subject).status_code == 404  # nothing registered


def test_lookup_with_metadata(sr, subject, registry_flavour):
    _contracts(registry_flavour)
    first = _post(sr, subject, {"schema": V1, "metadata": MAJOR_1}).json()
    found = _post(sr, subject, {"schema": V1, "metadata": MAJOR_1}, path="")
    assert found.status_code == 200, found.text
    assert (found.json()["id"], found.json()["metadata"]) == (first["id"], MAJOR_1)
    # the text alone: the latest's metadata is merged in, so it is found too
    assert _post(sr, subject, {"schema": V1}, path="").json()["version"] == 1
    assert _post(sr, subject, {"schema": V1, "metadata": MAJOR_2}, path="").status_code == 404


def test_explicit_version_is_recorded_in_the_metadata(sr, subject, registry_flavour):
    _contracts(registry_flavour)
    response = _post(sr, subject, {"schema": V1, "version": 1, "metadata": MAJOR_1})
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["properties"] == {"confluent:version": "1", "major_version": "1"}
