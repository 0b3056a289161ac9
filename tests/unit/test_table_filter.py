"""TiCDC's table-filter syntax (tidb-tools ``pkg/table-filter`` README examples) and column filters."""

from __future__ import annotations

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.routing.table_filter import ColumnFilter, TableFilter


@pytest.mark.parametrize(
    ("rules", "table", "expected"),
    [
        (["*.*"], ("any", "thing"), True),
        (["db.tbl"], ("db", "tbl"), True),
        (["db.tbl"], ("db", "tbl2"), False),
        (["db*.tbl?"], ("db2", "tbl1"), True),
        (["db*.tbl?"], ("db2", "tbl12"), False),
        (["db.[abc]*"], ("db", "b_x"), True),
        (["db.[abc]*"], ("db", "d_x"), False),
        (["db.[!abc]*"], ("db", "d_x"), True),
        (["db.[!abc]*"], ("db", "a_x"), False),
        (["db.[a-c]x"], ("db", "bx"), True),
        (["*.*", "!mysql.*"], ("mysql", "user"), False),  # the last matching rule wins
        (["!mysql.*", "*.*"], ("mysql", "user"), True),
        (["shop.*", "!shop.tmp_*"], ("shop", "tmp_1"), False),
        (["shop.*", "!shop.tmp_*", "shop.tmp_keep"], ("shop", "tmp_keep"), True),
        (['"db.with.dots".`tick``ed`'], ("db.with.dots", "tick`ed"), True),
        (['"a""b".t'], ('a"b', "t"), True),
        (["db./^log_\\d+$/"], ("db", "log_42"), True),
        (["db./log/"], ("db", "my_logs"), True),  # a /regex/ is searched, not anchored
        (["db./^log$/"], ("db", "my_logs"), False),
        (["db\\.x.t"], ("db.x", "t"), True),  # an escaped dot is part of the name
        (["db.t$1"], ("db", "t$1"), True),
        (["Shop.Orders"], ("shop", "ORDERS"), True),  # case-insensitive by default (TiCDC >= v7.5.0)
        (["  # a comment", "db.t"], ("db", "t"), True),
        (["other.*"], ("db", "t"), False),  # unmatched tables are excluded
    ],
)
def test_table_filter_rules(rules, table, expected):
    assert TableFilter.parse(rules).matches(*table) is expected


def test_case_sensitive_and_import_file(tmp_path):
    assert not TableFilter.parse(["Shop.Orders"], case_sensitive=True).matches("shop", "orders")
    assert TableFilter.parse(["Shop.O*"], case_sensitive=True).matches("Shop", "Orders")
    assert not TableFilter.parse(["Shop./^O/"], case_sensitive=True).matches("Shop", "orders")
    rules = tmp_path / "rules.txt"
    rules.write_text("shop.*\n# comment\n!shop.secret\n")
    f = TableFilter.parse([f"@{rules}"])
    assert f.matches("shop", "orders") and not f.matches("shop", "secret")


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("db", "wrong table pattern"),
        ("db-tbl", "unexpected special character '-'"),
        ("db.t.x", "stray characters"),
        ("db.[abc", "character class"),
        ("db.\\a", "cannot escape a letter or number"),
        ('"db.t', "incomplete quoted identifier"),
        ("db./(/", "invalid pattern"),
        ("@/no/such/file", "cannot open filter file"),
    ],
)
def test_syntax_errors_name_the_option_and_rule(rule, reason):
    with pytest.raises(ConfigError, match=reason) as err:
        TableFilter.parse([rule])
    assert "filter.rules" in str(err.value) and repr(rule) in str(err.value)


def test_column_filter_keeps_matched_columns_last_match_wins():
    f = ColumnFilter.parse(["*", "!secret*", "secret_ok"])
    assert f.matches("id") and f.matches("ID")
    assert not f.matches("Secret_Key")
    assert f.matches("secret_ok")
    assert not ColumnFilter.parse(["a", "b"]).matches("c")
    with pytest.raises(ConfigError, match=r"column-selectors.columns"):
        ColumnFilter.parse(["a.b"])
