"""What ``--on-incompatible new-major`` costs the running job.

    KAFKA_BOOTSTRAP=127.0.0.1:19092 python -m bench.evolution                 # 3 rounds, 300,000 rows
    python -m bench.evolution --rows 100000 --rounds 2 --breaks 2 --out -     # print only

1. **Throughput with migration rules registered.** The same storage tree (the reference table, TiCDC CSV) through
   ``run_job --available-now`` twice per round, alternating: *plain* (a fresh registry, ``stop``) and *with rules*
   (``new-major``, the table's subjects already holding major 1 and the table's schema as major 2 with its
   JSONata migration rules). Rules run in consumers, not in the job: the ratio should be 1.
2. **The cost of a breaking change to the running job.** A continuous job (1-second trigger, ``new-major``) on a
   storage tree; new data files of the current table version, and breaking DDLs (a NOT NULL column renamed: a new
   schema file, then its first data file) are written one at a time; the time from a file's write to its last
   record being in Kafka (a consumer counts them) is measured for both. The difference is what the breaking change
   costs: registering major N+1 with its rules, the compatibility group, reading the subject's versions.

Writes its section between ``<!-- evolution:start -->`` and ``<!-- evolution:end -->`` of ``bench/results.md``
(``bench.run`` rewrites the rest of the file and keeps this section), with the machine and its load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from avro_registry_sink.settings.config import OnIncompatible, RegistryConfig, parse_sink_uri
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
from avro_registry_sink.tabledef.storage import write_table_schema_file
from bench.harness import describe_machine, machine

RESULTS = Path(__file__).with_name("results.md")
START, END = "<!-- evolution:start -->", "<!-- evolution:end -->"


def _sink(bootstrap: str | None, url: str, out: Path):
    if bootstrap:
        return parse_sink_uri(f"kafka://{bootstrap}/?protocol=avro&partition-num=3&schema-registry={url}")
    return parse_sink_uri(f"file://{out}?protocol=avro").model_copy(
        update={"registry": RegistryConfig(urls=(url,))})


# -- 1. throughput -------------------------------------------------------------------------------------------


def _register_major_2(url: str, table: TableDef, topic_rule: str) -> None:
    """The table's subjects: major 1 an older shape (``qty`` a string), major 2 the table's, with rules."""
    from avro_registry_sink.manager import SchemaManager
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.routing.rules import TopicRouter

    older = table.model_copy(update={"version": 1, "columns": tuple(
        c.model_copy(update={"type": MySQLType.VARCHAR, "length": 20}) if c.name == "qty" else c
        for c in table.columns)})
    with RegistryClient(RegistryConfig(urls=(url,))) as client:
        manager = SchemaManager(client, TopicRouter(topic_rule=topic_rule), on_incompatible="new-major")
        manager.prepare_batch([older])
        manager.prepare_batch([table])
        [major] = manager.take_majors()
        assert major.new_major == 2 and major.rules, major


def bench_throughput(spark: Any, rows: int, rounds: int, bootstrap: str | None, work: Path) -> dict[str, Any]:
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from avro_registry_sink.spark.driver.job import run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source
    from bench.tree import CSV_OPTIONS, storage_tree

    tree = storage_tree(rows, 1)
    timings: dict[str, list[float]] = {"plain (stop)": [], "with rules (new-major)": []}

    def run(name: str, policy: OnIncompatible, prepare: Callable[[str, str], None]) -> float:
        with EmbeddedRegistry() as registry:
            assert registry.url is not None
            place = work / uuid.uuid4().hex[:8]
            rule = "evb" + uuid.uuid4().hex[:6] + "_{schema}_{table}"
            prepare(registry.url, rule)
            sink = _sink(bootstrap, registry.url, place / "out").model_copy(update={"on_incompatible": policy})
            options = JobOptions(source=parse_source(str(tree.root)), checkpoint=place / "checkpoint", sink=sink,
                                 topic_rule=rule, csv_options=CSV_OPTIONS)
            started = time.perf_counter()
            result = run_job(spark, options)
            seconds = time.perf_counter() - started
            assert result.totals.rows == tree.rows and not result.totals.new_majors
            return seconds

    candidates = {"plain (stop)": lambda: run("plain", OnIncompatible.STOP, lambda url, rule: None),
                  "with rules (new-major)": lambda: run("rules", OnIncompatible.NEW_MAJOR,
                                                        lambda url, rule: _register_major_2(url, tree.tables[0], rule))}
    for fn in candidates.values():  # warm-up
        fn()
    ratios = []
    for _ in range(rounds):
        got = {name: fn() for name, fn in candidates.items()}
        for name, seconds in got.items():
            timings[name].append(seconds)
        ratios.append(got["plain (stop)"] / got["with rules (new-major)"])
    return {"rows": tree.rows, "timings": timings, "ratios": ratios}


# -- 2. cost of a breaking change ----------------------------------------------------------------------------

T0 = 449_640_294_064_586_752


def _table(version: int, value_column: str) -> TableDef:
    return TableDef(schema_name="bench", table="evo", version=version, primary_key=("id",), columns=(
        ColumnDef(name="id", type=MySQLType.BIGINT, nullable=False),
        ColumnDef(name=value_column, type=MySQLType.INT, nullable=False),
        ColumnDef(name="note", type=MySQLType.VARCHAR, length=32)))


def _canal_file(path: Path, table: TableDef, first_id: int, count: int) -> None:
    value = table.columns[1].name
    mysql = {"id": "bigint", value: "int", "note": "varchar"}
    lines = []
    for i in range(count):
        ts = table.version + ((i + 1) << 6)
        lines.append(json.dumps({
            "id": 0, "database": table.schema_name, "table": table.table, "pkNames": ["id"], "isDdl": False,
            "type": "INSERT", "es": ts >> 18, "ts": (ts >> 18) + 1, "sql": "", "sqlType": {k: 12 for k in mysql},
            "mysqlType": mysql, "old": None,
            "data": [{"id": str(first_id + i), value: str(i), "note": f"n{i}"}], "_tidb": {"commitTs": ts}}))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.rename(path)  # the file appears whole, as TiCDC's storage sink writes it


class _Counter:
    """Counts the records of a topic as they arrive (a consumer in a thread)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.count = 0
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"evb-{uuid.uuid4().hex}",
                                   "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                   "topic.metadata.refresh.interval.ms": 500})
        self._consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                self.count += 1

    def wait_for(self, total: int, timeout: float = 300.0) -> float:
        deadline = time.monotonic() + timeout
        while self.count < total:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.count} of {total} records after {timeout} s")
            time.sleep(0.01)
        return time.monotonic()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


def bench_breaking_change(spark: Any, breaks: int, batch_rows: int, bootstrap: str, work: Path) -> dict[str, Any]:
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from avro_registry_sink.spark.driver.job import run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sources.sources import parse_source

    root = work / "live-tree"
    prefix = "evl" + uuid.uuid4().hex[:6]
    topic = f"{prefix}_bench_evo"
    table = _table(T0, "v0")
    write_table_schema_file(table, root)
    _canal_file(root / "bench/evo" / str(table.version) / "CDC000001.json", table, 0, batch_rows)
    stop = threading.Event()
    failure: list[BaseException] = []
    base: list[float] = []
    breaking: list[float] = []
    with EmbeddedRegistry() as registry:
        assert registry.url is not None
        sink = _sink(bootstrap, registry.url, work / "out").model_copy(
            update={"on_incompatible": OnIncompatible.NEW_MAJOR})
        options = JobOptions(source=parse_source(str(root)), checkpoint=work / "live-checkpoint", sink=sink,
                             topic_rule=prefix + "_{schema}_{table}", available_now=False,
                             trigger_interval="1 second")

        def job() -> None:
            try:
                run_job(spark, options, until=lambda totals: stop.is_set())
            except BaseException as exc:  # noqa: BLE001 - reported below
                failure.append(exc)

        thread = threading.Thread(target=job, daemon=True)
        thread.start()
        counter = None
        try:
            deadline = time.monotonic() + 300
            while counter is None:
                try:
                    counter = _Counter(bootstrap, topic) if _topic_exists(bootstrap, topic) else None
                except Exception:  # noqa: BLE001
                    counter = None
                if failure or time.monotonic() > deadline:
                    raise RuntimeError(f"the job did not start: {failure}")
                time.sleep(0.2)
            expected = batch_rows
            counter.wait_for(expected)
            next_id = batch_rows
            for n in range(breaks):
                # a new data file of the current version
                written = time.monotonic()
                _canal_file(root / "bench/evo" / str(table.version) / f"CDC{n + 2:06d}.json", table, next_id,
                            batch_rows)
                next_id += batch_rows
                expected += batch_rows
                base.append(counter.wait_for(expected) - written)
                # a breaking DDL: the NOT NULL value column renamed, and the new version's first data file
                new = _table(table.version + (1_000 << 18), f"v{n + 1}")
                query = f"ALTER TABLE `bench`.`evo` RENAME COLUMN `{table.columns[1].name}` TO `{new.columns[1].name}`"
                written = time.monotonic()
                write_table_schema_file(new, root, query=query, ddl_type=5)
                _canal_file(root / "bench/evo" / str(new.version) / "CDC000001.json", new, next_id, batch_rows)
                next_id += batch_rows
                expected += batch_rows
                breaking.append(counter.wait_for(expected) - written)
                table = new
        finally:
            stop.set()
            thread.join(120)
            if counter is not None:
                counter.close()
        if failure:
            raise failure[0]
    return {"base": base, "breaking": breaking, "batch_rows": batch_rows}


def _topic_exists(bootstrap: str, topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).topics


# -- report --------------------------------------------------------------------------------------------------


def _span(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def report(throughput: dict[str, Any] | None, change: dict[str, Any] | None, info: dict[str, Any],
           loads: tuple[float, float], commit: str) -> str:
    lines = [START, "## Schema evolution: `--on-incompatible new-major` (`python -m bench.evolution`)", "",
             f"Machine: {describe_machine(info)}. Load average (1 min) at the start / end: "
             f"{loads[0]:.2f} / {loads[1]:.2f}. Code `{commit}`.", ""]
    if throughput is not None:
        rows = throughput["rows"]
        lines += ["| candidate | seconds (median, min-max) | rows/s (median) |", "|---|---|---|"]
        for name, seconds in throughput["timings"].items():
            lines.append(f"| {name} | {_span(seconds)} | {rows / statistics.median(seconds):,.0f} |")
        lines += ["", f"Throughput with the table's subjects at major 2 with JSONata migration rules registered, "
                  f"relative to the plain job, per round: **{_span(throughput['ratios'], '{:.2f}x')}** "
                  f"({rows:,} rows, one table, `run_job --available-now`, alternating in each round after a "
                  "warm-up pair; rules run in consumers, the job only finds the registered version by its text).",
                  ""]
    if change is not None:
        base, breaking = change["base"], change["breaking"]
        extra = [b - a for a, b in zip(base, breaking, strict=False)]
        lines += ["| new input, continuous job (1 s trigger) | seconds from the file's write to its last record "
                  "in Kafka (median, min-max) |", "|---|---|",
                  f"| a data file of the current table version ({change['batch_rows']} rows) | {_span(base)} |",
                  f"| a breaking DDL (NOT NULL column renamed) and its first data file ({change['batch_rows']} rows) "
                  f"| {_span(breaking)} |", "",
                  f"The cost of a breaking change to the running job: **{_span(extra)} s** more than a plain data "
                  f"file ({len(extra)} breaking changes, each a new major with UPGRADE and DOWNGRADE rules); "
                  "the job never stopped.", ""]
    lines.append(END)
    return "\n".join(lines)


def _commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip() or "?"
    except Exception:  # noqa: BLE001
        return "?"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=300_000, help="rows of the throughput tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--breaks", type=int, default=3, help="breaking changes made to the running job")
    parser.add_argument("--batch-rows", type=int, default=1_000, help="rows of each new data file")
    parser.add_argument("--only", choices=("throughput", "change"), default=None)
    parser.add_argument("--out", default=str(RESULTS), help="results file, or - to print only")
    args = parser.parse_args(argv)
    from avro_registry_sink.spark.driver.job import job_session

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP")
    load_start = os.getloadavg()[0]
    spark = job_session(kafka=bool(bootstrap))
    with tempfile.TemporaryDirectory(prefix="bench-evolution-") as tmp:
        work = Path(tmp)
        throughput = None if args.only == "change" else bench_throughput(spark, args.rows, args.rounds, bootstrap,
                                                                          work)
        change = None
        if args.only != "throughput":
            if not bootstrap:
                print("KAFKA_BOOTSTRAP is not set: the cost of a breaking change (records in Kafka) is skipped")
            else:
                change = bench_breaking_change(spark, args.breaks, args.batch_rows, bootstrap, work)
    text = report(throughput, change, machine(), (load_start, os.getloadavg()[0]), _commit())
    print(text)
    if args.out != "-":
        out = Path(args.out)
        current = out.read_text(encoding="utf-8") if out.exists() else ""
        if START in current and END in current:
            current = current[:current.index(START)] + text + current[current.index(END) + len(END):]
        else:
            current = current.rstrip("\n") + "\n\n" + text + "\n"
        out.write_text(current, encoding="utf-8")


if __name__ == "__main__":
    main()
