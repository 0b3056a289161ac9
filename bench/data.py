"""The benchmarks' reference data: a 12-column CDC table and deterministic, vectorized rows for it.

>>> batch = generate(3)
>>> batch.num_rows, batch.schema.names[:3]
(3, ['id', 'qty', 'customer_id'])
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.encoding.plan import EncodingPlan
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import EncodingOptions
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T

__all__ = ["SEED", "generate", "plan_for", "reference_table"]

SEED = 20240229


def reference_table(columns: int | None = None, schema: str = "bench", name: str = "orders") -> TableDef:
    """The 12-column reference CDC table ``schema.name`` (``columns`` != 12 repeats its non-key column types)."""
    base = (
        ColumnDef(name="id", type=T.BIGINT, nullable=False),
        ColumnDef(name="qty", type=T.INT, nullable=False),
        ColumnDef(name="customer_id", type=T.INT, nullable=False),
        ColumnDef(name="status", type=T.TINYINT, nullable=False),
        ColumnDef(name="counter", type=T.BIGINT, unsigned=True, nullable=False),
        ColumnDef(name="amount", type=T.DECIMAL, precision=20, scale=4, nullable=False),
        ColumnDef(name="name", type=T.VARCHAR, length=64, nullable=False),
        ColumnDef(name="email", type=T.VARCHAR, length=64, nullable=False),
        ColumnDef(name="created_at", type=T.DATETIME, nullable=False),
        ColumnDef(name="note", type=T.TEXT),
        ColumnDef(name="score", type=T.DOUBLE, nullable=False),
        ColumnDef(name="region", type=T.INT, nullable=False),
    )
    if columns is None or columns == len(base):
        cols = base
    else:
        cols = [base[0]] + [base[1 + i % 11].model_copy(update={"name": f"{base[1 + i % 11].name}_{i}"})
                            for i in range(columns - 1)]
    return TableDef(schema_name=schema, table=name, columns=tuple(cols), primary_key=("id",))


_LETTERS = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789 .@", np.uint8)
_POOL: list[np.ndarray] = []  # random text that strings are cut from (cutting is much cheaper than drawing)


def _strings(rng: np.random.Generator, n: int, low: int, high: int) -> pa.Array:
    lens = rng.integers(low, high + 1, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if not _POOL or _POOL[0].size < total * 2:
        _POOL[:] = [_LETTERS[np.random.default_rng(SEED).integers(0, _LETTERS.size, max(total * 2, 1 << 24),
                                                                   dtype=np.uint8)]]
    pool = _POOL[0]
    start = int(rng.integers(0, pool.size - total + 1))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(pool[start: start + total]))


def _column(rng: np.random.Generator, col: ColumnDef, n: int, start: int) -> pa.Array:
    base = col.name.rsplit("_", 1)[0] if col.name.rsplit("_", 1)[-1].isdigit() else col.name
    if base == "id":
        return pa.array(np.arange(start, start + n, dtype=np.int64) + 10_000_000)
    if base == "qty":
        return pa.array(rng.integers(1, 1000, n, dtype=np.int32))
    if base == "customer_id":
        return pa.array(rng.integers(1, 1_000_000, n, dtype=np.int32))
    if base == "status":
        return pa.array(rng.integers(0, 6, n, dtype=np.int8))
    if base == "counter":
        return pa.array(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True))
    if base == "amount":
        unscaled = rng.integers(-10**12, 10**12, n)
        limbs = np.empty((n, 2), np.int64)
        limbs[:, 0], limbs[:, 1] = unscaled, unscaled >> 63
        return pa.Array.from_buffers(pa.decimal128(20, 4), n, [None, pa.py_buffer(limbs)])
    if base in ("name", "email"):
        return _strings(rng, n, 20, 60)
    if base == "created_at":
        seconds = rng.integers(1_600_000_000, 1_700_000_000, n)
        return pa.array(seconds, pa.timestamp("s")).cast(pa.string())  # "2021-08-26 12:11:47"
    if base == "note":
        text = _strings(rng, n, 0, 80)
        nulls = pa.array(rng.random(n) < 0.2)
        out = pc.if_else(nulls, pa.nulls(n, pa.string()), text)
        return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out
    if base == "score":
        return pa.array(rng.normal(0, 1000, n))
    if base == "region":
        return pa.array(rng.integers(1, 50, n, dtype=np.int32))
    raise ValueError(col.name)


def generate(n: int, table: TableDef | None = None, seed: int = SEED, start: int = 0) -> pa.RecordBatch:
    """Deterministic rows of the (reference) table as one typed Arrow batch."""
    table = table or reference_table()
    rng = np.random.default_rng(seed + start)
    return pa.RecordBatch.from_arrays([_column(rng, c, n, start) for c in table.columns], names=[c.name for c in table.columns])


def plan_for(table: TableDef, key_id: int = 1, value_id: int = 2) -> EncodingPlan:
    return EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions()), key_id, value_id)
