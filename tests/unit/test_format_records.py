"""formats.records.parse_records: the one entry point per format (what a replay feeds dead letters to)."""

from __future__ import annotations

import json

import pytest

from avro_registry_sink.formats.records import parse_records, raw_of
from avro_registry_sink.tabledef.ddl import parse_ddl

T = parse_ddl("CREATE TABLE s.t (id INT PRIMARY KEY, n SMALLINT NULL)")[0].model_copy(update={"version": 5})


def _canal(row_id, n="1"):
    return json.dumps({"database": "s", "table": "t", "type": "INSERT", "isDdl": False, "pkNames": ["id"],
                       "mysqlType": {"id": "int", "n": "smallint"}, "data": [{"id": str(row_id), "n": n}],
                       "old": None, "_tidb": {"commitTs": 100 + row_id}}).encode()


def _debezium(row_id):
    return json.dumps({"payload": {"op": "c", "before": None, "after": {"id": row_id, "n": 1},
                                   "source": {"db": "s", "table": "t", "commit_ts": 100 + row_id}}}).encode()


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    ("csv", [b'"I","t","s",1,2', b'"I","t","s",3,\\N'], [b'"I","t","s",x,1', b'"I","t","s"', b'"I","t","s",4,"\xff"']),
    ("canal-json", [_canal(1), _canal(2)], [b"oops", _canal(3, n="x"), b'{"data": 1}', b"\xff"]),
    ("debezium-json", [_debezium(1), _debezium(2)], [b"[1]", b'{"payload": {"op": "c", "source": {}}}', b"\xff"]),
])
def test_every_record_gives_rows_or_one_dead_letter(fmt, good, bad):
    history = {("s", "t"): [(5, T)]} if fmt != "csv" else T
    raws = good + bad
    got = parse_records(fmt, raws, table_or_history=history, origin=[f"f:{i}" for i in range(1, len(raws) + 1)])
    assert got.rows_in == len(raws)
    assert got.changes.column("source").to_pylist() == [f"f:{i}" for i in range(1, len(good) + 1)]
    assert [b["source"] for b in got.bad] == [f"f:{i}" for i in range(len(good) + 1, len(raws) + 1)]
    assert [raw_of(b) for b in got.bad] == bad  # what a replay feeds back in
    assert all(b["format"] == fmt and b["reason"] and b["message"] and b["id"] for b in got.bad)
    # replaying a dead letter through the same function: same verdict, nothing else
    again = parse_records(fmt, [raw_of(got.bad[0])], table_or_history=history, origin=[got.bad[0]["source"]])
    assert again.changes.num_rows == 0 and [b["id"] for b in again.bad] == [got.bad[0]["id"]]


def test_a_whole_csv_file_reports_lines():
    got = parse_records("csv", b'"I","t","s",1,2\r\n"I","t","s",x,2\r\n"I","t","s",3,4\r\n', table_or_history=T,
                        origin="shop/t/5/CDC1.csv")
    assert got.changes.column("after").to_pylist() == ['{"id":1,"n":2}', '{"id":3,"n":4}']
    assert [(b["file"], b["line"], raw_of(b)) for b in got.bad] == [("shop/t/5/CDC1.csv", 2, b'"I","t","s",x,2')]
