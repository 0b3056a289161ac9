"""Field-level diffs and downstream ALTER TABLEs over the corpus of breaking and compatible schema changes."""

from __future__ import annotations

import pytest

from avro_registry_sink.history.alter import alter_statements, create_table, dialect_of
from avro_registry_sink.history.diff import diff_schemas, renames_in_ddl
from avro_registry_sink.registry.connect import connect
from avro_registry_sink.settings.config import RegistryConfig
from tests.support.schema_changes import BREAKING, COMPATIBLE, CORPUS, SchemaChange, corpus_diff, schemas


def test_corpus_size():
    assert len(BREAKING) >= 12 and len(COMPATIBLE) >= 6


@pytest.fixture(scope="module")
def registry():
    with connect(RegistryConfig()) as client:
        yield client


@pytest.mark.parametrize("change", CORPUS, ids=lambda c: c.name)
def test_corpus_verdict_is_the_registrys(change: SchemaChange, registry):
    """Each case is refused by the registry's BACKWARD check (its value or key schema) as the corpus says."""
    before, after = schemas(change)
    verdicts = []
    for kind, old, new in (("key", before.key_json, after.key_json), ("value", before.value_json, after.value_json)):
        subject = f"{change.name}-{kind}"
        registry.register(subject, old)
        verdicts.append(registry.test_compatibility(subject, new).is_compatible)
    assert (not all(verdicts)) == change.refused


@pytest.mark.parametrize("change", CORPUS, ids=lambda c: c.name)
def test_corpus_diff_kinds(change: SchemaChange):
    diff = corpus_diff(change)
    assert {c.kind for c in diff.changes} == set(change.kinds), [c.to_json() for c in diff.changes]


def test_rename_is_one_change_not_a_drop_and_an_add():
    diff = corpus_diff(next(c for c in CORPUS if c.name == "rename-and-retype"))
    assert [(c.kind, c.field, c.old, c.new) for c in diff.changes] == [
        ("renamed", "quantity", "qty", "quantity"), ("type", "quantity", "int", "long"),
        ("connect.parameters", "quantity", {"tidb_type": "INT"}, {"tidb_type": "BIGINT"})]
    assert diff.renames == {"qty": "quantity"}


def test_without_the_ddl_a_rename_is_a_drop_and_an_add():
    before, after = schemas(next(c for c in CORPUS if c.name == "rename-not-null"))
    kinds = sorted((c.kind, c.field) for c in diff_schemas(before.value_json, after.value_json).changes)
    assert kinds == [("added", "title"), ("removed", "name")]


def test_decimal_rescale_and_key_change_are_described():
    diff = corpus_diff(next(c for c in CORPUS if c.name == "decimal-rescaled"))
    assert [c.describe() for c in diff.changes] == ["decimal(10,2) -> decimal(12,4)"]
    diff = corpus_diff(next(c for c in CORPUS if c.name == "primary-key-changed"))
    assert [c.describe() for c in diff.changes] == ["key (id) -> (id, name)"]
    assert diff.to_json()["key"] == {"before": ["id"], "after": ["id", "name"]}


def test_renames_in_ddl():
    assert renames_in_ddl("ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO c") == {"a": "c"}
    assert renames_in_ddl("ALTER TABLE t CHANGE COLUMN `x-y` z INT") == {"x_y": "z"}
    assert renames_in_ddl("ALTER TABLE t RENAME COLUMN a TO t, RENAME COLUMN b TO a, RENAME COLUMN t TO b") == {
        "a": "b", "b": "a"}
    assert renames_in_ddl("ALTER TABLE t ADD COLUMN c INT, RENAME INDEX i TO j") == {}
    assert renames_in_ddl("CREATE TABLE t (id INT)") == {} and renames_in_ddl(None) == {}


def test_swapped_columns_are_renames_both_ways():
    a = {"fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}]}
    b = {"fields": [{"name": "b", "type": "int"}, {"name": "a", "type": "string"}]}
    diff = diff_schemas(a, b, renames=renames_in_ddl(
        "ALTER TABLE t RENAME COLUMN a TO t, RENAME COLUMN b TO a, RENAME COLUMN t TO b"))
    assert [(c.kind, c.field) for c in diff.changes] == [("renamed", "b"), ("renamed", "a")]
    assert alter_statements(diff, "t", "postgres") == [
        'ALTER TABLE "t" RENAME COLUMN "a" TO "b"', 'ALTER TABLE "t" RENAME COLUMN "b" TO "a"']


def test_alter_statements_postgres_and_mysql():
    change = next(c for c in CORPUS if c.name == "not-null-added-without-default")
    assert alter_statements(corpus_diff(change), "shop_items", "postgres") == [
        'ALTER TABLE "shop_items" ADD COLUMN "stock" integer NOT NULL DEFAULT 0',
        'ALTER TABLE "shop_items" ALTER COLUMN "stock" DROP DEFAULT']
    change = next(c for c in CORPUS if c.name == "null-to-not-null")
    assert alter_statements(corpus_diff(change), "shop_items", "mariadb") == [
        "UPDATE `shop_items` SET `note` = '' WHERE `note` IS NULL",
        "ALTER TABLE `shop_items` MODIFY COLUMN `note` longtext NOT NULL"]
    change = next(c for c in CORPUS if c.name == "primary-key-changed")
    statements = alter_statements(corpus_diff(change), "shop_items", "mysql")
    assert statements == ["ALTER TABLE `shop_items` DROP PRIMARY KEY",
                          "ALTER TABLE `shop_items` MODIFY COLUMN `name` varchar(255) NOT NULL",
                          "ALTER TABLE `shop_items` ADD PRIMARY KEY (`id`, `name`)"]
    assert alter_statements(corpus_diff(next(c for c in CORPUS if c.name == "varchar-lengthened")), "t", "pg") == []


def test_create_table_types_as_the_readme_says():
    before, _ = schemas(CORPUS[0])
    assert create_table(before.value_json, before.key_json, "shop_items", "postgres") == (
        'CREATE TABLE "shop_items" ("id" integer NOT NULL, "qty" integer NOT NULL, "big" bigint NOT NULL, '
        '"price" numeric(10,2) NOT NULL, "name" text NOT NULL, "note" text, "code" text, "ratio" double precision, '
        '"u" bigint NOT NULL, "kind" text NOT NULL DEFAULT \'a\', "flag" integer NOT NULL DEFAULT 1, '
        'PRIMARY KEY ("id"))')


def test_unknown_dialect_is_refused():
    with pytest.raises(Exception, match="postgres or mysql"):
        dialect_of("oracle")


def _schema(*fields: dict) -> dict:
    return {"type": "record", "name": "t", "fields": [{"name": "id", "type": "long"}, *fields]}


def test_a_readded_column_is_removed_and_added_so_rows_get_the_default():
    before = _schema({"name": "qty", "type": {"type": "int", "connect.parameters": {"tidb_type": "INT"}}})
    after = _schema({"name": "qty", "type": {"type": "string", "connect.parameters": {"tidb_type": "TEXT"}}})
    diff = diff_schemas(before, after, readded={"qty"})
    assert [(c.kind, c.field) for c in diff.changes] == [("added", "qty"), ("removed", "qty")]
    assert alter_statements(diff, "t", "postgres") == [
        'ALTER TABLE "t" DROP COLUMN "qty"', """ALTER TABLE "t" ADD COLUMN "qty" text NOT NULL DEFAULT ''""",
        'ALTER TABLE "t" ALTER COLUMN "qty" DROP DEFAULT']
    # without the lineage the same schemas are a type change that keeps (casts) the value
    assert [c.kind for c in diff_schemas(before, after).changes] == ["type", "connect.parameters"]


def test_mysql_s_implicit_defaults_fill_an_added_not_null_column():
    enum = {"name": "st", "type": {"type": "string", "connect.parameters": {"tidb_type": "ENUM", "allowed": "x,y"}}}
    date = {"name": "d", "type": {"type": "string", "connect.parameters": {"tidb_type": "DATE"}}}
    statements = alter_statements(diff_schemas(_schema(), _schema(enum, date)), "t", "postgres")
    assert statements[0] == """ALTER TABLE "t" ADD COLUMN "st" text NOT NULL DEFAULT 'x'"""
    assert statements[2] == """ALTER TABLE "t" ADD COLUMN "d" text NOT NULL DEFAULT '0000-00-00'"""


def test_mysql_text_and_blob_defaults_are_expressions():
    text = {"name": "tag", "type": "string", "default": "n/a"}
    blob = {"name": "b", "type": "bytes", "default": "\u0001"}
    number = {"name": "n", "type": "int", "default": 3}
    ddl = create_table(_schema(text, blob, number), {"type": "record", "name": "k", "fields": [
        {"name": "id", "type": "long"}]}, "t", "mysql")
    assert "`tag` longtext NOT NULL DEFAULT ('n/a')" in ddl and "`b` longblob NOT NULL DEFAULT (X'01')" in ddl
    assert "`n` int NOT NULL DEFAULT 3" in ddl


def test_key_diff_and_lineage_read_from_rules():
    from avro_registry_sink.history.diff import diff_keys, lineage_in_rules, readded_in_ddl

    a = {"fields": [{"name": "id", "type": "long"}]}
    b = {"fields": [{"name": "id", "type": "long"}, {"name": "region", "type": "string"}]}
    diff = diff_keys(a, b)
    assert [c.kind for c in diff.changes] == ["key"] and not diff.of_kind("added")
    assert alter_statements(diff, "t", "mysql")[1:] == ["ALTER TABLE `t` MODIFY COLUMN `region` varchar(255) NOT NULL",
                                                        "ALTER TABLE `t` ADD PRIMARY KEY (`id`, `region`)"]
    assert lineage_in_rules(None) is None and lineage_in_rules({"migrationRules": [{"name": "mine", "doc": "a renamed to b"}]}) is None
    cut = {"migrationRules": [{"name": "upgrade_1_to_2", "mode": "UPGRADE", "doc": "x" * 1000, "expr": "$"}]}
    assert lineage_in_rules(cut) is None  # a doc cut short may miss a change: nothing is taken from it
    expr = {"migrationRules": [{"name": "upgrade_1_to_2", "mode": "UPGRADE", "doc": "b",
                                "expr": '$merge([$sift($, function($v, $k) {$not($k in ["a"])}), {"b": ($v := $.`a`; $v)}])'}]}
    assert lineage_in_rules(expr) == ({"a": "b"}, set())
    assert readded_in_ddl("CREATE TABLE t (a INT); ALTER TABLE t DROP COLUMN a, ADD COLUMN a TEXT") == {"a"}
