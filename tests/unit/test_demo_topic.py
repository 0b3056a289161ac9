"""The demo's changes as a TiCDC changelog topic (``sources/demo_topic.py``), read back by the product's own
canal-json and debezium-json readers: every row change of the manifest comes out, with the same op, commit ts and
values; DDL messages carry the tables (debezium's ``tableChanges`` equal to the manifest's definitions, but unique
keys, which Debezium does not list) on every partition."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from avro_registry_sink.formats.canal_json import DdlEvent, events_from_canal
from avro_registry_sink.formats.debezium_json import events_from_debezium
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.sources.demo_topic import changelog_messages
from avro_registry_sink.table import MySQLType
from tests.support.job import decoded_changes


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    return generate_demo(tmp_path_factory.mktemp("demo"), rows_per_table=16)


def _read(manifest, fmt: str):
    """(row events, DDL events) the product's reader gives, each DDL applied before the rows after it."""
    tables = {}
    rows, ddls = [], []
    messages = changelog_messages(manifest, fmt, partitions=3)
    for message in messages:
        if fmt == "canal-json":
            if message.is_ddl:
                body = json.loads(message.value)
                schema, table = body["database"], body["table"]
                version = body["_tidb"]["commitTs"]
                tables[(schema, table)] = manifest.table_versions[(schema, table, version)]
            read = events_from_canal(message.value, tables=tables)
        else:
            read = events_from_debezium(message.value, tables=tables)
        for event in read:
            if isinstance(event, DdlEvent):
                ddls.append((message.partition, event))
                for table in event.tables:
                    tables[(table.schema_name, table.table)] = table
            else:
                rows.append((message.partition, event))
    return messages, rows, ddls


@pytest.mark.parametrize("fmt", ["canal-json", "debezium-json"])
def test_every_change_of_the_demo_reads_back_from_the_messages(manifest, fmt):
    messages, rows, ddls = _read(manifest, fmt)
    expected = manifest.all_events
    assert len(rows) == len(expected) > 40
    assert [m.commit_ts for m in messages] == sorted(m.commit_ts for m in messages)
    def definition(event):  # the table version in force at the event's commit ts
        name = f"{event.schema}.{event.table}"
        version = max(v for v in manifest.schema_versions[name] if v <= event.commit_ts)
        return manifest.table_versions[(event.schema, event.table, version)]

    # as a consumer sees them: encoded by the reference encoder, decoded with fastavro, in commit order
    read = [e for _, e in sorted(rows, key=lambda r: r[1].commit_ts)]
    assert [(e.schema, e.table, e.op, e.commit_ts) for e in read] == \
        [(e.schema, e.table, e.op, e.commit_ts) for e in expected]
    assert list(decoded_changes(read, definition)) == list(decoded_changes(expected, definition))
    # one CREATE per table and the ALTER of shop.orders, on each of the three partitions
    assert Counter((e.schema, e.table, e.kind) for _, e in ddls) == {
        ("shop", "orders", "CREATE"): 3, ("shop", "customers", "CREATE"): 3, ("crm", "events", "CREATE"): 3,
        ("shop", "orders", "ALTER"): 3}
    # every change of a row on one partition
    partitions: dict[tuple, set[int]] = {}
    for partition, event in rows:
        image = event.after if event.after is not None else event.before
        key = tuple(image[c] for c in manifest.key_columns[f"{event.schema}.{event.table}"])
        partitions.setdefault((event.table, key), set()).add(partition)
    assert all(len(p) == 1 for p in partitions.values())


def test_debezium_ddl_messages_carry_the_tables_of_the_manifest(manifest):
    _, _, ddls = _read(manifest, "debezium-json")
    for _, event in ddls:
        (table,) = event.tables
        want = manifest.table_versions[(table.schema_name, table.table, event.commit_ts)]
        temporal = (MySQLType.TIME, MySQLType.DATETIME, MySQLType.TIMESTAMP)
        columns = tuple(c.model_copy(update={"fsp": c.fsp or 0}) if c.type in temporal else c for c in want.columns)
        assert table.model_copy(update={"version": want.version}) == \
            want.model_copy(update={"unique_keys": (), "columns": columns}), table.qualified_name  # fsp 0 = none


def test_a_bad_format_names_the_choices(manifest):
    with pytest.raises(ValueError, match="choose one of: canal-json, debezium-json"):
        changelog_messages(manifest, "avro", partitions=1)


def test_a_table_keyed_by_a_unique_key_keeps_it_through_debezium_ddls(manifest):
    """Debezium's tableChanges list the primary key only: shop.customers (a NOT NULL UNIQUE KEY, no primary key)
    takes its key from the CREATE TABLE text of the message, or from --tables when the text has none."""
    from avro_registry_sink.tabledef.catalog import TableCatalog

    ddls = [e for _, e in _read(manifest, "debezium-json")[2]]
    catalog = TableCatalog()
    for event in ddls:
        catalog.apply(event)
    customers = catalog.latest("shop", "customers")
    assert customers is not None and customers.handle_key_names() == ("code",)
    assert catalog.latest("shop", "orders").primary_key == ("id",)

    seeded = TableCatalog(seed=[manifest.tables["shop.customers"].model_copy(update={"version": 1})])
    bare = next(e for e in ddls if e.table == "customers")
    import dataclasses

    assert seeded.apply(dataclasses.replace(bare, query="CREATE TABLE `shop`.`customers` (`code` varchar(16))"))
    assert seeded.latest("shop", "customers").handle_key_names() == ("code",)
    assert TableCatalog().apply(dataclasses.replace(bare, query=""))  # nothing to take it from: no key
    unkeyed = TableCatalog()
    unkeyed.apply(dataclasses.replace(bare, query=""))
    assert not unkeyed.latest("shop", "customers").handle_key_names()
