"""TiCDC storage sink: CSV data lines (quote and escape mode, header, old values, errors) and the
directory layout (schema files, data file order, metadata)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from avro_registry_sink.errors import SourceError
from avro_registry_sink.formats.csv import CsvOptions, decode_value, iter_records, parse_csv
from avro_registry_sink.model import Op
from avro_registry_sink.sources.storage import DataFile, DateSeparator, StorageLayout, data_file_name, read_data_file
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

INPUTS = Path(__file__).resolve().parents[1] / "data" / "inputs"
CSV = INPUTS / "csv"

T1 = TableDef(
    schema_name="test",
    table="t1",
    primary_key=("id",),
    version=449118650000000000,
    columns=(
        ColumnDef(name="id", type=MySQLType.INT, nullable=False),
        ColumnDef(name="name", type=MySQLType.VARCHAR, length=32),
        ColumnDef(name="note", type=MySQLType.TEXT),
        ColumnDef(name="price", type=MySQLType.DECIMAL, precision=10, scale=2),
        ColumnDef(name="created", type=MySQLType.DATETIME, fsp=3),
        ColumnDef(name="data", type=MySQLType.VARBINARY, length=16, binary=True),
        ColumnDef(name="score", type=MySQLType.DOUBLE),
        ColumnDef(name="flags", type=MySQLType.BIT, length=10),
        ColumnDef(name="color", type=MySQLType.ENUM),
        ColumnDef(name="tags", type=MySQLType.SET),
        ColumnDef(name="doc", type=MySQLType.JSON),
    ),
)
T2 = TableDef(
    schema_name="test",
    table="t2",
    primary_key=("id",),
    columns=(ColumnDef(name="id", type=MySQLType.INT, nullable=False), ColumnDef(name="v", type=MySQLType.VARCHAR)),
)


T3 = TableDef(
    schema_name="test",
    table="t3",
    primary_key=("id",),
    columns=(
        ColumnDef(name="id", type=MySQLType.BIGINT, unsigned=True, nullable=False),
        ColumnDef(name="bin", type=MySQLType.VARBINARY, length=16, binary=True),
        ColumnDef(name="color", type=MySQLType.ENUM),
        ColumnDef(name="tags", type=MySQLType.SET),
        ColumnDef(name="flags", type=MySQLType.BIT, length=10),
        ColumnDef(name="amount", type=MySQLType.DECIMAL, precision=10, scale=2),
        ColumnDef(name="at", type=MySQLType.TIMESTAMP, fsp=3),
        ColumnDef(name="score", type=MySQLType.FLOAT),
        ColumnDef(name="name", type=MySQLType.VARCHAR, length=32),
    ),
)


def read(name: str) -> str:
    return (CSV / name).read_bytes().decode("utf-8")


# --------------------------------------------------------------------------------------------------
# CSV


def test_quote_mode_fixture() -> None:
    events, errors = parse_csv(read("quote_mode.csv"), T1, CsvOptions(include_commit_ts=True), source="q.csv")
    assert errors == []
    assert [(e.op, e.commit_ts) for e in events] == [
        (Op.INSERT, 449118655446581249),
        (Op.INSERT, 449118655446581250),
        (Op.INSERT, 449118655446581251),
        (Op.UPDATE, 449118655446581252),
        (Op.DELETE, 449118655446581253),
    ]
    first, second, third, update, delete = events
    assert first.after == {
        "id": 1,
        "name": "plain",
        "note": 'a "quoted", comma, text',
        "price": "12.50",
        "created": "2024-05-09 08:00:01.123",
        "data": b"\x00\xff\r\n",
        "score": 1.5,
        "flags": 682,
        "color": "green",
        "tags": "a,c",
        "doc": '{"a": 1, "b": [true, null]}',
    }
    assert first.source == "q.csv:1" and first.table_version == T1.version and first.extra == {}
    assert second.after["note"] == "line1\r\nline2\nline3"  # raw CR/LF inside quotes
    assert second.after["data"] is None and second.after["doc"] is None
    assert second.after["score"] == 1.5e20
    assert third.source == "q.csv:5"  # the record after a 3-line record
    assert third.after["name"] == ""  # "" is an empty string
    assert third.after["note"] == "\\N"  # a quoted \N is text, the bare one NULL
    assert third.after["price"] is None and third.after["color"] is None
    assert third.after["data"] == b"" and third.after["score"] == 1e-05 and third.after["flags"] == 1023
    assert update.before is None and update.after["name"] == "plain2"  # U without old values
    assert delete.after is None and delete.before == second.after


def test_escape_mode_fixture_with_hex_binary_and_pipe_delimiter() -> None:
    options = CsvOptions(**{"delimiter": "|", "quote": "", "binary-encoding-method": "hex"})
    events, errors = parse_csv(read("escape_mode.csv"), T1, options, source="e.csv")
    assert errors == []
    first, second, delete = events
    assert first.after["name"] == "a|b"
    assert first.after["note"] == "back\\slash\nnew\rline"
    assert first.after["data"] == b"\x00\xff\r\n"
    assert first.after["tags"] == "a,b"
    assert first.after["doc"] == '{"k": "v|w"}'
    assert first.commit_ts == 0 and first.extra == {"commit_ts_exact": False}  # no include-commit-ts
    assert second.after["name"] is None and second.after["note"] == "\\N"  # \N is NULL, \\N the text
    assert second.after["data"] == b"" and second.after["score"] == -7.0 and second.after["doc"] == "null"
    assert delete.op is Op.DELETE and delete.before == first.after


def test_multi_character_delimiter_in_escape_mode() -> None:
    options = CsvOptions(delimiter="[*]", quote="")
    text = "I[*]t2[*]test[*]1[*]a\\[\\*\\]b\\\\c\r\n"
    events, errors = parse_csv(text, T2, options)
    assert errors == []
    assert events[0].after == {"id": 1, "v": "a[*]b\\c"}


def test_header_and_old_value_pairs() -> None:
    options = CsvOptions(**{"include-commit-ts": True, "output-old-value": True, "output-field-header": True})
    events, errors = parse_csv(read("old_value.csv"), T2, options, source="o.csv")
    assert errors == []
    assert [e.op for e in events] == [Op.INSERT, Op.UPDATE, Op.DELETE]
    insert, update, delete = events
    assert insert.after == {"id": 1, "v": "one"} and insert.source == "o.csv:2"
    assert update.before == {"id": 1, "v": "one"} and update.after == {"id": 1, "v": "uno"}
    assert update.commit_ts == 449118655446581250 and update.source == "o.csv:3"
    assert delete.before == {"id": 1, "v": "uno"}


def test_header_mismatch_is_reported() -> None:
    text = "ticdc-meta$operation,ticdc-meta$table,ticdc-meta$schema,id,value\r\n\"I\",\"t2\",\"test\",1,\"x\"\r\n"
    events, errors = parse_csv(text, T2, source="h.csv")
    assert len(events) == 1
    assert [str(e) for e in errors] == [
        "h.csv:1: header ['ticdc-meta$operation', 'ticdc-meta$table', 'ticdc-meta$schema', 'id', 'value'] does not "
        "match the table definition and options (expected ['ticdc-meta$operation', 'ticdc-meta$table', "
        "'ticdc-meta$schema', 'id', 'v'])."
    ]


def test_malformed_lines_are_reported_and_the_rest_parsed() -> None:
    events, errors = parse_csv(read("bad_lines.csv"), T2, CsvOptions(include_commit_ts=True), source="bad.csv")
    assert [e.after["id"] for e in events] == [1, 5, 7]
    assert events[1].after["v"] == "fine,\r\nwith newline"
    assert [(e.line, e.column) for e in errors] == [(2, "op"), (3, None), (4, "id"), (7, None), (9, None)]
    assert all(isinstance(e, SourceError) and str(e).startswith(f"bad.csv:{e.line}: ") for e in errors)
    messages = [str(e) for e in errors]
    assert "unknown operation 'X'; valid operations are I, U, D" in messages[0]
    assert "expected 6 fields (4 TiCDC meta fields + 2 columns of test.t2), got 5" in messages[1]
    assert "column 'id': expected an integer, got 'four' (int)" in messages[2]
    assert "unexpected 'a' after a closing quote" in messages[3]
    assert "unterminated quoted field" in messages[4]


def test_old_value_pair_errors() -> None:
    options = CsvOptions(include_commit_ts=True, output_old_value=True)
    text = (
        '"D","t2","test",5,true,1,"old"\r\n'  # not followed by its I row
        '"I","t2","test",6,false,2,"x"\r\n'
        '"I","t2","test",7,true,3,"orphan"\r\n'  # no D before
    )
    events, errors = parse_csv(text, T2, options, source="p.csv")
    assert [e.after["id"] for e in events] == [2]
    assert [e.line for e in errors] == [1, 3]
    assert "is not followed by its new-value row" in str(errors[0])
    assert "has no old-value row" in str(errors[1])


def test_row_of_another_table_is_an_error() -> None:
    events, errors = parse_csv('"I","t9","test",1,"x"\r\n', T2, source="x.csv")
    assert events == [] and "row belongs to test.t9, but this file holds test.t2" in str(errors[0])


def test_records_accept_lf_only_and_keep_line_numbers() -> None:
    records = list(iter_records('"I","a\nb"\n\n"D","c"\n'))
    assert [(r.line, [f.text for f in r.fields]) for r in records] == [(1, ["I", "a\nb"]), (4, ["D", "c"])]


@pytest.mark.parametrize(
    ("col", "text", "expected"),
    [
        (ColumnDef(name="c", type=MySQLType.BIGINT, unsigned=True), "18446744073709551615", 18446744073709551615),
        (ColumnDef(name="c", type=MySQLType.YEAR), "2024", 2024),
        (ColumnDef(name="c", type=MySQLType.FLOAT), "1.2345675e+06", 1234567.5),
        (ColumnDef(name="c", type=MySQLType.DECIMAL, precision=20, scale=6), "0.000000", "0.000000"),
        (ColumnDef(name="c", type=MySQLType.TIME, fsp=3), "-838:59:59.000", "-838:59:59.000"),
        (ColumnDef(name="c", type=MySQLType.BLOB), "6Zi/5pav", "阿斯".encode()),
        (ColumnDef(name="c", type=MySQLType.VARCHAR, binary=True), "AA==", b"\x00"),
    ],
)
def test_decode_value(col: ColumnDef, text: str, expected: object) -> None:
    assert decode_value(col, text) == expected


def test_decode_value_rejects_bad_base64() -> None:
    with pytest.raises(ValueError, match="not valid base64"):
        decode_value(ColumnDef(name="c", type=MySQLType.BLOB), "%%%")


@pytest.mark.parametrize(
    "options",
    [{"delimiter": ""}, {"delimiter": "abcd"}, {"quote": "''"}, {"delimiter": '"'}, {"null": ""}, {"delimiter": "\n"},
     {"binary-encoding-method": "base32"}, {"unknown": 1}],
)
def test_csv_options_are_validated(options: dict) -> None:
    with pytest.raises(ValueError):
        CsvOptions(**options)


# --------------------------------------------------------------------------------------------------
# Layout


def test_data_file_name() -> None:
    assert data_file_name(1) == "CDC00000000000000000001.csv"
    assert data_file_name(12, "json", 6) == "CDC000012.json"
    assert data_file_name(3, "csv", 30) == "CDC00000000000000000003.csv"


def _touch(root: Path, relpath: str, text: str = "") -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_data_files_are_ordered_like_the_storage_consumer(tmp_path: Path) -> None:
    for relpath in [
        "b/t/200/2024-05-10/CDC000001.csv",
        "a/t/100/2024-05-10/CDC000001.csv",  # numbering restarts in a new date directory
        "a/t/100/2024-05-09/CDC000002.csv",
        "a/t/100/2024-05-09/CDC000001.csv",
        "a/t/100/2024-05-09/meta/CDC.index",
        "a/p/100/7/2024-05-09/CDC00000000000000000001.json",
        "a/p/100/5/2024-05-09/CDC00000000000000000001.json",
        "a/t/100/CDC00001.csv",  # 5 digits: not a data file
        "a/t/meta/schema_100_0000000001.json",
        "a/t/100/2024-05-09/notes.txt",
        "a/u/100/CDC000001.csv",
    ]:
        _touch(tmp_path, relpath)
    layout = StorageLayout(tmp_path)
    files = layout.data_files(require_schema=False)
    assert [f.relpath for f in files] == [  # version, partition, date, schema, table, number
        "a/u/100/CDC000001.csv",
        "a/t/100/2024-05-09/CDC000001.csv",
        "a/t/100/2024-05-09/CDC000002.csv",
        "a/t/100/2024-05-10/CDC000001.csv",
        "a/p/100/5/2024-05-09/CDC00000000000000000001.json",
        "a/p/100/7/2024-05-09/CDC00000000000000000001.json",
        "b/t/200/2024-05-10/CDC000001.csv",
    ]
    first = files[1]
    assert (first.schema, first.table, first.version, first.partition, first.date, first.number, first.format) == (
        "a", "t", 100, None, "2024-05-09", 1, "csv"
    )
    assert files[4].partition == 5 and files[4].format == "json"
    assert [f.relpath for f in layout.data_files(since={f.relpath for f in files[:5]}, require_schema=False)] == [
        "a/p/100/7/2024-05-09/CDC00000000000000000001.json",
        "b/t/200/2024-05-10/CDC000001.csv",
    ]


def test_year_date_directories_need_the_separator(tmp_path: Path) -> None:
    _touch(tmp_path, "a/t/100/2024/CDC000001.csv")
    assert StorageLayout(tmp_path).data_files(require_schema=False)[0].partition == 2024
    year = StorageLayout(tmp_path, date_separator=DateSeparator.YEAR).data_files(require_schema=False)[0]
    assert (year.partition, year.date) == (None, "2024")


def test_checkpoint_ts(tmp_path: Path) -> None:
    layout = StorageLayout(tmp_path)
    assert layout.checkpoint_ts() is None
    (tmp_path / "metadata").write_text('{"checkpoint-ts":449119597363200000}')
    assert layout.checkpoint_ts() == 449119597363200000
    (tmp_path / "metadata").write_text('{"checkpoint":1}')
    with pytest.raises(SourceError, match="checkpoint-ts"):
        layout.checkpoint_ts()


def test_read_index(tmp_path: Path) -> None:
    _touch(tmp_path, "a/t/100/2024-05-09/CDC000002.csv")
    _touch(tmp_path, "a/t/100/2024-05-09/meta/CDC.index", "CDC000002.csv\n")
    layout = StorageLayout(tmp_path)
    [data_file] = layout.data_files(require_schema=False)
    assert layout.read_index(data_file) == "CDC000002.csv"


def test_schema_file_version_must_match_its_name(tmp_path: Path) -> None:
    _touch(tmp_path, "a/t/meta/schema_100_0000000001.json", json.dumps({"Table": "t", "Schema": "a", "TableVersion": 99}))
    with pytest.raises(SourceError, match="says table version 100 but its TableVersion is 99"):
        StorageLayout(tmp_path).table_versions()


def test_schema_file_location_must_match_its_content(tmp_path: Path) -> None:
    _touch(tmp_path, "a/t/meta/schema_100_0000000001.json", json.dumps({"Table": "x", "Schema": "a", "TableVersion": 100}))
    with pytest.raises(SourceError, match=r"describes 'a'.'x' but lies under a/t"):
        StorageLayout(tmp_path).schema_files()


def test_read_csv_data_file_with_given_table(tmp_path: Path) -> None:
    shutil.copy(CSV / "old_value.csv", tmp_path / "CDC000001.csv")
    data_file = DataFile(path=tmp_path / "CDC000001.csv", schema="test", table="t2", version=7, partition=None,
                         date=None, number=1, format="csv", relpath="test/t2/7/CDC000001.csv")
    options = CsvOptions(include_commit_ts=True, output_old_value=True, output_field_header=True)
    events, errors = read_data_file(data_file, T2, options)
    assert errors == []
    assert [e.table_version for e in events] == [7, 7, 7]  # the directory's version, not the definition's
    assert events[0].source == "test/t2/7/CDC000001.csv:2"


def test_read_canal_json_data_file(tmp_path: Path) -> None:
    raw = (INPUTS / "canal" / "storage_t3.json").read_bytes()
    lines = raw.split(b"\r\n")
    lines.insert(2, b'{"database":"test","table":"t3","type":"INSERT","es":1,"data":[{"id":"oops"}]}')
    (tmp_path / "CDC000001.json").write_bytes(b"\r\n".join(lines))
    data_file = DataFile(path=tmp_path / "CDC000001.json", schema="test", table="t3", version=9, partition=None,
                         date=None, number=1, format="json", relpath="test/t3/9/CDC000001.json")
    events, errors = read_data_file(data_file, T3)
    assert [e.op for e in events] == [Op.INSERT, Op.INSERT, Op.UPDATE, Op.DELETE]
    assert [e.source for e in events] == [f"test/t3/9/CDC000001.json:{n}" for n in (1, 2, 4, 5)]
    assert {e.table_version for e in events} == {9}
    [error] = errors
    assert (error.source, error.line) == ("test/t3/9/CDC000001.json", 3)
    assert str(error).startswith("test/t3/9/CDC000001.json:3: column 'id' of test.t3")


def test_invalid_utf8_makes_only_its_record_bad(tmp_path: Path) -> None:
    raw = b'"I","t2","test",2,"\xff"'
    (tmp_path / "CDC000001.csv").write_bytes(b'"I","t2","test",1,"ok"\r\n' + raw + b'\r\n"I","t2","test",3,"x"\r\n')
    data_file = DataFile(path=tmp_path / "CDC000001.csv", schema="test", table="t2", version=1, partition=None,
                         date=None, number=1, format="csv", relpath="x/CDC000001.csv")
    events, errors = read_data_file(data_file, T2)
    assert [e.after["id"] for e in events] == [1, 3]
    assert [(e.line, e.context["raw"]) for e in errors] == [(2, raw)] and "invalid UTF-8" in str(errors[0])


def test_a_truncated_line_does_not_swallow_the_next(tmp_path: Path) -> None:
    truncated = b'"I","t2","test",2,"hel'
    (tmp_path / "CDC000001.csv").write_bytes(b'"I","t2","test",1,"ok"\r\n' + truncated + b'\r\n"I","t2","test",3,"x"\r\n'
                                             b'"I","t2","test",4,"a\r\nb"\r\n')
    data_file = DataFile(path=tmp_path / "CDC000001.csv", schema="test", table="t2", version=1, partition=None,
                         date=None, number=1, format="csv", relpath="x/CDC000001.csv")
    events, errors = read_data_file(data_file, T2)
    assert [e.after["id"] for e in events] == [1, 3, 4] and events[2].after["v"] == "a\r\nb"
    assert [(e.line, e.context["raw"]) for e in errors] == [(2, truncated)]


# --------------------------------------------------------------------------------------------------
# Hand-written trees (schema files parsed by tabledef.storage)

V_DB, V1, V2 = 449118600000000000, 449118600000000001, 449118657019445253


def _ts(n: int) -> int:
    return 449118655446581249 + n * 1000003


@pytest.fixture
def tabledef_storage() -> object:
    return pytest.importorskip("avro_registry_sink.tabledef.storage")


def test_csv_tree_table_versions_and_ddls(tabledef_storage: object) -> None:
    layout = StorageLayout(INPUTS / "storage_csv")
    versions = layout.table_versions()
    assert list(versions) == [("test", "t2", V1), ("test", "t2", V2)]
    assert [c.name for c in versions[("test", "t2", V1)].columns] == ["id", "v"]
    assert [c.name for c in versions[("test", "t2", V2)].columns] == ["id", "v", "w"]
    assert versions[("test", "t2", V2)].version == V2
    assert [(d.schema, d.table, d.commit_ts, d.kind) for d in layout.ddl_events()] == [
        ("test", "", V_DB, "1"),
        ("test", "t2", V1, "3"),
        ("test", "t2", V2, "5"),
    ]
    assert layout.ddl_events()[2].query == "ALTER TABLE `test`.`t2` ADD COLUMN `w` INT DEFAULT 0"
    assert layout.checkpoint_ts() == _ts(8)


def test_csv_tree_events_in_consumer_order(tabledef_storage: object) -> None:
    layout = StorageLayout(INPUTS / "storage_csv")
    events, errors = layout.read_all(CsvOptions(include_commit_ts=True))
    assert errors == []
    got = [(e.op, e.table_version, e.commit_ts, (e.after or e.before)) for e in events]
    assert got == [
        (Op.INSERT, V1, _ts(0), {"id": 1, "v": "one"}),
        (Op.INSERT, V1, _ts(1), {"id": 2, "v": "two"}),
        (Op.UPDATE, V1, _ts(2), {"id": 1, "v": "uno"}),
        (Op.DELETE, V1, _ts(3), {"id": 2, "v": "two"}),
        (Op.INSERT, V1, _ts(4), {"id": 3, "v": "three"}),  # next date directory, numbering restarted
        (Op.INSERT, V2, _ts(6), {"id": 4, "v": "four", "w": 40}),  # after the ADD COLUMN
        (Op.UPDATE, V2, _ts(7), {"id": 1, "v": "uno", "w": 7}),
    ]
    assert events[4].source == f"test/t2/{V1}/2024-05-10/CDC000001.csv:1"


def test_data_files_wait_for_their_schema_file(tabledef_storage: object, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    shutil.copytree(INPUTS / "storage_csv", root)
    [v2_schema] = (root / "test" / "t2" / "meta").glob(f"schema_{V2}_*.json")
    v2_schema.unlink()
    layout = StorageLayout(root)
    assert {f.version for f in layout.data_files()} == {V1}
    pending = [f for f in layout.data_files(require_schema=False) if f.version == V2]
    assert len(pending) == 1
    assert layout.table_for(pending[0]).version == V1  # the newest definition before it
    events, errors = layout.read_data_file(pending[0], options=CsvOptions(include_commit_ts=True))
    assert events == [] and "expected 6 fields (4 TiCDC meta fields + 2 columns of test.t2), got 7" in str(errors[0])


def test_partitioned_canal_tree(tabledef_storage: object) -> None:
    layout = StorageLayout(INPUTS / "storage_canal")
    files = layout.data_files()
    assert [(f.partition, f.date, f.number, f.format) for f in files] == [
        (106, "2024-05-09", 1, "json"),
        (107, "2024-05-09", 1, "json"),
    ]
    events, errors = layout.read_all()
    assert errors == []
    assert [(e.op, e.commit_ts, e.after) for e in events] == [
        (Op.INSERT, _ts(0), {"id": 10, "amount": "9.99"}),
        (Op.UPDATE, _ts(2), {"id": 10, "amount": "10.00"}),
        (Op.INSERT, _ts(1), {"id": 20, "amount": "1.00"}),  # other partition: ordered by partition, then ts
    ]
    assert events[1].before == {"id": 10, "amount": "9.99"}
    assert layout.checkpoint_ts() == _ts(3)


def test_errors_and_events_pickle_for_spark() -> None:
    import pickle

    events, errors = parse_csv(read("bad_lines.csv"), T2, CsvOptions(include_commit_ts=True), source="bad.csv")
    error = pickle.loads(pickle.dumps(errors[2]))
    assert isinstance(error, SourceError)
    assert (error.source, error.line, error.column) == ("bad.csv", 4, "id")
    assert str(error) == str(errors[2])
    assert pickle.loads(pickle.dumps(events)) == events
    assert pickle.loads(pickle.dumps(CsvOptions(delimiter="|"))) == CsvOptions(delimiter="|")


def test_field_count_mismatch_names_the_csv_settings_that_would_explain_it():
    from avro_registry_sink.formats.csv import CsvOptions, _meta_hint

    hint = _meta_hint(CsvOptions(include_commit_ts=True), 1)
    assert "output-old-value=true" in hint and "output-handle-key=true" in hint and "include-commit-ts" not in hint
    assert "without include-commit-ts" in _meta_hint(CsvOptions(include_commit_ts=True), -1)
    assert _meta_hint(CsvOptions(), 5) == ""


# --------------------------------------------------------------------------------------------------
# Schema files against the checksum in their name, also when rewritten while a layout is in use

CK_V = 449118600000000001


def _ck_table(name: str, columns: str = "id INT NOT NULL PRIMARY KEY, v VARCHAR(8)", version: int = CK_V) -> TableDef:
    from avro_registry_sink.tabledef.ddl import parse_ddl

    return parse_ddl(f"CREATE TABLE a.{name} ({columns})")[0].model_copy(update={"version": version})


def _rewrite(path: Path, text: str) -> None:
    """Rewrite a file in place, its modification time moved on (as any later write moves it)."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_a_schema_file_whose_content_does_not_match_its_name_stops_only_its_version(tmp_path: Path) -> None:
    from avro_registry_sink.tabledef.storage import write_table_schema_file

    t_file = write_table_schema_file(_ck_table("t"), tmp_path)
    write_table_schema_file(_ck_table("u"), tmp_path)
    _rewrite(t_file, t_file.read_text(encoding="utf-8").replace('"v"', '"w"'))  # a column renamed in place
    tables, broken = StorageLayout(tmp_path).table_versions_and_errors()
    assert list(tables) == [("a", "u", CK_V)]
    error = broken[("a", "t", CK_V)]
    relpath = t_file.relative_to(tmp_path).as_posix()
    assert error.message.startswith(f"{relpath}: refused: the checksum in its name is ")
    assert "changed after TiCDC wrote it" in error.message and error.context["reason"] == "checksum mismatch"
    with pytest.raises(SourceError, match="checksum in its name"):
        StorageLayout(tmp_path).table_versions()


def test_a_schema_file_rewritten_while_the_layout_is_in_use_is_checked_again(tmp_path: Path) -> None:
    from avro_registry_sink.tabledef.storage import write_table_schema_file

    path = write_table_schema_file(_ck_table("t"), tmp_path)
    original = path.read_text(encoding="utf-8")
    layout = StorageLayout(tmp_path)  # one layout for a whole run, as the job keeps it
    first = layout.table_versions_and_errors()[0][("a", "t", CK_V)]
    assert layout.table_versions_and_errors()[0][("a", "t", CK_V)] is first  # unchanged: not read again

    _rewrite(path, original.replace('"v"', '"w"'))  # same name, a column renamed
    tables, broken = layout.table_versions_and_errors()
    assert tables == {} and broken[("a", "t", CK_V)].context["reason"] == "checksum mismatch"

    _rewrite(path, original)  # restored: the definition read first, the very same object
    assert layout.table_versions_and_errors()[0][("a", "t", CK_V)] is first

    # the columns in another order: the checksum (over the columns sorted by name) still matches, but the
    # run read another definition under this name before
    content = json.loads(original)
    content["TableColumns"].reverse()
    _rewrite(path, json.dumps(content, indent=4))
    tables, broken = layout.table_versions_and_errors()
    error = broken[("a", "t", CK_V)]
    assert tables == {} and error.context["reason"] == "changed after read"
    assert "the columns (v, id) instead of (id, v)" in error.message
    # a new run reads the file as it now is
    assert [c.name for c in StorageLayout(tmp_path).table_versions()[("a", "t", CK_V)].columns] == ["v", "id"]


def test_resolve_holds_the_files_of_a_version_whose_schema_file_was_rewritten_between_batches(tmp_path: Path) -> None:
    from avro_registry_sink.spark.sources.sources import resolve_storage_files
    from avro_registry_sink.tabledef.storage import write_table_schema_file

    t_file = write_table_schema_file(_ck_table("t"), tmp_path)
    write_table_schema_file(_ck_table("u"), tmp_path)
    layout = StorageLayout(tmp_path)
    completed: dict = {}

    def batch(*relpaths: str):
        for relpath in relpaths:
            _touch(tmp_path, relpath, f'"I","{relpath.split("/")[1]}","a",1,"x"\r\n')
        return resolve_storage_files(layout, [layout.location.hadoop_uri(r) for r in relpaths], None, completed)

    first = batch(f"a/t/{CK_V}/CDC000001.csv")
    assert [f[0] for f in first.files] == [f"a/t/{CK_V}/CDC000001.csv"] and not first.held and not first.broken

    _rewrite(t_file, t_file.read_text(encoding="utf-8").replace('"v"', '"w"'))
    second = batch(f"a/t/{CK_V}/CDC000002.csv", f"a/u/{CK_V}/CDC000001.csv")
    assert [f[0] for f in second.files] == [f"a/u/{CK_V}/CDC000001.csv"]  # the other table goes on
    relpath = t_file.relative_to(tmp_path).as_posix()
    assert list(second.broken) == [relpath] and "refused" in second.broken[relpath]
    assert list(second.held) == [f"a/t/{CK_V}/CDC000002.csv"]
    assert second.held[f"a/t/{CK_V}/CDC000002.csv"].startswith(
        f"its table version's schema file cannot be used: {relpath}: refused")


def test_a_data_file_is_not_read_with_an_older_definition_past_a_refused_one(tmp_path: Path) -> None:
    from avro_registry_sink.spark.sources.sources import resolve_storage_files
    from avro_registry_sink.tabledef.storage import write_table_schema_file

    write_table_schema_file(_ck_table("t"), tmp_path)
    v2 = write_table_schema_file(_ck_table("t", "id INT NOT NULL PRIMARY KEY, v VARCHAR(8), x INT", CK_V + 5), tmp_path)
    _rewrite(v2, v2.read_text(encoding="utf-8").replace('"x"', '"y"'))
    later = f"a/t/{CK_V + 9}/CDC000001.csv"  # a version directory without its own schema file
    for relpath in (f"a/t/{CK_V}/CDC000001.csv", later):
        _touch(tmp_path, relpath)
    layout = StorageLayout(tmp_path)
    files = resolve_storage_files(layout, [layout.location.hadoop_uri(r) for r in
                                           (f"a/t/{CK_V}/CDC000001.csv", later)])
    assert [f[0] for f in files.files] == [f"a/t/{CK_V}/CDC000001.csv"]
    assert list(files.held) == [later] and "refused" in files.held[later]
