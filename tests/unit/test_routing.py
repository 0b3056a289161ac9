from __future__ import annotations

import pytest

from avro_registry_sink.errors import RoutingError
from avro_registry_sink.routing.rules import (
    TopicRouter,
    partition_for,
    subject_for,
    substitute,
    validate_topic_expression,
)
from avro_registry_sink.settings.config import DispatchRule, PartitionStrategy, SubjectNaming


@pytest.mark.parametrize(
    ("expr", "schema", "table", "topic"),
    [
        ("{schema}_{table}", "shop", "orders", "shop_orders"),
        ("cdc.{schema}.{table}", "shop", "order items", "cdc.shop.order_items"),
        ("{schema}_{table}", "数据", "t", "__._t".replace("._", "_")),
        ("{schema}{table}", ".", "", "_"),
    ],
)
def test_substitute(expr, schema, table, topic):
    assert substitute(expr, schema, table) == topic


def test_substitute_truncates_to_249():
    assert len(substitute("{schema}_{table}", "s" * 200, "t" * 200)) == 249


@pytest.mark.parametrize("expr", ["{schema}_{table}", "pre.{schema}-{table}.suf", "fixed_topic", "a.b-c"])
def test_valid_rules(expr):
    validate_topic_expression(expr)


@pytest.mark.parametrize("expr", ["{table}_{schema}", "{schema}", "{table}", "bad topic", "x_{schema}_{table}!", ""])
def test_invalid_rules_are_refused_with_the_rule_named(expr):
    with pytest.raises(RoutingError, match="must contain \\{schema\\} and then \\{table\\}"):
        validate_topic_expression(expr)


def test_fixed_topic_routes_exactly_one_table():
    router = TopicRouter(default_topic="only_topic")
    assert router.route("db", "a").topic == "only_topic"
    assert router.route("db", "a").topic == "only_topic"  # same table again is fine
    with pytest.raises(RoutingError, match=r"db\.a and db\.b would both go to topic 'only_topic'"):
        router.route("db", "b")


def test_a_fixed_topic_collision_advises_a_rule_with_placeholders():
    router = TopicRouter(default_topic="only_topic")
    router.route("db", "a")
    with pytest.raises(RoutingError) as info:
        router.route("db", "b")
    assert str(info.value) == (
        "Tables db.a and db.b would both go to topic 'only_topic' (rule 'only_topic'); Avro with TopicNameStrategy "
        "allows one table per topic (one schema per subject). Give db.b a topic of its own with a dispatcher rule in "
        "the changefeed TOML (--config), listed before any other rule that matches it: [[sink.dispatchers]] matcher "
        "= ['db.b'] topic = '<a topic of its own>'; or route the tables with a topic rule such as '{schema}_{table}' "
        "(a sink URI without a topic, kafka://host:9092/?protocol=avro, gives every table its own). TiCDC accepts one "
        "topic for all tables and then registers the second table's schema as a new version of the first table's "
        "subject, or has it refused by the registry's compatibility check."
    )


def test_substituted_names_that_collide_are_refused():
    router = TopicRouter(topic_rule="{schema}_{table}")
    router.route("a_b", "c")
    with pytest.raises(RoutingError, match=r"a_b.c and a.b_c"):
        router.route("a", "b_c")


def test_first_matching_dispatcher_wins_and_unmatched_use_default():
    router = TopicRouter(
        [DispatchRule(matcher=("shop.*", "!shop.tmp_*"), topic="shop_{schema}_{table}", partition=PartitionStrategy.TABLE),
         DispatchRule(matcher=("*.*",), topic="all_{schema}_{table}")],
    )
    assert router.route("shop", "orders").topic == "shop_shop_orders"
    assert router.route("shop", "orders").partition is PartitionStrategy.TABLE
    assert router.route("shop", "tmp_x").topic == "all_shop_tmp_x"
    assert router.route("crm", "users").topic == "all_crm_users"


def test_no_rule_and_no_default_topic():
    with pytest.raises(RoutingError, match=r"No topic for table db.t"):
        TopicRouter().route("db", "t")


def test_subjects():
    assert subject_for("a.b", "key") == "a.b-key"
    assert subject_for("a.b", "value", SubjectNaming.TICDC) == "a_b-value"
    router = TopicRouter(topic_rule="{schema}.{table}", subject_naming=SubjectNaming.TICDC)
    route = router.route("db", "t")
    assert (route.topic, route.key_subject, route.value_subject) == ("db.t", "db_t-key", "db_t-value")


def test_partition_dispatch_is_deterministic_and_in_range():
    router = TopicRouter(topic_rule="{schema}_{table}")
    route = router.route("db", "t")
    parts = {partition_for(route, 3, key_values=(i,)) for i in range(100)}
    assert parts == {0, 1, 2}
    assert partition_for(route, 3, key_values=(42,)) == partition_for(route, 3, key_values=(42,))
    ts_route = TopicRouter([DispatchRule(topic="{schema}_{table}", partition=PartitionStrategy.TS)]).route("db", "t")
    assert partition_for(ts_route, 3, commit_ts=7) == 1
    table_route = TopicRouter([DispatchRule(topic="{schema}_{table}", partition=PartitionStrategy.TABLE)]).route("db", "t")
    assert len({partition_for(table_route, 5, key_values=(i,)) for i in range(50)}) == 1
    assert partition_for(route, 1, key_values=(1,)) == 0


# --------------------------------------------------------------------------------------------------
# Collisions (issue 17): names TiCDC's substitution folds together, subjects, tables of earlier runs


ADVICE_SHANGPIN = (
    "Give shop.商品 a topic of its own with a dispatcher rule in the changefeed TOML (--config), listed before any "
    "other rule that matches it: [[sink.dispatchers]] matcher = ['shop.商品'] topic = '<a topic of its own>', and "
    "after it, unless dispatcher rules route the other tables already, one with matcher = ['*.*'] topic = "
    "'{schema}_{table}' (a --topic-rule comes before every dispatcher rule: leave it out); or use a topic rule that "
    "keeps the two names apart."
)


def test_non_ascii_names_of_the_same_length_collide_and_both_tables_are_named():
    router = TopicRouter(topic_rule="{schema}_{table}")
    assert router.route("shop", "订单").topic == "shop___"
    with pytest.raises(RoutingError) as info:
        router.route("shop", "商品")
    assert str(info.value) == (
        "Tables shop.订单 and shop.商品 would both go to topic 'shop___' (rule '{schema}_{table}', which turns "
        "every character of a name outside [A-Za-z0-9._-] into '_'); Avro with TopicNameStrategy allows one table "
        "per topic (one schema per subject). " + ADVICE_SHANGPIN
    )
    assert info.value.context == {"table": "shop.商品", "other_table": "shop.订单", "topic": "shop___",
                                  "rule": "{schema}_{table}"}
    assert router.route("shop", "订单").topic == "shop___"  # the owner is still routed (from its cache)
    assert router.route("shop", "订单x").topic == "shop___x"  # a longer name is another topic


def test_topics_differing_only_in_case_collide():
    router = TopicRouter(topic_rule="{schema}_{table}", case_sensitive=True)
    router.route("db", "Orders")
    with pytest.raises(RoutingError, match=r"^Tables db\.Orders and db\.orders would both go to topic 'db_orders'"):
        router.route("db", "orders")


def test_distinct_topics_sharing_a_subject_are_refused():
    router = TopicRouter(topic_rule="{schema}.{table}", subject_naming=SubjectNaming.TICDC)
    assert router.route("a", "b_c").value_subject == "a_b_c-value"
    with pytest.raises(RoutingError) as info:
        router.route("a_b", "c")  # topic 'a_b.c', not 'a.b_c', but the same subjects
    assert str(info.value).startswith(
        "Tables a.b_c and a_b.c would both go to subject 'a_b_c-key' (topics 'a.b_c' and 'a_b.c' under "
        "subject-naming 'ticdc'; rule '{schema}.{table}', which turns every character of a name outside "
        "[A-Za-z0-9._-] into '_'); Avro with TopicNameStrategy allows one table per topic (one schema per subject). "
        "Give a_b.c a topic of its own")
    assert info.value.context["subject"] == "a_b_c-key" and info.value.context["topic"] == "a_b.c"
    # under Confluent's naming the subjects differ too
    confluent = TopicRouter(topic_rule="{schema}.{table}")
    assert confluent.route("a", "b_c").value_subject != confluent.route("a_b", "c").value_subject


def test_tables_claimed_from_an_earlier_run_keep_their_topics_and_subjects():
    router = TopicRouter(topic_rule="{schema}_{table}")
    router.claim("shop", "订单", "shop___", ["shop___-key", "shop___-value"])
    route = router.route("shop", "订单")  # its own topic: fine
    assert (route.topic, route.value_subject) == ("shop___", "shop___-value")
    assert router.claimed_earlier(route)
    with pytest.raises(RoutingError) as info:
        router.route("shop", "商品")
    assert str(info.value) == (
        "Tables shop.订单 (routed there by an earlier batch or run of this checkpoint) and shop.商品 would both go "
        "to topic 'shop___' (rule '{schema}_{table}', which turns every character of a name outside [A-Za-z0-9._-] "
        "into '_'); Avro with TopicNameStrategy allows one table per topic (one schema per subject). "
        + ADVICE_SHANGPIN
    )
    fresh = router.route("shop", "goods")
    assert not router.claimed_earlier(fresh)


def test_a_claimed_subject_is_refused_to_a_table_whose_topic_differs():
    router = TopicRouter(topic_rule="{schema}.{table}", subject_naming=SubjectNaming.TICDC)
    router.claim("a", "b_c", "a.b_c", ["a_b_c-key", "a_b_c-value"])
    with pytest.raises(RoutingError, match=r"^Tables a\.b_c \(routed there by an earlier batch or run of this "
                                           r"checkpoint\) and a_b\.c would both go to subject 'a_b_c-key'"):
        router.route("a_b", "c")


def test_a_table_moved_to_another_topic_keeps_its_old_one():
    router = TopicRouter([DispatchRule(matcher=("shop.订单",), topic="shop_orders"),
                          DispatchRule(matcher=("*.*",), topic="{schema}_{table}")])
    router.claim("shop", "订单", "shop___", ["shop___-key", "shop___-value"])
    route = router.route("shop", "订单")
    assert route.topic == "shop_orders" and not router.claimed_earlier(route)
    with pytest.raises(RoutingError, match=r"shop.订单 .* and shop.商品 would both go to topic 'shop___'"):
        router.route("shop", "商品")


@pytest.mark.parametrize(("schema", "table", "matcher"), [
    ("shop", "订单", "shop.订单"),
    ("a.b", "t*", "`a.b`.`t*`"),
    ("db", "we`ird", "db.`we``ird`"),
    ("my-db", "x y", "`my-db`.`x y`"),
])
def test_the_advised_matcher_matches_exactly_the_table(schema, table, matcher):
    from avro_registry_sink.routing.rules import table_matcher
    from avro_registry_sink.routing.table_filter import TableFilter

    assert table_matcher(schema, table) == matcher
    parsed = TableFilter.parse([matcher], case_sensitive=True)
    assert parsed.matches(schema, table)
    assert not parsed.matches(schema, table + "x") and not parsed.matches(schema + "x", table)
