"""``spark.stages.plan_cache``: a running stream's ``mapInArrow`` UDF made once per content."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from avro_registry_sink.spark.stages import plan_cache


def _tagged(tag: str) -> Any:
    def run(batches: Any) -> Any:
        for batch in batches:
            yield pa.RecordBatch.from_pydict({"names": [f"{tag}:{','.join(batch.schema.names)}"] * batch.num_rows})

    return run


def test_a_function_that_pickles_alike_reuses_its_udf_and_sees_only_its_columns(spark):
    df = spark.range(3).selectExpr("id", "id * 2 AS b", "'x' AS c")
    plan_cache._UDFS.clear()  # (a cache: the other tests' UDFs may fill it)
    before = 0
    first = plan_cache.map_in_arrow(df, _tagged("one"), "names string", ["c", "b"]).collect()
    again = plan_cache.map_in_arrow(df, _tagged("one"), "names string", ["c", "b"]).collect()  # a new closure
    assert [r.names for r in first] == [r.names for r in again] == ["one:c,b"] * 3
    assert len(plan_cache._UDFS) == before + 1
    kept = next(reversed(plan_cache._UDFS.values()))[1]
    other = plan_cache.map_in_arrow(df, _tagged("two"), "names string", ["b"]).collect()  # other content
    assert [r.names for r in other] == ["two:b"] * 3
    assert len(plan_cache._UDFS) == before + 2 and next(reversed(plan_cache._UDFS.values()))[1] is not kept
