from __future__ import annotations

import pytest

from avro_registry_sink.config import DispatchRule, PartitionStrategy, SubjectNaming
from avro_registry_sink.errors import RoutingError
from avro_registry_sink.routing import TopicRouter, partition_for, subject_for, substitute, validate_topic_expression


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


def test_substituted_names_that_collide_are_refused():
    router = TopicRouter(topic_rule="{schema}_{table}")
    router.route("a_b", "c")
    with pytest.raises(RoutingError, match="a_b.c and a.b_c"):
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
    with pytest.raises(RoutingError, match="No topic for table db.t"):
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
