"""Commit-to-Kafka latency of a continuously running job, against the plain Spark streaming job, in one run.

For each rate (messages/s) and candidate, in the same SparkSession (the product's settings, ``local[*]``):

* a fresh canal-json source topic (TiCDC's messages of the reference table, :mod:`bench.changelog`) is fed at
  that rate for ``seconds`` seconds, in bursts every 10 ms, each message's commit ts (``_tidb.commitTs`` and
  ``es``) set to its send time: ``physical = send time in ms``, ``commitTs = physical << 18``;
* the candidate runs continuously with ``trigger(processingTime='0 seconds')``: the product's ``run_job``
  (the CLI's ``run --trigger-interval '0 seconds'``, ``--tables`` given), or the plain Spark streaming job
  (``readStream`` Kafka -> ``from_json`` -> casts -> ``to_avro`` -> Confluent header -> ``writeStream`` Kafka,
  :func:`bench.changelog.anchor_frame` without the ordering a streaming query cannot do);
* a consumer reads the output topic as it is written: latency = the time a record is consumed minus its commit's
  physical time (from the ``commit_ts`` header both candidates write), p50/p95/p99 over the records of the
  messages sent in the measured window (a warm-up before it lets the first micro-batches, Python workers and
  registrations pass).

``--storage``: the product on a TiCDC storage tree (CSV) that a writer extends with one data file every
``--file-interval`` seconds (the file's commit ts set to the time it appears): latency from a data file's
appearance to its records being consumed.

    python -m bench.latency --rates 2000,10000,20000 --seconds 60
    python -m bench.latency --storage --rates 2000 --seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.changelog import anchor_frame, canal_messages, create_table_sql
from bench.latency_parts import Result, Watcher, create_topics, delete_topics

_MARK_TS = "999999999999999999"  # commitTs placeholder (18 digits), replaced at send time
_MARK_ES = "9999999999999"  # es placeholder (13 digits)


def _templates(n: int, seed: int = 7) -> list[bytes]:
    """``n`` canal-json messages whose commit ts are placeholders."""
    import pyarrow as pa
    import pyarrow.compute as pc

    messages = canal_messages(n, 1, seed=seed)
    texts = messages.texts
    texts = pc.replace_substring_regex(texts, r'"commitTs":\d+', f'"commitTs":{_MARK_TS}')
    texts = pc.replace_substring_regex(texts, r'"es":\d+', f'"es":{_MARK_ES}')
    return [t.encode() for t in texts.cast(pa.string()).to_pylist()]


class Feeder(threading.Thread):
    """Sends messages at ``rate`` per second (bursts every 10 ms) with the send time as commit ts."""

    def __init__(self, bootstrap: str, topic: str, rate: int, seconds: float, templates: list[bytes],
                 partitions: int) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "1",
                                  "queue.buffering.max.messages": 1_000_000})
        self.topic, self.rate, self.seconds, self.templates, self.partitions = topic, rate, seconds, templates, partitions
        self.sent = 0
        self.first_ms = 0
        self.last_ms = 0

    def run(self) -> None:
        start = time.time()
        self.first_ms = int(start * 1000)
        tick = 0.01
        i = 0
        n = len(self.templates)
        while True:
            now = time.time()
            if now - start >= self.seconds:
                break
            due = int((now - start) * self.rate)
            while self.sent < due:
                ms = int(time.time() * 1000)
                body = self.templates[i % n].replace(_MARK_TS.encode(), str(ms << 18).encode(), 1).replace(
                    _MARK_ES.encode(), str(ms).encode(), 1)
                try:
                    self.producer.produce(self.topic, value=body, partition=i % self.partitions)
                except BufferError:
                    self.producer.poll(0.01)
                    continue
                i += 1
                self.sent += 1
            self.producer.poll(0)
            time.sleep(max(0.0, tick - (time.time() - now)))
        self.producer.flush(30)
        self.last_ms = int(time.time() * 1000)


def _measure(feeder: Feeder, watcher: Watcher, warmup_until_ms: int, result: Result) -> None:
    feeder.join()
    deadline = time.time() + 30  # let the last messages through
    while time.time() < deadline:
        got = sum(1 for c, _ in watcher.seen if c >= warmup_until_ms)
        if got >= result.sent:
            break
        time.sleep(0.2)
    watcher.stop.set()
    watcher.join(10)
    window = [(c, t) for c, t in watcher.seen if c >= warmup_until_ms]
    result.received = len(window)
    result.latencies_ms = [t - c for c, t in window]


def run_plain(spark: Any, bootstrap: str, rate: int, seconds: float, warmup: float, partitions: int,
              templates: list[bytes], registry_url: str, work: Path, tag: str) -> Result:
    from bench.anchor import register_tables
    from bench.changelog import reference_table

    table = reference_table(schema="bench", name="t000")
    source, rule = f"lat{tag}_plain_src", f"lat{tag}_plain_out_" + "{schema}_{table}"
    out_topic = rule.format(schema="bench", table="t000")
    create_topics(bootstrap, [source], partitions)
    create_topics(bootstrap, [out_topic], 3)
    ids = register_tables(registry_url, (table,), rule)
    frame = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
             .option("startingOffsets", "earliest").load())
    records = anchor_frame(spark, frame, "canal-json", (table,), ids, 3, rule, ordered=False)
    query = (records.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("kafka.enable.idempotence", "true").option("kafka.acks", "all")
             .option("checkpointLocation", str(work / "plain-ck"))
             .trigger(processingTime="0 seconds").start())
    result = Result("plain Spark streaming job", rate)
    try:
        result = _drive(bootstrap, source, [out_topic], rate, seconds, warmup, partitions, templates, result)
        result.batches = [p["durationMs"].get("triggerExecution", 0) / 1000 for p in query.recentProgress
                          if p.get("numInputRows")]
    finally:
        query.stop()
        delete_topics(bootstrap, f"lat{tag}_plain")
    return result


def _drive(bootstrap: str, source: str, outputs: list[str], rate: int, seconds: float, warmup: float,
           partitions: int, templates: list[bytes], result: Result) -> Result:
    watcher = Watcher(bootstrap, outputs)
    watcher.start()
    warm = Feeder(bootstrap, source, min(rate, 2000), warmup, templates, partitions)
    warm.start()
    warm.join()
    deadline = time.time() + 180  # the warm-up's records through: the job has caught up
    while len(watcher.seen) < warm.sent and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    start_ms = int(time.time() * 1000)
    feeder = Feeder(bootstrap, source, rate, seconds, templates, partitions)
    feeder.start()
    feeder.join()
    result.sent = feeder.sent
    _measure(feeder, watcher, start_ms, result)
    return result


def run_product(spark: Any, bootstrap: str, rate: int, seconds: float, warmup: float, partitions: int,
                templates: list[bytes], registry_url: str, work: Path, tag: str) -> Result:
    from avro_registry_sink.ops.progress import NullProgress
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.settings.config import RegistryConfig, parse_sink_uri
    from avro_registry_sink.spark.driver.job import run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source
    from avro_registry_sink.tabledef.ddl import parse_ddl
    from bench.changelog import reference_table

    table = reference_table(schema="bench", name="t000")
    source, rule = f"lat{tag}_prod_src", f"lat{tag}_prod_out_" + "{schema}_{table}"
    out_topic = rule.format(schema="bench", table="t000")
    create_topics(bootstrap, [source], partitions)
    sink = parse_sink_uri(f"kafka://{bootstrap}/?protocol=avro&partition-num=3")
    options = JobOptions(source=parse_source(f"canal-json+kafka://{bootstrap}/{source}"), checkpoint=work / "prod-ck",
                         sink=sink, topic_rule=rule, available_now=False, trigger_interval="0 seconds",
                         tables=tuple(parse_ddl(create_table_sql((table,)), default_schema="bench")))
    batches: list[float] = []

    class Progress(NullProgress):
        def batch(self, report: Any, totals: Any) -> None:
            batches.append(report.seconds)
            if os.environ.get("BENCH_LATENCY_DEBUG"):
                print(f"batch {report.batch_id}: {report.inputs} messages, {report.seconds:.2f} s", flush=True)

    result = Result("product run --trigger-interval '0 seconds'", rate)
    errors: list[BaseException] = []

    def job() -> None:
        try:
            with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
                run_job(spark, options, registry=client, progress=Progress(), timeout=warmup + seconds + 45)
        except BaseException as exc:  # noqa: BLE001 - reported with the result
            errors.append(exc)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    try:
        result = _drive(bootstrap, source, [out_topic], rate, seconds, warmup, partitions, templates, result)
    finally:
        thread.join(warmup + seconds + 90)
        delete_topics(bootstrap, f"lat{tag}_prod")
    result.batches = batches[1:]
    if errors:
        result.note = f"{type(errors[0]).__name__}: {errors[0]}"[:300]
    return result


def _row(r: Result) -> str:
    kept = "yes" if r.sent and r.received >= r.sent else f"**no** ({r.received:,} of {r.sent:,})"
    med_batch = statistics.median(r.batches) if r.batches else float("nan")
    return (f"| {r.rate:,} | {r.candidate} | {r.pct(50) / 1000:,.2f} | {r.pct(95) / 1000:,.2f} | {r.pct(99) / 1000:,.2f} | "
            f"{kept} | {med_batch:,.2f} | {r.note} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="2000,10000,20000")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the source topic")
    parser.add_argument("--candidates", default="plain,product")
    parser.add_argument("--storage", action="store_true", help="the storage source instead (product only)")
    parser.add_argument("--file-interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from bench.endtoend import bench_session, kafka_bootstrap

    bootstrap = kafka_bootstrap()
    if bootstrap is None:
        print("no broker at KAFKA_BOOTSTRAP", file=sys.stderr)
        return 1
    load_before = os.getloadavg()
    spark = bench_session()
    registry = EmbeddedRegistry()
    registry_url = registry.start()
    work = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    rates = [int(float(x)) for x in args.rates.split(",")]
    rows = []
    try:
        if args.storage:
            from bench.latency_storage import run_storage

            for rate in rates:
                tag = uuid.uuid4().hex[:6]
                r = run_storage(spark, bootstrap, rate, args.seconds, args.warmup, args.file_interval, registry_url,
                                work / f"s{tag}", tag)
                rows.append(_row(r))
                print(rows[-1], flush=True)
        else:
            templates = _templates(20_000)
            runners = {"plain": run_plain, "product": run_product}
            for rate in rates:
                for name in args.candidates.split(","):
                    tag = uuid.uuid4().hex[:6]
                    r = runners[name](spark, bootstrap, rate, args.seconds, args.warmup, args.partitions, templates,
                                      registry_url, work / f"{name}{tag}", tag)
                    rows.append(_row(r))
                    print(rows[-1], flush=True)
    finally:
        registry.stop()
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    print()
    print("| rate (msgs/s) | candidate | p50 s | p95 s | p99 s | kept up | median micro-batch s | note |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nload average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
          f"{', '.join(f'{x:.2f}' for x in load_after)}; {os.cpu_count()} cores")
    print(json.dumps({"argv": argv if argv is not None else sys.argv[1:]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
