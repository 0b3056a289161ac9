"""``diff --sql``'s ALTER TABLEs on real PostgreSQL and MariaDB (the repo's scripts): for every schema change of the
corpus, a table created from the older schema as the JDBC sinks create it, holding a row, altered by the generated
statements, has the definition of the table created from the newer schema (columns, types, nullability, defaults,
primary key), and keeps its row. Tables evolved under ``--on-incompatible new-major`` (``tests/support/major_chain.py``:
a rename, a primary-key change, a drop and re-add, an added ENUM and TEXT NOT NULL) are diffed from the registry
alone and from the journal, and their rows compared with those MySQL holds after the DDL. MySQL 8 itself is not
tested: Debian 12's archive this machine reaches has no MySQL server (``default-mysql-server`` is MariaDB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from avro_registry_sink.history.alter import alter_statements, create_table
from avro_registry_sink.registry.connect import connect
from tests.downstream.sinkdb import Database
from tests.support.major_chain import EVOLUTIONS, Evolution, evolution_sql, register_evolutions, registry_config
from tests.support.schema_changes import BASE_ROW, CORPUS, SchemaChange, corpus_diff, schemas
from tests.support.servers import ensure_mariadb, ensure_postgres

pytestmark = pytest.mark.downstream


@pytest.fixture(scope="module", params=["postgres", "mariadb"])
def database(request) -> Database:
    return Database(request.param, ensure_postgres() if request.param == "postgres" else ensure_mariadb())


def definition(db: Database, table: str) -> tuple[dict[str, tuple], list[str]]:
    """``{column: (type, nullable, default)}`` and the primary key's columns, from the database's catalog."""
    if db.kind == "postgres":
        columns = ("SELECT column_name AS name, data_type || coalesce('(' || numeric_precision || ',' || numeric_scale "
                   "|| ')', '') AS type, is_nullable AS nullable, column_default AS dflt FROM information_schema.columns "
                   "WHERE table_name = %s AND table_schema = current_schema()")
        key = ("SELECT k.column_name AS name FROM information_schema.table_constraints c JOIN "
               "information_schema.key_column_usage k USING (constraint_schema, constraint_name) WHERE "
               "c.table_name = %s AND c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema() "
               "ORDER BY k.ordinal_position")
    else:
        columns = ("SELECT column_name AS name, column_type AS type, is_nullable AS nullable, column_default AS dflt "
                   "FROM information_schema.columns WHERE table_name = %s AND table_schema = DATABASE()")
        key = ("SELECT column_name AS name FROM information_schema.key_column_usage WHERE table_name = %s AND "
               "constraint_name = 'PRIMARY' AND table_schema = DATABASE() ORDER BY ordinal_position")
    with db._connect() as conn, conn.cursor() as cur:
        cur.execute(columns, (table,))
        cols = {r["name"]: (r["type"], r["nullable"], r["dflt"]) for r in cur.fetchall()}
        cur.execute(key, (table,))
        return cols, [r["name"] for r in cur.fetchall()]


@pytest.mark.parametrize("change", CORPUS, ids=lambda c: c.name)
def test_alter_brings_the_downstream_table_to_the_new_definition(database: Database, change: SchemaChange):
    before, after = schemas(change)
    name = "h_" + change.name.replace("-", "_")
    expected = "e_" + change.name.replace("-", "_")
    for table in (name, expected):
        database.execute(f"DROP TABLE IF EXISTS {database.quote(table)}")
    database.execute(create_table(before.value_json, before.key_json, name, database.kind))
    database.execute(f"INSERT INTO {database.quote(name)} ("
                     + ", ".join(database.quote(c) for c in BASE_ROW) + ") VALUES (" + ", ".join(BASE_ROW.values()) + ")")
    diff = corpus_diff(change)
    for statement in alter_statements(diff, name, database.kind):
        database.execute(statement)
    database.execute(create_table(after.value_json, after.key_json, expected, database.kind))
    assert definition(database, name) == definition(database, expected)
    [row] = database.rows(name)
    for old, new in diff.renames.items():
        assert str(row[new]) == BASE_ROW[old].strip("'")
    assert str(row["id"]) == "1"


# --------------------------------------------------------------------------------------------------
# From the registry alone (no journal): tables evolved under --on-incompatible new-major, rows compared with MySQL's


@pytest.fixture(scope="module")
def evolved(tmp_path_factory) -> Path:
    """The registry's state dir; the journal is ``../ck``."""
    state = tmp_path_factory.mktemp("evolved") / "state"
    register_evolutions(state, state.parent / "ck")
    return state


def _text(row: dict) -> dict:
    return {k: None if v is None else str(v) for k, v in row.items()}


@pytest.mark.parametrize("source", ["registry", "journal"])
@pytest.mark.parametrize("evolution", EVOLUTIONS, ids=lambda e: e.name)
def test_evolved_table_holds_the_rows_mysql_holds(database: Database, evolved: Path, evolution: Evolution,
                                                  source: str):
    """The table of version 1, holding rows, altered by ``diff --sql``'s statements (from the registry alone, or
    from the journal) is the table of version 2 holding the rows MySQL holds after the DDL: renamed values kept,
    a re-added column's and an added NOT NULL column's values MySQL's (the ENUM's first member, '')."""
    with connect(registry_config(evolved)) as client:
        value_v = [client.get_version(f"{evolution.topic}-value", v).schema for v in (1, "latest")]
        key_v = [client.get_version(f"{evolution.topic}-key", v).schema for v in (1, "latest")]
    name, expected = f"r_{evolution.name}_{source}", f"re_{evolution.name}_{source}"
    for table in (name, expected):
        database.execute(f"DROP TABLE IF EXISTS {database.quote(table)}")
    database.execute(create_table(value_v[0], key_v[0], name, database.kind))
    for row in evolution.rows:
        database.execute(f"INSERT INTO {database.quote(name)} (" + ", ".join(database.quote(c) for c in row)
                         + ") VALUES (" + ", ".join(row.values()) + ")")
    statements = evolution_sql(evolved, evolution, database.kind, source)
    assert statements
    for statement in statements:
        database.execute(statement.replace(f"`{evolution.topic}`", f"`{name}`").replace(f'"{evolution.topic}"',
                                                                                         f'"{name}"'))
    database.execute(create_table(value_v[1], key_v[1], expected, database.kind))
    assert definition(database, name) == definition(database, expected)
    rows = sorted((_text(r) for r in database.rows(name)), key=lambda r: r["id"])
    assert rows == [_text(r) for r in evolution.expected]
