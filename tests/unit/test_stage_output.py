"""What the encode stage hands on: the file sink's lines built from Arrow, and the tally of a batch.

The lines must be, byte for byte, what ``json.dumps(record, separators=(",", ":"))`` gives (the file
sink's documented format, which ``read_file_sink`` and users parse), for any record: nulls in every
nullable field, empty and long byte strings, sliced Arrow batches.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from avro_registry_sink.model import FILE_LINE_COLUMNS, FILE_LINES_DDL, KAFKA_SCHEMA
from avro_registry_sink.spark.stages.file_lines import hex_text, lines_of
from avro_registry_sink.spark.stages.tally import StageOutput, TallyParam, empty_tally, tally_of
from tests.support.depth import examples

_bytes = st.one_of(st.none(), st.binary(max_size=40))
_header = st.fixed_dictionaries({"key": st.sampled_from(["op", "commit_ts", "x.y-z_1"]), "value": _bytes})
_record = st.fixed_dictionaries({
    "topic": st.sampled_from(["shop_orders", "a.b-c_d", "t"]),
    "partition": st.one_of(st.none(), st.integers(0, 2**31 - 1)),
    "key": _bytes,
    "value": _bytes,
    "headers": st.one_of(st.none(), st.lists(_header, max_size=3)),
    "commit_ts": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
})


def _reference(record: dict, batch_id: int) -> str:
    def text(value: bytes | None) -> str | None:
        return None if value is None else value.hex()

    return json.dumps({
        "topic": record["topic"], "partition": record["partition"], "key": text(record["key"]),
        "value": text(record["value"]),
        "headers": [{"key": h["key"], "value": text(h["value"])} for h in record["headers"] or ()],
        "commit_ts": record["commit_ts"], "batch": batch_id,
    }, separators=(",", ":"))


@settings(max_examples=examples(200), deadline=None)
@given(records=st.lists(_record, min_size=1, max_size=30), start=st.integers(0, 29), batch_id=st.integers(0, 10**9))
def test_lines_equal_json_dumps_of_each_record(records, start, batch_id):
    batch = pa.RecordBatch.from_pylist(records, schema=KAFKA_SCHEMA)
    part = batch.slice(min(start, len(records) - 1))  # Arrow offsets: a slice starts mid-buffer
    assert lines_of(part, batch_id).to_pylist() == [_reference(r, batch_id) for r in part.to_pylist()]


def test_hex_text_keeps_nulls_and_offsets():
    values = pa.array([b"\x00\xff", None, b"", b"\x10"], pa.binary())
    assert hex_text(values).to_pylist() == ["00ff", None, "", "10"]
    assert hex_text(values.slice(1)).to_pylist() == [None, "", "10"]


def _encoded(errors: list[str | None]) -> pa.RecordBatch:
    n = len(errors)
    records = pa.RecordBatch.from_pylist(
        [{"topic": "t" if i % 2 else "u", "partition": 0, "key": b"k", "value": None if i % 3 == 0 else b"v",
          "headers": [], "commit_ts": 100 + i} for i in range(n)], schema=KAFKA_SCHEMA)
    return pa.RecordBatch.from_arrays(
        [*records.columns, pa.array([1] * n, pa.int64()), pa.array(["f"] * n), pa.array(range(1, n + 1), pa.int64()),
         pa.array(errors, pa.string())],
        names=[*KAFKA_SCHEMA.names, "order_version", "order_file", "order_line", "error"])


def test_tally_counts_records_per_topic_and_keeps_the_errors():
    batch = _encoded([None, None, '{"reason": "bad"}', None, None, None])
    tally = tally_of(batch)
    # rows 0..5, row 2 refused: topic u = rows 0, 4 (row 0 a tombstone); topic t = rows 1, 3, 5 (row 3 a tombstone)
    # and the bytes of key and value: u = 3, t = 5
    assert tally == {"topics": {"u": [2, 1, 104, 3], "t": [3, 1, 105, 5]}, "errors": ['{"reason": "bad"}']}
    merged = TallyParam().addInPlace(TallyParam().addInPlace(empty_tally(), tally), tally)
    assert merged == {"topics": {"u": [4, 2, 104, 6], "t": [6, 2, 105, 10]}, "errors": ['{"reason": "bad"}'] * 2}


class _Accumulator:
    def __init__(self) -> None:
        self.value = empty_tally()

    def add(self, other) -> None:
        self.value = TallyParam().addInPlace(self.value, other)


def test_file_lines_output_leaves_refused_rows_to_the_tally():
    batch = _encoded([None, '{"reason": "bad"}', None])
    accumulator = _Accumulator()
    run, ddl = StageOutput(accumulator, lines_of_batch=7).wrap(lambda batches: iter(batches), "ignored")
    out = list(run(iter([batch])))
    assert ddl == FILE_LINES_DDL
    assert [b.schema.names for b in out] == [list(FILE_LINE_COLUMNS)]
    assert out[0].column("order_line").to_pylist() == [1, 3]
    assert [json.loads(line)["batch"] for line in out[0].column("line").to_pylist()] == [7, 7]
    assert accumulator.value["errors"] == ['{"reason": "bad"}']
    assert sum(n for n, *_ in accumulator.value["topics"].values()) == 2


def test_lines_need_a_tally():
    with pytest.raises(ValueError, match="tally"):
        StageOutput(None, lines_of_batch=1)
