"""``diff --sql`` over the evolution corpus (``tests/support/evolution.py``, 39 DDL classes) on real PostgreSQL and
MariaDB (MariaDB runs the ``mysql`` dialect; MySQL 8 is not installable here: see ``test_alter_sql.py``).

Every class is registered under ``--on-incompatible new-major`` as a job registers it (a schema manager per table
version, the embedded registry, the checkpoint's journal). For each pair of consecutive table versions, ``diff
--sql`` (the CLI, from the registry alone: the value subject's statements then the key subject's; and from the
journal: ``diff --table ... --checkpoint``) is applied to the table created from the older version as the JDBC sinks
create it, holding the class's rows as that version's readers see them (the oracle of its major); the altered table
must have the definition of the table created from the newer version (columns, types, nullability, defaults,
primary key) and hold the oracle's rows of the newer version's major: MySQL's values after the DDL. A row whose
value MySQL's ALTER refuses (the oracle's ``Refused``) makes the statements fail on the database too, as MySQL's
ALTER fails.

One connection per dialect; every class, from both sources, in one test function per dialect.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import click.testing
import psycopg
import pymysql
import pytest
import typer.main

from avro_registry_sink.cli import app
from avro_registry_sink.history.alter import create_table
from avro_registry_sink.history.diff import record_fields
from avro_registry_sink.history.journal import HistoryJournal, HistoryRecorder
from avro_registry_sink.manager import MAJOR_VERSION, TABLE_VERSION, SchemaManager
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.routing.rules import TopicRouter
from avro_registry_sink.settings.config import RegistryConfig
from tests.downstream.sinkdb import Database
from tests.downstream.test_alter_sql import database  # noqa: F401  the module's servers, started once
from tests.support.evolution import CORPUS, T0, BreakingClass, Refused
from tests.support.major_chain import registry_config

pytestmark = pytest.mark.downstream

DB_ERRORS = (psycopg.Error, pymysql.Error)
PREFIX = "ac_"
TOPIC = "sq_{schema}_{table}"


@dataclass(frozen=True)
class Step:
    """Two consecutive table versions of a class: the value and key subjects' ``(table version, subject version,
    major)`` at each, and the (value, key) schemas of each."""

    low: int
    high: int
    value: tuple[tuple[int, int, int], tuple[int, int, int]]
    key: tuple[tuple[int, int, int], tuple[int, int, int]]
    schemas: tuple[tuple[str, str], tuple[str, str]]


@dataclass(frozen=True)
class Corpus:
    state: Path
    url: str
    steps: dict[str, list[Step]]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Every class registered with ``--on-incompatible new-major`` (one schema manager per table version, as
    restarted batches) in the embedded registry (served for the module: ``diff --registry URL``), recorded in
    ``../ck``'s journal."""
    state = tmp_path_factory.mktemp("corpus") / "state"
    versions = {(c.table.split(".")[0], c.name): c.versions() for c in CORPUS}
    ddl = {key: {t.version: q for t, q in found} for key, found in versions.items()}
    server = EmbeddedRegistry(data=str(registry_config(state).embedded_data))
    url = server.start()
    try:
        with RegistryClient(RegistryConfig(urls=(url,))) as client:
            recorder = HistoryRecorder(HistoryJournal.at(str(state.parent / "ck")), client,
                                       lambda t: ("ddl", None, ddl[(t.schema_name, t.table)][t.version]))
            for batch in range(max(len(v) for v in versions.values())):
                manager = SchemaManager(client, TopicRouter(topic_rule=TOPIC), on_incompatible="new-major",
                                        ddl_history=lambda s, t: sorted(ddl[(s, t)].items()))
                manager.on_register, manager.on_refused = recorder.registered, recorder.refused
                manager.on_registering = recorder.registering
                manager.prepare_batch([found[batch][0] for found in versions.values() if batch < len(found)])
                recorder.note_majors(manager.take_majors())
                recorder.flush(batch_id=batch)
            steps = {case.name: list(_steps(case, client)) for case in CORPUS}
        yield Corpus(state, url, steps)
    finally:
        server.stop()


def _subject_versions(client: Any, subject: str) -> dict[int, tuple[tuple[int, int, int], str]]:
    """subject version -> ((table version, subject version, major), schema) of every version of ``subject``."""
    out = {}
    for number in client.get_versions(subject):
        got = client.get_version(subject, number)
        out[number] = ((int(got.properties[TABLE_VERSION]), number, int(got.properties[MAJOR_VERSION])), got.schema)
    return out


def _steps(case: BreakingClass, client: Any):
    topic = TOPIC.format(schema="evo", table=case.name)
    value, key = (_subject_versions(client, f"{topic}-{kind}") for kind in ("value", "key"))

    def at(found: dict, table_version: int) -> tuple[tuple[int, int, int], str]:
        return max((v for v in found.values() if v[0][0] <= table_version), key=lambda v: v[0])

    table_versions = [t.version for t, _ in case.versions()]
    for low, high in itertools.pairwise(table_versions):
        (v_low, value_low), (v_high, value_high) = at(value, low), at(value, high)
        (k_low, key_low), (k_high, key_high) = at(key, low), at(key, high)
        yield Step(low, high, (v_low, v_high), (k_low, k_high), ((value_low, key_low), (value_high, key_high)))


class Session:
    """One connection to a downstream database: statements, rows, a table's definition."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.conn = db._connect()

    def execute(self, statement: str, params: tuple = ()) -> None:
        with self.conn.cursor() as cur:
            cur.execute(statement, params or None)

    def rows(self, table: str) -> dict[int, dict[str, Any]]:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {self.db.quote(table)}")
            return {r["id"]: {k: bytes(v) if isinstance(v, memoryview) else v for k, v in r.items()}
                    for r in cur.fetchall()}

    def definition(self, table: str) -> tuple[dict[str, tuple], list[str]]:
        """``{column: (type, nullable, default)}`` and the primary key's columns (as ``test_alter_sql``'s)."""
        if self.db.kind == "postgres":
            columns = ("SELECT column_name AS name, data_type || coalesce('(' || numeric_precision || ',' || "
                       "numeric_scale || ')', '') AS type, is_nullable AS nullable, column_default AS dflt FROM "
                       "information_schema.columns WHERE table_name = %s AND table_schema = current_schema()")
            key = ("SELECT k.column_name AS name FROM information_schema.table_constraints c JOIN "
                   "information_schema.key_column_usage k USING (constraint_schema, constraint_name) WHERE "
                   "c.table_name = %s AND c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema() "
                   "ORDER BY k.ordinal_position")
        else:
            columns = ("SELECT column_name AS name, column_type AS type, is_nullable AS nullable, column_default AS "
                       "dflt FROM information_schema.columns WHERE table_name = %s AND table_schema = DATABASE()")
            key = ("SELECT column_name AS name FROM information_schema.key_column_usage WHERE table_name = %s AND "
                   "constraint_name = 'PRIMARY' AND table_schema = DATABASE() ORDER BY ordinal_position")
        with self.conn.cursor() as cur:
            cur.execute(columns, (table,))
            cols = {r["name"]: (r["type"], r["nullable"], r["dflt"]) for r in cur.fetchall()}
            cur.execute(key, (table,))
            return cols, [r["name"] for r in cur.fetchall()]

    def clean(self) -> None:
        """Drop this test's tables (all of them in one statement)."""
        schema = "current_schema()" if self.db.kind == "postgres" else "DATABASE()"
        with self.conn.cursor() as cur:
            cur.execute("SELECT table_name AS name FROM information_schema.tables WHERE table_name LIKE %s AND "
                        f"table_schema = {schema}", (PREFIX.replace("_", "\\_") + "%",))
            tables = [r["name"] for r in cur.fetchall()]
        if tables:
            self.execute("DROP TABLE " + ", ".join(self.db.quote(t) for t in tables))

    def insert(self, table: str, rows: list[dict[str, Any]]) -> None:
        """The rows in one statement."""
        if not rows:
            return
        columns = list(rows[0])
        self.execute(f"INSERT INTO {self.db.quote(table)} (" + ", ".join(self.db.quote(c) for c in columns)
                     + ") VALUES " + ", ".join("(" + ", ".join(["%s"] * len(columns)) + ")" for _ in rows),
                     tuple(r[c] for r in rows for c in columns))


@pytest.fixture(scope="module")
def session(database: Database):  # noqa: F811  the fixture imported above
    s = Session(database)
    yield s
    s.conn.close()


_COMMAND = typer.main.get_command(app)


def _cli(corpus: Corpus, *args: str) -> tuple[int, Any]:
    """``avro-registry-sink diff ARGS --json`` (the CLI's command, parsed by click as the console script does)."""
    out = click.testing.CliRunner().invoke(_COMMAND, ["diff", *args, "--json", "--registry", corpus.url])
    return out.exit_code, json.loads(out.stdout) if out.exit_code == 0 else out.output


def _statements(corpus: Corpus, case: BreakingClass, step: Step, source: str, dialect: str,
                table: str) -> tuple[int, Any]:
    """``diff --sql`` from the journal (``--table T A B --checkpoint CK``: one call) or from the registry alone
    (``--subject S A B``: the value subject, then the key subject, those that changed between the two table
    versions)."""
    if source == "journal":
        code, out = _cli(corpus, "--table", case.table, str(step.low), str(step.high), "--checkpoint",
                         str(corpus.state.parent / "ck"), "--sql", dialect, "--target-table", table)
        return code, out["sql"]["statements"] if code == 0 else out
    statements: list[str] = []
    topic = TOPIC.format(schema="evo", table=case.name)
    for kind, (a, b) in (("value", step.value), ("key", step.key)):
        if a[1] == b[1]:
            continue
        code, out = _cli(corpus, "--subject", f"{topic}-{kind}", str(a[1]), str(b[1]), "--sql", dialect,
                         "--target-table", table)
        if code != 0:
            return code, out
        statements += out["sql"]["statements"]
    return 0, statements


def _project(row: dict[str, Any], columns: list[str], what: str) -> dict[str, Any]:
    missing = [c for c in columns if c not in row]
    assert not missing, f"{what}: the oracle's row {row} lacks {missing}"
    return {c: row[c] for c in columns}


def _same(got: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Values as compared: a Decimal by its text (its scale too), a float as the number."""
    return {k: {c: str(v) if isinstance(v, Decimal) else v for c, v in r.items()} for k, r in got.items()}


#: Rows the corpus does not hold, each the class's first row with one value MySQL's ALTER refuses (error 1265):
#: (class, older table version) -> (column, value, why).
NON_MEMBERS = {("enum_set_members", T0): (("e", "c", "is not a member of ENUM('a','b')"),
                                          ("s", "x,z", "is not a member of SET('x','y')"))}


def _apply(session: Session, case: BreakingClass, step: Step, table: str, statements: list[str], expected: str,
           what: str) -> list[str]:
    """The table of the older version holding the class's rows, altered by ``statements``, against the table
    ``expected`` (of the newer version): the failures found."""
    db, dialect = session.db, "postgres" if session.db.kind == "postgres" else "mysql"
    eras = {t.version: rows for t, rows in case.eras()}
    ids = [r["id"] for v, rows in eras.items() if v <= step.low for r in rows]
    columns = [[f.name for f in record_fields(value)] for value, _ in step.schemas]
    if case.breaks_key:  # the value does not change: its rows are the rows written
        written = {r["id"]: r for rows in eras.values() for r in rows}
        before = {i: written[i] for i in ids}
        after: dict[int, Any] = dict(before)
    else:
        before = {i: _project(case.pinned[step.value[0][2]][i], columns[0], what) for i in ids}
        after = {i: case.pinned[step.value[1][2]][i] for i in ids}
    refused = {i: r for i, r in after.items() if isinstance(r, Refused)}
    after = {i: _project(r, columns[1], what) for i, r in after.items() if i not in refused}
    for n, (column, value, reason) in enumerate(NON_MEMBERS.get((case.name, step.low), ())):
        row_id = 100 + n  # a row the corpus does not hold: the first row with a value MySQL's ALTER refuses
        before[row_id] = {**before[ids[0]], "id": row_id, column: value}
        refused[row_id] = Refused(column, value, reason)
    failures = []
    session.execute(create_table(*step.schemas[0], table, dialect))
    session.insert(table, [before[i] for i in after])
    try:
        for statement in statements:
            session.execute(statement)
    except DB_ERRORS as exc:
        return [f"{what}: {exc} in {statements}"]
    if session.definition(table) != session.definition(expected):
        failures.append(f"{what}: definition {session.definition(table)} != {session.definition(expected)} after "
                        f"{statements}")
    if _same(session.rows(table)) != _same(after):
        failures.append(f"{what}: rows {session.rows(table)} != {after} after {statements}")
    for i, reason in refused.items():  # MySQL's ALTER fails on that value: so must the database's
        other = f"{table}_r{i}"
        session.execute(create_table(*step.schemas[0], other, dialect))
        session.insert(other, [before[i]])
        try:
            for statement in statements:
                session.execute(statement.replace(db.quote(table), db.quote(other)))
        except DB_ERRORS:  # the database refused the value, as MySQL does
            continue
        failures.append(f"{what}: row {i} ({reason.column}: {reason.value}, MySQL refuses: {reason.reason}) was "
                        f"altered into {session.rows(other)}")
    return failures


def test_corpus_alters_hold_the_rows_mysql_holds(session: Session, corpus: Corpus):
    """Every step of every class, from the registry alone and from the journal: the same statements (applied
    once, so both are proven), the altered table that of the newer version with MySQL's rows. No class is refused:
    the conversions ``diff --sql`` has no SQL for (``tests/unit/test_alter_values.py``) are not in the corpus."""
    dialect = "postgres" if session.db.kind == "postgres" else "mysql"
    session.clean()
    failures: list[str] = []
    covered = set()
    for case in CORPUS:
        for n, step in enumerate(corpus.steps[case.name]):
            what = f"{case.name} step {n + 1} ({dialect})"
            table, expected = f"{PREFIX}{case.name}_{n}", f"{PREFIX}{case.name}_{n}_new"
            answers = {source: _statements(corpus, case, step, source, dialect, table)
                       for source in ("registry", "journal")}
            if any(code != 0 for code, _ in answers.values()):
                failures.append(f"{what}: diff --sql refused: {answers}")
                continue
            if answers["registry"] != answers["journal"]:
                failures.append(f"{what}: the registry's statements {answers['registry'][1]} are not the "
                                f"journal's {answers['journal'][1]}")
                continue
            session.execute(create_table(*step.schemas[1], expected, dialect))
            failures += _apply(session, case, step, table, answers["journal"][1], expected, what)
            covered.add(case.name)
    session.clean()
    assert not failures, "\n".join(failures)
    assert covered == {c.name for c in CORPUS}
