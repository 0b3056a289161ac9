"""End to end: the product's ``run --available-now`` against the pure-JVM anchor job, and the big backlog.

* :func:`bench_end_to_end`: for each tree (rows x tables) and sink (files, Kafka), rounds of
  ``anchor, product, anchor, product, ...`` in one SparkSession (the product's own session settings:
  ``local[*]``, its shuffle partitions; Spark's Kafka and Avro packages loaded once). The product is
  the CLI command itself (``avro-registry-sink run --source TREE --available-now --csv
  include-commit-ts=true``), called in-process so both share the session; each run gets a fresh state
  directory (checkpoint, embedded registry) and output; outputs and topics are deleted between runs,
  untimed. The per-round ratio is product rows/s over anchor rows/s (target >= 1.0).
* :func:`bench_big`: the CLI in a subprocess with default settings on a 5x10^7-row tree, its process
  tree's peak RSS (driver JVM = executors in local mode, plus Python workers) sampled from ``/proc``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness import (
    Context,
    ProcessTreeSampler,
    Row,
    Section,
    fmt_ratio,
    interleaved,
    per_round_ratios,
    stage_breakdown,
    timed,
)
from bench.tree import Tree, storage_tree

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["bench_big", "bench_end_to_end", "bench_exactly_once", "bench_session", "kafka_bootstrap"]

TOPIC_RULE = "{schema}_{table}"


def kafka_bootstrap() -> str | None:
    """The broker to benchmark against (``KAFKA_BOOTSTRAP``), if one answers."""
    address = os.environ.get("KAFKA_BOOTSTRAP")
    if not address:
        return None
    try:
        from confluent_kafka.admin import AdminClient

        AdminClient({"bootstrap.servers": address}).list_topics(timeout=10)
        return address
    except Exception:  # noqa: BLE001 - no broker: the Kafka rows are skipped and say so
        return None


#: Where the bench session writes Spark's event log (read by :func:`~bench.harness.stage_breakdown`).
EVENT_DIR = Path(tempfile.gettempdir()) / f"bench-spark-events-{os.getpid()}"


def bench_session() -> SparkSession:
    """The session the product's CLI would build (``job_session``), with the Kafka and Avro packages and
    Spark's event log on (stage times for the "where the time goes" table)."""
    from avro_registry_sink.spark.runtime.packages import ivy_dir as _ivy_dir
    from avro_registry_sink.spark.runtime.packages import kafka_package
    from avro_registry_sink.spark.runtime.session import local_session
    from bench.anchor import avro_package

    EVENT_DIR.mkdir(parents=True, exist_ok=True)
    return local_session(
        app_name="avro-registry-sink-bench",
        master=os.environ.get("AVRO_SINK_SPARK_MASTER", "local[*]"),
        **{"spark.sql.shuffle.partitions": os.environ.get("AVRO_SINK_SHUFFLE_PARTITIONS", "4"),
           "spark.jars.packages": f"{kafka_package()},{avro_package()}", "spark.jars.ivy": _ivy_dir(),
           "spark.eventLog.enabled": "true", "spark.eventLog.dir": EVENT_DIR.as_uri(),
           "spark.eventLog.compress": "false"},
    )


def _where_time_goes(entry: dict[str, Any], top: int = 4) -> str:
    """``"41 s: foreachPartition at sinks.py:166 55%, ...; outside Spark stages 12%"`` for one run."""
    wall_ms = (entry["end"] - entry["start"]) * 1000
    stages = stage_breakdown(EVENT_DIR, entry["start"] * 1000 - 1, entry["end"] * 1000 + 1)
    inside = sum(e["wall_ms"] for e in stages)
    parts = [f"{e['name']} {e['wall_ms'] / wall_ms:.0%}" for e in stages[:top]]
    if len(stages) > top:
        parts.append(f"{len(stages) - top} other stage kinds {sum(e['wall_ms'] for e in stages[top:]) / wall_ms:.0%}")
    return (f"{wall_ms / 1000:,.1f} s: " + ", ".join(parts)
            + f"; outside Spark stages (driver) {max(wall_ms - inside, 0) / wall_ms:.0%}")


def _cli(args: list[str]) -> dict[str, Any]:
    """The CLI in this process; its last JSON line (``{"status": "ok", "rows": ...}``)."""
    import typer

    from avro_registry_sink.cli import app

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = typer.main.get_command(app).main(args, prog_name="avro-registry-sink", standalone_mode=False)
    if code not in (None, 0):
        raise RuntimeError(f"avro-registry-sink {' '.join(args)} exited {code}: {out.getvalue()[-2000:]}")
    lines = [line for line in out.getvalue().splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def _product_args(tree: Tree, state: Path, sink_uri: str) -> list[str]:
    return ["run", "--source", str(tree.root), "--available-now", "--progress", "none",
            "--csv", "include-commit-ts=true", "--state-dir", str(state), "--sink-uri", sink_uri]


def _partitions() -> int:
    from avro_registry_sink.settings.config import SinkConfig

    return SinkConfig().partition_num


class _Kafka:
    """Admin helpers: topics per run, deleted afterwards."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def create(self, topics: list[str], partitions: int, config: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import NewTopic

        existing = set(self.admin.list_topics(timeout=30).topics)
        new = [NewTopic(t, partitions, 1, config=config or {}) for t in topics if t not in existing]
        for future in self.admin.create_topics(new).values() if new else ():
            future.result()

    def records(self, topic: str) -> int:
        """Records ever written to ``topic`` (sum of its partitions' high watermarks; retention does not lower them)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench-watermarks"})
        try:
            partitions = self.admin.list_topics(topic, timeout=30).topics[topic].partitions
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions)
        finally:
            consumer.close()

    def delete_prefixed(self, prefix: str) -> None:
        topics = [t for t in self.admin.list_topics(timeout=30).topics if t.startswith(prefix)]
        if not topics:
            return
        for future in self.admin.delete_topics(topics).values():
            with contextlib.suppress(Exception):
                future.result()
        deadline = time.time() + 60
        while time.time() < deadline and any(t.startswith(prefix) for t in self.admin.list_topics(timeout=30).topics):
            time.sleep(0.5)


def _run_candidates(spark: SparkSession, tree: Tree, sink: str, work: Path, registry_url: str,
                    kafka: _Kafka | None, log: list[dict[str, Any]],
                    deliveries: tuple[str, ...] = ("at-least-once",), ceiling: bool = False) -> dict[str, Callable[[], Any]]:
    """The candidates of one configuration as argument-less callables (each run writes a log entry): the anchor,
    the product once per delivery of ``deliveries`` (Kafka; files are exactly once anyway), and with ``ceiling``
    the ceiling harness (:mod:`bench.ceiling`: no Spark, two processes)."""
    from bench.anchor import anchor_job

    partitions = _partitions()
    counter = {"n": 0}

    def fresh(name: str) -> Path:
        counter["n"] += 1
        path = work / f"{name}-{counter['n']}"
        path.mkdir(parents=True)
        return path

    def anchor() -> int:
        place = fresh("anchor")
        rule = f"a{counter['n']}_{TOPIC_RULE}"
        start = time.time()
        with ProcessTreeSampler() as sampler:
            if sink == "file":
                anchor_job(spark, tree, registry_url, sink="file", target=str(place / "out"), partitions=partitions,
                           topic_rule=rule)
            else:
                assert kafka is not None
                kafka.create([rule.format(schema=t.schema_name, table=t.table) for t in tree.tables], partitions)
                anchor_job(spark, tree, registry_url, sink="kafka", target=kafka.bootstrap, partitions=partitions,
                           topic_rule=rule)
        log.append({"name": "anchor", "cpu": sampler.cpu_seconds, "rows": tree.rows, "place": place,
                    "prefix": f"a{counter['n']}_", "start": start, "end": time.time()})
        return tree.rows

    def product(delivery: str = "at-least-once") -> int:
        place = fresh("product")
        prefix = f"p{counter['n']}_"
        if sink == "file":
            uri = f"file://{place / 'out'}?protocol=avro"
            args = _product_args(tree, place / "state", uri)
        else:
            assert kafka is not None
            uri = f"kafka://{kafka.bootstrap}/?protocol=avro&partition-num={partitions}"
            args = [*_product_args(tree, place / "state", uri), "--topic-rule", prefix + TOPIC_RULE]
            if delivery != "at-least-once":
                args += ["--delivery", delivery]
        start = time.time()
        error = None
        with ProcessTreeSampler() as sampler:
            try:
                result = _cli(args)
            except Exception as exc:  # noqa: BLE001 - a failed run is a result (reported in the table)
                result, error = {}, " ".join(f"{type(exc).__name__}: {exc}".split())
        rows = int(result.get("rows", 0))
        name = "product" if delivery == "at-least-once" else f"product {delivery}"
        log.append({"name": name, "cpu": sampler.cpu_seconds, "rows": rows, "place": place, "prefix": prefix,
                    "result": result, "start": start, "end": time.time(), "error": error})
        return rows

    def ceiling_run() -> int:
        from bench.anchor import register_tables
        from bench.ceiling import CeilingInput, run_ceiling

        place = fresh("ceiling")
        prefix = f"c{counter['n']}_"
        start = time.time()
        # registered as the anchor registers (same registry, same schemas: the job's ids)
        ids = register_tables(registry_url, tree.tables, prefix + TOPIC_RULE)
        if sink == "file":
            result = run_ceiling(CeilingInput.of_tree(tree), ids, sink="file", target=str(place / "out"),
                                 partitions=partitions)
        else:
            assert kafka is not None
            kafka.create([prefix + TOPIC_RULE.format(schema=t.schema_name, table=t.table) for t in tree.tables],
                         partitions)
            result = run_ceiling(CeilingInput.of_tree(tree), ids, sink="kafka", target=kafka.bootstrap,
                                 partitions=partitions, prefix=prefix)
        log.append({"name": "ceiling", "cpu": result.cpu_total, "rows": result.records, "place": place,
                    "prefix": prefix, "result": result, "start": start, "end": time.time()})
        return result.records

    out: dict[str, Callable[[], Any]] = {"pure-JVM anchor": anchor}
    for delivery in deliveries:
        out[PRODUCT if delivery == "at-least-once" else f"{PRODUCT} --delivery {delivery}"] = \
            (lambda d=delivery: product(d))
    if ceiling:
        out[CEILING] = ceiling_run
    return out


PRODUCT = "product run --available-now"
CEILING = "ceiling (no Spark)"
EXACTLY_ONCE = f"{PRODUCT} --delivery exactly-once"


def _cleanup(log: list[dict[str, Any]], kafka: _Kafka | None, keep: bool = False) -> None:
    entry = log[-1]
    if not keep:
        shutil.rmtree(entry["place"], ignore_errors=True)
    if kafka is not None:
        kafka.delete_prefixed(entry["prefix"])


def same_bytes(product_out: Path, anchor_out: Path) -> tuple[bool, int, str]:
    """Whether both file outputs hold the same records in the same per-partition order; rows compared."""
    from avro_registry_sink.spark.sinks.sinks import read_file_sink

    def strip(topic: str) -> str:  # the anchor's topics carry a run prefix
        return topic.split("_", 1)[1] if topic.startswith("a") and topic[1:].split("_", 1)[0].isdigit() else topic

    product: dict[tuple[str, int], list[tuple[bytes | None, bytes | None]]] = {}
    for r in read_file_sink(product_out):
        product.setdefault((r.topic, r.partition), []).append((r.key, r.value))
    anchor: dict[tuple[str, int], list[tuple[bytes | None, bytes | None]]] = {}
    for part in sorted(anchor_out.rglob("part-*.json")):
        with open(part, encoding="utf-8") as fh:
            topic = strip(part.parent.name.split("=", 1)[1])
            for line in fh:
                raw = json.loads(line)
                key = bytes.fromhex(raw["key"]) if raw.get("key") else None
                value = bytes.fromhex(raw["value"]) if raw.get("value") else None
                anchor.setdefault((topic, int(raw["partition"])), []).append((key, value))
    rows = sum(len(v) for v in product.values())
    if product.keys() != anchor.keys():
        return False, rows, f"topics/partitions differ: {sorted(product)[:3]} vs {sorted(anchor)[:3]}"
    for k in product:
        if product[k] != anchor[k]:
            first = next((i for i, (a, b) in enumerate(zip(product[k], anchor[k], strict=False)) if a != b), None)
            return False, rows, f"{k}: {len(product[k])} vs {len(anchor[k])} records, first difference at {first}"
    return True, rows, ""


def bench_end_to_end(ctx: Context) -> Section:
    """The product's job against the pure-JVM anchor, same files, same session, interleaved rounds."""
    from avro_registry_sink.registry.embedded import EmbeddedRegistry

    section = Section("End to end: `run --available-now` vs the pure-JVM Spark job (same files, same session)")
    opts = ctx.options
    sizes = opts.get("e2e_rows") or ([20_000] if ctx.quick else [10**5, 10**6, 5 * 10**6])
    table_counts = opts.get("e2e_tables") or ([1, 10] if ctx.quick else [1, 10, 100])
    sinks = opts.get("e2e_sinks") or sorted({c[2] for c in opts.get("e2e_configs") or ()}) or ["file", "kafka"]
    rounds = opts.get("e2e_rounds") or 1
    deadline = opts.get("deadline")  # epoch seconds: configurations not started by then are listed as not run
    bootstrap = kafka_bootstrap() if "kafka" in sinks else None
    kafka = _Kafka(bootstrap) if bootstrap else None
    if "kafka" in sinks and kafka is None:
        section.lines.append("Kafka rows skipped: no broker at `KAFKA_BOOTSTRAP` (start one with `scripts/kafka.sh`).")
        sinks = [s for s in sinks if s != "kafka"]
    spark = bench_session()
    work = Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    table_lines = ["| rows | tables | sink | anchor rows/s (median, min-max) | product rows/s (median, min-max) | "
                   "product / anchor per round (median, min-max) | target | meets target | CPU s per 1M rows: "
                   "anchor / product / ceiling | ceiling rows/s (median, min-max) | product / ceiling per round | "
                   "ceiling CPU µs/row: read / parse / encode / write |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts: list[tuple[str, float, bool | None]] = []
    breakdown = ["| rows | tables | sink | product: wall, then the share of each Spark stage kind | "
                 "anchor: wall, then the share of each Spark stage kind |", "|---|---|---|---|---|"]
    not_run: list[str] = []
    registry = EmbeddedRegistry()
    registry_url = registry.start()
    ctx.cleanup.append(registry.stop)
    generated: list[str] = []
    try:
        # warm-up (JIT, Ivy, Python workers) and the byte check, on a small tree of two tables, to files
        small = storage_tree(min(20_000, min(sizes)), 2)
        log: list[dict[str, Any]] = []
        warm = _run_candidates(spark, small, "file", work, registry_url, None, log, ceiling=True)
        warm["pure-JVM anchor"]()
        warm["product run --available-now"]()
        warm[CEILING]()
        try:
            same, compared, why = same_bytes(log[1]["place"] / "out", log[0]["place"] / "out")
        except Exception as exc:  # noqa: BLE001 - e.g. the product run failed: no output
            same, compared, why = False, 0, f"{type(exc).__name__}: {exc}; product run error: {log[1].get('error')}"
        try:
            from bench.ceiling import file_records, same_records

            ceiling_same = same_records(file_records(log[2]["place"] / "out"), file_records(log[1]["place"] / "out"))
        except Exception as exc:  # noqa: BLE001 - reported
            ceiling_same = (False, 0, f"{type(exc).__name__}: {exc}")
        product_rows = log[1]["rows"]
        for entry in log:
            shutil.rmtree(entry["place"], ignore_errors=True)
        section.lines.append(
            f"Same records, same per-partition order, byte for byte (anchor vs product, {small.rows:,} rows, "
            f"{len(small.tables)} tables, file sink): **{same}** ({compared:,} records" + (f"; {why}" if why else "")
            + f"; the product reported {product_rows:,} rows).")
        section.lines.append(
            f"Same records, same per-partition order, byte for byte (ceiling harness vs product, same tree, file "
            f"sink, headers included): **{ceiling_same[0]}** ({ceiling_same[1]:,} records"
            + (f"; {ceiling_same[2]}" if ceiling_same[2] else "") + ").")
        configs = opts.get("e2e_configs") or [(r, t, k) for r in sizes for t in table_counts for k in sinks]
        for rows, tables, sink in configs:
            label = f"{rows:,} rows, {tables} tables, {sink}"
            if sink not in sinks:
                continue
            if deadline is not None and time.time() > deadline:
                not_run.append(label)
                continue
            tree = storage_tree(rows, tables)
            if tree.seconds:
                generated.append(f"{rows:,} rows x {tables} tables: {tree.files} files, {tree.bytes / 1e9:,.2f} GB "
                                 f"in {tree.seconds:,.0f} s")
            log = []
            candidates = _run_candidates(spark, tree, sink, work, registry_url, kafka, log, ceiling=True)
            timings = interleaved(candidates, rounds, warmup=False,
                                  between=lambda _name, lg=log: _cleanup(lg, kafka))
            anchor_t, product_t = timings["pure-JVM anchor"], timings["product run --available-now"]
            ratios = per_round_ratios(product_t, rows, anchor_t, rows)
            med = statistics.median(ratios) if ratios else float("nan")
            meets = med >= 1.0 if rows >= 10**6 else None
            cpu = {name: statistics.median([e["cpu"] for e in log if e["name"] == name]) for name in
                   ("anchor", "product", "ceiling")}
            ceiling_t = timings[CEILING]
            vs_ceiling = per_round_ratios(product_t, rows, ceiling_t, rows)
            ceiling_runs = [e["result"] for e in log if e["name"] == "ceiling"]
            ceiling_parts = " / ".join(f"{statistics.median(r.cpu_us_per_row(p) for r in ceiling_runs):,.2f}"
                                       for p in ("read", "parse", "encode", "write"))
            if {e["rows"] for e in log if e["name"] == "ceiling"} != {rows}:
                ceiling_parts += " (**ceiling wrote " + str(sorted({e["rows"] for e in log if e["name"] == "ceiling"})) \
                    + " records**)"
            delivered = {e["rows"] for e in log if e["name"] == "product"}
            failures = [e["error"] for e in log if e.get("error")]
            note = "" if delivered == {rows} else f" (product delivered {sorted(delivered)} rows)"
            if failures:
                note += f" **failed**: {failures[0][:300]}"
                meets = False if rows >= 10**6 else None
            last = {e["name"]: e for e in log}
            with contextlib.suppress(Exception):  # the breakdown is extra information
                breakdown.append(f"| {rows:,} | {tables} | {sink} | {_where_time_goes(last['product'])} | "
                                 f"{_where_time_goes(last['anchor'])} |")
            a_row, p_row = Row.of(anchor_t, rows), Row.of(product_t, rows)
            table_lines.append(
                f"| {rows:,} | {tables} | {sink} | {a_row.rows_per_s:,.0f} ({a_row.spread or '-'}) | "
                f"{p_row.rows_per_s:,.0f} ({p_row.spread or '-'}){note} | {fmt_ratio(ratios)} | "
                f"{'>= 1.0x' if rows >= 10**6 else ''} | {'' if meets is None else ('yes' if meets else '**no**')} | "
                f"{cpu['anchor'] / rows * 1e6:,.0f} / {cpu['product'] / rows * 1e6:,.0f} / "
                f"{cpu['ceiling'] / rows * 1e6:,.0f} | {Row.of(ceiling_t, rows).rows_per_s:,.0f} "
                f"({Row.of(ceiling_t, rows).spread or '-'}) | {fmt_ratio(vs_ceiling, '%')} | {ceiling_parts} |")
            verdicts.append((label, med, meets))
            print(table_lines[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    targeted = [v for v in verdicts if v[2] is not None]
    if targeted:
        met = [v for v in targeted if v[2]]
        worst = min(targeted, key=lambda v: v[1])
        ctx.summary.append(
            f"end-to-end job / pure-JVM anchor (>= 10^6 rows): met in **{len(met)} of {len(targeted)}** configurations "
            f"(target >= 1.0x each); ratios {', '.join(f'{v[0]}: {v[1]:.2f}x' for v in targeted)}; lowest {worst[1]:.2f}x "
            f"({worst[0]})")
    elif verdicts:
        ctx.summary.append("end-to-end job / pure-JVM anchor (below 10^6 rows, no target): "
                           + ", ".join(f"{v[0]}: {v[1]:.2f}x" for v in verdicts))
    if not_run:
        ctx.summary.append(f"end-to-end configurations not run (time budget of this run): {'; '.join(not_run)}")
    section.lines = [
        *section.lines, "", *table_lines, "",
        *([f"Not run (the run's deadline passed first): {'; '.join(not_run)}.", ""] if not_run else []),
        f"{rounds} round(s) per configuration, anchor, product, then the ceiling harness in each round (after one "
        "warm-up round); the ceiling's CPU is its two workers' (main threads by part, librdkafka's and Arrow's threads, "
        "setup), the registration in the bench process aside; "
        "rows/s = rows in the tree / wall seconds of the whole run (the product: the CLI command, session start "
        "excluded: the session exists; the anchor: registration, read, encode, sort, write). CPU seconds are the "
        "process tree's (driver JVM with the executors, Python workers) over the run. Kafka: one broker on this "
        f"machine (`scripts/kafka.sh`), topics of {_partitions()} partitions created in the run, deleted after it.",
        "Trees: TiCDC CSV (`include-commit-ts=true`), the reference table's 12 columns, 90% inserts, 6% updates, "
        "4% deletes, files of at most 300,000 rows, cached between runs (`AVRO_SINK_BENCH_CACHE`, default "
        "`~/.cache/avro-registry-sink/bench-trees`)"
        + (f"; generated this run: {'; '.join(generated)}" if generated else "") + ".",
        "", "Where the time goes (the last round of each configuration; Spark's event log: stage kinds by call "
        "site, wall time from submission to completion as a share of the run; time outside any stage is driver "
        "work: listing, schema resolution, registry, planning). Stage kinds are the operators of the stage's RDDs: "
        "`MapInArrow` a Python Arrow stage (the product's parse or encode), `Python RDD` a Python function over "
        "rows or partitions, `InMemoryTableScan` a read of a cached batch, `Exchange` a shuffle (the sort by topic "
        "and partition follows it), `Scan csv`/`Scan binaryFile` file reads, `WriteFiles` Spark's file writer; "
        "a stage that ends in a shuffle-read only (`Exchange`) is the sort plus the write to Kafka:", "", *breakdown,
    ]
    return section


# --------------------------------------------------------------------------------------------------
# Exactly-once delivery: its cost against at-least-once, and against the pure-JVM job


def bench_exactly_once(ctx: Context) -> Section:
    """``--delivery exactly-once`` against the default (at-least-once, Spark's Kafka sink) and the pure-JVM anchor,
    the three in the same rounds, same trees, same session, Kafka only."""
    from avro_registry_sink.registry.embedded import EmbeddedRegistry

    section = Section("Exactly-once delivery: `run --delivery exactly-once` vs at-least-once vs the pure-JVM job (Kafka)")
    opts = ctx.options
    rounds = opts.get("e2e_rounds") or (1 if ctx.quick else 3)
    configs = [c for c in (opts.get("e2e_configs") or ([(20_000, 2, "kafka")] if ctx.quick else
                                                       [(10**6, 1, "kafka"), (10**6, 10, "kafka")])) if c[2] == "kafka"]
    bootstrap = kafka_bootstrap()
    if bootstrap is None:
        section.lines.append("Skipped: no broker at `KAFKA_BOOTSTRAP` (start one with `scripts/kafka.sh`).")
        return section
    kafka = _Kafka(bootstrap)
    spark = bench_session()
    work = Path(tempfile.mkdtemp(prefix="bench-eos-"))
    registry = EmbeddedRegistry()
    registry_url = registry.start()
    ctx.cleanup.append(registry.stop)
    lines = ["| rows | tables | anchor rows/s | at-least-once rows/s | exactly-once rows/s | exactly-once / "
             "at-least-once per round | target | exactly-once / anchor per round | target | CPU s per 1M rows: "
             "anchor / at-least-once / exactly-once |", "|---|---|---|---|---|---|---|---|---|---|"]
    breakdown = ["| rows | tables | exactly-once: wall, then the share of each Spark stage kind | at-least-once: the "
                 "same |", "|---|---|---|---|"]
    try:
        warm = storage_tree(20_000, 2)
        log: list[dict[str, Any]] = []
        for fn in _run_candidates(spark, warm, "kafka", work, registry_url, kafka, log,
                                  ("at-least-once", "exactly-once")).values():
            fn()
            _cleanup(log, kafka)
        for rows, tables, _ in configs:
            tree = storage_tree(rows, tables)
            log = []
            candidates = _run_candidates(spark, tree, "kafka", work, registry_url, kafka, log,
                                         ("at-least-once", "exactly-once"))
            timings = interleaved(candidates, rounds, warmup=False, between=lambda _n, lg=log: _cleanup(lg, kafka))
            anchor_t, alo_t, eos_t = timings["pure-JVM anchor"], timings[PRODUCT], timings[EXACTLY_ONCE]
            vs_alo = per_round_ratios(eos_t, rows, alo_t, rows)
            vs_anchor = per_round_ratios(eos_t, rows, anchor_t, rows)
            cpu = {name: statistics.median([e["cpu"] for e in log if e["name"] == name] or [float("nan")])
                   for name in ("anchor", "product", "product exactly-once")}
            failures = [e["error"] for e in log if e.get("error")]
            delivered = {e["rows"] for e in log if e["name"].startswith("product")}
            note = "" if delivered == {rows} else f" (delivered {sorted(delivered)} rows)"
            if failures:
                note += f" **failed**: {failures[0][:300]}"
            med_alo = statistics.median(vs_alo) if vs_alo else float("nan")
            med_anchor = statistics.median(vs_anchor) if vs_anchor else float("nan")
            ok_alo, ok_anchor = med_alo >= 0.85 and not failures, med_anchor >= 1.0 and not failures
            a_row, l_row, e_row = Row.of(anchor_t, rows), Row.of(alo_t, rows), Row.of(eos_t, rows)
            lines.append(
                f"| {rows:,} | {tables} | {a_row.rows_per_s:,.0f} ({a_row.spread or '-'}) | {l_row.rows_per_s:,.0f} "
                f"({l_row.spread or '-'}) | {e_row.rows_per_s:,.0f} ({e_row.spread or '-'}){note} | {fmt_ratio(vs_alo)} "
                f"| >= 0.85x | {'yes' if ok_alo else '**no**'} | {fmt_ratio(vs_anchor)} | >= 1.0x | "
                f"{'yes' if ok_anchor else '**no**'} | {cpu['anchor'] / rows * 1e6:,.0f} / "
                f"{cpu['product'] / rows * 1e6:,.0f} / {cpu['product exactly-once'] / rows * 1e6:,.0f} |")
            print(lines[-1], flush=True)
            last = {e["name"]: e for e in log}
            with contextlib.suppress(Exception):
                breakdown.append(f"| {rows:,} | {tables} | {_where_time_goes(last['product exactly-once'])} | "
                                 f"{_where_time_goes(last['product'])} |")
            ctx.summary.append(
                f"exactly-once / at-least-once, {rows:,} rows x {tables} tables to Kafka: **{med_alo:.2f}x** "
                f"(target >= 0.85x: {'met' if ok_alo else 'not met'}); exactly-once / pure-JVM anchor: "
                f"**{med_anchor:.2f}x** (target >= 1.0x: {'met' if ok_anchor else 'not met'})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    section.lines = [
        *lines, "",
        f"{rounds} round(s) per configuration, in each round the anchor, the product with the default delivery "
        "(at-least-once: Spark's Kafka sink), then the product with `--delivery exactly-once` (its default writer: "
        "the JVM slice writer, the Kafka client's transactional producer in the executors' JVM, one transaction per "
        "Spark partition of the write, a commit token "
        "per transaction in the control topic, the committed tokens read and the writers' open transactions aborted "
        "at start). Each product run has a fresh checkpoint (so a new query id); topics of "
        f"{_partitions()} partitions, deleted after each run. Rows/s as in the end-to-end section.",
        "", "Where the time goes (last round):", "", *breakdown,
    ]
    return section


# --------------------------------------------------------------------------------------------------
# The big backlog


def _cause(stderr: str) -> str:
    """The JVM's or Python's own reason in a failed run's error output (OutOfMemoryError first)."""
    import re

    for pattern in (r"java\.lang\.OutOfMemoryError[^\n]*", r"(?m)^\S*(?:Error|Exception)\b[^\n]{0,200}$"):
        found = re.findall(pattern, stderr)
        if found:
            return ": " + found[0 if "OutOfMemory" in pattern else -1].strip()[:200]
    return ""


def bench_big(ctx: Context) -> Section:
    """A 5x10^7-row tree through the CLI with default settings: completes? peak memory per million rows."""
    section = Section("Big backlog with default settings (the CLI in a subprocess)")
    rows = ctx.options.get("big_rows") or (200_000 if ctx.quick else 5 * 10**7)
    timeout = ctx.options.get("big_timeout") or 3600
    gen_s, tree = timed(lambda: storage_tree(rows, 1))
    bootstrap = kafka_bootstrap()
    work = Path(tempfile.mkdtemp(prefix="bench-big-"))
    kafka = _Kafka(bootstrap) if bootstrap else None
    try:
        if kafka is not None:
            # the output is as large as the input: the broker keeps about 1 GB per topic (no disk filled)
            topic = "big_" + TOPIC_RULE.format(schema=tree.schema, table=tree.tables[0].table)
            kafka.create([topic], _partitions(), {"retention.bytes": str(2**28), "segment.bytes": str(2**26)})
            uri = f"kafka://{bootstrap}/?protocol=avro"
            extra = ["--topic-rule", "big_" + TOPIC_RULE]
            sink = f"Kafka (`{bootstrap}`, topic retention 256 MiB per partition)"
        else:
            uri, extra, sink = f"file://{work / 'out'}?protocol=avro", [], "files"
        args = [sys.executable, "-m", "avro_registry_sink.cli", *_product_args(tree, work / "state", uri), *extra]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AVRO_SINK_SPARK", "AVRO_SINK_SHUFFLE"))}
        started = time.perf_counter()
        with open(work / "stdout", "wb") as out, open(work / "stderr", "wb") as err:
            proc = subprocess.Popen(args, stdout=out, stderr=err, env=env)
            with ProcessTreeSampler(proc.pid, interval=0.5) as sampler:
                try:
                    code = proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    code = None
        seconds = time.perf_counter() - started
        stdout = (work / "stdout").read_text(encoding="utf-8", errors="replace")
        stderr = (work / "stderr").read_text(encoding="utf-8", errors="replace")
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        result = json.loads(lines[-1]) if lines else {}
        delivered = int(result.get("rows", 0))
        in_kafka = kafka.records(topic) if kafka is not None else None
        ok = code == 0 and delivered == rows
        status = ("completed" if ok else
                  f"did not complete (exit {code if code is not None else f'none: killed after {timeout} s'}, "
                  f"{delivered:,} rows reported" + (f", {in_kafka:,} records in Kafka" if in_kafka is not None else "")
                  + f"{_cause(stderr)})")
        peak = sampler.peak_rss
        section.lines = [
            "| rows | input | sink | status | wall s | rows/s | peak RSS (driver + executors + Python workers) | "
            "peak RSS per million rows | CPU s per 1M rows |", "|---|---|---|---|---|---|---|---|---|",
            f"| {rows:,} | {tree.files} files, {tree.bytes / 1e9:,.1f} GB | {sink} | {status if ok else f'**{status}**'} | "
            f"{seconds:,.0f} | {f'{rows / seconds:,.0f}' if ok else '-'} | {peak / 2**30:,.2f} GiB | "
            f"{peak / 2**20 / (rows / 1e6):,.1f} MiB{'' if ok else ' (until it stopped)'} | "
            f"{sampler.cpu_seconds / rows * 1e6:,.1f} |",
            "",
            f"Command: `avro-registry-sink {' '.join(args[3:])}` with no memory or batch settings (Spark's defaults: "
            f"1 GiB driver heap, local[*]). Peak RSS is the largest sum over the process tree, sampled every 0.5 s. "
            f"Tree: {'reused from the cache' if not tree.seconds else f'generated in {gen_s:,.0f} s'}.",
        ]
        if not ok:
            tail = " ".join(stderr.strip().splitlines()[-3:])[-600:]
            section.lines.append(f"Last error output: `{tail}`")
            (Path(tempfile.gettempdir()) / "bench-big-stderr.txt").write_text(stderr, encoding="utf-8")
        ctx.summary.append(f"{rows:,}-row backlog with default settings: **{status}** in {seconds:,.0f} s; peak RSS "
                           f"{peak / 2**30:,.2f} GiB = **{peak / 2**20 / (rows / 1e6):,.1f} MiB per million rows**")
        if kafka is not None:
            kafka.delete_prefixed("big_")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return section
