"""Column selectors and the table filter: one TableDef transform seen by schemas, registry and encoders."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest

from avro_registry_sink.encoding.columnar import ColumnarEncoder
from avro_registry_sink.errors import ConfigError
from avro_registry_sink.manager import SchemaManager
from avro_registry_sink.model import Op
from avro_registry_sink.registry.connect import connect
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.routing.selection import TableSelection
from avro_registry_sink.settings.config import RegistryConfig, load_config
from avro_registry_sink.tabledef.ddl import parse_ddl
from tests.support.reference_encoder import RowEncoder

USERS = parse_ddl("""
CREATE TABLE shop.users (
  id BIGINT NOT NULL, email VARCHAR(64) NOT NULL, ssn VARCHAR(11), Secret_Note TEXT, name VARCHAR(20),
  PRIMARY KEY (id), UNIQUE KEY uk_email (email)
);
""")[0]


def _names(table):
    return [c.name for c in table.columns]


def test_first_matching_selector_keeps_matched_columns():
    sel = TableSelection.build(column_selectors=[
        {"matcher": ["shop.users"], "columns": ["*", "!ssn", "!secret*"]},
        {"matcher": ["shop.*"], "columns": ["id"]},  # never reached for shop.users: first match wins
    ])
    selected = sel.apply(USERS)
    assert _names(selected) == ["id", "email", "name"]
    assert selected.primary_key == ("id",) and selected.unique_keys == (("email",),)
    assert sel.dropped(USERS, selected) == ("ssn", "Secret_Note")
    untouched = TableSelection.build(column_selectors=[{"matcher": ["crm.*"], "columns": ["id"]}])
    assert untouched.apply(USERS) is USERS


def test_a_unique_key_may_stand_in_for_a_dropped_primary_key():
    sel = TableSelection.build(column_selectors=[{"matcher": ["shop.users"], "columns": ["email", "name"]}])
    selected = sel.apply(USERS)
    assert _names(selected) == ["email", "name"] and selected.primary_key == ()
    assert [c.name for c in selected.handle_key_columns()] == ["email"]


def test_no_key_left_or_dispatch_column_dropped_is_refused_by_name():
    sel = TableSelection.build(column_selectors=[{"matcher": ["shop.users"], "columns": ["name", "ssn"]}])
    with pytest.raises(ConfigError, match=r"no primary key or unique key of table shop\.users.*drops id, email"):
        sel.apply(USERS)
    sel = TableSelection.build(column_selectors=[{"matcher": ["shop.*"], "columns": ["*", "!name"]}])
    with pytest.raises(ConfigError, match=r"leaves out column 'name' of table shop\.users.*partition = 'columns'"):
        sel.apply(USERS, partition_columns=("name",))


def test_filter_rules_case_sensitivity():
    sel = TableSelection.build(filter_rules=["shop.*", "!shop.tmp*"])
    assert sel.admits("SHOP", "users") and not sel.admits("shop", "tmp1") and not sel.admits("crm", "x")
    strict = TableSelection.build(filter_rules=["shop.*"], case_sensitive=True)
    assert not strict.admits("SHOP", "users")
    assert TableSelection().is_everything and not sel.is_everything


def _decode(schema_json: str, framed: bytes) -> dict:
    parsed = fastavro.parse_schema(json.loads(schema_json))
    return fastavro.schemaless_reader(io.BytesIO(framed[5:]), parsed, parsed)


def test_manager_registers_and_encoders_write_only_selected_columns(tmp_path):
    toml = tmp_path / "cf.toml"
    toml.write_text("""
[sink]
protocol = "avro"
[[sink.column-selectors]]
matcher = ["shop.users"]
columns = ["*", "!ssn", "!secret_note"]
""")
    cfg = load_config(config_file=toml, environ={})
    with connect(RegistryConfig()) as client:
        manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), cfg.encoding,
                                selection=TableSelection.from_config(cfg))
        plan = manager.plan(USERS)
        registered = json.loads(client.get_latest("shop_users-value").schema)
    assert [f["name"] for f in registered["fields"]] == ["id", "email", "name"]
    assert plan.encoding.omitted == ("ssn", "Secret_Note")
    full_row = {"id": 7, "email": "a@b", "ssn": "123-45-6789", "Secret_Note": "hush", "name": "Ann"}
    key, value = RowEncoder(plan.encoding).encode(Op.INSERT, full_row, 0)
    assert _decode(plan.encoding.value_schema_json, value) == {"id": 7, "email": "a@b", "name": "Ann"}
    assert _decode(plan.encoding.key_schema_json, key) == {"id": 7}
    batch = pa.RecordBatch.from_pylist([full_row])
    keys, values = ColumnarEncoder(plan.encoding).encode(batch)
    assert values[0].as_py() == value and keys[0].as_py() == key
    assert b"123-45-6789" not in value and b"hush" not in value


def test_stage_image_parser_ignores_omitted_columns_only():
    from avro_registry_sink.spark.stages.stage import images_to_batch

    sel = TableSelection.build(column_selectors=[{"matcher": ["shop.users"], "columns": ["*", "!ssn"]}])
    selected = sel.apply(USERS)
    image = json.dumps({"id": 1, "email": "e", "ssn": "x", "Secret_Note": None, "name": "n"})
    batch = images_to_batch(pa.array([image]), selected, omitted=("ssn",))
    assert batch.schema.names == ["id", "email", "Secret_Note", "name"]
