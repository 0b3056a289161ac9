"""Migration rules of a breaking DDL (schema/migration.py, tabledef/ddl.column_lineage): the generated JSONata is
evaluated with jsonata-python (what confluent-kafka-python's JSONata executor runs) on sample records."""

from __future__ import annotations

import json
from decimal import Decimal

import jsonata
import pytest

from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.schema.migration import plan_migration, rule_set_for
from avro_registry_sink.settings.config import DEFAULT_ENCODING
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


def test_string_to_nullable_int_refuses_text_that_is_no_integer():
    plan = plan_for("ALTER TABLE t MODIFY c INT NULL")
    with pytest.raises(Exception, match="column c: x1 is not an integer"):  # MySQL's strict ALTER: error 1366
        up(plan, {**OLD_ROW, "c": "x1"})
    assert up(plan, {**OLD_ROW, "c": None})["c"] is None
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


def test_narrowed_nullable_column_refuses_out_of_range():
    plan = plan_for("ALTER TABLE t MODIFY big INT NULL")
    with pytest.raises(Exception, match="column big: 1099511627776"):  # MySQL's strict ALTER: error 1264
        up(plan, {**OLD_ROW, "big": 2**40})


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


def test_decimal_rounding_is_mysqls_on_the_decimal_digits_and_its_carry_is_range_checked():
    def record(kind: object) -> dict[str, object]:
        return {"type": "record", "name": "t", "fields": [{"name": "p", "type": kind}]}

    def dec(precision: int, scale: int) -> dict[str, object]:
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}

    plan = plan_migration(record(dec(12, 4)), record(dec(10, 2)))
    # half away from zero on the decimal digits, where the doubles (1.00499..., -7.00499...) would round down
    assert [up(plan, {"p": v})["p"] for v in (1.2345, 1.235, -7.005, 1.005, 0)] == [1.23, 1.24, -7.01, 1.01, 0]
    with pytest.raises(Exception, match=r"column p: 99999999.9999 is out of range for DECIMAL\(10,2\)"):
        up(plan, {"p": 99999999.9999})  # as many integer digits, but the carry makes nine: MySQL's error 1264
    text = plan_migration(record({"type": "string", "connect.parameters": {"tidb_type": "VARCHAR"}}),
                          record(dec(10, 2)))
    # MySQL's ALTER reads text into a DECIMAL rounded to its scale (a note, not an error)
    assert [up(text, {"p": v})["p"] for v in ("1.239", " -0.005 ", "7.5", "+4.444", ".5", "1e2")] == [
        1.24, -0.01, 7.5, 4.44, 0.5, 100]
    for bad, why in (("abc", "is not a DECIMAL"), ("99999999.995", "is out of range"),
                     ("1234567890123456.5", "has more digits than JSONata holds exactly")):
        with pytest.raises(Exception, match=f"column p: {bad} {why}"):
            up(text, {"p": bad})


def test_enum_and_set_targets_check_members_and_print_a_set_in_the_columns_order():
    def member(name: str, kind: str, members: str, nullable: bool = False) -> dict[str, object]:
        branch = {"type": "string", "connect.parameters": {"tidb_type": kind, "allowed": members}}
        return {"name": name, "type": ["null", branch] if nullable else branch, **({"default": None} if nullable
                                                                                   else {})}

    def record(*fields: dict[str, object]) -> dict[str, object]:
        return {"type": "record", "name": "t", "fields": list(fields)}

    old = record(member("e", "ENUM", "a,b"), member("s", "SET", "x,y", nullable=True))
    new = record(member("e", "ENUM", "b,a,d"), member("s", "SET", "y,x,w", nullable=True))
    plan = plan_migration(old, new)
    # MySQL stores a SET as a bitmask and prints it in the definition's order; every old ENUM value is a member
    assert up(plan, {"e": "a", "s": "x,y"}) == {"e": "a", "s": "y,x"}
    assert up(plan, {"e": "b", "s": ""}) == {"e": "b", "s": ""} and up(plan, {"e": "b", "s": None})["s"] is None
    assert down(plan, {"e": "a", "s": "y,x"}) == {"e": "a", "s": "x,y"}
    with pytest.raises(Exception, match=r"column e: d is not a member of ENUM\('a','b'\)"):  # MySQL: error 1265
        down(plan, {"e": "d", "s": "y"})
    with pytest.raises(Exception, match=r"column s: w,y is not a member of SET\('x','y'\)"):  # nullable or not
        down(plan, {"e": "a", "s": "w,y"})
    assert "column e: a value that is not a member of ENUM('a','b') fails the record" in " ".join(plan.downgrade_refused)
    assert not plan.upgrade_refused or "column e" not in " ".join(plan.upgrade_refused)
    # the members alone are no conversion: the schema manager keeps a member change a minor version
    assert plan.conversions == ()
    text = plan_migration(record({"name": "e", "type": "string"}), record(member("e", "ENUM", "a,b")))
    with pytest.raises(Exception, match="column e: c is not a member"):
        up(text, {"e": "c"})


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


# -- the whole target shape, next to minor versions ------------------------------------------------------------


def test_upgrade_fills_a_field_an_older_minor_record_lacks_and_downgrade_projects_onto_the_target():
    """A minor version without rules (n added) then a major: Confluent's client runs the major's UPGRADE on the
    record as it was written (no n) and does not resolve the output, so the rule fills n with its default; going
    down the rule gives exactly the older version's fields (a column added by a later minor is not kept)."""
    with_n = "CREATE TABLE s.t (id BIGINT PRIMARY KEY, a INT NOT NULL, n INT NULL)"
    plan = plan_for("ALTER TABLE t MODIFY a VARCHAR(20) NOT NULL", base=with_n)
    assert up(plan, {"id": 1, "a": 5}) == {"id": 1, "a": "5", "n": None}
    assert up(plan, {"id": 1, "a": 5, "n": 7}) == {"id": 1, "a": "5", "n": 7}
    assert down(plan, {"id": 2, "a": "6", "n": 8, "w": 9}) == {"id": 2, "a": 6, "n": 8}
    default = plan_for("ALTER TABLE t MODIFY a VARCHAR(20) NOT NULL",
                       base="CREATE TABLE s.t (id BIGINT PRIMARY KEY, a INT NOT NULL, k INT NOT NULL DEFAULT 4)")
    assert up(default, {"id": 1, "a": 5}) == {"id": 1, "a": "5", "k": 4}  # its DEFAULT, as Avro resolution gives


def test_a_renamed_or_converted_field_missing_from_the_record_is_its_default_before_it_moves():
    base = "CREATE TABLE s.t (id BIGINT PRIMARY KEY, n INT NULL, k INT NOT NULL DEFAULT 4)"
    plan = plan_for("ALTER TABLE t MODIFY n VARCHAR(20) NULL, CHANGE k k2 BIGINT NOT NULL DEFAULT 4", base=base)
    assert up(plan, {"id": 1}) == {"id": 1, "n": None, "k2": 4}
    assert up(plan, {"id": 1, "n": 3, "k": 5}) == {"id": 1, "n": "3", "k2": 5}


def test_a_minor_change_has_projection_rules_and_no_conversion():
    plan = plan_for("ALTER TABLE t ADD COLUMN w INT NULL")
    assert plan.conversions == ()
    assert up(plan, OLD_ROW) == {**OLD_ROW, "w": None}
    assert down(plan, {**OLD_ROW, "w": 3}) == OLD_ROW
    assert list(up(plan, OLD_ROW)) == [*OLD_ROW, "w"]  # the target's field order
    assert rule_set_for(plan, 2, 2)["migrationRules"][0]["name"] == "upgrade_within_2"


@pytest.mark.parametrize("statement, converted", [
    ("ALTER TABLE t RENAME COLUMN a TO a2", ("a2",)),
    ("ALTER TABLE t MODIFY a BIGINT NOT NULL", ("a",)),  # going down the range is checked
    ("ALTER TABLE t DROP COLUMN a, ADD COLUMN a INT NOT NULL", ("a",)),
    ("ALTER TABLE t MODIFY c DATE NOT NULL", ("c",)),  # string to string for Avro, a conversion for MySQL
    ("ALTER TABLE t DROP COLUMN b", ()),
    ("ALTER TABLE t ADD COLUMN z INT NOT NULL DEFAULT 1", ()),
])
def test_conversions_are_the_values_avro_resolution_would_not_give(statement, converted):
    assert plan_for(statement).conversions == converted


# -- temporal pairs: MySQL 8's values (schema/migration.py's table) --------------------------------------------

TEMPORAL = [
    # (from, to, old value, the value MySQL holds after ALTER ... MODIFY c <to>)
    ("DATE", "DATETIME", "2024-01-02", "2024-01-02 00:00:00"),
    ("DATE", "DATETIME", "0000-00-00", "0000-00-00 00:00:00"),
    ("DATE", "TIMESTAMP", "2024-01-02", "2024-01-02 00:00:00"),
    ("DATE", "TIME", "2024-01-02", "00:00:00"),
    ("DATE", "BIGINT", "2024-01-02", 20240102),
    ("DATE", "VARCHAR(20)", "2024-01-02", "2024-01-02"),
    ("DATETIME", "DATE", "2024-01-02 23:59:59", "2024-01-02"),
    ("DATETIME", "DATE", "2024-12-31 23:59:59.500", "2025-01-01"),  # MySQL 8 rounds the time part
    ("DATETIME", "TIMESTAMP", "2024-01-02 12:34:56", "2024-01-02 12:34:56"),
    ("DATETIME", "TIME", "2024-01-02 12:34:56", "12:34:56"),
    ("DATETIME", "BIGINT", "2024-01-02 12:34:56", 20240102123456),
    ("DATETIME", "VARCHAR(30)", "2024-01-02 12:34:56", "2024-01-02 12:34:56"),
    ("TIMESTAMP", "BIGINT", "2024-01-01 00:00:00", 20240101000000),
    ("TIMESTAMP", "DATETIME", "2024-01-01 00:00:00", "2024-01-01 00:00:00"),
    ("TIMESTAMP", "DATE", "2024-01-01 08:00:00", "2024-01-01"),
    ("TIME", "BIGINT", "-12:34:56", -123456),
    ("TIME", "BIGINT", "838:59:59", 8385959),
    ("TIME", "VARCHAR(20)", "12:00:00", "12:00:00"),
    ("YEAR", "BIGINT", 2024, 2024),
    ("YEAR", "VARCHAR(4)", 0, "0000"),
    ("YEAR", "TIME", 2024, "00:20:24"),  # a number read as [H]HMMSS
    ("BIGINT", "YEAR", 24, 2024),
    ("BIGINT", "YEAR", 70, 1970),
    ("BIGINT", "YEAR", 0, 0),
    ("BIGINT", "DATE", 20240102, "2024-01-02"),
    ("BIGINT", "DATE", 240102, "2024-01-02"),
    ("BIGINT", "DATE", 0, "0000-00-00"),
    ("BIGINT", "DATETIME", 20240101000000, "2024-01-01 00:00:00"),
    ("BIGINT", "DATETIME", 20240101, "2024-01-01 00:00:00"),
    ("BIGINT", "TIMESTAMP", 20240101000000, "2024-01-01 00:00:00"),
    ("BIGINT", "TIME", 123456, "12:34:56"),
    ("BIGINT", "TIME", 1234, "00:12:34"),
    ("VARCHAR(30)", "DATE", "2024-1-2", "2024-01-02"),
    ("VARCHAR(30)", "DATE", "20240102", "2024-01-02"),
    ("VARCHAR(30)", "DATE", "2024-01-02 10:00:00", "2024-01-02"),
    ("VARCHAR(30)", "DATETIME", "2024-1-2 3:4:5", "2024-01-02 03:04:05"),
    ("VARCHAR(30)", "TIMESTAMP", "2024-01-02", "2024-01-02 00:00:00"),
    ("VARCHAR(30)", "TIME", "3:4:5", "03:04:05"),
    ("VARCHAR(30)", "TIME", "12:34", "12:34:00"),
    ("VARCHAR(30)", "YEAR", "24", 2024),
    ("VARCHAR(30)", "YEAR", "0", 2000),  # the text '0' is 2000, the number 0 is 0000
    ("VARCHAR(30)", "YEAR", "2024", 2024),
]

REFUSED = [
    # (from, to, old value, what the rule's failure says)
    ("DATE", "YEAR", "2024-01-02", "is refused by MySQL's ALTER"),
    ("DATETIME", "YEAR", "2024-01-02 00:00:00", "is refused by MySQL's ALTER"),
    ("DATETIME", "TIMESTAMP", "1960-01-02 12:34:56", "out of the range of TIMESTAMP"),
    ("DATETIME", "BIGINT", "2024-01-02 12:34:56.5", "has fractional seconds"),
    ("TIME", "DATE", "12:34:56", "CURRENT_DATE"),
    ("TIME", "DATETIME", "12:34:56", "CURRENT_DATE"),
    ("TIME", "YEAR", "12:34:56", "is refused by MySQL's ALTER"),
    ("YEAR", "DATE", 2024, "is refused by MySQL's ALTER"),
    ("BIGINT", "YEAR", 1900, "out of range for YEAR"),
    ("BIGINT", "DATETIME", 20241301000000, "is not a valid DATETIME"),
    ("BIGINT", "DATE", 20230229, "is not a valid DATE"),
    ("BIGINT", "TIME", 8396000, "is not a valid TIME"),
    ("BIGINT", "TIMESTAMP", 19600101000000, "out of the range of TIMESTAMP"),
    ("VARCHAR(30)", "DATE", "zz", "is not a DATE MySQL reads"),
    ("VARCHAR(30)", "TIME", "noon", "is not a TIME MySQL reads"),
    ("VARCHAR(30)", "YEAR", "1800", "out of range for YEAR"),
]


def temporal_plan(source: str, target: str):
    return plan_for(f"ALTER TABLE t MODIFY c {target} NOT NULL",
                    base=f"CREATE TABLE s.t (id BIGINT PRIMARY KEY, c {source} NOT NULL)")


@pytest.mark.parametrize("source, target, value, mysql", TEMPORAL, ids=[f"{a}-{b}-{v}" for a, b, v, _ in TEMPORAL])
def test_temporal_upgrade_gives_mysqls_value(source, target, value, mysql):
    plan = temporal_plan(source, target)
    got = up(plan, {"id": 1, "c": value})
    assert got == {"id": 1, "c": mysql} and type(got["c"]) is type(mysql)
    assert plan.conversions == ("c",)  # never a minor without rules, even string to string


@pytest.mark.parametrize("source, target, value, why", REFUSED, ids=[f"{a}-{b}-{v}" for a, b, v, _ in REFUSED])
def test_temporal_value_mysql_would_not_convert_is_refused_by_column_and_value(source, target, value, why):
    plan = temporal_plan(source, target)
    with pytest.raises(Exception, match=f"column c: {value}") as caught:
        up(plan, {"id": 1, "c": value})
    assert why in str(caught.value)
    assert any(line.startswith("consumers pinned to major 2 reading records of major 1: column c:") and why in line
               for line in plan.describe(1, 2))


def test_bigint_back_to_timestamp_formats_the_number_or_refuses_it():
    plan = temporal_plan("TIMESTAMP", "BIGINT")
    assert down(plan, {"id": 1, "c": 20240101000000}) == {"id": 1, "c": "2024-01-01 00:00:00"}
    with pytest.raises(Exception, match="column c: 20240132000000 is not a valid TIMESTAMP"):
        down(plan, {"id": 1, "c": 20240132000000})
    assert any("consumers pinned to major 1 reading records of major 2: column c: a value that is not a valid "
               "TIMESTAMP fails the record" in line for line in plan.describe(1, 2))


def test_date_back_from_datetime_is_the_date_part_and_a_nullable_column_is_refused_too():
    plan = plan_for("ALTER TABLE t MODIFY c DATETIME NULL", base="CREATE TABLE s.t (id BIGINT PRIMARY KEY, c DATE)")
    assert down(plan, {"id": 1, "c": "2024-01-03 04:05:06"})["c"] == "2024-01-03"
    assert up(plan, {"id": 1, "c": None})["c"] is None
    to_time = plan_for("ALTER TABLE t MODIFY c TIME NULL", base="CREATE TABLE s.t (id BIGINT PRIMARY KEY, c YEAR)")
    assert up(to_time, {"id": 1, "c": 2024})["c"] == "00:20:24"
    with pytest.raises(Exception, match="column c: 12:00:00 is refused by MySQL's ALTER"):  # TIME to YEAR, NULL column
        down(to_time, {"id": 1, "c": "12:00:00"})
    assert any("column c: a value that is refused by MySQL's ALTER (not a YEAR) fails the record" in line
               for line in to_time.describe(1, 2))


# -- unsigned changes --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, target, value, result", [
    ("INT", "INT UNSIGNED", 5, 5),
    ("INT", "INT UNSIGNED", -1, "out of range for INT UNSIGNED"),
    ("INT UNSIGNED", "INT", 4294967295, "out of range for INT"),
    ("INT UNSIGNED", "BIGINT", 4294967295, 4294967295),
    ("BIGINT", "BIGINT UNSIGNED", -1, "out of range for BIGINT UNSIGNED"),
    ("BIGINT UNSIGNED", "BIGINT", 7, 7),
    ("BIGINT UNSIGNED", "BIGINT", -1, "out of range for BIGINT"),  # TiCDC's long for 18446744073709551615
    ("BIGINT UNSIGNED", "VARCHAR(30)", -1, "JSONata holds exactly"),
    ("BIGINT", "INT UNSIGNED", 4294967296, "out of range for INT UNSIGNED"),
])
def test_unsigned_ranges(source, target, value, result):
    plan = temporal_plan(source, target)
    if isinstance(result, int):
        assert up(plan, {"id": 1, "c": value})["c"] == result
    else:
        with pytest.raises(Exception, match=f"column c: {value} .*{result}"):
            up(plan, {"id": 1, "c": value})
    assert plan.conversions == ("c",)


def test_widening_an_unsigned_int_to_bigint_checks_the_range_going_down():
    plan = temporal_plan("INT UNSIGNED", "BIGINT")
    assert down(plan, {"id": 1, "c": 12}) == {"id": 1, "c": 12}
    with pytest.raises(Exception, match="column c: -1 is out of range for INT UNSIGNED"):
        down(plan, {"id": 1, "c": -1})


def test_decimal_to_string_keeps_the_scale_as_mysql_prints_it() -> None:
    import jsonata

    def record(name: str, kind: object) -> dict[str, object]:
        return {"type": "record", "name": "t", "fields": [{"name": name, "type": kind}]}

    money = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 4,
             "connect.parameters": {"tidb_type": "DECIMAL"}}
    text = {"type": "string", "connect.parameters": {"tidb_type": "TEXT"}}
    plan = plan_migration(record("p", money), record("p", text))
    assert plan.upgrade is not None
    assert [jsonata.Jsonata(plan.upgrade).evaluate({"p": v})["p"] for v in (12.34, -1.5, 0)] == [
        "12.3400", "-1.5000", "0.0000"]
