"""The schema manager's hooks for the history journal, and ``auto_register=False``."""

from __future__ import annotations

import pytest

from avro_registry_sink.history.journal import HistoryJournal, HistoryRecorder, TableSources, metadata_properties
from avro_registry_sink.manager import SchemaEvolutionError, SchemaManager, SchemaNotRegistered
from avro_registry_sink.registry.connect import connect
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.settings.config import RegistryConfig
from avro_registry_sink.storage_fs import StoreFS, parse_storage_uri
from tests.support.schema_changes import CORPUS, versions


@pytest.fixture
def client():
    with connect(RegistryConfig()) as c:
        yield c


def manager(client, **kw) -> SchemaManager:
    return SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), **kw)


def test_hooks_record_registrations_and_refusals(client, tmp_path):
    change = next(c for c in CORPUS if c.name == "int-to-varchar")
    before, after = versions(change)
    journal = HistoryJournal(StoreFS(parse_storage_uri(str(tmp_path)), option="checkpoint"))
    sources = TableSources()
    sources.note_ddl(type("Ddl", (), {"schema": "shop", "table": "items", "commit_ts": 200, "query": change.ddl})())
    recorder = HistoryRecorder(journal, client, sources)
    m = manager(client)
    m.on_register, m.on_refused = recorder.registered, recorder.refused
    m.plan(before)
    recorder.flush(1)
    with pytest.raises(SchemaEvolutionError):
        m.plan(after)
    records = journal.read()
    assert [(r.subject, r.verdict, r.version) for r in records] == [
        ("shop_items-key", "new subject", 1), ("shop_items-value", "new subject", 1),
        ("shop_items-value", "incompatible", None)]
    refused = records[-1]
    assert refused.ddl == change.ddl and refused.source == "ddl" and refused.previous_version == 1
    assert refused.reasons and refused.compatibility_level == "BACKWARD" and refused.table_version == 200
    assert records[0].source == "unknown" and records[0].batch == 1
    assert metadata_properties(refused)["avro-registry-sink.ddl"] == change.ddl


def test_auto_register_false_only_looks_up(client):
    before, after = versions(next(c for c in CORPUS if c.name == "nullable-added"))
    manager(client).plan(before)  # registered elsewhere (CI)
    lookup_only = manager(client, auto_register=False)
    plan = lookup_only.plan(before)
    assert plan.encoding.value_schema_id == 2 and lookup_only.stats.registrations == 0
    with pytest.raises(SchemaNotRegistered) as failed:
        lookup_only.plan(after)
    assert failed.value.context["subject"] == "shop_items-value"
    assert "auto-register is false" in str(failed.value) and '"name":"memo"' in str(failed.value)
    assert client.get_versions("shop_items-value") == [1]  # nothing registered
    with pytest.raises(SchemaNotRegistered, match="does not exist"):
        manager(client, auto_register=False).plan(before.model_copy(update={"table": "other"}))


def test_deferred_records_read_the_versions_their_registration_left(client, tmp_path):
    """A job's recorder (``defer``) reads versions and levels later, in a thread (``complete_later``); a
    subject registering again first completes its waiting record, so two versions of one table in one batch
    read "new subject" and "compatible", as they do when read at once."""
    before, after = versions(next(c for c in CORPUS if c.name == "nullable-added"))
    journal = HistoryJournal(StoreFS(parse_storage_uri(str(tmp_path)), option="checkpoint"))
    recorder = HistoryRecorder(journal, client, defer=True)
    m = manager(client)
    m.on_register, m.on_refused, m.on_registering = recorder.registered, recorder.refused, recorder.registering
    m.prepare_batch([before, after.model_copy(update={"version": before.version + 1})])
    waiting = [r for r in recorder._pending if r.version is None]
    assert len(waiting) == 2  # the value subject's second version and the key's: not read yet
    recorder.complete_later()
    m.plan(before.model_copy(update={"table": "other"}))  # waits for the thread, then registers
    records = recorder.flush(1)
    assert [(r.subject, r.verdict, r.version, r.previous_version) for r in records] == [
        ("shop_items-key", "new subject", 1, None), ("shop_items-value", "new subject", 1, None),
        ("shop_items-value", "compatible", 2, 1),
        ("shop_other-key", "new subject", 1, None), ("shop_other-value", "new subject", 1, None)]
    assert all(r.compatibility_level == "BACKWARD" for r in records)


def test_the_batch_s_topics_are_told_after_its_routes_are_checked_and_before_any_registration(client):
    """``on_routed`` (the job creates new topics meanwhile) comes once a batch, with each topic once, after
    the owners' checks and before the first schema registers (``on_registering``)."""
    before, after = versions(next(c for c in CORPUS if c.name == "nullable-added"))
    calls: list[tuple[str, object]] = []
    m = manager(client)
    m.on_routed = lambda topics: calls.append(("routed", topics))
    m.on_registering = lambda subject: calls.append(("registering", subject))
    m.prepare_batch([before, after.model_copy(update={"version": before.version + 1}),
                     before.model_copy(update={"table": "other"})])
    assert calls[0] == ("routed", ["shop_items", "shop_other"])
    assert [c for c in calls if c[0] == "routed"] == calls[:1]
    assert {subject for kind, subject in calls[1:]} == {
        "shop_items-key", "shop_items-value", "shop_other-key", "shop_other-value"}
