"""The vectorized CSV reader (``formats.csv.read_columns``) gives the bytes the reference parser gives.

Each CSV data file of the demo tree (quoted strings with delimiters, quotes and CRLF inside, NULL and the
string ``\\N``, base64 binary, DECIMAL, ENUM/SET, JSON, UPDATE pairs of ``output-old-value``, a key change)
is read both ways and encoded: the vectorized path's keys and values must equal those of the reference
path (``parse_csv`` -> change rows -> the stage), row for row; files the vectorized reader declines go to
the reference as a whole.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from avro_registry_sink.changes import split_key_change
from avro_registry_sink.encoding.columnar import ColumnarEncoder
from avro_registry_sink.encoding.plan import EncodingPlan
from avro_registry_sink.formats.csv import CsvOptions, parse_csv, read_columns
from avro_registry_sink.model import CHANGE_SCHEMA
from avro_registry_sink.routing.rules import Route
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import EncodingOptions
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.stages.plan import StagePlan
from avro_registry_sink.spark.stages.stage import encode_change_batch
from avro_registry_sink.table import TableDef


def _plan(table: TableDef) -> StagePlan:
    encoding = EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions(enable_tidb_extension=True)), 7, 8)
    route = Route(schema=table.schema_name, table=table.table, topic="t", key_subject="t-key", value_subject="t-value")
    return StagePlan(encoding, "t", 1, route)


def _reference(text: str, table: TableDef, options: CsvOptions, plan: StagePlan) -> list[tuple]:
    events, errors = parse_csv(text, table, options)
    assert not errors
    rows = [dict(zip(CHANGE_SCHEMA.names, part.to_row(), strict=False)) for e in events for part in split_key_change(e, table)]
    out = encode_change_batch(pa.RecordBatch.from_pylist(rows, schema=CHANGE_SCHEMA), {plan.key: plan})
    return list(zip(out.column("key").to_pylist(), out.column("value").to_pylist(), out.column("commit_ts").to_pylist(), strict=True))


def _vectorized(data: bytes, table: TableDef, options: CsvOptions, plan: StagePlan) -> list[tuple] | None:
    columns = read_columns(data, table, options)
    if columns is None:
        return None
    ops = pa.DictionaryArray.from_arrays(pa.array(columns.op_codes.astype(np.int8)), pa.array(["insert", "update", "delete"]))
    keys, values = ColumnarEncoder(plan.encoding).encode(columns.values, ops=ops,
                                                         commit_ts=pa.array(columns.commit_ts, pa.int64()))
    return list(zip(keys.to_pylist(), values.to_pylist(), columns.commit_ts.tolist(), strict=True))


@pytest.mark.parametrize("old_value", [True, False])
def test_demo_files_encode_the_same_both_ways(tmp_path, old_value):
    options = CsvOptions(**{"include-commit-ts": True, "output-old-value": old_value})
    manifest = generate_demo(tmp_path, rows_per_table=40, csv_options=options)
    files = [f for f in manifest.data_files if f.endswith(".csv")]
    taken = 0
    for relpath in files:
        schema, table_name, version = relpath.split("/")[:3]
        table = manifest.table_versions[(schema, table_name, int(version))]
        hint = manifest.tables[f"{schema}.{table_name}"]
        table = table.model_copy(update={"columns": tuple(
            c.model_copy(update={"elements": next(h.elements for h in hint.columns if h.name == c.name)})
            if any(h.name == c.name for h in hint.columns) else c for c in table.columns),
            "unique_keys": hint.unique_keys if not table.primary_key else table.unique_keys})
        plan = _plan(table)
        data = (tmp_path / relpath).read_bytes()
        fast = _vectorized(data, table, options, plan)
        if fast is None:
            continue
        taken += 1
        assert fast == _reference(data.decode("utf-8"), table, options, plan), relpath
    assert taken == len(files)  # every demo file takes the vectorized path


@pytest.mark.parametrize("text", [
    '"I","t","s",x\r\n',  # not an integer
    '"I","t","s",1\r\n"I","t","s"\r\n',  # a short record
    '"I","t","s",1,2\r\n',  # a long record
    '"X","t","s",1\r\n',  # an unknown op
    '"I","t","other",1\r\n',  # another table
    '"I","t","s",1\r\n"I","t","s",\xff\r\n',  # invalid UTF-8
    'ticdc-meta$operation,ticdc-meta$table,ticdc-meta$schema,id\r\n"I","t","s",1\r\n',  # a header
])
def test_files_the_reference_must_read_are_declined(text):
    from avro_registry_sink.tabledef.ddl import parse_ddl

    table = parse_ddl("CREATE TABLE s.t (id INT PRIMARY KEY)")[0]
    assert read_columns(text.encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff"), table,
                        CsvOptions()) is None
