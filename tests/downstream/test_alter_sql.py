"""``diff --sql``'s ALTER TABLEs on real PostgreSQL and MariaDB (the repo's scripts): for every schema change of the
corpus, a table created from the older schema as the JDBC sinks create it, holding a row, altered by the generated
statements, has the definition of the table created from the newer schema (columns, types, nullability, defaults,
primary key), and keeps its row."""

from __future__ import annotations

import pytest

from avro_registry_sink.history.alter import alter_statements, create_table
from tests.downstream.sinkdb import Database
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
