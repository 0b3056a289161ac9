"""Following majors without Spark: Confluent's migration chain per writer version, and the record reader that runs
it exactly (DECIMAL and bytes values JSONata cannot hold are restored, or the record is refused by name)."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from avro_registry_sink.schema.follow import RecordFollower, RecordRefused, RegisteredVersion, plan_follow
from avro_registry_sink.schema.migration import plan_migration, rule_set_for
from avro_registry_sink.tabledef.ddl import ColumnLineage


def dec(precision: int, scale: int) -> dict[str, Any]:
    return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale,
            "connect.parameters": {"tidb_type": "DECIMAL"}}


def record(*fields: tuple[str, Any]) -> dict[str, Any]:
    out = []
    for name, kind in fields:
        spec: dict[str, Any] = {"name": name, "type": kind}
        if isinstance(kind, list):
            spec["default"] = None
        out.append(spec)
    return {"type": "record", "name": "t", "fields": out}


def rule(name: str, mode: str, expr: str = "$", **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "TRANSFORM", "mode": mode, "type": "JSONATA", "expr": expr, **extra}


def framed(schema_id: int, schema: dict[str, Any], value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def majors(*schemas: dict[str, Any], lineage: dict[int, ColumnLineage] | None = None) -> list[RegisteredVersion]:
    """Version i+1 (schema id 100+i) of each schema, each a new major with the rules plan_migration writes."""
    out = [RegisteredVersion(1, 100, json.dumps(schemas[0]), {"major_version": "1"})]
    for i in range(1, len(schemas)):
        plan = plan_migration(schemas[i - 1], schemas[i], (lineage or {}).get(i + 1))
        out.append(RegisteredVersion(i + 1, 100 + i, json.dumps(schemas[i]), {"major_version": str(i + 1)},
                                     rule_set_for(plan, i, i + 1)))
    return out


# -- the chain -----------------------------------------------------------------------------------------------


def test_the_chain_is_confluents_every_version_with_rules_of_the_direction():
    s = json.dumps(record(("id", "long")))
    versions = [
        RegisteredVersion(1, 10, s, {"major_version": "1"}),
        RegisteredVersion(2, 11, s, {"major_version": "2"}, {"migrationRules": [
            rule("up2", "UPGRADE"), rule("down2a", "DOWNGRADE"), rule("down2b", "DOWNGRADE"), rule("both2", "UPDOWN")]}),
        RegisteredVersion(3, 12, s, {"major_version": "2"}),  # a minor: no rules
        RegisteredVersion(4, 13, s, {"major_version": "3"}, {"migrationRules": [
            rule("up4", "UPGRADE"), rule("off", "DOWNGRADE", disabled=True)]}),
        RegisteredVersion(5, 14, s, {"major_version": "2"}, deleted=True),  # soft-deleted: never the reader
    ]
    to2 = plan_follow("t-value", versions, major=2)
    assert to2.reader_version == 3
    assert [(st.mode, st.version, [r[0] for r in st.rules]) for st in to2.chains[10]] == [
        ("UPGRADE", 2, ["up2", "both2"])]
    assert to2.chains[11] == () and to2.chains[12] == ()  # no rules between: Avro resolution
    # down from 4: version 4 has DOWNGRADE rules (disabled ones do not run, the step stays: no resolution)
    assert [(st.mode, st.version, st.rules) for st in to2.chains[13]] == [("DOWNGRADE", 4, ())]
    # down from the deleted version 5 through 4: the newest step first
    assert [st.version for st in to2.chains[14]] == [4]
    to1 = plan_follow("t-value", versions, major=1)
    # going down, a version's rules run in reverse order
    assert [(st.version, [r[0] for r in st.rules]) for st in to1.chains[13]] == [
        (4, []), (2, ["both2", "down2b", "down2a"])]


def test_a_major_that_is_not_there_names_the_subject_and_its_majors():
    versions = majors(record(("id", "long")))
    with pytest.raises(RecordRefused, match=r"Subject 't-value' has no live version of major 4.*its majors: 1"):
        plan_follow("t-value", versions, major=4)


def test_a_rule_of_another_type_makes_its_writers_unfollowable_by_name():
    s = json.dumps(record(("id", "long")))
    versions = [RegisteredVersion(1, 10, s, {"major_version": "1"}),
                RegisteredVersion(2, 11, s, {"major_version": "2"}, {"migrationRules": [
                    {"name": "cel", "kind": "TRANSFORM", "mode": "UPGRADE", "type": "CEL_FIELD", "expr": "x"}]})]
    plan = plan_follow("t-value", versions, major=2)
    with pytest.raises(RecordRefused, match="rule 'cel' of version 2 is of type 'CEL_FIELD'"):
        RecordFollower(plan).read(framed(10, json.loads(s), {"id": 1}))


# -- exact values ------------------------------------------------------------------------------------------

MONEY = ("amount", dec(38, 10))
V1 = record(("id", "long"), MONEY, ("doc", ["null", "bytes"]), ("a", "int"))
V2 = record(("id", "long"), MONEY, ("doc", ["null", "bytes"]), ("a", "string"))  # a: INT -> VARCHAR
V3 = record(("id", "long"), MONEY, ("doc", ["null", "bytes"]), ("b", "string"))  # a renamed to b
BIG = Decimal("123456789012345678901234567.8901234567")  # 37 digits: far beyond a double's 2^53
NEG = Decimal("-123456789012345678901234567.8901234567")  # (-BIG would round to 28 digits)


def test_decimals_and_bytes_that_rules_only_copy_come_out_exact_whatever_their_digits():
    versions = majors(V1, V2, V3, lineage={3: ColumnLineage(renamed=(("b", "a"),))})
    rows = {100: framed(100, V1, {"id": 1, "amount": BIG, "doc": b"\x00\xff", "a": 42}),
            102: framed(102, V3, {"id": 3, "amount": NEG, "doc": None, "b": "-7"})}
    to3 = RecordFollower(plan_follow("t-value", versions, major=3))
    assert to3.read(rows[100]) == {"id": 1, "amount": BIG, "doc": b"\x00\xff", "b": "42"}
    to1 = RecordFollower(plan_follow("t-value", versions, major=1))
    got = to1.read(rows[102])
    assert got == {"id": 3, "amount": NEG, "doc": None, "a": -7}
    assert str(got["amount"]) == "-123456789012345678901234567.8901234567"


def test_a_rule_computing_with_a_decimal_is_exact_or_refused_naming_column_value_and_reason():
    old, new = record(("id", "long"), ("m", dec(38, 10))), record(("id", "long"), ("m", dec(38, 2)))
    follower = RecordFollower(plan_follow("t-value", majors(old, new), major=2))

    def read(text: str) -> Any:
        return follower.read(framed(100, old, {"id": 1, "m": Decimal(text)}))["m"]

    assert read("12.3456789012") == Decimal("12.35")  # MySQL: ROUND(12.3456789012, 2)
    assert read("-12.3449999999") == Decimal("-12.34")
    # 1.005 is 1.00499999999999989... as a double: the rule rounds the unscaled integer (exact), as MySQL: 1.01
    assert read("1.005") == Decimal("1.01")
    assert read("-7.005") == Decimal("-7.01")
    with pytest.raises(RecordRefused, match=r"column m: .*m=1234567890123456789012345678\.9000000000.*more than the "
                                            r"15 significant digits"):
        read("1234567890123456789012345678.9")  # beyond 2^53: never handed back rounded


def test_a_long_decimal_turned_into_text_by_a_rule_is_refused_a_short_one_is_the_rules_text():
    old, new = record(("id", "long"), ("m", dec(38, 10))), record(("id", "long"), ("m", "string"))
    follower = RecordFollower(plan_follow("t-value", majors(old, new), major=2))
    # MySQL prints a DECIMAL(38,10) with its ten digits of scale, and so does the rule
    assert follower.read(framed(100, old, {"id": 1, "m": Decimal("12.5")}))["m"] == "12.5000000000"
    with pytest.raises(RecordRefused, match="more than the 15 significant digits JSONata's doubles hold"):
        follower.read(framed(100, old, {"id": 1, "m": BIG}))


def test_bytes_a_rule_uses_as_text_are_refused():
    old = record(("id", "long"), ("doc", "bytes"))
    new = record(("id", "long"), ("doc", "bytes"), ("tag", "string"))
    versions = [RegisteredVersion(1, 100, json.dumps(old), {"major_version": "1"}),
                RegisteredVersion(2, 101, json.dumps(new), {"major_version": "2"}, {"migrationRules": [
                    rule("up", "UPGRADE", '$merge([$, {"tag": "x" & $.doc}])')]})]
    follower = RecordFollower(plan_follow("t-value", versions, major=2))
    with pytest.raises(RecordRefused, match="column tag: the rules use the bytes of a column as text"):
        follower.read(framed(100, old, {"id": 1, "doc": b"ab"}))


def test_rules_must_give_the_whole_reader_shape_and_its_nullability():
    old = record(("id", "long"), ("a", "int"))
    new = record(("id", "long"), ("a", "string"), ("n", "int"))
    versions = [RegisteredVersion(1, 100, json.dumps(old), {"major_version": "1"}),
                RegisteredVersion(2, 101, json.dumps(new), {"major_version": "2"}, {"migrationRules": [
                    rule("up", "UPGRADE", '$merge([$, {"a": $string($.a)}])')]})]
    follower = RecordFollower(plan_follow("t-value", versions, major=2))
    with pytest.raises(RecordRefused, match="column n: the migration rules give no value for it"):
        follower.read(framed(100, old, {"id": 1, "a": 5}))
    versions[1] = RegisteredVersion(2, 101, json.dumps(new), {"major_version": "2"}, {"migrationRules": [
        rule("up", "UPGRADE", '$merge([$, {"a": $string($.a), "n": null}])')]})
    follower = RecordFollower(plan_follow("t-value", versions, major=2))
    with pytest.raises(RecordRefused, match=r"column n \(int\): value None is null and the column is NOT NULL"):
        follower.read(framed(100, old, {"id": 1, "a": 5}))


def test_records_of_the_readers_own_major_use_avro_resolution():
    v1 = record(("id", "long"), ("a", "int"))
    v2 = {**record(("id", "long"), ("a", "int")),
          "fields": [*record(("id", "long"), ("a", "int"))["fields"], {"name": "w", "type": "int", "default": 7}]}
    versions = [RegisteredVersion(1, 100, json.dumps(v1), {"major_version": "1"}),
                RegisteredVersion(2, 101, json.dumps(v2), {"major_version": "1"})]  # a minor: no rules
    follower = RecordFollower(plan_follow("t-value", versions, major=1))
    assert follower.read(framed(100, v1, {"id": 1, "a": 2})) == {"id": 1, "a": 2, "w": 7}  # the reader's default


def test_a_rule_that_branches_on_a_decimals_value_is_never_answered_from_its_stand_ins():
    old = record(("id", "long"), ("m", dec(10, 2)))
    new = record(("id", "long"), ("m", ["null", dec(10, 2)]))
    versions = [RegisteredVersion(1, 100, json.dumps(old), {"major_version": "1"}),
                RegisteredVersion(2, 101, json.dumps(new), {"major_version": "2"}, {"migrationRules": [
                    rule("up", "UPGRADE", '$merge([$, {"m": $.m = 0.1 or $.m = 0 ? null : $.m}])')]})]
    follower = RecordFollower(plan_follow("t-value", versions, major=2))
    assert follower.read(framed(100, old, {"id": 1, "m": Decimal("5.00")}))["m"] == Decimal("5.00")
    # for 0.10 the rule gives null; its stand-ins (a text marker, the doubles next to 0.1) would not: refused
    with pytest.raises(RecordRefused, match="column m: the rules compute its value"):
        follower.read(framed(100, old, {"id": 2, "m": Decimal("0.10")}))
    # 0 is its double exactly: no stand-in moves it, and the rule's answer for it is the answer
    assert follower.read(framed(100, old, {"id": 3, "m": Decimal("0.00")}))["m"] is None
