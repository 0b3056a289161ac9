"""Tests of the job tests' own helpers (tests/support/job.py); no Spark."""

from __future__ import annotations

import json

from tests.support.job import canal_messages, expected_state


def test_canal_messages_read_back_as_the_manifest_events(tmp_path):
    from avro_registry_sink.formats.canal_json import DdlEvent, events_from_canal
    from avro_registry_sink.sources.demo import generate_demo

    manifest = generate_demo(tmp_path, rows_per_table=6)
    messages = canal_messages(manifest)
    ddls = [m for _, _, m in messages if json.loads(m)["isDdl"]]
    assert len(ddls) == 3 * (len(manifest.tables) + 1)  # CREATE x 3 tables + ALTER, on every partition
    got = []
    for _, _, text in messages:
        msg = json.loads(text)
        if msg["isDdl"]:
            assert isinstance(events_from_canal(text)[0], DdlEvent)
            continue
        name = f"{msg['database']}.{msg['table']}"
        version = max(v for v in manifest.schema_versions[name] if v <= msg["_tidb"]["commitTs"])
        table = manifest.table_versions[(msg["database"], msg["table"], version)]
        got.extend(events_from_canal(text, table=table))
    assert len(got) == len(manifest.all_events)
    assert {e.commit_ts for e in got} == {e.commit_ts for e in manifest.all_events}


def test_expected_state_has_the_final_rows(tmp_path):
    from avro_registry_sink.sources.demo import generate_demo

    manifest = generate_demo(tmp_path, rows_per_table=8)
    state = expected_state(manifest)
    for name, rows in manifest.final_rows.items():
        assert len(state[name]) == len(rows)
