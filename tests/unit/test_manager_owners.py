"""The schema manager's registry check: a subject that already holds another table's schema (issue 17)."""

from __future__ import annotations

import json

import pytest

from avro_registry_sink.errors import RegistryUnavailable, RoutingError, SubjectNotFound
from avro_registry_sink.manager import SchemaManager, registered_table
from avro_registry_sink.registry.models import RegisteredSchema
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef


def table(schema: str, name: str, version: int = 1) -> TableDef:
    return TableDef(schema_name=schema, table=name, version=version, primary_key=("id",),
                    columns=(ColumnDef(name="id", type=MySQLType.INT, nullable=False),))


class FakeRegistry:
    """register / get_latest over a dict; counts the calls."""

    def __init__(self) -> None:
        self.subjects: dict[str, list[str]] = {}
        self.calls: list[tuple[str, str]] = []
        self.unavailable = 0

    def register(self, subject: str, schema: str) -> int:
        self.calls.append(("register", subject))
        versions = self.subjects.setdefault(subject, [])
        if schema not in versions:
            versions.append(schema)
        return 100 + versions.index(schema)

    def get_latest(self, subject: str) -> RegisteredSchema:
        self.calls.append(("get_latest", subject))
        if self.unavailable:
            self.unavailable -= 1
            raise RegistryUnavailable("connection refused")
        if subject not in self.subjects:
            raise SubjectNotFound(f"Subject '{subject}' not found.", status_code=404, error_code=40401)
        versions = self.subjects[subject]
        return RegisteredSchema(subject=subject, version=len(versions), id=100 + len(versions) - 1, schema=versions[-1])


def test_registered_table_reads_namespace_and_name():
    assert registered_table(derive_schemas(table("shop_", "_")).value_json) == ("shop_", "_")
    assert registered_table(derive_schemas(table("shop", "订单")).value_json) == ("shop", "__")
    assert registered_table('{"type":"record","name":"ns1.db.t","fields":[]}') == ("db", "t")
    assert registered_table('{"type":"record","name":"t","fields":[]}') == ("", "t")
    assert registered_table('"string"') is None and registered_table("not json") is None


def test_a_subject_holding_another_tables_schema_is_refused_before_anything_is_registered():
    registry = FakeRegistry()
    SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}")).prepare_batch([table("a_b", "c")])
    registry.calls.clear()

    manager = SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}"))  # another run, another checkpoint
    with pytest.raises(RoutingError) as info:
        manager.prepare_batch([table("x", "y"), table("a", "b_c")])
    assert str(info.value) == (
        "Tables a_b.c and a.b_c would both go to topic 'a_b_c': its subject 'a_b_c-value' in the schema registry "
        "already holds the schema of table a_b.c (version 1, schema id 100; as its Avro record names it, every "
        "character outside [A-Za-z0-9_] of a name turned into '_'), registered by another run or changefeed. "
        "Registering a.b_c's schema there would make it a new version of that subject and mix two tables in one "
        "topic; nothing of this batch was written. Give a.b_c a topic of its own with a dispatcher rule in the "
        "changefeed TOML (--config), listed before any other rule that matches it: [[sink.dispatchers]] matcher = "
        "['a.b_c'] topic = '<a topic of its own>', and after it, unless dispatcher rules route the other tables "
        "already, one with matcher = ['*.*'] topic = '{schema}_{table}' (a --topic-rule comes before every "
        "dispatcher rule: leave it out); or use a topic rule that keeps the two names apart. If subject "
        "'a_b_c-value' is stale, delete it (and its key subject) from the registry instead."
    )
    assert info.value.context == {"table": "a.b_c", "other_table": "a_b.c", "topic": "a_b_c",
                                  "subject": "a_b_c-value", "registered_version": 1, "schema_id": 100}
    # one lookup per new topic, and nothing registered (not even x.y, routed first)
    assert registry.calls == [("get_latest", "x_y-value"), ("get_latest", "a_b_c-value")]
    assert registry.subjects["a_b_c-value"] == [derive_schemas(table("a_b", "c")).value_json]


def test_the_same_table_again_is_looked_up_once_per_run_and_accepted():
    registry = FakeRegistry()
    SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}")).prepare_batch([table("db", "t")])
    registry.calls.clear()
    manager = SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}"))
    manager.prepare_batch([table("db", "t")])
    manager.prepare_batch([table("db", "t", 2)])
    manager.prepare_batch([table("db", "t", 2)])
    assert [c for c in registry.calls if c[0] == "get_latest"] == [("get_latest", "db_t-value")]
    assert manager.take_warnings() == []


def test_a_table_the_checkpoint_recorded_is_not_looked_up():
    registry = FakeRegistry()
    router = TopicRouter(topic_rule="{schema}_{table}")
    router.claim("db", "t", "db_t", ["db_t-key", "db_t-value"])
    SchemaManager(registry, router).prepare_batch([table("db", "t")])
    # no owner check; the value subject's latest is read once, to compare its values with the new version's
    assert registry.calls == [("register", "db_t-key"), ("get_latest", "db_t-value"), ("register", "db_t-value")]


def _columns(*columns: ColumnDef, version: int) -> TableDef:
    return TableDef(schema_name="shop", table="t", version=version, primary_key=("id",),
                    columns=(ColumnDef(name="id", type=MySQLType.INT, nullable=False), *columns))


def test_under_stop_a_version_whose_avro_resolution_is_not_mysqls_is_registered_with_a_warning():
    """DECIMAL -> VARCHAR: the registry's level (Avro: bytes promote to string) accepts it, but a reader of the new
    version would get the decimal's two's-complement bytes as text for the older records: the run says so, naming
    the column and the policy that gives MySQL's values."""
    registry = FakeRegistry()
    old = _columns(ColumnDef(name="amount", type=MySQLType.DECIMAL, nullable=False, precision=10, scale=2), version=1)
    new = _columns(ColumnDef(name="amount", type=MySQLType.VARCHAR, nullable=False, length=20), version=2)
    manager = SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}"))
    manager.prepare_batch([old])
    assert manager.take_warnings() == []
    manager.prepare_batch([new])
    [warning] = manager.take_warnings()
    assert warning.startswith("table shop.t: subject 'shop_t-value' takes table version 2 as a new version")
    assert "amount" in warning and "--on-incompatible new-major" in warning
    assert len(registry.subjects["shop_t-value"]) == 2  # registered all the same: the registry's level decides
    added = _columns(ColumnDef(name="amount", type=MySQLType.VARCHAR, nullable=False, length=20),
                     ColumnDef(name="note", type=MySQLType.INT, nullable=True), version=3)
    manager.prepare_batch([added])  # a column added: resolution gives MySQL's values, no warning
    assert manager.take_warnings() == []


def test_a_lossy_name_matching_the_registered_one_is_accepted_with_a_warning():
    registry = FakeRegistry()
    SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}")).prepare_batch([table("shop", "商品")])
    manager = SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}"))
    manager.prepare_batch([table("shop", "订单")])  # record default.shop.__ either way: cannot be told apart
    assert manager.take_warnings() == [
        "Subject 'shop___-value' already holds a schema (version 1, schema id 100) whose Avro record is named "
        "shop.__, as shop.订单's is after sanitising (every character outside [A-Za-z0-9_] becomes '_'); another "
        "table whose name sanitises the same would carry that name too, so whether shop.订单 registered it cannot "
        "be told. If another table did, give shop.订单 a topic of its own (a [[sink.dispatchers]] rule with "
        "topic = '...')."
    ]
    assert manager.take_warnings() == []


def test_a_subject_holding_something_else_than_a_table_record_is_refused():
    registry = FakeRegistry()
    registry.subjects["db_t-value"] = ['"string"']
    with pytest.raises(RoutingError, match=r"^Table db\.t would go to topic 'db_t', but its subject 'db_t-value' in "
                                           r"the schema registry already holds a schema that is not a table's record "
                                           r"\(version 1, schema id 100, AVRO: '\"string\"'\)"):
        SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}")).plan(table("db", "t"))
    assert registry.subjects == {"db_t-value": ['"string"']}


def test_the_lookup_is_retried_while_the_registry_is_unavailable():
    registry = FakeRegistry()
    registry.unavailable = 2
    slept: list[float] = []
    manager = SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}"), sleep=slept.append)
    manager.prepare_batch([table("db", "t")])
    assert len(slept) == 2 and registry.subjects.keys() == {"db_t-key", "db_t-value"}

    gone = FakeRegistry()
    gone.unavailable = 10**6
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds + 1

    manager = SchemaManager(gone, TopicRouter(topic_rule="{schema}_{table}"), unavailable_budget=3.0, sleep=sleep,
                            clock=lambda: now[0])
    with pytest.raises(RegistryUnavailable, match=r"^Schema registry unreachable while looking up the latest schema "
                                                  r"of subject 'db_t-value' for table db\.t; gave up after 3s"):
        manager.prepare_batch([table("db", "t")])


def test_tables_of_one_batch_are_all_routed_before_anything_is_registered():
    registry = FakeRegistry()
    manager = SchemaManager(registry, TopicRouter(topic_rule="{schema}_{table}"))
    with pytest.raises(RoutingError, match=r"shop.订单 and shop.商品"):
        manager.prepare_batch([table("shop", "订单"), table("shop", "商品")])
    assert registry.subjects == {}
    assert json.dumps(registry.calls) == "[]"
