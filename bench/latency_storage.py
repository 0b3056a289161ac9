"""Latency of the storage source: from a data file's appearance in a TiCDC storage tree to its records in Kafka.

A writer extends a storage tree (TiCDC's CSV, ``include-commit-ts=true``, the reference table) with one data
file every ``file_interval`` seconds holding ``rate * file_interval`` rows, each file written under another name
and renamed into place (its appearance), its rows' commit ts set to that moment (``physical ms << 18``). The
product runs continuously on the tree (``trigger(processingTime='0 seconds')``) into Kafka; latency = the time a
record is consumed minus its commit's physical time. Used by ``python -m bench.latency --storage``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.latency_parts import Result, Watcher, create_topics, delete_topics


class TreeWriter(threading.Thread):
    """Appends data files to a storage tree at a fixed pace."""

    def __init__(self, root: Path, rate: int, seconds: float, interval: float) -> None:
        super().__init__(daemon=True)
        from avro_registry_sink.tabledef.storage import write_table_schema_file
        from bench.data import reference_table

        self.root, self.rate, self.seconds, self.interval = root, rate, seconds, interval
        self.version = 449640294252544000
        self.table = reference_table(schema="bench", name="t000").model_copy(update={"version": self.version})
        root.mkdir(parents=True, exist_ok=True)
        write_table_schema_file(self.table, root)
        (root / "metadata").write_text('{"checkpoint-ts":0}', encoding="utf-8")
        self.directory = root / "bench" / "t000" / str(self.version) / "2024-05-09"
        (self.directory / "meta").mkdir(parents=True, exist_ok=True)
        self.number = 0
        self.sent = 0
        self.start_ms = 0

    def write_file(self, rows: int) -> None:
        import pyarrow as pa

        from avro_registry_sink.sources.storage import data_file_name
        from bench.data import generate
        from bench.tree import _csv_text, _write_file

        self.number += 1
        batch = generate(rows, self.table, start=self.sent)
        ops = np.zeros(rows, np.int64)
        temp = self.directory / f".tmp-{self.number}"
        ms = int(time.time() * 1000)
        commit_ts = np.full(rows, ms << 18, np.int64)
        _write_file(temp, _csv_text(batch, self.table, ops, commit_ts))
        name = data_file_name(self.number)
        temp.rename(self.directory / name)  # the file appears (its commit ts is about now)
        (self.directory / "meta" / "CDC.index").write_text(name + "\n", encoding="utf-8")
        self.sent += rows
        del pa

    def run(self) -> None:
        start = time.time()
        self.start_ms = int(start * 1000)
        k = 0
        while time.time() - start < self.seconds:
            self.write_file(max(1, int(self.rate * self.interval)))
            k += 1
            time.sleep(max(0.0, start + k * self.interval - time.time()))


def run_storage(spark: Any, bootstrap: str, rate: int, seconds: float, warmup: float, interval: float,
                registry_url: str, work: Path, tag: str) -> Result:
    from avro_registry_sink.formats.csv import CsvOptions
    from avro_registry_sink.ops.progress import NullProgress
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.settings.config import RegistryConfig, parse_sink_uri
    from avro_registry_sink.spark.driver.job import run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source

    root = work / "tree"
    writer = TreeWriter(root, rate, warmup, interval)
    writer.write_file(100)  # the first file: the job starts with something to do
    rule = f"lat{tag}_tree_" + "{schema}_{table}"
    out_topic = rule.format(schema="bench", table="t000")
    create_topics(bootstrap, [out_topic], 3)
    options = JobOptions(source=parse_source(str(root)), checkpoint=work / "ck",
                         sink=parse_sink_uri(f"kafka://{bootstrap}/?protocol=avro&partition-num=3"), topic_rule=rule,
                         available_now=False, trigger_interval="0 seconds", csv_options=CsvOptions(include_commit_ts=True))
    errors: list[BaseException] = []
    batches: list[float] = []

    class Progress(NullProgress):
        def batch(self, report: Any, totals: Any) -> None:
            batches.append(report.seconds)

    def job() -> None:
        try:
            with RegistryClient(RegistryConfig(urls=(registry_url,))) as client:
                run_job(spark, options, registry=client, progress=Progress(), timeout=warmup + seconds + 60)
        except BaseException as exc:  # noqa: BLE001 - reported with the result
            errors.append(exc)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    watcher = Watcher(bootstrap, [out_topic])
    watcher.start()
    result = Result(f"product, storage tree (a file every {interval:g} s)", rate)
    try:
        writer.start()  # warm-up
        writer.join()
        deadline = time.time() + 180
        while len(watcher.seen) < writer.sent and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        measured = TreeWriter.__new__(TreeWriter)
        measured.__dict__.update(writer.__dict__)
        threading.Thread.__init__(measured, daemon=True)
        measured.seconds, measured.sent = seconds, 0
        start_ms = int(time.time() * 1000)
        measured.start()
        measured.join()
        result.sent = measured.sent
        deadline = time.time() + 30
        while time.time() < deadline and sum(1 for c, _ in watcher.seen if c >= start_ms) < result.sent:
            time.sleep(0.2)
        watcher.stop.set()
        watcher.join(10)
        window = [(c, t) for c, t in watcher.seen if c >= start_ms]
        result.received = len(window)
        result.latencies_ms = [t - c for c, t in window]
    finally:
        thread.join(seconds + warmup + 120)
        delete_topics(bootstrap, f"lat{tag}_tree")
    result.batches = batches[1:]
    if errors:
        result.note = f"{type(errors[0]).__name__}: {errors[0]}"[:300]
    return result
