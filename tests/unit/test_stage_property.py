"""The job's one encode path (``spark.stages.stage.encode_change_batch``) against the per-row reference.

Rows travel as change rows (JSON images, as the parse stages produce them); whatever path the stage takes
(vectorized JSON parse, or row by row for texts it cannot take), each row's key and value must be the
bytes the reference :class:`~tests.support.reference_encoder.RowEncoder` writes for the same image, and a row
the reference refuses must come out alone with an ``error``, the others unaffected.
"""

from __future__ import annotations

import decimal
import json

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avro_registry_sink.changes import dump_image, load_image
from avro_registry_sink.errors import AvroSinkError
from avro_registry_sink.model import CHANGE_SCHEMA, Op
from avro_registry_sink.routing.rules import Route
from avro_registry_sink.spark.stages.plan import StagePlan
from avro_registry_sink.spark.stages.stage import encode_change_batch
from tests.support.depth import examples
from tests.support.reference_encoder import RowEncoder
from tests.unit.test_columnar import scenarios


def _plain(value):
    return str(value) if isinstance(value, decimal.Decimal) else value


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenario=scenarios(), spoil=st.lists(st.integers(0, 24), max_size=3))
def test_the_stage_equals_the_reference_row_by_row(scenario, spoil):
    plan, batch, ops, ts = scenario
    table = plan.table
    images = [dump_image({k: _plain(v) for k, v in row.items()}) for row in batch.to_pylist()]
    for i in spoil:  # rows the reference refuses: a missing key column, or text that is no JSON object
        if i < len(images):
            images[i] = "{}" if i % 2 else "[1, 2]"
    rows = []
    for image, op, commit_ts in zip(images, ops, ts, strict=False):
        deleted = Op.parse(op) is Op.DELETE
        rows.append({"schema": table.schema_name, "table": table.table, "table_version": table.version, "op": op,
                     "commit_ts": commit_ts, "before": image if deleted else None,
                     "after": None if deleted else image, "source": f"f:{len(rows) + 1}"})
    route = Route(schema=table.schema_name, table=table.table, topic="t", key_subject="t-key", value_subject="t-value")
    plans = {(table.schema_name, table.table, table.version): StagePlan(plan, "t", 1, route)}
    out = encode_change_batch(pa.RecordBatch.from_pylist(rows, schema=CHANGE_SCHEMA), plans, isolate=True).to_pylist()

    reference = RowEncoder(plan)
    assert len(out) == len(rows)
    for row, record in zip(rows, out, strict=True):
        try:
            image = load_image(row["before"] or row["after"], table)
            key, value = reference.encode(row["op"], image, row["commit_ts"])
        except (AvroSinkError, ValueError, TypeError):
            assert record["error"] is not None and record["key"] is None and record["value"] is None
            assert json.loads(record["error"])["source"] == row["source"]
            continue
        assert record["error"] is None, record["error"]
        assert (record["key"], record["value"], record["commit_ts"]) == (key, value, row["commit_ts"])
