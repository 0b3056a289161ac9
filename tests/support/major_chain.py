"""Tables evolved under ``--on-incompatible new-major`` into a registry (and a checkpoint's journal), for ``diff``
and ``history`` from the registry alone: each :class:`Evolution` is one table created and altered once (table
versions 1 and 5), registered by the schema manager as a job registers it (the new major's migration rules read
the DDL), with the rows MySQL holds before and after the ALTER.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avro_registry_sink.cli import app
from avro_registry_sink.history.journal import HistoryJournal, HistoryRecorder
from avro_registry_sink.manager import SchemaManager
from avro_registry_sink.registry.connect import connect
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.settings.config import RegistryConfig
from avro_registry_sink.table import TableDef
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
from tests.support.cli_runner import CachedCliRunner

SCHEMA = "dn"
_RUNNER = CachedCliRunner()  # the CLI's click command built once, not per diff


@dataclass(frozen=True)
class Evolution:
    """One table: its CREATE TABLE, one ALTER, rows before (column -> SQL literal) and after (as MySQL holds them
    after the ALTER; ``None`` is NULL, other values compared as text)."""

    name: str
    create: str
    alter: str
    rows: tuple[dict[str, str], ...]
    expected: tuple[dict[str, Any], ...]

    @property
    def topic(self) -> str:
        return f"{SCHEMA}_{self.name}"

    def tables(self) -> tuple[TableDef, TableDef]:
        first = parse_ddl(self.create)[0].model_copy(update={"version": 1})
        if self.alter.startswith("DROP TABLE"):  # dropped and created again
            second: TableDef | None = parse_ddl(self.alter.split(";", 1)[1])[0]
        else:
            second = apply_ddl(first, self.alter)
        assert second is not None
        return first, second.model_copy(update={"version": 5})


EVOLUTIONS = (
    Evolution("ren", f"CREATE TABLE {SCHEMA}.ren (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL, note VARCHAR(20))",
              "ALTER TABLE ren RENAME COLUMN a TO b",
              ({"id": "1", "a": "5", "note": "'x'"}, {"id": "2", "a": "7", "note": "NULL"}),
              ({"id": 1, "b": 5, "note": "x"}, {"id": 2, "b": 7, "note": None})),
    Evolution("pk", f"CREATE TABLE {SCHEMA}.pk (id BIGINT NOT NULL, region VARCHAR(8) NOT NULL, qty INT NOT NULL, "
              "PRIMARY KEY (id))", "ALTER TABLE pk DROP PRIMARY KEY, ADD PRIMARY KEY (id, region)",
              ({"id": "1", "region": "'eu'", "qty": "3"}, {"id": "2", "region": "'us'", "qty": "4"}),
              ({"id": 1, "region": "eu", "qty": 3}, {"id": 2, "region": "us", "qty": 4})),
    Evolution("readd", f"CREATE TABLE {SCHEMA}.readd (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL)",
              "ALTER TABLE readd DROP COLUMN a, ADD COLUMN a VARCHAR(10) NOT NULL",
              ({"id": "1", "a": "5"},), ({"id": 1, "a": ""},)),
    Evolution("en", f"CREATE TABLE {SCHEMA}.en (id BIGINT NOT NULL PRIMARY KEY, qty INT NOT NULL)",
              "ALTER TABLE en ADD COLUMN st ENUM('x','y') NOT NULL",
              ({"id": "1", "qty": "3"},), ({"id": 1, "qty": 3, "st": "x"},)),
    Evolution("tx", f"CREATE TABLE {SCHEMA}.tx (id BIGINT NOT NULL PRIMARY KEY, qty INT NOT NULL)",
              "ALTER TABLE tx ADD COLUMN memo TEXT NOT NULL, ADD COLUMN tag VARCHAR(8) NOT NULL DEFAULT 'n/a'",
              ({"id": "1", "qty": "3"},), ({"id": 1, "qty": 3, "memo": "", "tag": "n/a"},)),
)


def registry_config(state: Path) -> RegistryConfig:
    """The embedded registry ``diff``/``history --state-dir state`` read."""
    state.mkdir(parents=True, exist_ok=True)
    return RegistryConfig(embedded_data=str(state / "registry.db"))


def register_evolutions(state: Path, checkpoint: Path | None = None,
                        evolutions: tuple[Evolution, ...] = EVOLUTIONS) -> None:
    """Register every table's two versions with ``--on-incompatible new-major`` (a fresh schema manager per table
    version, as a restarted job), recorded in ``checkpoint``'s journal when given."""
    ddl = {(SCHEMA, e.name): {1: e.create, 5: e.alter} for e in evolutions}
    with connect(registry_config(state)) as client:
        journal = HistoryJournal.at(str(checkpoint)) if checkpoint is not None else None
        recorder = HistoryRecorder(journal, client,
                                   lambda t: ("ddl", None, ddl[(t.schema_name, t.table)][t.version]))
        for batch, version in enumerate((0, 1)):
            manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"), on_incompatible="new-major",
                                    ddl_history=lambda s, t: sorted(ddl[(s, t)].items()))
            manager.on_register, manager.on_refused = recorder.registered, recorder.refused
            manager.on_registering = recorder.registering
            manager.prepare_batch([e.tables()[version] for e in evolutions])
            recorder.note_majors(manager.take_majors())
            recorder.flush(batch_id=batch)


def corpus_evolutions() -> tuple[Evolution, ...]:
    """The schema-change corpus (``tests/support/schema_changes.py``), one table ``dn.c_<case>`` per case, holding
    its base row (the rows after are not modelled here: ``expected`` is empty)."""
    from tests.support.schema_changes import BASE, BASE_ROW, CORPUS

    out = []
    for change in CORPUS:
        name = "c_" + change.name.replace("-", "_")
        out.append(Evolution(name, BASE.replace("shop.items", f"{SCHEMA}.{name}"),
                             change.ddl.replace("shop.items", f"{SCHEMA}.{name}"), (dict(BASE_ROW),), ()))
    return tuple(out)


def diff_sql(state: Path, dialect: str, *args: str) -> list[str]:
    """The statements of ``diff ARGS --sql DIALECT`` against the embedded registry under ``state``."""
    out = _RUNNER.invoke(app, ["diff", *args, "--sql", dialect, "--json", "--state-dir", str(state)])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["sql"]["statements"]


def evolution_sql(state: Path, evolution: Evolution, dialect: str, source: str) -> list[str]:
    """From the registry alone: ``diff --subject S 1 2`` of the value subject, then of the key subject (those with
    two versions); from the journal (``register_evolutions(state, state.parent / "ck")``): ``diff --table T 1 5
    --checkpoint CK`` (value and key in one)."""
    if source == "journal":
        return diff_sql(state, dialect, "--table", f"dn.{evolution.name}", "1", "5",
                        "--checkpoint", str(state.parent / "ck"))
    statements = []
    for subject in (f"{evolution.topic}-value", f"{evolution.topic}-key"):
        with connect(registry_config(state)) as client:
            if len(client.get_versions(subject)) < 2:
                continue
        statements += diff_sql(state, dialect, "--subject", subject, "1", "2")
    return statements
