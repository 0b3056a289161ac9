"""A table whose ENUM and SET members are removed, reordered and added by DDL (issue 34 item 2), written as a TiCDC
storage tree: each version's schema file (no members, as TiCDC writes them) and a canal-json data file whose rows
send each member by its index in that version (as TiCDC does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from avro_registry_sink.model import Op
from avro_registry_sink.table import TableDef
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.support.job import canal_dml

COLUMNS = "id BIGINT PRIMARY KEY, e ENUM('a','b','c') NOT NULL, s SET('x','y','z')"
#: members removed, reordered, added, for ENUM and SET ({t}: the table)
DDLS = (
    "ALTER TABLE {t} MODIFY e ENUM('a','b') NOT NULL, MODIFY s SET('x','y')",
    "ALTER TABLE {t} MODIFY e ENUM('b','a') NOT NULL, MODIFY s SET('y','x')",
    "ALTER TABLE {t} ADD COLUMN n INT",  # leaves the members as they are
    "ALTER TABLE {t} MODIFY e ENUM('b','a','d') NOT NULL, MODIFY s SET('y','x','w')",
)
#: (e, s) of every version, as MySQL holds them
MEMBERS = [
    (("a", "b", "c"), ("x", "y", "z")),
    (("a", "b"), ("x", "y")),
    (("b", "a"), ("y", "x")),
    (("b", "a"), ("y", "x")),
    (("b", "a", "d"), ("y", "x", "w")),
]


def create(table: str = "evo.m") -> str:
    return f"CREATE TABLE {table} ({COLUMNS})"


def versions(table: str = "evo.m", first: int = 1, step: int = 1) -> list[tuple[TableDef, str]]:
    """Every version of ``table`` as MySQL has it (versions ``first``, ``first + step`` ...) and the DDL that made it."""
    current = parse_ddl(create(table))[0].model_copy(update={"version": first})
    out = [(current, create(table))]
    for i, ddl in enumerate(DDLS, start=1):
        statement = ddl.format(t=table)
        changed = apply_ddl(current, statement)
        assert changed is not None
        current = changed.model_copy(update={"version": first + i * step})
        out.append((current, statement))
    return out


def rows_of(index: int) -> list[dict[str, Any]]:
    """The rows written at version ``index`` (0-based): the last member of ``e`` and every other member of ``s``,
    then the first member of each (the ids are unique over the versions)."""
    e, s = MEMBERS[index]
    return [{"id": index * 10 + 1, "e": e[-1], "s": ",".join(s[::2])}, {"id": index * 10 + 2, "e": e[0], "s": s[0]}]


def write_tree(root: Path, table: str = "evo.m", *, first_query: bool = True, first: int = 1, step: int = 1
               ) -> list[TableDef]:
    """``table``'s versions as a storage tree under ``root`` (version 1's ``Query`` empty unless ``first_query``:
    a table that existed before the changefeed); the definitions as MySQL has them."""
    out = []
    for i, (definition, query) in enumerate(versions(table, first, step)):
        write_table_schema_file(definition, root, query=query if i or first_query else "",
                                ddl_type=3 if i == 0 else 12)
        directory = root / definition.schema_name / definition.table / str(definition.version)
        directory.mkdir(parents=True)
        lines = [canal_dml(definition, Op.INSERT, definition.version + j + 1, None,
                           {c.name: None for c in definition.columns} | row)  # every column: n is NULL
                 for j, row in enumerate(rows_of(i))]
        (directory / "CDC000001.json").write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
        out.append(definition)
    return out


def allowed_lists(schema: dict[str, Any]) -> dict[str, str]:
    """The ``allowed`` connect parameter of every field of a value schema that has one."""
    out = {}
    for f in schema["fields"]:
        for branch in f["type"] if isinstance(f["type"], list) else [f["type"]]:
            if isinstance(branch, dict) and "allowed" in branch.get("connect.parameters", {}):
                out[f["name"]] = branch["connect.parameters"]["allowed"]
    return out
