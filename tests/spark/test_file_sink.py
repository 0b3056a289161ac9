"""The file sink as Spark's text writer writes it: layout, content, order, atomic and replaceable batches."""

from __future__ import annotations

import json

import pytest

from avro_registry_sink.model import KAFKA_DDL
from avro_registry_sink.spark.sinks.sinks import STAGING_DIR, FileSink, read_file_sink

pytestmark = pytest.mark.spark


def _records(spark, rows):
    return spark.createDataFrame(rows, KAFKA_DDL).repartition(2, "topic", "partition").sortWithinPartitions(
        "topic", "partition", "commit_ts")


ROWS = [
    ("shop_orders", 0, b"\x00\x00\x00\x00\x01\x02", b"\x00\x00\x00\x00\x02\x04ab", [("op", b"c")], 10),
    ("shop_orders", 0, b"\x00\x00\x00\x00\x01\x02", None, [], 11),  # a tombstone after its insert
    ("shop_orders", 1, b"\x00\x00\x00\x00\x01\x04", b"\x00\x00\x00\x00\x02\x06", [("op", None)], 12),
    ("crm_events", 2, b"\x00\x00\x00\x00\x03\x08", b"\x00\x00\x00\x00\x04", [], None),
]


def test_layout_and_lines_are_the_per_row_writers(spark, tmp_path):
    FileSink(tmp_path).write(_records(spark, ROWS), batch_id=7)
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.jsonl"))
    assert files and all(f.split("/")[0] in ("shop_orders", "crm_events") for f in files)
    assert all(f.split("/")[1].startswith("batch-0000000007-part-0000") for f in files)
    assert not (tmp_path / STAGING_DIR).exists()
    lines = {line for f in files for line in (tmp_path / f).read_text().splitlines()}
    expected = {json.dumps({
        "topic": t, "partition": p, "key": k.hex(), "value": None if v is None else v.hex(),
        "headers": [{"key": hk, "value": None if hv is None else hv.hex()} for hk, hv in h],
        "commit_ts": ts, "batch": 7}, separators=(",", ":")) for t, p, k, v, h, ts in ROWS}
    assert lines == expected
    records = list(read_file_sink(tmp_path, "shop_orders"))
    assert [(r.partition, r.commit_ts, r.is_tombstone) for r in records] == [(0, 10, False), (0, 11, True),
                                                                            (1, 12, False)]
    assert records[0].headers == (("op", b"c"),) and records[2].headers == (("op", None),)


def test_a_rerun_batch_replaces_its_files_and_unfinished_batches_are_invisible(spark, tmp_path):
    sink = FileSink(tmp_path.as_uri())  # a Hadoop URI, as s3a:// or hdfs:// would be
    sink.write(_records(spark, ROWS), batch_id=0)
    sink.write(_records(spark, ROWS[3:]), batch_id=1)
    sink.write(_records(spark, ROWS[:1]), batch_id=0)  # a replay of batch 0 writes less
    assert [(r.batch, r.commit_ts) for r in read_file_sink(tmp_path)] == [(1, None), (0, 10)]
    # a writer that died between Spark's commit and the renames leaves its staged files: not complete
    left = tmp_path / STAGING_DIR / "batch-0000000001" / "topic=crm_events"
    left.mkdir(parents=True)
    (left / "part-00000-x.c000.txt").write_text("{}\n")
    assert [r.batch for r in read_file_sink(tmp_path)] == [0]
    sink.write(_records(spark, ROWS[3:]), batch_id=1)  # its rerun publishes it
    assert [r.batch for r in read_file_sink(tmp_path)] == [1, 0]
    assert not (tmp_path / STAGING_DIR).exists()


def test_each_file_keeps_the_rows_order(spark, tmp_path):
    """The writer sorts by topic; the rows of each (topic, Spark partition) stay in the order they came in."""
    rows = [("t", 0, i.to_bytes(4, "big"), b"v", [], 1000 - i) for i in range(2000)]
    records = spark.createDataFrame(rows, KAFKA_DDL).coalesce(1)
    FileSink(tmp_path).write(records, batch_id=2)
    files = sorted(p.name for p in (tmp_path / "t").iterdir())
    assert files == ["batch-0000000002-part-00000.jsonl"]  # no .crc or other side files either
    assert [r.commit_ts for r in read_file_sink(tmp_path, "t")] == [1000 - i for i in range(2000)]


def test_an_empty_batch_writes_nothing(spark, tmp_path):
    FileSink(tmp_path).write(_records(spark, []), batch_id=3)
    assert list(read_file_sink(tmp_path)) == []
    assert not (tmp_path / STAGING_DIR).exists()
