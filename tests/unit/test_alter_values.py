"""``diff --sql`` gives a kept column the values MySQL's ALTER gives it, where the type change alone would not (the
conversions ``tests/downstream/test_alter_corpus.py`` applies to real databases), and refuses, naming the column,
a conversion it has no SQL for."""

from __future__ import annotations

from typing import Any

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.history.alter import alter_statements
from avro_registry_sink.history.diff import diff_schemas


def _schema(**fields: Any) -> dict[str, Any]:
    return {"type": "record", "name": "t", "fields": [{"name": n, "type": t} for n, t in fields.items()]}


def _typed(base: str, tidb_type: str, **extra: str) -> dict[str, Any]:
    return {"type": base, "connect.parameters": {"tidb_type": tidb_type, **extra}}


def _sql(old: Any, new: Any, dialect: str) -> list[str]:
    return alter_statements(diff_schemas(_schema(c=old), _schema(c=new)), "t", dialect)


def test_datetime_to_date_keeps_the_date_with_the_time_rounded():
    assert _sql(_typed("string", "DATETIME"), _typed("string", "DATE"), "postgres") == [
        """UPDATE "t" SET "c" = CASE WHEN "c" LIKE '% 23:59:59.%' THEN to_char("c"::timestamp + interval """
        """'0.5 second', 'YYYY-MM-DD') ELSE substr("c", 1, 10) END"""]
    [mysql] = _sql(_typed("string", "DATETIME"), _typed("string", "DATE"), "mysql")
    assert "DATE_FORMAT(CAST(`c` AS DATETIME(6)) + INTERVAL 500000 MICROSECOND, '%Y-%m-%d')" in mysql


def test_timestamp_to_bigint_takes_the_digits_before_the_cast():
    assert _sql(_typed("string", "TIMESTAMP"), _typed("long", "BIGINT"), "mysql") == [
        "UPDATE `t` SET `c` = REPLACE(REPLACE(REPLACE(`c`, '-', ''), ':', ''), ' ', '')",
        "ALTER TABLE `t` MODIFY COLUMN `c` bigint NOT NULL"]
    assert _sql(_typed("string", "TIME"), _typed("long", "BIGINT"), "postgres")[0] == (
        """UPDATE "t" SET "c" = replace("c", ':', '')""")


def test_year_to_text_is_four_digits_after_the_cast():
    assert _sql(_typed("int", "YEAR"), _typed("string", "VARCHAR"), "postgres") == [
        'ALTER TABLE "t" ALTER COLUMN "c" TYPE text USING "c"::text', """UPDATE "t" SET "c" = lpad("c", 4, '0')"""]


def test_double_to_int_rounds_half_away_from_zero_in_both_dialects():
    assert _sql("double", _typed("int", "INT"), "postgres")[0] == 'UPDATE "t" SET "c" = round("c"::numeric)'
    assert _sql("double", _typed("int", "INT"), "mysql")[0] == "UPDATE `t` SET `c` = ROUND(CAST(`c` AS DECIMAL(65,30)))"


def test_a_set_reordered_is_printed_in_the_new_order_and_a_set_extended_is_not_touched():
    [statement] = _sql(["null", _typed("string", "SET", allowed="x,y")],
                       ["null", _typed("string", "SET", allowed="y,x,w")], "mysql")
    assert statement == ("UPDATE `t` SET `c` = CASE WHEN `c` IS NULL THEN NULL ELSE concat_ws(',', "
                         "IF(FIND_IN_SET('y', `c`), 'y', NULL), IF(FIND_IN_SET('x', `c`), 'x', NULL), "
                         "IF(FIND_IN_SET('w', `c`), 'w', NULL)) END")
    assert _sql(_typed("string", "SET", allowed="x,y"), _typed("string", "SET", allowed="x,y,w"), "postgres") == []


@pytest.mark.parametrize(("old", "new", "pair"), [
    (_typed("string", "TIME"), _typed("string", "DATE"), "TIME to DATE"),
    (_typed("long", "BIGINT"), _typed("string", "DATETIME"), "INTEGER to DATETIME"),
    (_typed("string", "VARCHAR"), _typed("string", "TIME"), "TEXT to TIME"),
])
def test_a_conversion_without_sql_is_refused_naming_the_column(old, new, pair):
    with pytest.raises(ConfigError, match=f"column c: {pair}: .*--sql has no statement"):
        _sql(old, new, "postgres")


def test_members_removed_are_checked_on_the_rows_there_and_members_added_are_not():
    old = _typed("string", "ENUM", allowed="a,b,c")
    assert _sql(old, _typed("string", "ENUM", allowed="a,b"), "postgres") == [
        """ALTER TABLE "t" ADD CONSTRAINT "avro_sink_enum_c" CHECK ("c" IN ('a', 'b'))""",
        'ALTER TABLE "t" DROP CONSTRAINT "avro_sink_enum_c"']
    assert _sql(old, _typed("string", "ENUM", allowed="c,b,a,d"), "postgres") == []
    [check, _] = _sql(["null", _typed("string", "SET", allowed="x,y.z")],
                      ["null", _typed("string", "SET", allowed="x,y")], "mysql")
    assert check == "ALTER TABLE `t` ADD CONSTRAINT `avro_sink_set_c` CHECK (`c` REGEXP '^((x|y)(,(x|y))*)?$')"
    [check, _] = _sql(_typed("string", "VARCHAR"), _typed("string", "SET", allowed="a.b,c"), "mysql")
    assert "(a\\\\.b|c)" in check  # a member is matched as text, not as a pattern
