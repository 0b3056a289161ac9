"""Embedded-registry specifics: exact Confluent texts and codes, ids from 1, SQLite persistence, modes,
media types, canonical identity, normalization and concurrency. Each test starts its own registry."""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.integration

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


def record(*fields: dict[str, Any], name: str = "Row", namespace: str | None = None) -> str:
    schema: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        schema["namespace"] = namespace
    schema["fields"] = list(fields)
    return json.dumps(schema)


def f(name: str, type_: Any = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def err(response: httpx.Response) -> tuple[int, int, str]:
    body = response.json()
    return response.status_code, body["error_code"], body["message"]


S1 = record(f("f1"))
S2 = record(f("f1"), f("f2", default="d"))
S3 = record(f("f1"), f("f2"))


# -- ids, versions, exact error texts ---------------------------------------------------------------


def test_ids_start_at_one_and_failed_registrations_consume_nothing(embedded):
    sr = embedded()
    assert sr.register("a-value", S1).json() == {"id": 1, "version": 1, "schema": S1.replace(" ", "")}
    assert sr.register_id("b-value", S1) == 1  # same schema, other subject: same id
    assert sr.register("a-value", record(f("f1"), f("f9", "int"))).status_code == 409
    assert sr.register(
        "a-value", '{"type":"record","name":"Row","fields":[{"name":"x","type":"nope"}]}'
    ).status_code == 422
    assert sr.register("a-value", S2).json() == {"id": 2, "version": 2, "schema": S2.replace(" ", "")}
    assert sr.register_id("c-value", '"string"') == 3
    assert sr.versions("a-value").json() == [1, 2]
    assert sr.schema_by_id(2, fetchMaxId="true").json()["maxId"] == 3


def test_not_found_texts(embedded):
    sr = embedded()
    sr.register_id("s", S1)
    assert err(sr.versions("nope")) == (404, 40401, "Subject 'nope' not found.")
    assert err(sr.version("s", 7)) == (404, 40402, "Version 7 not found.")
    assert err(sr.lookup("s", S2)) == (404, 40403, "Schema not found")
    assert err(sr.schema_by_id(99)) == (404, 40403, "Schema 99 not found")
    assert err(sr.schema_by_id(99, "/subjects")) == (404, 40403, "Schema 99 not found")
    assert err(sr.get_config("s")) == (
        404, 40408, "Subject 's' does not have subject-level compatibility configured"
    )
    assert err(sr.client.get("/mode/s")) == (404, 40409, "Subject 's' does not have subject-level mode configured")
    assert sr.client.get("/mode/s", params={"defaultToGlobal": "true"}).json() == {"mode": "READWRITE"}


def test_invalid_version_texts(embedded):
    sr = embedded()
    sr.register_id("s", S1)
    for bad in ("0", "-2", "earliest", "2147483648", "1.5"):
        assert err(sr.version("s", bad)) == (
            422,
            42202,
            f"The specified version '{bad}' is not a valid version id. Allowed values are between "
            '[1, 2^31-1] and the string "latest"',
        )
    assert sr.version("s", "LATEST").json()["version"] == 1
    assert sr.version("s", 2**31 - 1).status_code == 404


def test_delete_state_machine_texts(embedded):
    sr = embedded()
    sr.register_id("s", S1)
    sr.register_id("s", S2)
    assert sr.delete_version("s", 1).json() == 1
    assert err(sr.delete_version("s", 1)) == (
        404, 40406, "Subject 's' Version 1 was soft deleted.Set permanent=true to delete permanently"
    )
    assert err(sr.delete_version("s", 2, permanent=True)) == (
        404, 40407, "Subject 's' Version 2 was not deleted first before being permanently deleted"
    )
    assert err(sr.delete_subject("s", permanent=True)) == (
        404, 40405, "Subject 's' was not deleted first before being permanently deleted"
    )
    assert sr.delete_subject("s").json() == [2]
    assert err(sr.delete_subject("s")) == (
        404, 40404, "Subject 's' was soft deleted.Set permanent=true to delete permanently"
    )
    assert sr.delete_subject("s", permanent=True).json() == [1, 2]
    assert err(sr.delete_subject("s")) == (404, 40401, "Subject 's' not found.")
    assert err(sr.schema_by_id(1)) == (404, 40403, "Schema 1 not found")


def test_listing_filters(embedded):
    sr = embedded()
    for name in ("orders-value", "orders-key", "users-value"):
        sr.register_id(name, S1)
    sr.register_id("orders-value", S2)
    sr.delete_version("orders-value", 1)
    sr.delete_subject("users-value")
    assert sr.subjects().json() == ["orders-key", "orders-value"]
    assert sr.subjects(deleted="true").json() == ["orders-key", "orders-value", "users-value"]
    assert sr.subjects(deletedOnly="true").json() == ["users-value"]
    assert sr.subjects(subjectPrefix="orders-v").json() == ["orders-value"]
    assert sr.subjects(offset=1, limit=1).json() == ["orders-value"]
    assert sr.versions("orders-value").json() == [2]
    assert sr.versions("orders-value", deleted="true").json() == [1, 2]
    assert sr.versions("orders-value", deletedOnly="true").json() == [1]
    assert sr.versions("orders-value", deletedAsNegative="true").json() == [-1, 2]
    assert sr.lookup("orders-value", S1).status_code == 404
    assert sr.lookup("orders-value", S1, deleted="true").json()["version"] == 1
    assert sr.schema_by_id(1, "/subjects").json() == ["orders-key"]
    assert sr.schema_by_id(1, "/subjects", deleted="true").json() == ["orders-key", "orders-value", "users-value"]
    assert sr.schema_by_id(1, "/versions").json() == [{"subject": "orders-key", "version": 1}]


def test_reregistering_a_soft_deleted_schema_makes_a_new_version_with_the_old_id(embedded):
    sr = embedded()
    sr.register_id("s", S1)
    sr.register_id("s", S2)
    sr.delete_version("s", 2)
    assert sr.register("s", S2).json()["version"] == 3
    assert sr.register_id("s", S2) == 2
    # the soft-deleted version 2 held the same id and was tombstoned
    assert sr.versions("s", deleted="true").json() == [1, 3]


def test_permanent_delete_of_the_last_version_drops_subject_config_and_mode(embedded):
    sr = embedded()
    sr.register_id("s", S1)
    sr.put_config("s", "FULL")
    assert sr.client.put("/mode/s", json={"mode": "READWRITE"}).status_code == 200
    sr.delete_subject("s")
    assert sr.get_config("s").json() == {"compatibilityLevel": "FULL"}  # soft delete keeps it
    sr.delete_subject("s", permanent=True)
    assert sr.get_config("s").status_code == 404
    assert sr.client.get("/mode/s").status_code == 404


# -- compatibility messages ---------------------------------------------------------------------------


def test_incompatible_message_is_confluents(embedded):
    sr = embedded()
    sr.register_id("s", S1)
    status, code, message = err(sr.register("s", S3))
    assert (status, code) == (409, 409)
    assert message == (
        'Schema being registered is incompatible with an earlier schema for subject "s", details: ['
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path '/fields/1' "
        "in the new schema has no default value and is missing in the old schema', additionalInfo:'f2'}, "
        "{oldSchemaVersion: 1}, "
        """{oldSchema: '{"type":"record","name":"Row","fields":[{"name":"f1","type":"string"}]}'}, """
        "{validateFields: 'false', compatibility: 'BACKWARD'}]"
    )


def test_incompatible_error_code_can_be_40901(embedded):
    sr = embedded(incompatible_error_code=40901)
    sr.register_id("s", S1)
    assert err(sr.register("s", S3))[:2] == (409, 40901)


def test_transitive_reports_the_first_failing_version_newest_first(embedded):
    sr = embedded()
    sr.put_config("s", "BACKWARD_TRANSITIVE")
    sr.register_id("s", S1)
    sr.register_id("s", S2)
    assert "{oldSchemaVersion: 1}" in err(sr.register("s", S3))[2]  # s3 reads s2, not s1
    sr.register_id("t", S1)
    sr.put_config("t", "BACKWARD_TRANSITIVE")
    sr.register_id("t", record(f("f1"), f("f3", default="x")))
    message = err(sr.register("t", S3))[2]
    assert "{oldSchemaVersion: 2}" in message  # fails against both; the newest is reported
    assert "{oldSchemaVersion: 1}" not in message
    assert "compatibility: 'BACKWARD_TRANSITIVE'" in message


def test_forward_and_full_messages(embedded):
    sr = embedded()
    sr.put_config("fw", "FORWARD")
    sr.register_id("fw", record(f("f1"), f("f2")))
    message = err(sr.register("fw", S1))[2]
    assert (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path '/fields/1' "
        "in the old schema has no default value and is missing in the new schema', additionalInfo:'f2'}"
    ) in message
    sr.put_config("full", "FULL")
    sr.register_id("full", record(f("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]})))
    message = err(sr.register("full", record(f("e", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}))))[2]
    assert (
        "{errorType:'MISSING_ENUM_SYMBOLS', description:'The old schema is missing enum symbols '[C]' at path "
        "'/fields/0/type/symbols' in the new schema', additionalInfo:'[C]'}"
    ) in message
    assert "compatibility: 'FULL'" in message


def test_type_mismatch_message_names_java_types(embedded):
    sr = embedded()
    sr.register_id("s", record(f("n", "int")))
    message = err(sr.register("s", record(f("n", "boolean"))))[2]
    assert (
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in the new schema "
        "does not match with the old schema', additionalInfo:'reader type: BOOLEAN not compatible with writer "
        "type: INT'}"
    ) in message


def test_compatibility_endpoint_details(embedded):
    sr = embedded()
    sr.register_id("s", S1)
    quiet = sr.compatibility("s", S3, "latest")
    assert quiet.json() == {"is_compatible": False}  # messages only with verbose
    verbose = sr.compatibility("s", S3, "latest", verbose="True").json()
    assert verbose["is_compatible"] is False
    assert verbose["messages"][0].startswith("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'")
    assert verbose["messages"][-1] == "{validateFields: 'false', compatibility: 'BACKWARD'}"
    invalid = sr.compatibility("s", '{"type":"nope"}', "latest", verbose="true").json()
    assert invalid["is_compatible"] is False
    assert "Type not supported: nope" in invalid["messages"][0]
    assert err(sr.compatibility("s", '{"type":"nope"}', "latest"))[:2] == (422, 42201)
    assert err(sr.compatibility("s", S2, "first"))[:2] == (422, 42202)
    assert sr.compatibility("unknown", S3, "latest").json() == {"is_compatible": True}
    assert sr.compatibility("unknown", S3).json() == {"is_compatible": True}
    assert err(sr.compatibility("unknown", S3, 1))[:2] == (404, 40402)


def test_compatibility_against_one_version_ignores_transitivity(embedded):
    sr = embedded()
    sr.put_config("s", "BACKWARD_TRANSITIVE")
    sr.register_id("s", S1)
    sr.register_id("s", S2)
    assert sr.compatibility("s", S3, 2).json() == {"is_compatible": True}
    assert sr.compatibility("s", S3, 1).json() == {"is_compatible": False}
    assert sr.compatibility("s", S3).json() == {"is_compatible": False}


# -- config and invalid values ------------------------------------------------------------------------


def test_config_texts_and_defaults(embedded):
    sr = embedded()
    assert sr.get_config().json() == {"compatibilityLevel": "BACKWARD"}
    assert sr.put_config(None, "full_transitive").json() == {"compatibility": "FULL_TRANSITIVE"}
    assert sr.get_config().json() == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert err(sr.put_config(None, "sideways")) == (
        422,
        42203,
        "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, "
        "forward_transitive, and full_transitive",
    )
    assert sr.put_config("pre-configured-value", "NONE").status_code == 200  # before the subject exists
    assert sr.get_config("pre-configured-value").json() == {"compatibilityLevel": "NONE"}
    assert sr.get_config("other", defaultToGlobal="TRUE").json() == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert sr.delete_config().json() == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert sr.get_config().json() == {"compatibilityLevel": "BACKWARD"}
    assert err(sr.delete_config("other")) == (404, 40401, "Subject 'other' not found.")


def test_invalid_subject(embedded):
    sr = embedded()
    for bad in ("bad\x01subject", "__GLOBAL"):
        assert err(sr.register(bad, S1)) == (422, 42208, f"The specified subject '{bad}' is not a valid.")


def test_subjects_with_slashes_and_unicode_round_trip(embedded):
    sr = embedded()
    for name in ("db/orders-value", "ça va?-value", "a%2Fb-value"):
        assert sr.register(name, S1).status_code == 200, name
        assert sr.version(name, 1).json()["subject"] == name
    assert sr.subjects().json() == sorted(["db/orders-value", "ça va?-value", "a%2Fb-value"])


# -- transport ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [MEDIA_TYPE, "application/vnd.schemaregistry+json", "application/json; charset=utf-8",
     "application/octet-stream", None],
)
def test_accepted_content_types(embedded, content_type):
    sr = embedded()
    headers = {"Content-Type": content_type} if content_type else {}
    client = httpx.Client(base_url=sr.registry.url, headers=headers)
    with client:
        response = client.post("/subjects/s/versions", content=json.dumps({"schema": S1}).encode())
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == MEDIA_TYPE


def test_unsupported_media_types(embedded):
    sr = embedded()
    body = json.dumps({"schema": S1}).encode()
    text = sr.client.post("/subjects/s/versions", content=body, headers={"Content-Type": "text/plain"})
    assert err(text) == (415, 415, "HTTP 415 Unsupported Media Type")
    put = sr.client.put("/config", content=b'{"compatibility":"NONE"}', headers={"Content-Type": "text/xml"})
    assert err(put)[:2] == (415, 415)
    html = sr.client.get("/subjects", headers={"Accept": "text/html"})
    assert err(html)[:2] == (406, 406)
    assert sr.client.get("/subjects", headers={"Accept": "*/*"}).status_code == 200


def test_invalid_schemas_are_422_with_the_parser_message(embedded):
    sr = embedded()
    cases = {
        '{"type": "record", "name": "R", "fields": [': "Invalid JSON",
        '{"type": "nope"}': "Type not supported: nope",
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}': (
            '"Missing" is not a defined name. The type of the "a" field must be a defined name or a '
            '{"type": ...} expression.'
        ),
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "string", "default": null}]}': (
            'Invalid default for field a: null not a "string"'
        ),
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": ["string", "null"], "default": null}]}': (
            'Invalid default for field a: null not a ["string","null"]'
        ),
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": 1.5}]}': (
            "Invalid default for field a: 1.5 not a \"int\""
        ),
        '{"type": "enum", "name": "E", "symbols": ["A", "A"]}': "Duplicate enum symbol: A",
        '{"type": "record", "name": "1R", "fields": []}': "Illegal initial character: 1R",
    }
    for schema, detail in cases.items():
        status, code, message = err(sr.register("s", schema))
        assert (status, code) == (422, 42201), schema
        assert message.startswith(f"Invalid schema {schema} with refs [] of type AVRO, details: "), message
        assert detail in message, message
    assert err(sr.client.post("/subjects/s/versions", json={"schemaType": "PROTOBUF", "schema": "syntax"}))[:2] == (
        422, 42201
    )
    assert err(sr.client.post("/subjects/s/versions", json={}))[:3] == (422, 42201, "Empty schema")
    assert err(sr.client.post("/subjects/s/versions", content=b"{oops"))[:2] == (400, 400)


def test_unknown_fields_and_params_are_ignored_and_booleans_are_case_insensitive(embedded):
    sr = embedded()
    body = {"schema": S1, "schemaType": "AVRO", "metadata": {"properties": {"a": "b"}}, "ruleSet": None, "x": 1}
    assert sr.client.post("/subjects/s/versions", json=body, params={"normalize": "False", "zzz": "1"}).json()[
        "id"
    ] == 1
    assert sr.delete_version("s", 1).status_code == 200
    assert sr.client.delete("/subjects/s/versions/1", params={"permanent": "True"}).json() == 1
    assert sr.client.get("/").json() == {}
    assert sr.client.get("/schemas/types").json() == ["AVRO"]
    assert sr.client.get("/contexts").json() == ["."]
    assert err(sr.client.get("/no/such/path"))[:2] == (404, 404)
    assert err(sr.client.put("/subjects"))[:2] == (405, 405)


def test_bare_schema_endpoints(embedded):
    sr = embedded()
    sr.register_id("s", '{"type": "string"}')
    assert sr.client.get("/schemas/ids/1/schema").text == '"string"'
    assert sr.client.get("/subjects/s/versions/latest/schema").text == '"string"'


# -- modes ----------------------------------------------------------------------------------------


def test_readonly_mode(embedded):
    sr = embedded()
    sr.register_id("s", S1)
    assert sr.client.put("/mode", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert sr.client.get("/mode").json() == {"mode": "READONLY"}
    assert err(sr.register("s", S2)) == (422, 42205, "Subject s in context . is in read-only mode")
    assert sr.register_id("s", S1) == 1  # idempotent re-registration happens before the mode check
    assert err(sr.delete_version("s", 1))[:2] == (422, 42205)
    assert err(sr.delete_subject("s"))[:2] == (422, 42205)
    assert err(sr.put_config("s", "NONE"))[:2] == (422, 42205)
    # a subject-level mode overrides the global one
    assert sr.client.put("/mode/s", json={"mode": "readwrite"}).json() == {"mode": "READWRITE"}
    assert sr.register("s", S2).status_code == 200
    assert err(sr.register("other", S1))[:2] == (422, 42205)
    assert sr.client.delete("/mode/s").json() == {"mode": "READWRITE"}
    assert err(sr.client.put("/mode", json={"mode": "SLEEPY"})) == (
        422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD."
    )


def test_import_mode(embedded):
    sr = embedded()
    sr.register_id("existing", S1)
    assert err(sr.client.put("/mode", json={"mode": "IMPORT"})) == (
        422, 42205, "Cannot import since found existing subjects"
    )
    assert sr.client.put("/mode/imported", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    body = {"schema": S2, "id": 100, "version": 5}
    assert sr.client.post("/subjects/imported/versions", json=body).json()["id"] == 100
    assert sr.version("imported", 5).json()["id"] == 100
    assert sr.schema_by_id(100).json()["schema"] == S2.replace(" ", "")
    assert err(sr.client.post("/subjects/imported/versions", json={"schema": S3}))[:2] == (422, 42205)
    clash = sr.client.post("/subjects/imported/versions", json={"schema": S3, "id": 100, "version": 6})
    assert err(clash) == (422, 42205, "Overwrite new schema with id 100 is not permitted.")
    # no compatibility check in IMPORT: S3 is not BACKWARD-compatible with S2
    assert sr.client.post("/subjects/imported/versions", json={"schema": S3, "id": 101, "version": 6}).status_code == 200
    assert sr.versions("imported").json() == [5, 6]
    assert sr.client.delete("/mode/imported").status_code == 200
    assert err(sr.client.post("/subjects/imported/versions", json={"schema": '"long"', "id": 7}))[:3] == (
        422, 42205, "Subject imported in context . is not in import mode"
    )
    assert sr.register("imported", record(f("f1"), f("f2"), f("f4", default="z"))).json() == {
        "id": 102, "version": 7, "schema": record(f("f1"), f("f2"), f("f4", default="z")).replace(" ", ""),
    }
    assert sr.client.put("/mode", json={"mode": "IMPORT"}, params={"force": "true"}).json() == {"mode": "IMPORT"}


def test_version_outside_import_must_be_the_next_one(embedded):
    sr = embedded()
    sr.register_id("s", S1)
    assert err(sr.client.post("/subjects/s/versions", json={"schema": S2, "version": 5})) == (
        422, 42201, "Version is not one more than previous version"
    )
    assert sr.client.post("/subjects/s/versions", json={"schema": S2, "version": 2}).json()["version"] == 2


# -- identity and normalization -------------------------------------------------------------------


def test_canonical_text_is_javas_tostring(embedded):
    sr = embedded()
    # Confluent AvroSchemaTest.testNormalization
    text = '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":[{"type":"string","name":"f1","doc":"bye\\"now"}]}'
    assert sr.register("s", text).json()["schema"] == (
        '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":[{"name":"f1","type":"string","doc":"bye\\"now"}]}'
    )
    nested = {
        "namespace": "a.b", "name": "Outer", "type": "record",
        "fields": [
            {"name": "in", "type": {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": {"type": "int"}}]}},
            {"name": "again", "type": "a.b.Inner"},
            {"name": "top", "type": {"type": "fixed", "name": "Top", "namespace": "", "size": 2}},
        ],
    }
    assert sr.register("n", json.dumps(nested, indent=4)).json()["schema"] == (
        '{"type":"record","name":"Outer","namespace":"a.b","fields":[{"name":"in","type":{"type":"record",'
        '"name":"Inner","fields":[{"name":"x","type":"int"}]}},{"name":"again","type":"Inner"},{"name":"top",'
        '"type":{"type":"fixed","name":"Top","namespace":"","size":2}}]}'
    )


def test_identity_ignores_layout_but_not_props_defaults_or_logical_types(embedded):
    sr = embedded()
    sr.put_config("s", "NONE")
    base = record(f("id", {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}), name="R", namespace="db")
    first = sr.register_id("s", base)
    same = [
        json.dumps(json.loads(base), indent=3, sort_keys=True),
        '{"type":"record","name":"db.R","fields":[{"name":"id","type":{"type":"long",'
        '"connect.parameters":{"tidb_type":"BIGINT"}}}]}',
    ]
    for text in same:
        assert sr.register_id("other-value", text) == first, text
    assert sr.register_id("prim", '{"type": "string"}') == sr.register_id("prim2", '"string"')
    different = [
        record(f("id", {"type": "long", "connect.parameters": {"tidb_type": "INT"}}), name="R", namespace="db"),
        record(f("id", {"type": "long"}), name="R", namespace="db"),
        record(f("id", {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}, default=0), name="R", namespace="db"),
        record(f("id", {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}), name="R", namespace="db2"),
    ]
    ids = {sr.register_id("s", text) for text in different}
    assert first not in ids and len(ids) == len(different)


def test_unicode_names_are_accepted_and_checked_like_java(embedded):
    sr = embedded()
    sr.put_config("s", "FULL")
    enum = {"type": "enum", "name": "Größe", "symbols": ["É", "u__x"]}
    sr.register_id("s", record(f("größe", enum), name="Zeilé", namespace="ns.ü"))
    grown = {**enum, "symbols": ["É", "Ö", "u__x"]}
    message = err(sr.register("s", record(f("größe", grown), name="Zeilé", namespace="ns.ü")))[2]
    assert "additionalInfo:'[Ö]'" in message


def test_decimal_scale_change_is_a_new_schema_but_compatible(embedded):
    sr = embedded()
    scale2 = record(f("amount", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}))
    scale3 = record(f("amount", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3}))
    assert sr.register_id("s", scale2) == 1
    # logical types are invisible to Avro's checker, so BACKWARD accepts the change, as in Confluent
    assert sr.register("s", scale3).json() == {"id": 2, "version": 2, "schema": scale3.replace(" ", "")}


def test_equivalent_props_order_maps_to_the_existing_version_in_the_subject(embedded):
    sr = embedded()
    ab = record(f("c", {"type": "string", "connect.name": "x", "connect.parameters": {"a": "1", "b": "2"}}))
    ba = record(f("c", {"type": "string", "connect.parameters": {"b": "2", "a": "1"}, "connect.name": "x"}))
    assert sr.register("s", ab).json()["id"] == 1
    assert sr.register("s", ba).json() == {"id": 1, "version": 1, "schema": ab.replace(" ", "")}
    assert sr.lookup("s", ba).json()["version"] == 1
    # the second chance is per subject: elsewhere the other order is another canonical text, another id
    assert sr.register_id("t", ba) == 2


def test_normalize(embedded):
    sr = embedded()
    ab = record(f("c", {"type": "string", "connect.name": "x", "connect.parameters": {"b": "2", "a": "1"}}))
    ba = record(f("c", {"type": "string", "connect.parameters": {"a": "1", "b": "2"}, "connect.name": "x"}))
    normalized = sr.register("n1", ab, normalize="true").json()
    assert normalized["schema"] == (
        '{"type":"record","name":"Row","fields":[{"name":"c","type":{"type":"string",'
        '"connect.name":"x","connect.parameters":{"a":"1","b":"2"}}}]}'
    )
    assert sr.register_id("n2", ba, ) != normalized["id"]
    assert sr.register("n3", ba, normalize="TRUE").json()["id"] == normalized["id"]
    scale0 = record(f("d", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 0}))
    no_scale = record(f("d", {"type": "bytes", "logicalType": "decimal", "precision": 5}))
    assert sr.register_id("d1", scale0) != sr.register_id("d2", no_scale)
    assert sr.register("d3", scale0, normalize="true").json()["schema"] == no_scale.replace(" ", "")
    # a subject config with normalize=true normalizes every registration
    assert sr.client.put("/config/n4", json={"normalize": True}).json() == {"normalize": True}
    assert sr.register_id("n4", ba) == normalized["id"]


def test_references(embedded):
    sr = embedded()
    address = json.dumps({"type": "record", "name": "Address", "namespace": "acme",
                          "fields": [{"name": "street", "type": "string"}]})
    sr.register_id("address-value", address)
    person = json.dumps({"type": "record", "name": "Person", "namespace": "acme",
                         "fields": [{"name": "home", "type": "acme.Address"}]})
    refs = [{"name": "acme.Address", "subject": "address-value", "version": 1}]
    response = sr.client.post("/subjects/person-value/versions", json={"schema": person, "references": refs})
    assert response.json() == {
        "id": 2, "version": 1,
        "schema": '{"type":"record","name":"Person","namespace":"acme","fields":[{"name":"home","type":"Address"}]}',
    }
    assert sr.schema_by_id(2).json()["references"] == refs
    assert sr.client.get("/subjects/address-value/versions/1/referencedby").json() == [2]
    assert err(sr.delete_version("address-value", 1))[:2] == (422, 42206)
    assert err(sr.register("person2-value", person))[:2] == (422, 42201)  # without the reference


# -- persistence ------------------------------------------------------------------------------------


def test_sqlite_restart_keeps_everything(embedded, tmp_path):
    data = str(tmp_path / "registry.db")
    sr = embedded(data)
    assert sr.register_id("a-value", S1) == 1
    assert sr.register_id("a-value", S2) == 2
    assert sr.register_id("b-value", S1) == 1
    assert sr.register_id("c-value", '"string"') == 3
    assert sr.register_id("d-value", '"long"') == 4
    sr.delete_version("a-value", 1)
    sr.delete_subject("c-value")
    sr.delete_subject("d-value")
    sr.delete_subject("d-value", permanent=True)
    sr.put_config("a-value", "FULL")
    sr.put_config(None, "FORWARD")
    sr.client.put("/mode/b-value", json={"mode": "READONLY"})
    sr.stop()

    with sqlite3.connect(data) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    sr = embedded(data)
    assert sr.subjects().json() == ["a-value", "b-value"]
    assert sr.subjects(deleted="true").json() == ["a-value", "b-value", "c-value"]
    assert sr.versions("a-value").json() == [2]
    assert sr.versions("a-value", deleted="true").json() == [1, 2]
    assert sr.version("a-value", 1, deleted="true").json()["id"] == 1
    assert sr.version("a-value", "latest").json() == {
        "subject": "a-value", "version": 2, "id": 2, "schema": S2.replace(" ", ""),
    }
    assert sr.schema_by_id(3).json() == {"schema": '"string"'}  # soft-deleted: still resolvable
    assert sr.schema_by_id(4).status_code == 404  # permanently deleted
    assert sr.get_config("a-value").json() == {"compatibilityLevel": "FULL"}
    assert sr.get_config().json() == {"compatibilityLevel": "FORWARD"}
    assert sr.client.get("/mode/b-value").json() == {"mode": "READONLY"}
    assert err(sr.register("b-value", S2))[:2] == (422, 42205)
    assert err(sr.delete_subject("c-value"))[:2] == (404, 40404)
    # ids continue after the highest ever given; versions after the highest kept
    assert sr.register("a-value", record(f("f1"), f("f2", default="d"), f("f3", default="e"))).json()["id"] == 5
    assert sr.versions("a-value").json() == [2, 3]
    assert sr.register("d-value", '"long"').json() == {"id": 4, "version": 1, "schema": '"long"'}


def test_two_registries_on_one_sqlite_file_see_each_other(embedded, tmp_path):
    data = str(tmp_path / "shared.db")
    left, right = embedded(data), embedded(data)
    assert left.register_id("s", S1) == 1
    assert right.version("s", 1).json()["id"] == 1
    assert right.register_id("t", S2) == 2
    assert left.schema_by_id(2).status_code == 200
    assert left.register("s", S2).json() == {"id": 2, "version": 2, "schema": S2.replace(" ", "")}


# -- concurrency ----------------------------------------------------------------------------------


def test_concurrent_registrations_get_consistent_ids(embedded):
    sr = embedded()
    url = sr.registry.url
    sr.put_config(None, "NONE")
    schemas = [record(f(f"c{i}", "long")) for i in range(24)]
    results: list[tuple[str, int, int]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        with httpx.Client(base_url=url, timeout=30, headers={"Content-Type": MEDIA_TYPE}) as client:
            for i, schema in enumerate(schemas):
                subject = f"subject-{(i + n) % 3}"
                response = client.post(f"/subjects/{subject}/versions", json={"schema": schema})
                with lock:
                    if response.status_code != 200:
                        errors.append(response.text)
                    else:
                        results.append((schema, response.json()["id"], n))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ids_by_schema: dict[str, set[int]] = {}
    for schema, schema_id, _ in results:
        ids_by_schema.setdefault(schema, set()).add(schema_id)
    assert all(len(ids) == 1 for ids in ids_by_schema.values())
    assert sorted(next(iter(ids)) for ids in ids_by_schema.values()) == list(range(1, len(schemas) + 1))
    for k in range(3):
        versions = sr.versions(f"subject-{k}").json()
        assert versions == list(range(1, len(versions) + 1))
        assert len(versions) == len(schemas)  # every schema reached every subject exactly once


# -- stopping ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("client_open", [False, True], ids=["idle", "keep-alive-open"])
def test_stop_ends_the_server_frees_the_port_and_closes_the_store(tmp_path, client_open):
    """stop() wakes the server's loop at once; with a client's connection still open it goes through uvicorn's
    own shutdown, which closes that connection. Either way the thread ends, the port is free and the SQLite file
    is closed (a new registry on it sees what was written)."""
    import socket

    from avro_registry_sink.registry.embedded import EmbeddedRegistry

    data = str(tmp_path / "registry.db")
    registry = EmbeddedRegistry(data)
    url = registry.start()
    thread = registry._thread
    port = int(url.rsplit(":", 1)[1])
    client = httpx.Client(base_url=url)
    assert client.post("/subjects/s-value/versions", json={"schema": '"string"'}).json()["id"] == 1
    if not client_open:
        client.close()
    registry.stop()
    assert thread is not None and not thread.is_alive()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    if client_open:
        with pytest.raises(httpx.TransportError):  # its connection was closed by the server, not left hanging
            client.get("/subjects")
        client.close()
    registry.stop()  # twice is fine
    with EmbeddedRegistry(data) as again, httpx.Client(base_url=again.url) as second:
        assert second.get("/subjects").json() == ["s-value"]


def test_stop_right_after_start():
    from avro_registry_sink.registry.embedded import EmbeddedRegistry

    for _ in range(3):
        registry = EmbeddedRegistry()
        registry.start()
        thread = registry._thread
        registry.stop()
        assert thread is not None and not thread.is_alive()
