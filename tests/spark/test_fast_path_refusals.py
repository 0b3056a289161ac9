"""A row the encoder refuses in a CSV data file read by the vectorized path: it is set aside alone, named by
the line its record starts on, and the rest of its file stays on the vectorized path (the job's Python
workers count the files read record by record at the ``storage.record-by-record`` probe)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from avro_registry_sink.failpoints import COUNTS_ENV, ENV, passes
from avro_registry_sink.formats.csv import CsvOptions
from avro_registry_sink.settings.config import SinkConfig
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from avro_registry_sink.tabledef.ddl import parse_ddl
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.support.job import decode_file_sink

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore::FutureWarning")]

PROBE = "storage.record-by-record"
TABLE = parse_ddl("CREATE TABLE shop.t (id INT NOT NULL PRIMARY KEY, code VARCHAR(10) NOT NULL, v INT NULL)")[0]
VERSION = 449640294073761793
TS = 449640297946939000


@pytest.fixture()
def probe(spark, tmp_path):
    """Counts the passes of the probe in every process of the job (driver and Python workers)."""
    counts = tmp_path / "probe-counts"
    counts.mkdir()
    saved = {k: os.environ.get(k) for k in (ENV, COUNTS_ENV)}
    settings = {ENV: f"{PROBE}=raise@1000000000", COUNTS_ENV: str(counts)}  # counted, never acted on
    os.environ.update(settings)
    spark.sparkContext.environment.update(settings)  # new Python workers get them
    yield lambda: passes(PROBE)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
        spark.sparkContext.environment.pop(key, None)


def _tree(root: Path, lines: list[str]) -> str:
    table = TABLE.model_copy(update={"version": VERSION})
    write_table_schema_file(table, root)
    relpath = f"shop/t/{VERSION}/CDC00000000000000000001.csv"
    (root / relpath).parent.mkdir(parents=True, exist_ok=True)
    (root / relpath).write_bytes("".join(line + "\r\n" for line in lines).encode())
    return relpath


def _run(spark, registry, root: Path, work: Path):
    options = JobOptions(source=parse_source(str(root)), checkpoint=work / "ck",
                         sink=SinkConfig(scheme="file", path=str(work / "out")),
                         csv_options=CsvOptions(include_commit_ts=True, output_old_value=True), tables=(TABLE,))
    result = run_job(spark, options, registry=registry)
    return result, decode_file_sink(work / "out", registry).get("shop_t", [])


ROWS = [
    f'"I","t","shop",{TS + 1},false,1,"a",10',
    f'"D","t","shop",{TS + 2},true,1,"a",10',  # an UPDATE written as two rows (output-old-value)
    f'"I","t","shop",{TS + 2},true,1,"b",11',
    f'"I","t","shop",{TS + 3},false,2,\\N,20',  # NULL in the NOT NULL column: the encoder refuses it
    f'"I","t","shop",{TS + 4},false,3,"c",30',
    f'"D","t","shop",{TS + 5},true,3,"c",30',
    f'"I","t","shop",{TS + 5},true,3,"c",\\N',
]


def test_a_refused_row_leaves_the_rest_of_its_file_on_the_vectorized_path(spark, registry, tmp_path, probe):
    relpath = _tree(tmp_path / "in", ROWS)

    result, records = _run(spark, registry, tmp_path / "in", tmp_path)

    assert probe() == 0  # no file was read record by record
    (letter,) = result.bad_input
    assert letter["source"] == f"{relpath}:4" and letter["column"] == "code", letter
    assert [(ts - TS, key["id"], value) for _, ts, key, value in records] == [
        (1, 1, {"id": 1, "code": "a", "v": 10}), (2, 1, {"id": 1, "code": "b", "v": 11}),
        (4, 3, {"id": 3, "code": "c", "v": 30}), (5, 3, {"id": 3, "code": "c", "v": None})]


def test_with_a_value_over_two_lines_the_file_goes_record_by_record_and_names_the_same_row(
        spark, registry, tmp_path, probe):
    # a quoted value spanning lines: the vectorized reader knows each record's position, not its line
    rows = [ROWS[0].replace('"a"', '"a\r\nz"'), *ROWS[1:]]
    relpath = _tree(tmp_path / "in", rows)

    result, records = _run(spark, registry, tmp_path / "in", tmp_path)

    assert probe() == 1  # this file was read record by record
    (letter,) = result.bad_input
    assert letter["source"] == f"{relpath}:5" and letter["column"] == "code", letter  # one line later
    assert [key["id"] for _, _, key, _ in records] == [1, 1, 3, 3]
