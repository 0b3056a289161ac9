"""Rule sets read back: a registry that keeps config rule sets but drops those of versions (a real HTTP proxy in
front of the registry, :mod:`tests.support.rule_dropping`) is refused before any write, and a new major read back
without its rules fails the batch; ``defaultRuleSet``/``overrideRuleSet`` in a subject's or the global config are
reported, a malformed JSONata expression among them refused before anything registers."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from avro_registry_sink.cli import app
from avro_registry_sink.errors import ConfigError, SubjectNotFound
from avro_registry_sink.manager import RulesNotKept, SchemaManager, require_data_contracts
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.settings.config import OnIncompatible, RegistryConfig, SinkConfig
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
from tests.support.rule_dropping import RuleDroppingProxy

pytestmark = pytest.mark.integration

CREATE = "CREATE TABLE {s}.t (id BIGINT PRIMARY KEY, a INT NOT NULL)"
RENAME = "ALTER TABLE t RENAME COLUMN a TO a2"
OVERRIDE = {"migrationRules": [{"name": "audit", "kind": "TRANSFORM", "mode": "UPGRADE", "type": "JSONATA",
                                "expr": "$merge([$, {'audited': true}])"}]}


@pytest.fixture
def schema_name() -> str:
    return "rb" + uuid.uuid4().hex[:10]


@pytest.fixture
def proxy(registry_url):
    with RuleDroppingProxy(registry_url) as url:
        yield url


def versions(schema_name: str):
    v1 = parse_ddl(CREATE.format(s=schema_name))[0].model_copy(update={"version": 1})
    return v1, apply_ddl(v1, RENAME).model_copy(update={"version": 5})


def manager(client, policy: str = "new-major") -> SchemaManager:
    return SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), on_incompatible=policy,
                         ddl_history=lambda s, t: [(5, RENAME)])


def test_probe_refuses_a_registry_that_drops_the_rule_sets_of_versions(proxy, registry_url):
    with RegistryClient(RegistryConfig(urls=(proxy,))) as client:
        reason = client.data_contracts_unsupported()
        assert reason is not None and "dropped the rule set of a schema version" in reason
        assert "avroRegistrySinkProbe" in reason
        with pytest.raises(ConfigError, match="does not keep them: it kept the rule set of a subject's config"):
            require_data_contracts(SinkConfig(on_incompatible=OnIncompatible.NEW_MAJOR), client)
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as direct:
        assert direct.data_contracts_unsupported() is None  # the registry behind it keeps them
        assert not direct.get_subjects(prefix="avro-registry-sink-contract-probe", deleted=True)  # cleaned up


def test_register_new_major_is_refused_before_any_write(tmp_path, proxy, registry_url, schema_name):
    path = tmp_path / "t.sql"
    path.write_text(CREATE.format(s=schema_name))
    result = CliRunner().invoke(app, ["register", "--ddl", str(path), "--registry", proxy,
                                      "--on-incompatible", "new-major"])
    assert result.exit_code == 2 and "dropped the rule set of a schema version" in result.output
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as direct:
        assert not direct.get_subjects(prefix=schema_name)


def test_a_new_major_read_back_without_its_rules_fails_the_batch(proxy, schema_name):
    v1, v2 = versions(schema_name)
    with RegistryClient(RegistryConfig(urls=(proxy,))) as client:
        m = manager(client)  # the probe skipped: what a registry that fooled it would give
        m.prepare_batch([v1])
        with pytest.raises(RulesNotKept) as caught:
            m.prepare_batch([v2])
        subject = f"{schema_name}_t-value"
        latest = client.get_latest(subject)
    error = caught.value
    assert (error.subject, error.version, error.schema_id) == (subject, 2, latest.id)
    assert error.missing_rules == ["upgrade_1_to_2", "downgrade_2_to_1"]
    for text in (repr(subject), "version 2", f"schema id {latest.id}", "missing upgrade_1_to_2, downgrade_2_to_1",
                 "no migration rules"):
        assert text in error.message


def test_override_rule_set_is_reported_and_a_malformed_one_refused(registry_url, schema_name):
    v1, _ = versions(schema_name)
    subject = f"{schema_name}_t-value"
    with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
        try:
            client.update_config(subject, {"overrideRuleSet": OVERRIDE})
            stop = manager(client, "stop")
            stop.prepare_batch([v1])
            assert not stop.take_warnings()  # stop registers no rules: nothing asked
            m = manager(client)
            m.prepare_batch([v1])
            [warning] = m.take_warnings()
            assert repr(subject) in warning and "overrideRuleSet" in warning and "audit (JSONATA TRANSFORM UPGRADE)" \
                in warning

            other = schema_name + "x"
            broken = f"{other}_t-value"
            bad = {"migrationRules": [{**OVERRIDE["migrationRules"][0], "expr": "$merge([$, {'audited': "}]}
            client.update_config(broken, {"overrideRuleSet": bad})
            table = parse_ddl(CREATE.format(s=other))[0].model_copy(update={"version": 1})
            with pytest.raises(ConfigError) as caught:
                manager(client).prepare_batch([table])
            assert repr(broken) in caught.value.message and "'audit'" in caught.value.message
            assert "does not parse" in caught.value.message
            for kind in ("key", "value"):  # nothing registered
                with pytest.raises(SubjectNotFound):
                    client.get_versions(f"{other}_t-{kind}")
        finally:
            for name in (subject, f"{schema_name}x_t-value"):
                client.delete_config(name)


def test_global_default_rule_set_is_reported(embedded, schema_name):
    http = embedded()
    url = str(http.client.base_url)
    with RegistryClient(RegistryConfig(urls=(url,))) as client:
        client.update_config(None, {"defaultRuleSet": OVERRIDE})
        m = manager(client)
        m.prepare_batch([versions(schema_name)[0]])
        warnings = m.take_warnings()
    assert len(warnings) == 2  # key and value subjects
    assert all("defaultRuleSet" in w and "audit" in w for w in warnings)
    assert json.dumps(sorted(w.split("'")[1] for w in warnings)) == json.dumps(
        [f"{schema_name}_t-key", f"{schema_name}_t-value"])
