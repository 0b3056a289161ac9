"""The benchmark suite: one process, one generated data set, every encoder; results to stdout and results.md.

    python -m bench.run                 # 1,000,000 rows, rows scaling up to 10^7
    python -m bench.run --quick         # 200,000 rows, scaling capped at 10^6, fewer repeats
    python -m bench.run --only encoders,spark --rows 500000

Sections are entries of :data:`SECTIONS` (name -> function taking a :class:`Context` and returning a
:class:`Section`); add one there to extend the suite.

What is measured (the reference table: 12 columns, key + value per row, Confluent-framed):

* per record, single thread: confluent-kafka's ``AvroSerializer`` (the real class, against the project's
  embedded registry over HTTP; schemas registered on the first call, then served from its cache), fastavro
  ``schemaless_writer``, and this project's reference ``RowEncoder`` (conversions included). The two
  baselines get Avro-ready dicts (conversions excluded), which favours them;
* ``ColumnarEncoder`` on one Arrow batch, single thread (= per core);
* Spark ``local[2]`` on a cached DataFrame, written to the ``noop`` sink: ``mapInArrow`` identity, a
  per-row stage (``RowEncoder``, i.e. fastavro per row), the columnar stage (``encode_table``), and the
  JSON change path (``encode_changes``) next to an identity pass over the same change DataFrame;
* how cost grows with rows (10^4..10^7), columns (5..200), and peak memory per million rows;
* the schema manager's cost per DML batch with no schema change, for 1..1000 tables per batch
  (``SchemaManager.prepare_batch`` against the embedded registry over HTTP; the steady batches must send
  no request), next to the columnar encoder's time for 1,000,000 reference rows.

Each section's table has a "meets target" column where a target applies: columnar encoder >= 20x
confluent-kafka's AvroSerializer per core; Spark columnar stage >= 90% of ``mapInArrow`` identity; the
manager's 1000-table batch < 1% of the 1M-row encode.

Timings are medians of repeats after a warm-up run, with the candidates of a comparison interleaved so a
noisy neighbour hits all of them alike. No assertions: the numbers are reported, the README records them.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import platform
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.columnar import CHUNK_ROWS, ColumnarEncoder
from avro_registry_sink.config import EncodingOptions
from avro_registry_sink.encoder import EncodingPlan, RowEncoder, writer_schema
from avro_registry_sink.routing import Route
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.table import ColumnDef, TableDef
from avro_registry_sink.table import MySQLType as T

RESULTS = Path(__file__).with_name("results.md")
SEED = 20240229


# --------------------------------------------------------------------------------------------------
# Data


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


def _strings(rng: np.random.Generator, n: int, low: int, high: int) -> pa.Array:
    lens = rng.integers(low, high + 1, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789 .@", np.uint8)
    data = letters[rng.integers(0, letters.size, int(offsets[-1]))]
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


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
        seconds = rng.integers(1_600_000_000, 1_700_000_000, n).astype("datetime64[s]")
        text = pc.replace_substring(pa.array(np.datetime_as_string(seconds)), "T", " ")
        return text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
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


# --------------------------------------------------------------------------------------------------
# Measurement helpers


@dataclass
class Row:
    name: str
    rows: int
    seconds: float
    out_bytes: int = 0
    note: str = ""
    ratio: str = ""  # against the target's baseline, e.g. "31.2x confluent-kafka AvroSerializer"
    target: str = ""  # e.g. ">= 20x"; rows with a target get a "meets target" cell
    meets: bool | None = None  # None: no target, or the baseline could not be measured

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else float("nan")

    @property
    def mb_per_s(self) -> float:
        return self.out_bytes / self.seconds / 1e6 if self.seconds and self.out_bytes else float("nan")


@dataclass
class Section:
    title: str
    rows: list[Row] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # extra markdown (tables, notes)

    def markdown(self, baselines: dict[str, float] | None = None) -> str:
        out = [f"## {self.title}", ""]
        if self.rows:
            heads = ["benchmark", "rows", "rows/s", "MB/s"]
            if baselines:
                heads += [f"x {name}" for name in baselines]
            targets = any(r.ratio or r.target for r in self.rows)
            if targets:
                heads += ["ratio", "target", "meets target"]
            heads.append("note")
            out.append("| " + " | ".join(heads) + " |")
            out.append("|" + "---|" * len(heads))
            for r in self.rows:
                cells = [r.name, f"{r.rows:,}", f"{r.rows_per_s:,.0f}", "" if r.mb_per_s != r.mb_per_s else f"{r.mb_per_s:,.1f}"]
                if baselines:
                    cells += [f"{r.rows_per_s / b:,.2f}" for b in baselines.values()]
                if targets:
                    cells += [r.ratio, r.target, verdict(r.meets) if r.target else ""]
                cells.append(r.note)
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        out.extend(self.lines)
        return "\n".join(out) + "\n"


def verdict(meets: bool | None) -> str:
    """The "meets target" cell: yes / no / n/a (baseline not measured). Reported, never asserted."""
    return "n/a" if meets is None else ("yes" if meets else "**no**")


@dataclass
class Context:
    rows: int
    quick: bool
    repeats: int
    baselines: dict[str, float] = field(default_factory=dict)  # name -> rows/s (per core)
    summary: list[str] = field(default_factory=list)
    _data: dict[Any, Any] = field(default_factory=dict)

    def data(self, n: int | None = None) -> pa.RecordBatch:
        """The reference batch of ``n`` rows (generated once; smaller sizes are prefixes)."""
        n = n or self.rows
        full = self._data.get("reference")
        if full is None or full.num_rows < n:
            full = self._data["reference"] = generate(max(n, self.rows))
        return full.slice(0, n)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def interleaved(candidates: dict[str, Callable[[], Any]], repeats: int, warmup: bool = True) -> dict[str, tuple[float, Any]]:
    """Median seconds of each candidate, runs interleaved (a warm-up round first)."""
    times: dict[str, list[float]] = {name: [] for name in candidates}
    results: dict[str, Any] = {}
    for round_ in range(repeats + (1 if warmup else 0)):
        for name, fn in candidates.items():
            results[name] = None
            seconds, results[name] = timed(fn)
            if round_ or not warmup:
                times[name].append(seconds)
    return {name: (statistics.median(times[name]), results[name]) for name in candidates}


def _out_bytes(keys: pa.Array, values: pa.Array) -> int:
    return int(pc.sum(pc.binary_length(keys)).as_py() or 0) + int(pc.sum(pc.binary_length(values)).as_py() or 0)


# --------------------------------------------------------------------------------------------------
# Sections


def bench_encoders(ctx: Context) -> Section:
    """Per-record baselines vs the columnar encoder, single thread (per core), same data, same bytes."""
    from avro_registry_sink.typemap.mysql import to_avro_value

    section = Section("Encoders, single thread (per core), reference table, key + value per row")
    table = reference_table()
    plan = plan_for(table)
    batch = ctx.data()
    per_record = min(ctx.rows, 20_000 if ctx.quick else 100_000)
    sample = batch.slice(0, per_record)
    py_rows = sample.to_pylist()
    options = plan.options
    datums = [{c.name: (None if r[c.name] is None else to_avro_value(c, r[c.name], options)) for c in table.columns}
              for r in py_rows]
    key_datums = [{"id": d["id"]} for d in datums]
    schemas = derive_schemas(table)
    value_writer = writer_schema(schemas.value_schema)
    key_writer = writer_schema(schemas.key_schema)

    # confluent-kafka AvroSerializer, the real class against the embedded registry (HTTP, then its cache)
    confluent_note = ""
    try:
        confluent = _confluent_serializers(key_writer, value_writer)
    except Exception as exc:  # noqa: BLE001 - reported, the rest of the suite still runs
        confluent, confluent_note = None, f"unavailable: {exc}"

    import fastavro

    parsed_value = fastavro.parse_schema(value_writer)
    parsed_key = fastavro.parse_schema(key_writer)

    def run_fastavro() -> int:
        total = 0
        for k, d in zip(key_datums, datums):
            buf = io.BytesIO()
            buf.write(b"\x00\x00\x00\x00\x01")
            fastavro.schemaless_writer(buf, parsed_key, k)
            total += len(buf.getvalue())
            buf = io.BytesIO()
            buf.write(b"\x00\x00\x00\x00\x02")
            fastavro.schemaless_writer(buf, parsed_value, d)
            total += len(buf.getvalue())
        return total

    reference = RowEncoder(plan)

    def run_reference() -> int:
        total = 0
        for row in py_rows:
            k, v = reference.encode("insert", row)
            total += len(k) + len(v or b"")
        return total

    columnar = ColumnarEncoder(plan)

    def run_columnar() -> int:
        keys, values = columnar.encode(batch)
        size = _out_bytes(keys, values)
        del keys, values
        return size

    repeats = 1 if ctx.quick else 2
    candidates: dict[str, Callable[[], Any]] = {}
    if confluent is not None:
        def run_confluent(serialize: Any = confluent) -> int:
            return serialize(key_datums, datums)
        candidates["confluent-kafka AvroSerializer"] = run_confluent
    candidates["fastavro schemaless_writer"] = run_fastavro
    candidates["RowEncoder (reference, per row)"] = run_reference
    slow = interleaved(candidates, repeats)
    fast = interleaved({"ColumnarEncoder": run_columnar}, ctx.repeats)

    rows: list[Row] = []
    if confluent is None:
        rows.append(Row("confluent-kafka AvroSerializer", 0, float("nan"), note=confluent_note))
    for name, (seconds, size) in slow.items():
        note = "pre-converted dicts" if name != "RowEncoder (reference, per row)" else "conversions included"
        rows.append(Row(name, per_record, seconds, size, note))
    seconds, size = fast["ColumnarEncoder"]
    rows.append(Row("ColumnarEncoder", batch.num_rows, seconds, size, "one Arrow batch; conversions and checks included"))
    section.rows = rows
    for r in rows:
        if r.rows and r.name.startswith(("confluent", "fastavro")):
            ctx.baselines[r.name.split()[0]] = r.rows_per_s
    columnar_rate = rows[-1].rows_per_s
    confluent_rate = ctx.baselines.get("confluent-kafka")
    rows[-1].target = ">= 20x confluent-kafka AvroSerializer per core"
    if confluent_rate:
        ratio = columnar_rate / confluent_rate
        rows[-1].ratio, rows[-1].meets = f"{ratio:,.1f}x confluent-kafka AvroSerializer", ratio >= 20
        ctx.summary.append(f"columnar encoder / confluent AvroSerializer per core: **{ratio:,.1f}x** "
                           f"(target >= 20x: {'met' if ratio >= 20 else 'NOT met'})")
    else:
        rows[-1].ratio = "confluent-kafka AvroSerializer not measured"
        ctx.summary.append("columnar encoder / confluent AvroSerializer per core: not measured "
                           f"(target >= 20x: n/a; {confluent_note})")
    # the same bytes: columnar == reference for the sample; confluent's bodies equal them too
    keys, values = columnar.encode(sample.slice(0, 2000))
    same = all(keys[i].as_py() == k and values[i].as_py() == v
               for i, (k, v) in enumerate(reference.encode("insert", r) for r in py_rows[:2000]))
    section.lines.append(f"Columnar output equals the reference encoder's bytes on the first 2,000 rows: **{same}**.")
    if confluent is not None:
        bodies = confluent.bodies(key_datums[:200], datums[:200])
        equal = all(kb == keys[i].as_py()[5:] and vb == values[i].as_py()[5:] for i, (kb, vb) in enumerate(bodies))
        section.lines.append(f"confluent-kafka's Avro bodies (after the 5-byte header) equal ours on 200 rows: **{equal}**.")
    section.lines.append(
        f"Per-record rows are timed over {per_record:,} rows; the columnar encoder over {batch.num_rows:,} "
        f"rows (median of {ctx.repeats} runs after a warm-up). confluent-kafka {_version('confluent_kafka')} "
        f"serializer talks to `avro_registry_sink.registry.embedded.EmbeddedRegistry` (registration on the first "
        "record, cached afterwards).")
    return section


class _Confluent:
    """confluent-kafka's AvroSerializer pair (key, value) against an embedded registry."""

    def __init__(self, key_schema: dict[str, Any], value_schema: dict[str, Any]) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        from avro_registry_sink.registry.embedded import EmbeddedRegistry

        self.registry = EmbeddedRegistry()
        url = self.registry.start()
        client = SchemaRegistryClient({"url": url})
        conf = {"auto.register.schemas": True}
        self.key = AvroSerializer(client, json.dumps(key_schema), conf=conf)
        self.value = AvroSerializer(client, json.dumps(value_schema), conf=conf)
        self.key_ctx = SerializationContext("bench_orders", MessageField.KEY)
        self.value_ctx = SerializationContext("bench_orders", MessageField.VALUE)

    def __call__(self, keys: list[dict[str, Any]], values: list[dict[str, Any]]) -> int:
        total = 0
        key, value, kc, vc = self.key, self.value, self.key_ctx, self.value_ctx
        for k, v in zip(keys, values):
            total += len(key(k, kc)) + len(value(v, vc))
        return total

    def bodies(self, keys: list[dict[str, Any]], values: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
        return [(self.key(k, self.key_ctx)[5:], self.value(v, self.value_ctx)[5:]) for k, v in zip(keys, values)]

    def close(self) -> None:
        self.registry.stop()


_OPEN: list[Any] = []


def _confluent_serializers(key_schema: dict[str, Any], value_schema: dict[str, Any]) -> _Confluent:
    serializer = _Confluent(key_schema, value_schema)
    _OPEN.append(serializer)
    return serializer


def bench_rows(ctx: Context) -> Section:
    """Columnar encoder rows/s as the batch grows (10^7 = ten batches of 10^6: one binary array holds < 2 GiB)."""
    section = Section("Scaling with rows (ColumnarEncoder, single thread)")
    plan = plan_for(reference_table())
    encoder = ColumnarEncoder(plan)
    sizes = [10**4, 10**5, 10**6] + ([] if ctx.quick else [10**7])
    for n in sizes:
        if n <= 10**6:
            batch = ctx.data(n) if n <= ctx.rows else generate(n)
            reps = max(ctx.repeats, 5 if n <= 10**5 else ctx.repeats)

            def run(b: pa.RecordBatch = batch) -> int:
                keys, values = encoder.encode(b)
                return _out_bytes(keys, values)

            seconds, size = interleaved({"x": run}, reps)["x"]
            section.rows.append(Row(f"{n:,} rows", n, seconds, size, "one batch"))
        else:
            batches = [generate(10**6, start=i * 10**6) for i in range(n // 10**6)]

            def run_all(batches: list[pa.RecordBatch] = batches) -> int:
                total = 0
                for b in batches:
                    keys, values = encoder.encode(b)
                    total += _out_bytes(keys, values)
                    del keys, values
                return total

            seconds, size = interleaved({"x": run_all}, 1)["x"]
            section.rows.append(Row(f"{n:,} rows", n, seconds, size, f"{len(batches)} batches of 1,000,000"))
            del batches
    return section


def bench_columns(ctx: Context) -> Section:
    """Columnar encoder cost per row and per cell as the table widens (5 to 200 columns)."""
    section = Section("Scaling with columns (ColumnarEncoder, single thread)")
    n = 20_000 if ctx.quick else 100_000
    lines = ["| columns | rows | rows/s | cells/s | MB/s | bytes/row |", "|---|---|---|---|---|---|"]
    for width in (5, 10, 20, 50, 100, 200):
        table = reference_table(width)
        batch = generate(n, table)
        encoder = ColumnarEncoder(plan_for(table))

        def run(b: pa.RecordBatch = batch, e: ColumnarEncoder = encoder) -> int:
            keys, values = e.encode(b)
            return _out_bytes(keys, values)

        seconds, size = interleaved({"x": run}, ctx.repeats)["x"]
        lines.append(f"| {width} | {n:,} | {n / seconds:,.0f} | {n * width / seconds:,.0f} | {size / seconds / 1e6:,.1f} | "
                     f"{size / n:,.0f} |")
    section.lines = lines + ["", "Columns repeat the reference table's types (ints, BIGINT UNSIGNED, DECIMAL(20,4), "
                             "VARCHARs of 20-60 chars, a DATETIME string, a nullable TEXT, a DOUBLE)."]
    return section


def _rss_kib(field_name: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise KeyError(field_name)


def bench_memory(ctx: Context) -> Section:
    """Peak resident memory added while encoding one batch, per million rows."""
    section = Section("Peak memory (ColumnarEncoder)")
    n = min(ctx.rows, 10**6)
    batch = ctx.data(n)
    encoder = ColumnarEncoder(plan_for(reference_table()))
    encoder.encode(batch.slice(0, 1000))
    input_bytes = batch.nbytes
    gc.collect()
    pa.default_memory_pool().release_unused()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # reset the peak RSS (VmHWM) to the current RSS
        resettable = True
    except OSError:
        resettable = False
    before = _rss_kib("VmRSS")
    keys, values = encoder.encode(batch)
    peak = _rss_kib("VmHWM")
    after = _rss_kib("VmRSS")
    output = keys.nbytes + values.nbytes
    del keys, values
    scale = 1e6 / n
    if resettable:
        extra = (peak - before) * 1024
        temporaries = max(extra - output, 0)
        section.lines = [
            "| rows | input (Arrow) | output (key + value arrays) | peak RSS added while encoding | of which temporaries |",
            "|---|---|---|---|---|",
            f"| {n:,} | {input_bytes / 1e6:,.0f} MB | {output / 1e6:,.0f} MB | {extra / 1e6:,.0f} MB | "
            f"{temporaries / 1e6:,.0f} MB |",
            "",
            f"Per million rows: about **{(output * scale + temporaries) / 1e6:,.0f} MB** at peak = the output "
            f"({output * scale / 1e6:,.0f} MB per million rows, it grows with the batch) + the temporaries "
            f"({temporaries / 1e6:,.0f} MB, bounded: the encoder works in chunks of {CHUNK_ROWS:,} rows). Peak RSS is "
            "`/proc/self/status` VmHWM after a reset through `/proc/self/clear_refs`.",
        ]
    else:
        section.lines = [f"VmHWM cannot be reset here; RSS after encoding {n:,} rows grew by "
                         f"{(after - before) / 1024:,.0f} MB (output {output / 1e6:,.0f} MB)."]
    return section


def bench_spark(ctx: Context) -> Section:
    """Spark local[2] on a cached DataFrame: identity mapInArrow vs per-row and columnar stages."""
    section = Section("Spark local[2], cached input, noop sink")
    warnings.simplefilter("ignore", FutureWarning)
    from avro_registry_sink.changes import CHANGE_DDL, dump_image
    from avro_registry_sink.spark.session import local_session
    from avro_registry_sink.spark.stage import StagePlan, encode_changes, encode_table

    n = min(ctx.rows, 200_000 if ctx.quick else 1_000_000)
    # 1M cached rows are created from driver-side Arrow data: the default 1 GiB driver heap is too small
    spark = local_session(app_name="avro-registry-sink-bench", **{"spark.driver.memory": "6g"})
    try:
        table = reference_table()
        plan = plan_for(table)
        route = Route(schema="bench", table="orders", topic="bench_orders", key_subject="bench_orders-key",
                      value_subject="bench_orders-value")
        stage_plan = StagePlan(plan, "bench_orders", 6, route)
        arrow = pa.Table.from_batches([ctx.data(n)])
        arrow = arrow.set_column(4, "counter", arrow.column("counter").cast(pa.decimal128(20, 0)))  # Spark has no uint64
        df = spark.createDataFrame(arrow).repartition(2).cache()
        df.count()

        def identity(batches: Any) -> Any:
            yield from batches

        def per_row(batches: Any, encoding: EncodingPlan = plan) -> Any:
            encoder = RowEncoder(encoding)
            for batch in batches:
                keys, values = [], []
                for row in batch.to_pylist():
                    k, v = encoder.encode("insert", row)
                    keys.append(k)
                    values.append(v)
                yield pa.RecordBatch.from_arrays([pa.array(keys, pa.binary()), pa.array(values, pa.binary())],
                                                 names=["key", "value"])

        def write(frame: Any) -> None:
            frame.write.format("noop").mode("overwrite").save()

        runs = interleaved({
            "mapInArrow identity": lambda: write(df.mapInArrow(identity, df.schema)),
            "columnar stage (encode_table)": lambda: write(encode_table(df, stage_plan)),
        }, ctx.repeats)
        per_row_n = min(n, 100_000 if ctx.quick else 300_000)
        small = df.limit(per_row_n).repartition(2).cache()
        small.count()
        slow = interleaved({"per-row stage (RowEncoder = fastavro per row)": lambda: write(small.mapInArrow(per_row, "key BINARY, value BINARY"))},
                           1)
        rows = [Row(name, n, seconds) for name, (seconds, _) in runs.items()]
        rows += [Row(name, per_row_n, seconds, note=f"first {per_row_n:,} rows of the same DataFrame")
                 for name, (seconds, _) in slow.items()]

        # the JSON change path: images as text, several versions possible (here one)
        changes_n = min(n, 100_000 if ctx.quick else 500_000)
        # images as the sources produce them: DECIMAL as text at the column's scale (canal-json, debezium)
        events = [{k: (str(v) if isinstance(v, Decimal) else v) for k, v in e.items()}
                  for e in ctx.data(changes_n).to_pylist()]
        change_rows = [("bench", "orders", 0, "c", 417318403368288260 + i, None, dump_image(e), f"bench:{i}")
                       for i, e in enumerate(events)]
        changes = spark.createDataFrame(change_rows, CHANGE_DDL).repartition(2).cache()
        changes.count()
        del change_rows, events
        plans = {("bench", "orders", 0): stage_plan}
        json_runs = interleaved({
            "mapInArrow identity (change rows)": lambda: write(changes.mapInArrow(identity, changes.schema)),
            "columnar stage (encode_changes, JSON images)": lambda: write(encode_changes(changes, plans)),
        }, ctx.repeats)
        rows += [Row(name, changes_n, seconds) for name, (seconds, _) in json_runs.items()]
        section.rows = rows
        identity_rate = rows[0].rows_per_s
        stage_rate = rows[1].rows_per_s
        ratio = stage_rate / identity_rate
        json_ratio = rows[-1].rows_per_s / rows[-2].rows_per_s
        rows[1].ratio, rows[1].target, rows[1].meets = f"{ratio:.0%} of mapInArrow identity", ">= 90%", ratio >= 0.9
        rows[2].ratio = f"{rows[2].rows_per_s / identity_rate:.0%} of mapInArrow identity"
        rows[-1].ratio = f"{json_ratio:.0%} of mapInArrow identity (change rows)"
        rows[-1].note = "no target set for the JSON path"
        ctx.summary.append(f"Spark columnar stage / mapInArrow identity on the same DataFrame: **{ratio:.0%}** "
                           f"(target >= 90%: {'met' if ratio >= 0.9 else 'NOT met'}); JSON change path: {json_ratio:.0%}")
        section.lines = [
            f"Throughput is for both cores together (local[2]); per core it is half. Stage/identity: {ratio:.0%} "
            f"(typed columns), {json_ratio:.0%} (JSON change rows). Arrow batches of "
            f"{spark.conf.get('spark.sql.execution.arrow.maxRecordsPerBatch')} rows; median of {ctx.repeats} "
            "interleaved runs after a warm-up; per-row stage: one run.",
        ]
        df.unpersist()
        small.unpersist()
        changes.unpersist()
    finally:
        spark.stop()
    return section


class _CountingTransport(httpx.BaseTransport):
    """An httpx transport that counts every request actually sent (wraps httpx's HTTP transport)."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def bench_manager(ctx: Context) -> Section:
    """Schema manager cost per DML batch with no schema change, versus tables per batch.

    Each table count gets a fresh manager and its own tables (``db<N>.t<i>``, the reference table's
    columns) against the embedded registry over real HTTP: the first batch registers 2 subjects per table,
    the steady batches must find everything cached and send no request (counted at the transport).
    """
    from avro_registry_sink.config import RegistryConfig
    from avro_registry_sink.manager import SchemaManager
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from avro_registry_sink.routing import TopicRouter

    section = Section("Schema manager per batch, no schema change (embedded registry over HTTP)")
    target_tables, budget = 1000, 0.05 if ctx.quick else 0.2  # seconds of steady batches per timed round

    # the yardstick: the columnar encoder on 1,000,000 reference rows (as in the encoders section)
    encode_n = min(ctx.rows, 10**6) if ctx.quick else 10**6
    batch = ctx.data(encode_n)
    encoder = ColumnarEncoder(plan_for(reference_table()))

    def run_encode(b: pa.RecordBatch = batch) -> int:
        keys, values = encoder.encode(b)
        size = _out_bytes(keys, values)
        del keys, values
        return size

    encode_s = interleaved({"encode": run_encode}, ctx.repeats)["encode"][0] * (10**6 / encode_n)
    extrapolated = encode_n != 10**6
    del batch

    transport = _CountingTransport()
    results = []
    with EmbeddedRegistry() as server:
        client = RegistryClient(RegistryConfig(urls=(server.url,)), transport=transport)
        with client:
            for n in (1, 10, 100, 1000):
                tables = [reference_table(schema=f"db{n}", name=f"t{i}") for i in range(n)]
                copies = [t.model_copy(deep=True) for t in tables]  # equal, not identical (rebuilt definitions)
                manager = SchemaManager(client, TopicRouter(topic_rule="{schema}_{table}"))
                sent = transport.requests
                first_s, _ = timed(lambda m=manager, d=tables: m.prepare_batch(d))
                first_requests = transport.requests - sent
                registrations = manager.stats.registrations
                sent, client_calls = transport.requests, client.cache_info().http_calls  # from here on: steady batches
                loops = {}
                for label, defs in (("same", tables), ("copies", copies)):  # warm-up of each path, sizes its loops
                    probe, _ = timed(lambda m=manager, d=defs: m.prepare_batch(d))
                    loops[label] = max(1, min(10_000, int(budget / max(probe, 1e-7))))

                def steady(defs: list[TableDef], k: int, m: SchemaManager = manager) -> None:
                    for _ in range(k):
                        m.prepare_batch(defs)

                runs = interleaved({"same": lambda d=tables, k=loops["same"]: steady(d, k),
                                    "copies": lambda d=copies, k=loops["copies"]: steady(d, k)}, ctx.repeats)
                results.append({
                    "tables": n, "first_s": first_s, "first_requests": first_requests, "registrations": registrations,
                    "same_s": runs["same"][0] / loops["same"], "copies_s": runs["copies"][0] / loops["copies"],
                    "batches": 2 + (ctx.repeats + 1) * (loops["same"] + loops["copies"]),
                    "steady_requests": transport.requests - sent,
                    "client_requests": client.cache_info().http_calls - client_calls,
                    "manager_registrations": manager.stats.registrations - registrations,
                })

    lines = [("| tables per batch | first batch (registers) ms | HTTP requests, first batch | steady ms/batch: same "
              "TableDef objects / equal copies | registry HTTP requests in steady batches | steady / 1M-row encode: "
              "same / copies | target | meets target: same / copies |"), "|---|---|---|---|---|---|---|---|"]
    for r in results:
        same, copies = r["same_s"] / encode_s, r["copies_s"] / encode_s
        is_target = r["tables"] == target_tables
        ok = r["steady_requests"] == 0
        lines.append(
            f"| {r['tables']:,} | {r['first_s'] * 1e3:,.1f} | {r['first_requests']:,} | {r['same_s'] * 1e3:,.3f} / "
            f"{r['copies_s'] * 1e3:,.3f} | {r['steady_requests']:,} in {r['batches']:,} batches | {same:.3%} / {copies:.3%} | "
            + (f"< 1%, 0 requests | {verdict(same < 0.01 and ok)} / {verdict(copies < 0.01 and ok)} |" if is_target else " | |"))
        if is_target:
            ctx.summary.append(
                f"schema manager, {target_tables:,} tables, steady batch / columnar encode of 1M rows"
                + (" (extrapolated)" if extrapolated else "") + f": **{same:.3%}** with the same TableDef objects, "
                f"**{copies:.3%}** with equal copies (target < 1%: {'met' if same < 0.01 else 'NOT met'} / "
                f"{'met' if copies < 0.01 else 'NOT met'}); registry HTTP requests in steady batches: "
                f"**{r['steady_requests']}** (must be 0)")
    mismatched = [r["tables"] for r in results if r["client_requests"] != r["steady_requests"] or r["manager_registrations"]]
    how = (f"measured on {encode_n:,} rows and **extrapolated linearly** to 1,000,000 (quick mode)" if extrapolated
           else "measured on 1,000,000 rows")
    section.lines = lines + [
        "",
        f"Yardstick: `ColumnarEncoder.encode` of 1,000,000 reference rows, single thread = **{encode_s:,.3f} s** "
        f"({how}; median of {ctx.repeats} runs after a warm-up). "
        "Steady batches: median of "
        f"{ctx.repeats} interleaved rounds, each looping `prepare_batch` for about {budget * 1e3:,.0f} ms; 'equal copies' "
        "passes deep copies of the table definitions (the cache's equality check instead of identity, as when definitions are "
        "rebuilt, e.g. storage-sink definitions completed from hints). HTTP requests are counted at the client's httpx transport"
        + (" and agree with `RegistryClient.cache_info().http_calls`; the manager registered nothing in steady batches."
           if not mismatched else
           f"; for {mismatched} tables they disagree with `cache_info().http_calls` or the manager registered again."),
    ]
    return section


#: The suite: name -> section function. Add entries to extend it.
SECTIONS: dict[str, Callable[[Context], Section]] = {
    "encoders": bench_encoders,
    "rows": bench_rows,
    "columns": bench_columns,
    "memory": bench_memory,
    "spark": bench_spark,
    "manager": bench_manager,
}


# --------------------------------------------------------------------------------------------------
# Main


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module.replace("_", "-"))
    except Exception:  # noqa: BLE001
        return "?"


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    versions = ", ".join(f"{m} {_version(m)}" for m in ("pyarrow", "numpy", "fastavro", "confluent-kafka", "pyspark"))
    return (f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, Python "
            f"{platform.python_version()}; {versions}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=None, help="rows of the reference data (default 1,000,000; quick 200,000)")
    parser.add_argument("--quick", action="store_true", help="smaller data, fewer repeats, scaling capped at 10^6 rows")
    parser.add_argument("--only", default=None, help="comma-separated sections: " + ", ".join(SECTIONS))
    parser.add_argument("--out", type=Path, default=RESULTS, help="markdown results file (default bench/results.md)")
    args = parser.parse_args(argv)
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    ctx = Context(rows=rows, quick=args.quick, repeats=3 if args.quick else 5)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(SECTIONS)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    started = time.perf_counter()
    header = ["# Benchmark results", "", f"- machine: {machine()}",
              f"- command: `python -m bench.run {' '.join(argv if argv is not None else sys.argv[1:])}`".rstrip(),
              f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}", ""]
    print("\n".join(header), flush=True)
    blocks = []
    try:
        for name in names:
            section = SECTIONS[name](ctx)
            block = section.markdown(ctx.baselines if name == "encoders" else None)
            blocks.append(block)
            print(block, flush=True)
    finally:
        for item in _OPEN:
            item.close()
        _OPEN.clear()
    wall = time.perf_counter() - started
    summary = ["## Summary", ""] + [f"- {line}" for line in ctx.summary] + [f"- wall time: {wall:,.0f} s", ""]
    print("\n".join(summary), flush=True)
    args.out.write_text("\n".join(header) + "\n" + "\n".join(summary) + "\n" + "\n".join(blocks), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
