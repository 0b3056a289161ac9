"""Migration rules of a breaking DDL (schema/migration.py, tabledef/ddl.column_lineage): the generated JSONata is
evaluated with jsonata-python (what confluent-kafka-python's JSONata executor runs) on sample records."""

from __future__ import annotations

import json
from decimal import Decimal

import jsonata
import pytest

from avro_registry_sink.config import DEFAULT_ENCODING
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.schema.migration import plan_migration, rule_set_for
from avro_registry_sink.tabledef.ddl import ColumnLineage, apply_ddl, column_lineage, parse_ddl

BASE = ("CREATE TABLE s.t (id BIGINT PRIMARY KEY, a INT NOT NULL, b INT, c VARCHAR(20) NOT NULL, "
        "d DOUBLE NOT NULL, big BIGINT NOT NULL, e ENUM('x','y') NOT NULL DEFAULT 'y')")
OLD_ROW = {"id": 1, "a": 5, "b": None, "c": "42", "d": 2.5, "big": 7, "e": "x"}


def plan_for(*statements: str, base: str = BASE, key: bool = False):
    before = parse_ddl(base)[0]
    after = before
    for statement in statements:
        after = parse_ddl(statement)[0] if statement.upper().startswith("CREATE") else apply_ddl(after, statement)
    old, new = derive_schemas(before, DEFAULT_ENCODING), derive_schemas(after, DEFAULT_ENCODING)
    if key:
        return plan_migration(old.key_json, new.key_json, column_lineage(statements), is_key=True)
    return plan_migration(old.value_json, new.value_json, column_lineage(statements))


def up(plan, record):
    return jsonata.Jsonata(plan.upgrade).evaluate(record)


def down(plan, record):
    return jsonata.Jsonata(plan.downgrade).evaluate(record)


# -- one test per breaking class: the rules, value by value ---------------------------------------------------


def test_int_to_string():
    plan = plan_for("ALTER TABLE t MODIFY a VARCHAR(20) NOT NULL")
    assert up(plan, OLD_ROW)["a"] == "5"
    assert down(plan, {**OLD_ROW, "a": " -17 "})["a"] == -17
    with pytest.raises(Exception, match="column a: zz is not an integer"):
        down(plan, {**OLD_ROW, "a": "zz"})
    with pytest.raises(Exception, match="out of range for INT"):
        down(plan, {**OLD_ROW, "a": "3000000000"})


def test_string_to_bigint_is_exact_up_to_two_to_the_53():
    plan = plan_for("ALTER TABLE t MODIFY c BIGINT NOT NULL")
    assert up(plan, OLD_ROW)["c"] == 42
    assert up(plan, {**OLD_ROW, "c": "9007199254740991"})["c"] == 9007199254740991
    assert down(plan, {**OLD_ROW, "c": -1234567890123456})["c"] == "-1234567890123456"
    with pytest.raises(Exception, match="2\\^53"):
        down(plan, {**OLD_ROW, "c": 2**60})


def test_string_to_nullable_int_gives_null_for_text_that_is_no_integer():
    plan = plan_for("ALTER TABLE t MODIFY c INT NULL")
    assert up(plan, {**OLD_ROW, "c": "x1"})["c"] is None
    assert down(plan, {**OLD_ROW, "c": None})["c"] == ""  # NOT NULL again going down: the implicit default


def test_not_null_column_added_without_default():
    plan = plan_for("ALTER TABLE t ADD COLUMN z INT NOT NULL")
    assert up(plan, OLD_ROW) == {**OLD_ROW, "z": 0}
    assert down(plan, {**OLD_ROW, "z": 3}) == OLD_ROW


def test_not_null_enum_added_gets_its_first_member_and_a_default_its_default():
    plan = plan_for("ALTER TABLE t ADD COLUMN k ENUM('p','q') NOT NULL, ADD COLUMN n INT NOT NULL DEFAULT 9")
    assert up(plan, OLD_ROW) == {**OLD_ROW, "k": "p", "n": 9}


def test_rename_column():
    plan = plan_for("ALTER TABLE t RENAME COLUMN a TO a2")
    assert plan.changes == ("a renamed to a2",)
    renamed = {k if k != "a" else "a2": v for k, v in OLD_ROW.items()}
    assert up(plan, OLD_ROW) == renamed
    assert down(plan, renamed) == OLD_ROW


def test_change_renames_and_widens():
    plan = plan_for("ALTER TABLE t CHANGE a a2 BIGINT NOT NULL")
    assert up(plan, OLD_ROW)["a2"] == 5 and "a" not in up(plan, OLD_ROW)
    assert down(plan, {**OLD_ROW, "a2": 6})["a"] == 6
    with pytest.raises(Exception, match="out of range for INT"):
        down(plan, {**OLD_ROW, "a2": 2**40})


def test_bigint_narrowed_to_int():
    plan = plan_for("ALTER TABLE t MODIFY big INT NOT NULL")
    assert up(plan, OLD_ROW)["big"] == 7
    with pytest.raises(Exception, match="column big: 5000000000 is out of range for INT"):
        up(plan, {**OLD_ROW, "big": 5_000_000_000})
    assert down(plan, {**OLD_ROW, "big": -3}) == {**OLD_ROW, "big": -3}


def test_narrowed_nullable_column_gets_null_out_of_range():
    plan = plan_for("ALTER TABLE t MODIFY big INT NULL")
    assert up(plan, {**OLD_ROW, "big": 2**40})["big"] is None


def test_double_narrowed_to_float_and_to_int():
    to_float = plan_for("ALTER TABLE t MODIFY d FLOAT NOT NULL")
    assert up(to_float, OLD_ROW)["d"] == 2.5
    with pytest.raises(Exception, match="out of range for FLOAT"):
        up(to_float, {**OLD_ROW, "d": 1e300})
    to_int = plan_for("ALTER TABLE t MODIFY d INT NOT NULL")
    assert [up(to_int, {**OLD_ROW, "d": v})["d"] for v in (2.5, -2.5, 2.4)] == [3, -3, 2]  # half away from zero
    assert down(to_int, {**OLD_ROW, "d": 3})["d"] == 3


def test_null_made_not_null():
    plan = plan_for("ALTER TABLE t MODIFY b INT NOT NULL")
    assert up(plan, OLD_ROW)["b"] == 0
    assert up(plan, {**OLD_ROW, "b": 4})["b"] == 4
    assert down(plan, {**OLD_ROW, "b": 4})["b"] == 4


def test_dropped_and_re_added_column_carries_no_value():
    for statements in (["ALTER TABLE t DROP COLUMN a, ADD COLUMN a VARCHAR(5) NOT NULL"],
                       ["ALTER TABLE t DROP COLUMN a", "ALTER TABLE t ADD COLUMN a VARCHAR(5) NOT NULL"]):
        plan = plan_for(*statements)
        assert up(plan, OLD_ROW)["a"] == ""
        assert down(plan, {**OLD_ROW, "a": "q"})["a"] == 0


def test_same_column_type_change_without_the_drop_converts():
    plan = plan_for("ALTER TABLE t MODIFY a VARCHAR(5) NOT NULL")
    assert up(plan, OLD_ROW)["a"] == "5"


def test_table_recreated_with_other_columns():
    plan = plan_for("CREATE TABLE s.t (id BIGINT PRIMARY KEY, a BIGINT NOT NULL, note VARCHAR(10))")
    assert up(plan, OLD_ROW) == {"id": 1, "a": 5, "note": None}
    assert down(plan, {"id": 1, "a": 6, "note": "n"}) == {"id": 1, "a": 6, "b": None, "c": "", "d": 0, "big": 0,
                                                         "e": "y"}


def test_primary_key_change_key_rules():
    plan = plan_for("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, c)", key=True)
    assert plan.upgrade is None
    assert any("key column c is new" in why for why in plan.upgrade_impossible)
    assert down(plan, {"id": 1, "c": "x"}) == {"id": 1}
    lines = plan.describe(1, 2)
    assert "consumers pinned to major 2 cannot read the records of major 1" in lines


def test_widening_only_breaks_a_forward_level_and_its_rules_are_identity_up():
    plan = plan_for("ALTER TABLE t MODIFY a BIGINT NOT NULL")
    assert up(plan, OLD_ROW) == OLD_ROW
    with pytest.raises(Exception, match="out of range"):
        down(plan, {**OLD_ROW, "a": 2**33})


def test_decimal_precision_and_scale():
    plan = plan_migration(
        {"type": "record", "name": "t", "fields": [
            {"name": "p", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 4}}]},
        {"type": "record", "name": "t", "fields": [
            {"name": "p", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1}}]})
    # JSON numbers (what a Java consumer's JSONata sees): rounded to the new scale, guarded by its digits
    assert up(plan, {"p": 12.25})["p"] == 12.3
    with pytest.raises(Exception, match="out of range"):
        up(plan, {"p": 123456.0})
    assert plan.python_blocked == ("p",)
    assert any("jsonata-python" in line for line in plan.describe())
    with pytest.raises(ValueError, match="Unsupported type"):  # what confluent-kafka-python hands it
        up(plan, {"p": Decimal("12.25")})


def test_bytes_column_added_not_null_cannot_be_filled():
    plan = plan_for("ALTER TABLE t ADD COLUMN blob_col VARBINARY(4) NOT NULL")
    assert plan.upgrade is None and plan.downgrade is not None
    assert plan.python_blocked == ("blob_col",)


def test_rule_set_has_confluent_shape():
    plan = plan_for("ALTER TABLE t RENAME COLUMN a TO a2")
    rules = rule_set_for(plan, 1, 2)["migrationRules"]
    assert [(r["name"], r["mode"], r["type"], r["kind"]) for r in rules] == [
        ("upgrade_1_to_2", "UPGRADE", "JSONATA", "TRANSFORM"), ("downgrade_2_to_1", "DOWNGRADE", "JSONATA", "TRANSFORM")]
    json.dumps(rules)  # plain JSON


def test_not_a_flat_record_is_impossible_both_ways():
    plan = plan_migration({"type": "string"}, {"type": "long"})
    assert plan.upgrade is None and plan.downgrade is None


# -- the lineage read from DDL text ---------------------------------------------------------------------------


@pytest.mark.parametrize("statements, renamed, fresh, recreated", [
    (["ALTER TABLE t RENAME COLUMN a TO b"], (("b", "a"),), (), False),
    (["ALTER TABLE t CHANGE COLUMN a b INT NOT NULL"], (("b", "a"),), (), False),
    (["ALTER TABLE t RENAME COLUMN a TO b", "ALTER TABLE `t` CHANGE `b` `c` TEXT"], (("c", "a"),), (), False),
    (["ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a"], (("b", "a"), ("a", "b")), (), False),  # a swap
    (["ALTER TABLE t DROP COLUMN x, ADD COLUMN x INT"], (), ("x",), False),
    (["ALTER TABLE t ADD COLUMN (p INT, q INT), ADD INDEX i (p), DROP PRIMARY KEY"], (), ("p", "q"), False),
    (["ALTER TABLE t MODIFY a BIGINT", "ALTER TABLE t CHANGE a a INT"], (), (), False),
    (["CREATE TABLE t (id INT PRIMARY KEY)"], (), (), True),
    (["not sql at all ((("], (), (), False),
])
def test_column_lineage(statements, renamed, fresh, recreated):
    assert column_lineage(statements) == ColumnLineage(renamed=renamed, fresh=fresh, recreated=recreated)


def test_lineage_origin():
    lineage = column_lineage(["ALTER TABLE t RENAME COLUMN a TO B", "ALTER TABLE t ADD COLUMN z INT"])
    assert (lineage.origin("b"), lineage.origin("z"), lineage.origin("other")) == ("a", None, "other")


def test_lineage_of_one_table_of_a_file():
    statements = ["ALTER TABLE db.t RENAME COLUMN a TO b", "ALTER TABLE other RENAME COLUMN c TO d"]
    assert column_lineage(statements, table="t").renamed == (("b", "a"),)
    assert column_lineage(statements, table="T").renamed == (("b", "a"),)
    assert column_lineage(statements).renamed == (("b", "a"), ("d", "c"))
