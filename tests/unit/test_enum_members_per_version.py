"""ENUM/SET members per table version (issue 34 item 2): a storage tree's schema files do not record them, so each
version takes those of its own definition (its CREATE TABLE, else the version before it or ``--tables`` with its
DDL applied), never ``--tables``' for every version; a changelog's DDL messages give each version its own too.
What cannot be known is said, naming the table, the column and the versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from avro_registry_sink.errors import EncodingError
from avro_registry_sink.formats.canal_json import DdlEvent, events_from_canal
from avro_registry_sink.model import Op
from avro_registry_sink.schema.builder import derive_value_schema
from avro_registry_sink.settings.config import DEFAULT_ENCODING
from avro_registry_sink.sources.storage import StorageLayout
from avro_registry_sink.table import MySQLType, TableDef
from avro_registry_sink.tabledef.catalog import TableCatalog, complete_versions, pick_version
from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
from avro_registry_sink.tabledef.storage import write_table_schema_file
from avro_registry_sink.typemap.mysql import connect_parameters, to_avro_value
from tests.support.enum_versions import MEMBERS, allowed_lists, create, rows_of, versions, write_tree
from tests.support.job import canal_ddl, canal_dml

CREATE = create()


def _versions() -> list[tuple[TableDef, str]]:
    return versions()


def _as_schema_file(table: TableDef) -> TableDef:
    """What a schema file says of a version: no members."""
    return table.model_copy(update={"columns": tuple(c.model_copy(update={"elements": ()}) for c in table.columns)})


def _members(table: TableDef | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    assert table is not None
    return table.column("e").elements, table.column("s").elements


def test_every_version_takes_the_members_of_its_own_ddl() -> None:
    files = [(_as_schema_file(t), q) for t, q in _versions()]
    wrong_hint = parse_ddl("CREATE TABLE evo.m (id BIGINT PRIMARY KEY, e ENUM('q') NOT NULL, s SET('q'))")[0]
    for hint in (None, wrong_hint):  # a CREATE TABLE in the tree wins over --tables
        done, notes = complete_versions(files, hint)
        assert [_members(t) for t in done] == MEMBERS
        assert notes == []
    done, _ = complete_versions(files, None)
    assert [t for t in done] == [t for t, _ in _versions()]  # and nothing else differs from MySQL's versions


def test_a_table_that_existed_before_the_changefeed_replays_tables_through_the_ddls() -> None:
    chain = _versions()
    files = [(_as_schema_file(t), "" if i == 0 else q) for i, (t, q) in enumerate(chain)]
    done, notes = complete_versions(files, parse_ddl(CREATE)[0])  # --tables: the table before the first DDL
    assert [_members(t) for t in done] == MEMBERS and notes == []
    # the members used to be --tables' for every version: version 1 then had ('a','b','c') and so did the rest
    assert done[2] is not None and connect_parameters(done[2].column("e"))["allowed"] == "b,a"


def test_unknown_members_are_said_naming_table_column_and_versions() -> None:
    chain = _versions()
    files = [(_as_schema_file(t), "" if i == 0 else q) for i, (t, q) in enumerate(chain)]
    done, notes = complete_versions(files, None)  # no --tables: version 1's members cannot be known
    assert [_members(t) for t in done] == [((), ()), *MEMBERS[1:]]
    assert len(notes) == 2
    for note, column in zip(notes, ("e", "s"), strict=True):
        assert (note.schema, note.table) == ("evo", "m")
        assert f"column {column!r}" in note.message and "table version(s) 1 " in note.message
        assert "empty 'allowed' list" in note.message and "--tables" in note.message
    assert connect_parameters(done[0].column("e"))["allowed"] == ""  # type: ignore[union-attr]


def test_a_version_after_an_unreadable_schema_file_knows_only_what_its_ddl_says() -> None:
    chain = _versions()
    files: list[tuple[TableDef | None, str]] = [(_as_schema_file(t), q) for t, q in chain]
    files[2] = (None, "")  # version 3 (the reordering) cannot be read
    done, notes = complete_versions(files, parse_ddl(CREATE)[0])
    assert done[2] is None
    # version 4 (ADD COLUMN n) follows no known definition: never version 2's members, which would be wrong
    assert _members(done[3]) == ((), ())
    assert _members(done[4]) == MEMBERS[4]  # its own MODIFY says them
    assert {(n.table, "table version(s) 4 " in n.message) for n in notes} == {("m", True)}


def test_tables_that_describe_the_table_after_a_ddl_are_questioned() -> None:
    chain = _versions()
    files = [(_as_schema_file(t), "" if i == 0 else q) for i, (t, q) in enumerate(chain)]
    after = parse_ddl("CREATE TABLE evo.m (id BIGINT PRIMARY KEY, e ENUM('b','a','d') NOT NULL, "
                      "s SET('y','x','w'), n INT)")[0]
    done, notes = complete_versions(files, after)  # the user gave SHOW CREATE TABLE of today
    assert _members(done[0]) == MEMBERS[4] and [_members(t) for t in done[1:]] == MEMBERS[1:]
    messages = [n.message for n in notes]
    assert len(messages) == 2 and all("version 5 gives it the same members" in m for m in messages)


def test_a_later_version_without_a_ddl_says_it_takes_tables() -> None:
    chain = _versions()
    files = [(_as_schema_file(t), q) for t, q in chain]
    files[4] = (files[4][0], "")  # the changefeed restarted after the last DDL: TiCDC wrote no Query
    done, notes = complete_versions(files, parse_ddl(CREATE)[0])
    assert _members(done[4]) == MEMBERS[0]
    assert len(notes) == 2 and all("the DDL between them is not in the tree" in n.message for n in notes)


# --------------------------------------------------------------------------------------------------
# The storage layout: every version as the job reads it


def _tree(root: Path, *, first_query: bool = True) -> list[TableDef]:
    return write_tree(root, first_query=first_query)


def test_the_layout_gives_each_version_its_members_and_encodes_each_row_with_them(tmp_path: Path) -> None:
    truth = _tree(tmp_path)
    layout = StorageLayout(tmp_path)
    hints = {("evo", "m"): parse_ddl("CREATE TABLE evo.m (id BIGINT PRIMARY KEY, e ENUM('a','b') NOT NULL, "
                                     "s SET('x','y'))")[0]}  # today's definition: the CREATE in the tree wins
    tables, broken = layout.table_versions_and_errors(hints)
    assert not broken and [tables[("evo", "m", v)] for v in range(1, 6)] == truth
    allowed = [allowed_lists(derive_value_schema(tables[("evo", "m", v)])) for v in range(1, 6)]
    assert allowed == [{"e": ",".join(e), "s": ",".join(s)} for e, s in MEMBERS]
    assert layout.table_versions_and_errors(hints)[0][("evo", "m", 2)] is tables[("evo", "m", 2)]  # same objects
    assert layout.take_notes() == []
    events, errors = layout.read_all()
    assert not errors and len(events) == 10
    for event in events:
        table = tables[("evo", "m", event.table_version)]
        assert event.after is not None
        got = {c: to_avro_value(table.column(c), event.after[c], DEFAULT_ENCODING, "evo.m") for c in ("e", "s")}
        [row] = [r for r in rows_of(event.table_version - 1) if r["id"] == event.after["id"]]
        assert got == {"e": row["e"], "s": row["s"]}, event.table_version  # 'c' in v1, 'a' in v3 (index 2)


def test_the_layout_says_once_what_it_cannot_know(tmp_path: Path) -> None:
    _tree(tmp_path, first_query=False)
    layout = StorageLayout(tmp_path)
    tables, _ = layout.table_versions_and_errors()
    assert tables[("evo", "m", 1)].column("e").elements == ()
    assert tables[("evo", "m", 2)].column("e").elements == MEMBERS[1][0]
    notes = layout.take_notes()
    assert sorted(n.message.split("column ")[1][:3] for n in notes) == ["'e'", "'s'"]
    layout.table_versions_and_errors()
    assert layout.take_notes() == []  # said once
    tables, _ = layout.table_versions_and_errors({("evo", "m"): parse_ddl(CREATE)[0]})
    assert [_members(tables[("evo", "m", v)]) for v in range(1, 6)] == MEMBERS and layout.take_notes() == []
    # a canal-json index with no members to map it: refused, never guessed
    with pytest.raises(EncodingError, match="members"):
        to_avro_value(StorageLayout(tmp_path).table_versions()[("evo", "m", 1)].column("e"), 3, DEFAULT_ENCODING)


# --------------------------------------------------------------------------------------------------
# A changelog: canal-json DDL messages give each version its members


def test_canal_json_ddl_messages_give_each_version_its_members() -> None:
    lines = []
    rows = []
    for table, query in _versions():
        kind = "CREATE" if query.startswith("CREATE") else "ALTER"
        lines.append(canal_ddl("evo", "m", kind, query, table.version * 100))
        row = {"id": table.version, "e": table.column("e").elements[-1], "s": ",".join(table.column("s").elements[::2])}
        lines.append(canal_dml(table.model_copy(update={"version": table.version * 100}), Op.INSERT,
                               table.version * 100 + 1, None, row))
        rows.append(row)
    catalog = TableCatalog()
    converted = []
    for number, line in enumerate(lines):
        known = {key: catalog.latest(*key) for key in catalog.known()}
        for event in events_from_canal(line, source=f"part-0:{number}", tables=known):
            if isinstance(event, DdlEvent):
                assert catalog.apply(event)
                continue
            table = pick_version(catalog.history([("evo", "m")])[("evo", "m")], event.commit_ts)
            assert event.after is not None
            converted.append({"id": event.after["id"], **{c: to_avro_value(table.column(c), event.after[c],
                                                                            DEFAULT_ENCODING) for c in ("e", "s")}})
    assert converted == rows
    versions = [t for _, t in catalog.history([("evo", "m")])[("evo", "m")]]
    assert [_members(t) for t in versions] == MEMBERS
    assert all(t.column("e").type is MySQLType.ENUM for t in versions)


def test_a_renamed_table_keeps_the_members_of_the_table_it_was(tmp_path: Path) -> None:
    truth = write_tree(tmp_path)  # evo.m, versions 1..5
    last = truth[-1]
    for i, query in enumerate(("RENAME TABLE evo.m TO evo.r", "ALTER TABLE evo.r MODIFY e ENUM('d','b','a') NOT NULL")):
        renamed = last.model_copy(update={"table": "r", "version": 6 + i})
        if i:
            renamed = apply_ddl(renamed, query).model_copy(update={"version": 7})  # type: ignore[union-attr]
        write_table_schema_file(renamed, tmp_path, query=query, ddl_type=14 if i == 0 else 12)
    layout = StorageLayout(tmp_path)
    tables, broken = layout.table_versions_and_errors()
    assert not broken and layout.take_notes() == []
    assert _members(tables[("evo", "r", 6)]) == MEMBERS[4]
    assert _members(tables[("evo", "r", 7)]) == (("d", "b", "a"), MEMBERS[4][1])


def test_a_ddl_that_cannot_be_applied_keeps_members_only_when_it_spells_none() -> None:
    chain = _versions()
    files = [(_as_schema_file(t), q) for t, q in chain]
    files[3] = (files[3][0], "ALTER TABLE evo.m ADD COLUMN n INT AFTER gone")  # no column gone: refused
    done, notes = complete_versions(files, None)
    assert [_members(t) for t in done] == MEMBERS and notes == []  # spells no ENUM/SET: version 3's stay
    files[3] = (files[3][0], "ALTER TABLE evo.m MODIFY gone INT, MODIFY e ENUM('b','a') NOT NULL")
    done, notes = complete_versions(files, None)
    assert _members(done[3]) == ((), ()) and _members(done[4]) == MEMBERS[4]
    assert len(notes) == 2 and all("table version(s) 4 (at 4: its DDL cannot be applied" in n.message for n in notes)
