"""The benchmark suite: one process, every comparison timed in the same rounds; results to stdout and results.md.

    python -m bench.run                          # the full suite (long: end-to-end up to 5x10^6 rows, 5x10^7 backlog)
    python -m bench.run --quick                  # small sizes, one round: checks the harness in a few minutes
    python -m bench.run --only encoders,spark    # some sections (see SECTIONS)
    python -m bench.run --only e2e --e2e-rows 1000000 --e2e-tables 1,10 --e2e-sinks file --rounds 3

Sections are entries of :data:`SECTIONS` (name -> function taking a :class:`~bench.harness.Context` and
returning a :class:`~bench.harness.Section`):

* ``encoders``: per record, single thread, confluent-kafka's ``AvroSerializer`` (the real class, against
  the project's embedded registry over HTTP), fastavro ``schemaless_writer``, the tests' per-row reference ``RowEncoder``
  (``tests/support/reference_encoder.py``; run from the repository's root),
  and the ``ColumnarEncoder`` on one Arrow batch, all in the same rounds; per-round ratio columnar /
  AvroSerializer (target >= 20x);
* ``rows``, ``columns``, ``memory``: how the columnar encoder's cost grows with rows and columns, its peak memory;
* ``spark``: Spark on one cached DataFrame (read from Parquet), ``noop`` sink: ``mapInArrow`` identity,
  Spark's own ``to_avro`` (spark-avro, with the Confluent header and TiCDC's partition), the columnar stage
  ``encode_table`` (default engine, and ``engine="arrow"``), a per-row stage, and the JSON change path;
  target: stage >= ``to_avro``;
* ``manager``: the schema manager's cost per batch with no schema change (1..1000 tables);
* ``e2e``: the product's ``run --available-now`` against the pure-JVM anchor job (:mod:`bench.anchor`) on
  generated TiCDC storage trees (:mod:`bench.tree`), files and Kafka (:mod:`bench.endtoend`); target >= 1.0x;
* ``eos``: ``run --delivery exactly-once`` against the default at-least-once run and the pure-JVM anchor, the
  three in the same rounds (Kafka only; ``--e2e-configs``/``--e2e-rounds`` as for ``e2e``).
* ``big``: a 5x10^7-row tree through the CLI with default settings; peak memory per million rows.
* ``ceiling``: the same inputs into the same records with no Spark (:mod:`bench.ceiling`: two processes, read ->
  the product's parse -> columnar encode -> librdkafka or the file sink's lines), rows/s and CPU µs per row per
  part; the ``e2e`` and ``changelog`` sections run it as a third contender in their rounds.

Each comparison runs its candidates one after the other within every round, and reports medians, the
fastest and slowest round, and ratios taken round by round. The machine (CPU model, cores, memory) is
read at run time and written with the results. No assertions: the numbers are reported.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.encoding.columnar import CHUNK_ROWS, ColumnarEncoder
from avro_registry_sink.encoding.plan import EncodingPlan
from avro_registry_sink.routing.rules import Route
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.table import TableDef
from bench.ceiling import bench_ceiling
from bench.changelog import bench_changelog
from bench.data import generate, plan_for, reference_table
from bench.endtoend import bench_big, bench_end_to_end, bench_exactly_once, bench_session
from bench.harness import (
    Context,
    Row,
    Section,
    describe_machine,
    fmt_ratio,
    interleaved,
    machine,
    per_round_ratios,
    ratio_cell,
    timed,
    verdict,
)
from tests.support.reference_encoder import RowEncoder, writer_schema

RESULTS = Path(__file__).with_name("results.md")


def reference_data(ctx: Context, n: int | None = None) -> pa.RecordBatch:
    """The reference batch of ``n`` rows (generated once; smaller sizes are prefixes)."""
    n = n or ctx.rows
    full = ctx.shared.get("reference")
    if full is None or full.num_rows < n:
        full = ctx.shared["reference"] = generate(max(n, ctx.rows))
    return full.slice(0, n)


def _out_bytes(keys: pa.Array, values: pa.Array) -> int:
    return int(pc.sum(pc.binary_length(keys)).as_py() or 0) + int(pc.sum(pc.binary_length(values)).as_py() or 0)


# --------------------------------------------------------------------------------------------------
# Sections


def bench_encoders(ctx: Context) -> Section:
    """Per-record baselines and the columnar encoder in the same rounds, single thread, same data, same bytes."""
    from avro_registry_sink.typemap.mysql import to_avro_value

    section = Section("Encoders, single thread (per core), reference table, key + value per row")
    table = reference_table()
    plan = plan_for(table)
    batch = reference_data(ctx)
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
        confluent = _Confluent(key_writer, value_writer)
        ctx.cleanup.append(confluent.close)
    except Exception as exc:  # noqa: BLE001 - reported, the rest of the suite still runs
        confluent, confluent_note = None, f"unavailable: {exc}"

    import fastavro

    parsed_value = fastavro.parse_schema(value_writer)
    parsed_key = fastavro.parse_schema(key_writer)

    def run_fastavro() -> int:
        total = 0
        for k, d in zip(key_datums, datums, strict=False):
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

    names = {"confluent": "confluent-kafka AvroSerializer", "fastavro": "fastavro schemaless_writer",
             "reference": "RowEncoder (reference, per row)", "columnar": "ColumnarEncoder"}
    candidates: dict[str, Callable[[], Any]] = {}
    if confluent is not None:
        candidates[names["confluent"]] = lambda: confluent(key_datums, datums)
    candidates[names["fastavro"]] = run_fastavro
    candidates[names["reference"]] = run_reference
    candidates[names["columnar"]] = run_columnar
    repeats = ctx.options.get("rounds") or (2 if ctx.quick else 5)
    runs = interleaved(candidates, repeats)

    rows: list[Row] = []
    if confluent is None:
        rows.append(Row(names["confluent"], 0, float("nan"), note=confluent_note))
    for name, timing in runs.items():
        n = batch.num_rows if name == names["columnar"] else per_record
        note = {names["confluent"]: "pre-converted dicts", names["fastavro"]: "pre-converted dicts",
                names["reference"]: "conversions included",
                names["columnar"]: "one Arrow batch; conversions and checks included"}[name]
        rows.append(Row.of(timing, n, timing.result, note))
    section.rows = rows
    col_row = rows[-1]
    col_row.target = ">= 20x confluent-kafka AvroSerializer per core"
    if confluent is not None:
        ratios = per_round_ratios(runs[names["columnar"]], batch.num_rows, runs[names["confluent"]], per_record)
        col_row.ratio, col_row.meets = ratio_cell(ratios, 20)
        fast = per_round_ratios(runs[names["fastavro"]], per_record, runs[names["confluent"]], per_record)
        rows[1].ratio = fmt_ratio(fast) + " of AvroSerializer"
        ctx.summary.append(f"columnar encoder / confluent-kafka AvroSerializer, per core, same rounds: **{col_row.ratio}** "
                           f"(target >= 20x: {'met' if col_row.meets else 'NOT met'})")
    else:
        col_row.ratio = "confluent-kafka AvroSerializer not measured"
        ctx.summary.append(f"columnar encoder / confluent AvroSerializer: not measured ({confluent_note})")
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
        f"One round = every candidate once, in table order; {repeats} timed rounds after a warm-up round. Per-record "
        f"candidates encode {per_record:,} rows, the columnar encoder {batch.num_rows:,} rows; ratios are rows/s "
        f"ratios of the same round (median, lowest-highest round). confluent-kafka {_version('confluent-kafka')} talks "
        "to `avro_registry_sink.registry.embedded.EmbeddedRegistry` (registration on the first record, cached after).")
    return section


def _version(module: str) -> str:
    from bench.harness import _version as version

    return version(module)


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
        for k, v in zip(keys, values, strict=False):
            total += len(key(k, kc)) + len(value(v, vc))
        return total

    def bodies(self, keys: list[dict[str, Any]], values: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
        return [(self.key(k, self.key_ctx)[5:], self.value(v, self.value_ctx)[5:]) for k, v in zip(keys, values, strict=False)]

    def close(self) -> None:
        self.registry.stop()


def bench_rows(ctx: Context) -> Section:
    """Columnar encoder rows/s as the batch grows (10^7 = ten batches of 10^6: one binary array holds < 2 GiB)."""
    section = Section("Scaling with rows (ColumnarEncoder, single thread)")
    plan = plan_for(reference_table())
    encoder = ColumnarEncoder(plan)
    sizes = [10**4, 10**5, 10**6] + ([] if ctx.quick else [10**7])
    for n in sizes:
        if n <= 10**6:
            batch = reference_data(ctx, n) if n <= ctx.rows else generate(n)
            reps = max(ctx.repeats, 5 if n <= 10**5 else ctx.repeats)

            def run(b: pa.RecordBatch = batch) -> int:
                keys, values = encoder.encode(b)
                return _out_bytes(keys, values)

            t = interleaved({"x": run}, reps)["x"]
            seconds, size = t.median, t.result
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

            t = interleaved({"x": run_all}, 1)["x"]
            seconds, size = t.median, t.result
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

        t = interleaved({"x": run}, ctx.repeats)["x"]
        seconds, size = t.median, t.result
        lines.append(f"| {width} | {n:,} | {n / seconds:,.0f} | {n * width / seconds:,.0f} | {size / seconds / 1e6:,.1f} | "
                     f"{size / n:,.0f} |")
    section.lines = [*lines, "", "Columns repeat the reference table's types (ints, BIGINT UNSIGNED, DECIMAL(20,4), " "VARCHARs of 20-60 chars, a DATETIME string, a nullable TEXT, a DOUBLE)."]
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
    batch = reference_data(ctx, n)
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
    from avro_registry_sink.manager import SchemaManager
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from avro_registry_sink.routing.rules import TopicRouter
    from avro_registry_sink.settings.config import RegistryConfig

    section = Section("Schema manager per batch, no schema change (embedded registry over HTTP)")
    target_tables, budget = 1000, 0.05 if ctx.quick else 0.2  # seconds of steady batches per timed round

    # the yardstick: the columnar encoder on 1,000,000 reference rows (as in the encoders section)
    encode_n = min(ctx.rows, 10**6) if ctx.quick else 10**6
    batch = reference_data(ctx, encode_n)
    encoder = ColumnarEncoder(plan_for(reference_table()))

    def run_encode(b: pa.RecordBatch = batch) -> int:
        keys, values = encoder.encode(b)
        size = _out_bytes(keys, values)
        del keys, values
        return size

    encode_s = interleaved({"encode": run_encode}, ctx.repeats)["encode"].median * (10**6 / encode_n)
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
                    "same_s": runs["same"].median / loops["same"], "copies_s": runs["copies"].median / loops["copies"],
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
    section.lines = [*lines, "", f"Yardstick: `ColumnarEncoder.encode` of 1,000,000 reference rows, single thread = **{encode_s:,.3f} s** " f"({how}; median of {ctx.repeats} runs after a warm-up). " "Steady batches: median of " f"{ctx.repeats} interleaved rounds, each looping `prepare_batch` for about {budget * 1000.0:,.0f} ms; 'equal copies' " "passes deep copies of the table definitions (the cache's equality check instead of identity, as when definitions are " "rebuilt, e.g. storage-sink definitions completed from hints). HTTP requests are counted at the client's httpx transport" + (" and agree with `RegistryClient.cache_info().http_calls`; the manager registered nothing in steady batches." if not mismatched else f"; for {mismatched} tables they disagree with `cache_info().http_calls` or the manager registered again.")]
    return section


def _spark_frame(spark: Any, batch: pa.RecordBatch, work: Path) -> Any:
    """A cached DataFrame of the reference rows, read from Parquet (Spark has no uint64: DECIMAL(20,0))."""
    import pyarrow.parquet as pq

    arrow = pa.Table.from_batches([batch])
    arrow = arrow.set_column(4, "counter", arrow.column("counter").cast(pa.decimal128(20, 0)))
    path = work / "reference.parquet"
    pq.write_table(arrow, path, row_group_size=65_536)
    df = spark.read.parquet(str(path)).repartition(2).cache()
    df.count()
    return df


def to_avro_frame(df: Any, table: TableDef, key_id: int, value_id: int, topic: str, partitions: int) -> Any:
    """Spark's own ``to_avro`` producing what the stage produces: topic, TiCDC partition, framed key and value,
    headers, commit ts (all inserts, commit ts 0, as ``encode_table`` without ``_op``/``_commit_ts``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    from bench.anchor import typed_column

    schemas = derive_schemas(table)
    key_cols = [c.name for c in table.handle_key_columns()]
    header = lambda schema_id: F.lit(bytearray(b"\x00" + schema_id.to_bytes(4, "big")))  # noqa: E731
    prefix = f"{table.schema_name}\x1f{table.table}\x1f"
    hashed = F.concat(F.lit(prefix), *[x for k in key_cols for x in (F.col(k).cast("string"), F.lit("\x1f"))])
    headers = F.array(F.struct(F.lit("op").alias("key"), F.lit(bytearray(b"c")).alias("value")),
                      F.struct(F.lit("commit_ts").alias("key"), F.lit(bytearray(b"0")).alias("value")))
    return df.select(
        F.lit(topic).alias("topic"),
        F.pmod(F.crc32(hashed.cast("binary")), F.lit(partitions)).cast("int").alias("partition"),
        F.concat(header(key_id), to_avro(F.struct(*key_cols), schemas.key_json)).alias("key"),
        F.concat(header(value_id), to_avro(F.struct(*(typed_column(c.name, c) for c in table.columns)),
                                           schemas.value_json)).alias("value"),
        headers.alias("headers"), F.lit(0).cast("bigint").alias("commit_ts"),
    )


def bench_spark(ctx: Context) -> Section:
    """Spark on a cached DataFrame: identity mapInArrow, Spark's to_avro, the columnar stage, per-row, JSON path."""
    section = Section("Spark encoding stage, cached input, noop sink (both cores)")
    warnings.simplefilter("ignore", FutureWarning)
    from avro_registry_sink.spark.stages import stage as stage_module
    from avro_registry_sink.spark.stages.plan import StagePlan

    n = min(ctx.rows, 200_000 if ctx.quick else 1_000_000)
    spark = bench_session()
    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    table = reference_table()
    plan = plan_for(table)
    route = Route(schema="bench", table="orders", topic="bench_orders", key_subject="bench_orders-key",
                  value_subject="bench_orders-value")
    stage_plan = StagePlan(plan, "bench_orders", 6, route)
    df = _spark_frame(spark, reference_data(ctx, n), work)
    frames = [df]
    try:
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

        spark_avro = lambda frame: to_avro_frame(frame, table, 1, 2, "bench_orders", 6)  # noqa: E731
        from avro_registry_sink.spark.stages.jvm_stage import jvm_stage_gap

        engine = "arrow" if jvm_stage_gap(df, stage_plan) else "jvm"
        names = {"identity": "mapInArrow identity", "to_avro": "Spark to_avro (spark-avro) + header + partition",
                 "stage": f"encode_table, default engine ({engine}: SQL checks + to_avro)" if engine == "jvm" else
                 "encode_table, default engine (arrow)",
                 "arrow": "encode_table, engine=arrow (mapInArrow + columnar encoder)"}
        runs = interleaved({
            names["identity"]: lambda: write(df.mapInArrow(identity, df.schema)),
            names["to_avro"]: lambda: write(spark_avro(df)),
            names["stage"]: lambda: write(stage_module.encode_table(df, stage_plan)),
            names["arrow"]: lambda: write(stage_module.encode_table(df, stage_plan, engine="arrow")),
        }, ctx.options.get("rounds") or ctx.repeats)
        rows = [Row.of(t, n) for t in runs.values()]
        stage_row, avro_row, arrow_row = rows[2], rows[1], rows[3]
        arrow_row.ratio = fmt_ratio(per_round_ratios(runs[names["arrow"]], n, runs[names["to_avro"]], n)) + " of to_avro"
        ratios = per_round_ratios(runs[names["stage"]], n, runs[names["to_avro"]], n)
        stage_row.ratio, stage_row.meets = ratio_cell(ratios, 1.0)
        stage_row.ratio += " of to_avro"
        stage_row.target = ">= 1.0x Spark's to_avro"
        avro_row.ratio = fmt_ratio(per_round_ratios(runs[names["to_avro"]], n, runs[names["identity"]], n)) + " of identity"
        ctx.summary.append(f"Spark stage (encode_table, default engine: {engine}) / Spark's to_avro on the same cached "
                           f"DataFrame: **{stage_row.ratio}** "
                           f"(target >= 1.0x: {'met' if stage_row.meets else 'NOT met'})")
        # byte check: same rows in the same order from both
        head = df.limit(5000).cache()
        frames.append(head)
        ours = stage_module.encode_table(head, stage_plan).select("partition", "key", "value").collect()
        arrow = stage_module.encode_table(head, stage_plan, engine="arrow").select("partition", "key", "value").collect()
        theirs = spark_avro(head).select("partition", "key", "value").collect()
        same = [tuple(r) for r in ours] == [tuple(r) for r in theirs] == [tuple(r) for r in arrow]
        section.lines.append(f"`to_avro` + header + partition, the default engine and the Arrow engine give the same "
                             f"(partition, key, value) on the first {len(ours):,} rows: **{same}**.")

        per_row_n = min(n, 50_000 if ctx.quick else 300_000)
        small = df.limit(per_row_n).repartition(2).cache()
        small.count()
        frames.append(small)
        slow = interleaved({"per-row stage (RowEncoder = fastavro per row)":
                            lambda: write(small.mapInArrow(per_row, "key BINARY, value BINARY"))}, 1)
        rows += [Row.of(t, per_row_n, note=f"first {per_row_n:,} rows of the same DataFrame; one run")
                 for t in slow.values()]
        try:  # the JSON change path, as the job ran it before issue 11 (its API may change)
            from avro_registry_sink.changes import dump_image
            from avro_registry_sink.model import CHANGE_DDL

            changes_n = min(n, 50_000 if ctx.quick else 500_000)
            events = [{k: (str(v) if isinstance(v, Decimal) else v) for k, v in e.items()}
                      for e in reference_data(ctx, changes_n).to_pylist()]
            import pyarrow.parquet as pq

            change_table = pa.table({
                "schema": pa.array(["bench"] * changes_n), "table": pa.array(["orders"] * changes_n),
                "table_version": pa.array([0] * changes_n, pa.int64()), "op": pa.array(["c"] * changes_n),
                "commit_ts": pa.array(range(417318403368288260, 417318403368288260 + changes_n), pa.int64()),
                "before": pa.nulls(changes_n, pa.string()), "after": pa.array([dump_image(e) for e in events]),
                "source": pa.array([f"bench:{i}" for i in range(changes_n)]),
            })
            pq.write_table(change_table, work / "changes.parquet", row_group_size=65_536)
            del change_table, events  # read back by Spark: no driver-side rows in the plan
            changes = spark.read.schema(CHANGE_DDL).parquet(str(work / "changes.parquet")).repartition(2).cache()
            changes.count()
            frames.append(changes)
            plans = {("bench", "orders", 0): stage_plan}
            json_runs = interleaved({
                "mapInArrow identity (change rows)": lambda: write(changes.mapInArrow(identity, changes.schema)),
                "columnar stage (encode_changes, JSON images)": lambda: write(stage_module.encode_changes(changes, plans)),
            }, ctx.repeats)
            json_rows = [Row.of(t, changes_n) for t in json_runs.values()]
            t_id, t_enc = json_runs.values()
            json_rows[1].ratio = fmt_ratio(per_round_ratios(t_enc, changes_n, t_id, changes_n)) + " of its identity"
            rows += json_rows
        except Exception as exc:  # noqa: BLE001 - reported
            section.lines.append(f"JSON change path not measured: {type(exc).__name__}: {exc}")
        section.rows = rows
        section.lines.insert(0, (
            f"Both cores (local[*]); rows/s for the whole session. {n:,} cached rows (Parquet, "
            f"{df.rdd.getNumPartitions()} partitions), Arrow batches of "
            f"{spark.conf.get('spark.sql.execution.arrow.maxRecordsPerBatch')} rows; identity, to_avro and the stage run "
            f"in the same rounds ({ctx.options.get('rounds') or ctx.repeats} after a warm-up round); ratios per round. "
            "`to_avro` gets the columns cast as the Avro schema needs (BIGINT UNSIGNED wrapped into a long, TINYINT as "
            "int) and makes the same output columns as the stage (topic, TiCDC partition by CRC-32, framed key and "
            "value, headers)."))
    finally:
        for frame in frames:
            frame.unpersist()
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return section


#: The suite: name -> section function. Add entries to extend it.
SECTIONS: dict[str, Callable[[Context], Section]] = {
    "encoders": bench_encoders,
    "rows": bench_rows,
    "columns": bench_columns,
    "memory": bench_memory,
    "spark": bench_spark,
    "manager": bench_manager,
    "e2e": bench_end_to_end,
    "eos": bench_exactly_once,
    "big": bench_big,
    "changelog": bench_changelog,
    "ceiling": bench_ceiling,
}


def _ints(text: str | None) -> list[int] | None:
    return [int(float(x)) for x in text.split(",")] if text else None


def _configs(text: str | None) -> list[tuple[int, int, str]] | None:
    """``"1e6x1:file,5e6x10:kafka"`` -> ``[(1000000, 1, "file"), (5000000, 10, "kafka")]``."""
    if not text:
        return None
    out = []
    for item in text.split(","):
        size, sink = item.split(":")
        rows, tables = size.lower().split("x")
        out.append((int(float(rows)), int(tables), sink))
    return out


def _commit() -> str:
    """The commit benchmarked (and whether the work tree had changes)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "log", "-1", "--format=%h %cI %s"], cwd=root, capture_output=True, text=True,
                              timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True,
                               text=True, timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001 - not a git checkout
        return "unknown"
    return head[:120] + (" (with uncommitted changes)" if dirty else "")


def _deadline(text: str | None) -> float | None:
    """Epoch seconds of the next UTC ``HH:MM``."""
    if not text:
        return None
    import calendar

    hours, minutes = (int(x) for x in text.split(":"))
    now = time.time()
    today = time.gmtime(now)
    at = calendar.timegm((today.tm_year, today.tm_mon, today.tm_mday, hours, minutes, 0))
    return at if at > now else at + 86_400


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=None, help="rows of the reference data (default 1,000,000; quick 200,000)")
    parser.add_argument("--quick", action="store_true", help="small sizes, fewer rounds (checks the harness)")
    parser.add_argument("--only", default=None, help="comma-separated sections: " + ", ".join(SECTIONS))
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds of the encoder, Spark and end-to-end comparisons")
    parser.add_argument("--e2e-rows", default=None, help="end-to-end tree sizes, e.g. 1e5,1e6,5e6")
    parser.add_argument("--e2e-tables", default=None, help="end-to-end table counts, e.g. 1,10,100")
    parser.add_argument("--e2e-sinks", default=None, help="end-to-end sinks: file,kafka (Kafka at KAFKA_BOOTSTRAP)")
    parser.add_argument("--e2e-configs", default=None,
                        help="end-to-end configurations in this order, ROWSxTABLES:SINK, e.g. 1e6x1:file,5e6x100:kafka")
    parser.add_argument("--changelog-configs", default=None,
                        help="changelog configurations, MESSAGESxTABLES:FORMAT, e.g. 1e6x1:canal-json,1e6x100:debezium-json")
    parser.add_argument("--ceiling-configs", default=None,
                        help="ceiling harness configurations, ROWSxTABLES:INPUT, e.g. 1e5x1:storage-csv,1e5x1:canal-json-topic "
                             "(inputs: storage-csv, storage-canal-json, canal-json-topic, debezium-json-topic)")
    parser.add_argument("--ceiling-sinks", default=None, help="ceiling harness outputs: file,kafka (default both)")
    parser.add_argument("--e2e-rounds", type=int, default=None, help="end-to-end rounds per configuration (default 1)")
    parser.add_argument("--deadline", default=None, help="UTC HH:MM after which no new end-to-end configuration starts")
    parser.add_argument("--big-rows", type=float, default=None, help="rows of the big backlog (default 5e7; quick 2e5)")
    parser.add_argument("--big-timeout", type=float, default=None, help="seconds before the big run is stopped (default 3600)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="markdown results file (default bench/results.md)")
    args = parser.parse_args(argv)
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    options = {"rounds": args.rounds, "e2e_rows": _ints(args.e2e_rows), "e2e_tables": _ints(args.e2e_tables),
               "e2e_sinks": args.e2e_sinks.split(",") if args.e2e_sinks else None, "e2e_rounds": args.e2e_rounds,
               "e2e_configs": _configs(args.e2e_configs),
               "changelog_configs": _configs(args.changelog_configs),
               "ceiling_configs": _configs(args.ceiling_configs),
               "ceiling_sinks": args.ceiling_sinks.split(",") if args.ceiling_sinks else None,
               "deadline": _deadline(args.deadline),
               "big_rows": int(args.big_rows) if args.big_rows else None, "big_timeout": args.big_timeout}
    ctx = Context(rows=rows, quick=args.quick, repeats=args.rounds or (2 if args.quick else 5), options=options)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(SECTIONS)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    started = time.perf_counter()
    info = machine()
    command = f"python -m bench.run {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip()
    header = ["# Benchmark results", "", f"- machine (read at run time): {describe_machine(info)}",
              f"- code: {_commit()}",
              f"- command: `{command}`", f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}", ""]
    print("\n".join(header), flush=True)
    blocks = []
    try:
        for name in names:
            section = SECTIONS[name](ctx)
            blocks.append(section.markdown())
            print(blocks[-1], flush=True)
    finally:
        for close in reversed(ctx.cleanup):
            with contextlib.suppress(Exception):  # best effort at exit
                close()
        ctx.cleanup.clear()
    wall = time.perf_counter() - started
    summary = ["## Summary", ""] + [f"- {line}" for line in ctx.summary] + [f"- wall time: {wall:,.0f} s", ""]
    print("\n".join(summary), flush=True)
    kept = ""  # the section bench.evolution writes into the same file
    previous = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
    if "<!-- evolution:start -->" in previous and "<!-- evolution:end -->" in previous:
        kept = "\n" + previous[previous.index("<!-- evolution:start -->"):previous.index("<!-- evolution:end -->")] + \
            "<!-- evolution:end -->\n"
    args.out.write_text("\n".join(header) + "\n" + "\n".join(summary) + "\n" + "\n".join(blocks) + kept,
                        encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
