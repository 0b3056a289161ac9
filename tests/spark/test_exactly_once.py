"""Exactly-once delivery to Kafka under faults (issue 18): a real broker, a real (embedded, HTTP) registry.

Each test grows a source in waves (a multi-table TiCDC storage tree, or a canal-json topic) and runs the job
on it again and again while faults are injected (:mod:`~avro_registry_sink.failpoints`), at random points
chosen by a seeded generator (``AVRO_SINK_FAULT_SEED`` to replay one):

* the CLI in a subprocess with task retries on (``local[2,8]``): ``kill -9`` of Python workers while
  encoding, producing, before and after the commit (Spark retries the task: a retry finds a committed
  slice's token, or aborts what the dead attempt left open), an injected task failure, and ``kill -9`` of
  the driver at a point between the batch's start and Spark's commit (also from a worker while it produces:
  its transaction then belongs to a dead run, and the next run fences it);
* ``run_job`` in this process on the session's Spark: ``kill -9`` of a Python worker (the batch fails and
  the next run retries it), a failure on the driver between the Kafka commit and Spark's;
* storage only: a misconfiguration verdict (a file contradicting ``--csv output-old-value=false``) and a
  registry refusal (an incompatible table version), each followed by a rerun with the fix;
* a broker restart while a slice produces (its own broker, ``scripts/kafka.sh restart``).

After the last, clean, run a plain confluent-kafka consumer with ``isolation.level=read_committed`` counts
every (topic, key, commit ts) exactly once, and exactly the source's rows. The same scenario with
``--delivery at-least-once`` shows the duplicates (so the test can fail).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections import Counter
from pathlib import Path

import pytest

from avro_registry_sink.errors import AvroSinkError
from avro_registry_sink.failpoints import COUNTS_ENV, DRIVER_ENV, ENV, PAUSE_ENV, WORKER_POINTS, FailpointError
from avro_registry_sink.formats.csv import CsvOptions
from avro_registry_sink.model import Op
from avro_registry_sink.registry.client import RegistryClient
from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.settings.config import RegistryConfig, parse_sink_uri
from avro_registry_sink.spark.audit.verify import verify_run
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from avro_registry_sink.tabledef.ddl import parse_ddl
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.support.depth import full_depth, rounds
from tests.support.job import canal_dml
from tests.support.servers import REPO, ensure_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.faults,
              pytest.mark.filterwarnings("ignore::FutureWarning")]

SEED = int(os.environ.get("AVRO_SINK_FAULT_SEED", "18"))
V1 = 449640297946939392
V2 = V1 + 5_000_000
DDL = {
    "shop.a": "CREATE TABLE shop.a (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL)",
    "shop.b": "CREATE TABLE shop.b (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL)",
    "crm.c": "CREATE TABLE crm.c (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NULL)",
}
#: shop.a's second version: ``v`` from VARCHAR to INT, which the registry refuses (BACKWARD) until told otherwise.
DDL_A2 = "CREATE TABLE shop.a (id INT NOT NULL PRIMARY KEY, v INT NULL)"
RUN_TIMEOUT = 300
#: Driver points where a subprocess run is killed (``kill -9``), and worker points that kill the driver (later
#: passes than the workers' own kills, which come first).
DRIVER_KILLS = ("job.after-side-read=kill@2", "job.after-sink-write=kill", "job.after-side-write=kill@2",
                "eos.before-resolved=kill@2", "eos.produced=kill-driver@3", "eos.after-commit=kill-driver@3")
#: Driver points where an in-process run fails (a raise: this process must live).
DRIVER_RAISES = ("job.after-side-read", "job.after-sink-write", "job.after-side-write", "eos.before-resolved",
                 "eos.after-abort")


def _table(name: str, version: int = V1, ddl: str | None = None):
    return parse_ddl(ddl or DDL[name])[0].model_copy(update={"version": version})


# --------------------------------------------------------------------------------------------------
# Sources that grow in waves; what a read_committed consumer must see


class Source:
    """Waves of changes to three tables: per table and wave 4 inserts, 1 update and 1 delete, each row with
    its own commit ts; ``expected`` holds (topic, id, commit ts) of every row written so far."""

    def __init__(self, work: Path, prefix: str) -> None:
        self.work = work
        self.prefix = prefix
        self.expected: set[tuple[str, int, int]] = set()
        self.ts = V1
        self.wave = 0
        self.values: dict[tuple[str, int], str] = {}

    def topic(self, name: str) -> str:
        return f"{self.prefix}_{name.replace('.', '_')}"

    def input_of(self, key: int) -> int:
        """The input a row comes from (a source partition); storage: one data directory per table."""
        return 0

    def resolved(self) -> dict[str, int]:
        """Per table: the lowest, over the inputs, of the newest commit ts (what the job's resolved ts is once
        everything is delivered)."""
        newest: dict[tuple[str, int], int] = {}
        for name in DDL:
            for topic, key, ts in self.expected:
                if topic == self.topic(name):
                    where = (name, self.input_of(key))
                    newest[where] = max(newest.get(where, 0), ts)
        return {name: min(ts for (n, _), ts in newest.items() if n == name) for name in DDL}

    def _changes(self, name: str) -> list[tuple[Op, int, int, str | None, str]]:
        """(op, id, commit ts, value before, value after) of one table for this wave."""
        base = self.wave * 4
        out = []
        for i in range(1, 5):
            self.ts += 3
            out.append((Op.INSERT, base + i, self.ts, None, f"w{self.wave}-{i}"))
        for op, target in ((Op.UPDATE, base + 1), (Op.DELETE, base + 2)):
            self.ts += 3
            out.append((op, target, self.ts, f"w{self.wave}-{target - base}", f"u{self.wave}"))
        for _op, key, ts, _, _ in out:
            self.expected.add((self.topic(name), key, ts))
        return out


class StorageSource(Source):
    """A TiCDC storage tree (CSV, include-commit-ts=true), one data file per table and wave."""

    def __init__(self, work: Path, prefix: str) -> None:
        super().__init__(work, prefix)
        self.root = work / "in"
        for name in DDL:
            write_table_schema_file(_table(name), self.root)
        self.a_version = V1

    def add_wave(self, *, old_value: str | None = None, a_version: int | None = None) -> None:
        """One file per table; ``old_value``: that table's file written with output-old-value=true (inserts
        only); ``a_version``: shop.a's rows go to that table version from now on."""
        self.wave += 1
        if a_version is not None and a_version != self.a_version:
            write_table_schema_file(_table("shop.a", a_version, DDL_A2), self.root)
            self.a_version = a_version
        for name in DDL:
            schema, table = name.split(".")
            version = self.a_version if name == "shop.a" else V1
            changes = self._changes(name)
            lines = []
            for op, key, ts, before, after in changes:
                if name == old_value:
                    if op is not Op.INSERT:
                        self.expected.discard((self.topic(name), key, ts))
                        continue
                    lines.append(f'"I","{table}","{schema}",{ts},false,{key},"{after}"')
                    continue
                value = (str(self.wave) if version != V1 else f'"{after if op is not Op.DELETE else before}"')
                lines.append(f'"{op.value[0].upper()}","{table}","{schema}",{ts},{key},{value}')
            path = self.root / schema / table / str(version) / f"CDC{self.wave:020d}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\r\n" for line in lines))

    def source_arg(self) -> str:
        return str(self.root)

    def cli_args(self) -> list[str]:
        return ["--csv", "include-commit-ts=true", "--max-files-per-trigger", "3"]

    def job_fields(self, csv: CsvOptions | None = None) -> dict:
        return {"csv_options": csv or CsvOptions(include_commit_ts=True), "max_files_per_trigger": 3}


class CanalSource(Source):
    """A canal-json topic of three partitions (rows dispatched by key), on ``bootstrap``."""

    def __init__(self, work: Path, prefix: str, bootstrap: str) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        super().__init__(work, prefix)
        self.bootstrap = bootstrap
        self.source_topic = f"{prefix}-canal"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(self.source_topic, num_partitions=3,
                                                    replication_factor=1)]).values():
            future.result(30)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})

    def add_wave(self, **_: object) -> None:
        self.wave += 1
        for name in DDL:
            table = _table(name)
            for op, key, ts, before, after in self._changes(name):
                old = {"id": key, "v": before} if op is not Op.INSERT else None
                new = {"id": key, "v": after} if op is not Op.DELETE else None
                self.producer.produce(self.source_topic, canal_dml(table, op, ts, old, new).encode(),
                                      partition=self.input_of(key))
        assert self.producer.flush(30) == 0

    def input_of(self, key: int) -> int:
        return zlib.crc32(str(key).encode()) % 3

    def source_arg(self) -> str:
        return f"canal-json+kafka://{self.bootstrap}/{self.source_topic}"

    def cli_args(self) -> list[str]:
        return ["--max-offsets-per-trigger", "30"]

    def job_fields(self, csv: CsvOptions | None = None) -> dict:
        return {"max_offsets_per_trigger": 30}


def committed_records(bootstrap: str, topics: list[str], timeout: float = 60.0) -> Counter:
    """(topic, id, commit ts) -> how often a plain read_committed consumer reads it (keys decoded from
    their Avro body: one ``int``; the commit ts from the record's header)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    metadata = consumer.list_topics(timeout=30)
    assignment = [TopicPartition(t, p, 0) for t in topics if t in metadata.topics
                  for p in metadata.topics[t].partitions]
    consumer.assign(assignment)
    pending = {(tp.topic, tp.partition) for tp in assignment}
    seen: Counter = Counter()
    deadline = time.monotonic() + timeout
    try:
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard((msg.topic(), msg.partition()))
                    continue
                raise AssertionError(msg.error())
            body, shift, key = msg.key()[5:], 0, 0
            for byte in body:
                key |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
            headers = dict(msg.headers() or [])
            seen[(msg.topic(), (key >> 1) ^ -(key & 1), int(headers["commit_ts"]))] += 1
    finally:
        consumer.close()
    assert not pending, f"partitions not read to their end (a transaction left open?): {sorted(pending)}"
    return seen


# --------------------------------------------------------------------------------------------------
# Running the job, with faults


class Faults:
    """Failpoints for runs in this process (a spec file read at every pass, counts across processes) and
    for CLI subprocesses (their own environment)."""

    def __init__(self, spark, work: Path) -> None:
        self.spark = spark
        self.spec_file = work / "failpoints"
        self.counts = work / "failpoint-counts"
        self.counts.mkdir(parents=True, exist_ok=True)
        self.spec_file.write_text("")
        self.kills = 0  # kill -9 injections that fired
        self.log: list[str] = []
        self._saved = {k: os.environ.get(k) for k in (ENV, COUNTS_ENV)}
        self.setenv(ENV, f"@{self.spec_file}")
        self.setenv(COUNTS_ENV, str(self.counts))

    def setenv(self, name: str, value: str | None) -> None:
        """``name`` for this process, for the Python workers of new stages, and for the JVM slice writer (a Java
        system property: the session's JVM keeps the environment it started with); ``None`` unsets it in all three."""
        environment = self.spark.sparkContext.environment
        system = self.spark.sparkContext._jvm.java.lang.System
        if value is None:
            os.environ.pop(name, None)
            environment.pop(name, None)
            system.clearProperty(name)
        else:
            os.environ[name] = environment[name] = value
            system.setProperty(name, value)

    def close(self) -> None:
        self.spec_file.write_text("")
        for key, value in self._saved.items():
            self.setenv(key, None)
            if value is not None:
                os.environ[key] = value

    def arm(self, spec: str) -> None:
        shutil.rmtree(self.counts, ignore_errors=True)
        self.counts.mkdir()
        self.spec_file.write_text(spec)

    def fired(self, spec: str) -> list[str]:
        """The items of ``spec`` whose pass came (counted under ``self.counts``)."""
        out = []
        for item in filter(None, spec.split(",")):
            point, _, action = item.partition("=")
            nth = int(action.partition("@")[2] or 1)
            if passes_in(self.counts, point) >= nth:
                out.append(item)
        return out

    def count(self, spec: str, outcome: str) -> None:
        fired = self.fired(spec)
        self.kills += sum(1 for item in fired if "=kill" in item)
        self.log.append(f"{spec or '-'} -> {outcome}; fired {fired}")


def passes_in(directory: Path, point: str) -> int:
    path = directory / point
    return path.stat().st_size if path.exists() else 0


class Scenario:
    """One source, one checkpoint, one registry: runs in this process and as CLI subprocesses."""

    def __init__(self, spark, source: Source, bootstrap: str, registry_url: str, delivery: str, faults: Faults,
                 control_topic: str, tables_sql: Path, producer: str = "auto") -> None:
        self.spark = spark
        self.producer = producer  # exactly once: "confluent" writes slices in Python workers, else in the JVM
        self.source = source
        self.bootstrap = bootstrap
        self.registry_url = registry_url
        self.delivery = delivery
        self.faults = faults
        self.control_topic = control_topic
        self.tables_sql = tables_sql
        self.checkpoint = source.work / "checkpoint"

    def options(self, csv: CsvOptions | None = None) -> JobOptions:
        sink = parse_sink_uri(f"kafka://{self.bootstrap}/?protocol=avro&partition-num=3").model_copy(update={
            "delivery": self.delivery, "control_topic": self.control_topic,
            "registry": RegistryConfig(urls=(self.registry_url,))})
        return JobOptions(source=parse_source(self.source.source_arg()), checkpoint=self.checkpoint, sink=sink,
                          kafka_producer=self.producer,
                          topic_rule=self.source.prefix + "_{schema}_{table}",
                          tables=tuple(_table(n) for n in DDL), **self.source.job_fields(csv))

    def here(self, spec: str = "", csv: CsvOptions | None = None) -> str:
        """A run in this process; ``"ok"`` or the error's first words."""
        self.faults.arm(spec)
        started = time.monotonic()
        try:
            run_job(self.spark, self.options(csv))
            outcome = "ok"
        except (AvroSinkError, FailpointError) as exc:  # a failed batch, or a failure at the run's start
            outcome = "failed: " + " ".join(str(exc).split())[:300]
        self.faults.count(spec, f"{outcome} ({time.monotonic() - started:.0f} s)")
        self.faults.arm("")
        return outcome

    def cli(self, spec: str) -> subprocess.CompletedProcess:
        """A CLI run in a subprocess (its own Spark, task retries on) with ``spec``'s failpoints."""
        self.faults.arm("")
        env = {k: v for k, v in os.environ.items() if k not in (ENV, COUNTS_ENV, DRIVER_ENV)}
        env.update({ENV: spec, COUNTS_ENV: str(self.faults.counts), "PYSPARK_PYTHON": sys.executable,
                    "PYSPARK_DRIVER_PYTHON": sys.executable, "AVRO_SINK_SPARK_MASTER": "local[2,8]",
                    "AVRO_SINK_SHUFFLE_PARTITIONS": "2", "AVRO_SINK_CONTROL_TOPIC": self.control_topic,
                    "AVRO_SINK_DRIVER_MEMORY": "1g"})
        args = ["run", "--source", self.source.source_arg(), "--available-now", "--checkpoint", str(self.checkpoint),
                "--sink-uri", f"kafka://{self.bootstrap}/?protocol=avro&partition-num=3", "--registry",
                self.registry_url, "--topic-rule", self.source.prefix + "_{schema}_{table}", "--tables",
                str(self.tables_sql), "--delivery", self.delivery, "--producer", self.producer, "--progress", "json",
                *self.source.cli_args()]
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", "from avro_registry_sink.cli import main; main()", *args],
                              env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        self.faults.count(spec, f"exit {done.returncode} ({time.monotonic() - started:.0f} s)")
        return done

    def received(self) -> Counter:
        return committed_records(self.bootstrap, sorted({t for t, _, _ in self.source.expected}))


def _random_worker_spec(rng: random.Random, kills: int) -> list[str]:
    points = rng.sample(WORKER_POINTS, kills)
    return [f"{point}=kill@{rng.choice((1, 1, 2))}" for point in points]


def chaos(scenario: Scenario, rng: random.Random, *, cli_runs: int, here_runs: int, storage: bool) -> None:
    """Grow the source and run the job under faults (see the module docs); ends with a clean run."""
    source = scenario.source
    for _ in range(cli_runs):  # workers killed and a task failed (Spark retries them), then the driver killed
        source.add_wave()
        source.add_wave()
        workers = [f"{point}=kill@1" for point in WORKER_POINTS]  # each once, in whichever task comes first
        raised = f"{rng.choice(('stage.encoded', 'eos.produced', 'eos.before-commit'))}=raise@2"
        spec = ",".join([*rng.sample(workers, len(workers)), raised, rng.choice(DRIVER_KILLS)])
        done = scenario.cli(spec)
        assert done.returncode in (-9, 0, 1), (spec, done.returncode, done.stderr[-3000:])
    if storage:  # a verdict after encoding: shop.b's file contradicts output-old-value=false
        source.add_wave(old_value="shop.b")
        outcome = scenario.here("", csv=CsvOptions(include_commit_ts=True, output_old_value=False))
        assert outcome.startswith("failed") and "output-old-value" in outcome, outcome
        source.add_wave(a_version=V2)  # a registry refusal: shop.a's new version is incompatible
        outcome = scenario.here("")
        assert outcome.startswith("failed") and "shop_a-value" in outcome.replace(source.prefix + "_", ""), outcome
        with RegistryClient(RegistryConfig(urls=(scenario.registry_url,))) as client:
            client.set_config("NONE", subject=f"{source.topic('shop.a')}-value")
    for i in range(here_runs):  # a Python worker killed (no task retries here), or a failure on the driver
        source.add_wave()
        spec = f"{rng.choice(DRIVER_RAISES)}=raise" if i % 3 == 2 else _random_worker_spec(rng, 1)[0]
        scenario.here(spec)
    assert scenario.here("") == "ok", scenario.faults.log


def _tables_sql(work: Path) -> Path:
    path = work / "tables.sql"
    path.write_text(";\n".join(DDL.values()) + ";\n")
    return path


@pytest.fixture(scope="module")
def bootstrap() -> str:
    return ensure_kafka()


@pytest.fixture(scope="module")
def control_topic() -> str:
    return f"eos-control-{uuid.uuid4().hex[:8]}"


@pytest.fixture()
def registry_url(tmp_path):
    with EmbeddedRegistry(data=str(tmp_path / "registry.db")) as server:
        yield server.url


@pytest.fixture()
def faults(spark, tmp_path):
    f = Faults(spark, tmp_path)
    yield f
    f.close()


def _assert_exactly_once(scenario: Scenario, received: Counter) -> None:
    expected = scenario.source.expected
    twice = {k: n for k, n in received.items() if n > 1}
    assert not twice, (f"{len(twice)} records delivered more than once, e.g. {sorted(twice)[:3]}",
                       scenario.faults.log)
    assert set(received) == expected, (f"missing {sorted(expected - set(received))[:5]}, unexpected "
                                       f"{sorted(set(received) - expected)[:5]}", scenario.faults.log)


@pytest.mark.parametrize("kind", ["storage", "canal-json"])
def test_exactly_once_under_kills(spark, bootstrap, registry_url, faults, control_topic, tmp_path, kind):
    rng = random.Random(f"{SEED}-{kind}")
    prefix = "x" + uuid.uuid4().hex[:8]
    source = StorageSource(tmp_path, prefix) if kind == "storage" else CanalSource(tmp_path, prefix, bootstrap)
    scenario = Scenario(spark, source, bootstrap, registry_url, "exactly-once", faults, control_topic,
                        _tables_sql(tmp_path), producer="confluent")
    cli_runs = rounds(2, 1)  # CI: one CLI run under kills (tests/support/depth.py)
    here_runs = rounds(4, 3)  # CI: two worker kills and a driver failure in this process
    chaos(scenario, rng, cli_runs=cli_runs, here_runs=here_runs, storage=kind == "storage")
    received = scenario.received()
    _assert_exactly_once(scenario, received)
    print("\n".join(faults.log))
    # every kill fired: each worker point and a driver point per CLI run, a worker per in-process run but every third
    here_kills = sum(1 for i in range(here_runs) if i % 3 != 2)
    assert faults.kills >= (len(WORKER_POINTS) + 1) * cli_runs + here_kills, faults.log
    _assert_verified(spark, scenario, received)


#: The points of the JVM slice writer (the same names as the Python writer's; ``kill`` there is the JVM's).
JVM_WRITER_POINTS = ("eos.before-init", "eos.produced", "eos.before-commit", "eos.after-commit")
JVM_WRITER_CI_POINTS = ("eos.produced", "eos.after-commit")


def test_exactly_once_under_kills_in_the_jvm_writer(spark, bootstrap, registry_url, faults, control_topic, tmp_path):
    """The slices written by the JVM writer (``--producer spark``): CLI runs whose JVM (driver and executors,
    local mode) is killed at each of its points, task failures Spark retries, driver failures in this process."""
    rng = random.Random(f"{SEED}-jvm")
    source = StorageSource(tmp_path, "j" + uuid.uuid4().hex[:8])
    scenario = Scenario(spark, source, bootstrap, registry_url, "exactly-once", faults, control_topic,
                        _tables_sql(tmp_path), producer="spark")
    # Each kill is a JVM's end, so a CLI run (a JVM start) of its own. CI kills at the two points whose
    # recovery differs: an open transaction of a dead run (the next run fences it) and a committed slice Spark
    # did not record (the next run finds its token); before-init and before-commit at full depth.
    points = list(JVM_WRITER_POINTS) if full_depth() else list(JVM_WRITER_CI_POINTS)
    rng.shuffle(points)
    # a task failure, which Spark retries, on another point than the kill's: while encoding (the writer's input
    # fails under it: its producer is closed), while producing, before the commit
    failures = ("stage.encoded", "eos.produced", "eos.before-commit", "stage.encoded")[:len(points)]
    for point, failure in zip(points, failures, strict=True):
        source.add_wave()
        source.add_wave()
        raised = (failure if failure != point else "stage.encoded") + "=raise@1"
        spec = ",".join([raised, f"{point}=kill@{rng.choice((1, 2))}"])
        done = scenario.cli(spec)
        assert done.returncode in (-9, 0, 1), (spec, done.returncode, done.stderr[-3000:])
    # a task that fails after its commit: Spark's retry (a CLI run; CI: the next run, in this process) finds the
    # slice's token and writes nothing again
    source.add_wave()
    if full_depth():
        done = scenario.cli("eos.after-commit=raise@1")
        assert done.returncode == 0 and scenario.faults.fired("eos.after-commit=raise@1"), done.stderr[-3000:]
    else:
        outcome = scenario.here("eos.after-commit=raise@1")  # here() clears the counts: its log line says what fired
        assert outcome.startswith("failed") and scenario.faults.log[-1].endswith(
            "fired ['eos.after-commit=raise@1']"), scenario.faults.log
    for _ in range(rounds(2, 1)):
        source.add_wave()
        scenario.here(f"{rng.choice(DRIVER_RAISES)}=raise")
    assert scenario.here("") == "ok", scenario.faults.log
    received = scenario.received()
    _assert_exactly_once(scenario, received)
    print("\n".join(faults.log))
    assert faults.kills >= len(points), faults.log
    _assert_verified(spark, scenario, received)


def _assert_verified(spark, scenario: Scenario, received: Counter) -> None:
    source = scenario.source
    from avro_registry_sink.kafka.delivery import resolved_ts

    query = json.loads((scenario.checkpoint / "delivery.json").read_text())["query"]
    assert resolved_ts(scenario.bootstrap, scenario.control_topic, query) == source.resolved()
    # the product's own proof agrees with the plain consumer: nothing missing, twice or unexpected, and each
    # table complete up to the resolved ts its control topic records
    report = verify_run(spark, scenario.options())
    assert report.ok, report.to_json()
    assert {k: report.totals[k] for k in ("missing", "duplicated", "unexpected")} == \
        {"missing": 0, "duplicated": 0, "unexpected": 0}
    assert report.totals["delivered"] == sum(received.values()) == len(source.expected), report.to_json()
    assert all(not counts.get("unread") for counts in report.tables.values()), report.to_json()  # read to the end
    assert {name: report.tables[name].get("completeness") for name in source.resolved()} == {
        name: {"resolved_ts": ts, "complete": True, "first_missing_ts": None,
               "max_delivered_ts": report.tables[name]["max_delivered_ts"]}
        for name, ts in source.resolved().items()}, report.to_json()


def test_at_least_once_shows_the_duplicates(spark, bootstrap, registry_url, faults, control_topic, tmp_path):
    rng = random.Random(f"{SEED}-alo")
    source = StorageSource(tmp_path, "y" + uuid.uuid4().hex[:8])
    scenario = Scenario(spark, source, bootstrap, registry_url, "at-least-once", faults, control_topic,
                        _tables_sql(tmp_path))
    source.add_wave()
    assert scenario.here("job.after-sink-write=raise").startswith("failed")  # between Kafka's commit and Spark's
    if full_depth():  # CI: one failure between the commits is enough to show a duplicate
        source.add_wave()
        assert scenario.here("job.after-side-write=raise").startswith("failed")
    chaos(scenario, rng, cli_runs=0, here_runs=rounds(1, 0), storage=False)
    received = scenario.received()
    assert set(received) == source.expected  # nothing lost ...
    again = sum(n - 1 for n in received.values())
    assert again > 0  # ... but delivered again: at least once
    report = verify_run(spark, scenario.options())  # and verify says so, with no resolved ts to lean on
    assert not report.ok and report.totals["duplicated"] == again and report.totals["missing"] == 0, \
        report.to_json()
    assert not any("completeness" in counts for counts in report.tables.values())


# --------------------------------------------------------------------------------------------------
# A broker restart while a slice produces (a broker of its own)


@pytest.fixture(scope="module")
def own_broker():
    env = {**os.environ, "KAFKA_PORT": os.environ.get("AVRO_SINK_TEST_KAFKA2_PORT", "29092"),
           "KAFKA_CACHE": str(REPO / ".cache" / "kafka-restart"),
           # the first broker's jars (scripts/test.sh fetched them): no second Maven run
           "KAFKA_LIBS": str(REPO / ".cache" / "kafka" / os.environ.get("KAFKA_VERSION", "4.1.1") / "libs")}
    started = subprocess.run([str(REPO / "scripts" / "kafka.sh"), "start"], env=env, capture_output=True,
                             text=True, timeout=900)
    if started.returncode != 0:
        pytest.fail(f"scripts/kafka.sh start (second broker) failed:\n{started.stderr[-3000:]}")
    yield started.stdout.strip().splitlines()[-1], env
    subprocess.run([str(REPO / "scripts" / "kafka.sh"), "stop"], env=env, capture_output=True, timeout=120)


@pytest.mark.parametrize("producer", ["confluent", "spark"])
def test_a_broker_restart_while_producing(spark, own_broker, registry_url, faults, control_topic, tmp_path, producer):
    bootstrap, env = own_broker
    source = StorageSource(tmp_path, "z" + uuid.uuid4().hex[:8])
    scenario = Scenario(spark, source, bootstrap, registry_url, "exactly-once", faults, control_topic,
                        _tables_sql(tmp_path), producer=producer)
    source.add_wave()
    assert scenario.here("") == "ok"  # topics and the control topic exist: the restart hits a running write
    for _ in range(3):
        source.add_wave()
    restarted: list[subprocess.CompletedProcess] = []

    def restart_when_paused() -> None:
        marker = faults.counts / "eos.produced.paused"
        deadline = time.monotonic() + 240
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if marker.exists():
            restarted.append(subprocess.run([str(REPO / "scripts" / "kafka.sh"), "restart"], env=env,
                                            capture_output=True, text=True, timeout=300))

    watcher = threading.Thread(target=restart_when_paused, daemon=True)
    watcher.start()
    faults.setenv(PAUSE_ENV, "1")
    try:
        outcome = scenario.here("eos.produced=pause@1")
    finally:
        faults.setenv(PAUSE_ENV, None)
    watcher.join(300)
    assert restarted and restarted[0].returncode == 0, (outcome, restarted and restarted[0].stderr[-2000:])
    source.add_wave()
    assert scenario.here("") == "ok", faults.log
    _assert_exactly_once(scenario, scenario.received())


# --------------------------------------------------------------------------------------------------
# A verdict before a shuffle, and the rerun that skips what committed (the sink alone)


@pytest.mark.parametrize("writer", ["python", "jvm"])
def test_a_verdict_aborts_the_slices_of_its_topic_and_the_rerun_writes_them(spark, bootstrap, control_topic, tmp_path,
                                                                           writer):

    from avro_registry_sink.kafka.delivery import DeliveryError
    from avro_registry_sink.spark.driver.job import ensure_spark_kafka
    from avro_registry_sink.spark.sinks.sinks import KafkaSink
    from avro_registry_sink.spark.stages.tally import spread_verdicts
    from avro_registry_sink.storage_fs import StoreFS, parse_storage_uri

    assert ensure_spark_kafka(spark)  # as run_job does (this test may run before any job in the session)
    prefix = "v" + uuid.uuid4().hex[:8]
    good, bad = f"{prefix}_good", f"{prefix}_bad"
    sink = KafkaSink([bootstrap], delivery="exactly-once", control_topic=control_topic,
                     checkpoint=StoreFS(parse_storage_uri(str(tmp_path / "ck"))),
                     producer="spark" if writer == "jvm" else "confluent", spark=spark)
    assert sink.transactions is not None and sink.transactions.in_python == (writer == "python")
    sink.check()
    partitions = sink.prepare({good: 3, bad: 3})
    rows = [(topic, p, i.to_bytes(5, "big") + bytes([i]), b"v", [("commit_ts", str(V1 + i).encode())], V1 + i,
             f"{0:020d}//{1:020d}", i, None)
            for i, (topic, p) in enumerate((t, p) for t in (good, bad) for p in range(3) for _ in range(4))]
    ddl = ("topic STRING, partition INT, key BINARY, value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>, "
           "commit_ts BIGINT, order_file STRING, order_line BIGINT, error STRING")
    verdict = (bad, None, None, None, None, None, "", 0, '{"reason": "misconfiguration", "message": "wrong"}')
    spread_in_stage = spread_verdicts(lambda batches: batches, partitions)  # as the encode stage hands it on

    def batch(with_verdict: bool):
        df = spark.createDataFrame(rows + ([verdict] if with_verdict else []), ddl)
        spread = df.mapInArrow(spread_in_stage, ddl)
        return spread.repartition(6, "topic", "partition").sortWithinPartitions("order_line")

    spread = spark.createDataFrame([verdict], ddl).mapInArrow(spread_in_stage, ddl)
    assert sorted((r["topic"], r["partition"]) for r in spread.collect()) == [(bad, p) for p in range(3)]
    with pytest.raises(DeliveryError, match="refused while it was encoded"):
        sink.write(batch(True), 0, tables={good: "s.good", bad: "s.bad"}, slices=6)
    first = committed_records(bootstrap, [good, bad])
    assert not [k for k in first if k[0] == bad]  # every slice with a partition of the refused topic aborted
    committed = sink.transactions.committed(0)
    assert set(committed) <= {good} and len(first) == 4 * len(committed.get(good, []))
    sink.write(batch(False), 0, tables={good: "s.good", bad: "s.bad"}, slices=6)  # the rerun, fixed
    sink.close()
    again = committed_records(bootstrap, [good, bad])
    assert len(again) == len(rows) and set(again.values()) == {1}, (committed, again)
    assert {t for t, _, _ in again} == {good, bad}
    received = {(t, ts) for t, _, ts in again}
    assert received == {(t, ts) for t, _, _, _, _, ts, _, _, _ in rows}


# --------------------------------------------------------------------------------------------------
# Which writer a sink takes


def test_the_sink_takes_the_jvm_writer_when_it_can_and_says_why_not(spark, monkeypatch, tmp_path):
    from avro_registry_sink.errors import ConfigError
    from avro_registry_sink.spark.driver.job import ensure_spark_kafka
    from avro_registry_sink.spark.sinks import jvm_writer
    from avro_registry_sink.spark.sinks.sinks import KafkaSink

    assert ensure_spark_kafka(spark)  # as run_job does
    brokers = ["127.0.0.1:1"]  # nothing connects here
    assert KafkaSink(brokers, spark=spark).producer == "spark"  # at least once: Spark's Kafka sink
    auto = KafkaSink(brokers, spark=spark, delivery="exactly-once")
    assert auto.producer == "spark" and not auto.transactions.in_python and "executors' JVM" in auto.description
    python = KafkaSink(brokers, spark=spark, delivery="exactly-once", producer="confluent")
    assert python.transactions.in_python and "confluent-kafka transactional producer" in python.description

    monkeypatch.setenv("AVRO_SINK_JAR_DIR", str(tmp_path / "jars"))
    jar = jvm_writer.build(spark)  # compiled against this Spark and its Kafka client, then cached
    assert jar.parent == tmp_path / "jars" and jvm_writer.build(spark) == jar
    with __import__("zipfile").ZipFile(jar) as built:
        assert "avro_registry_sink/TransactionalSliceWriter.class" in built.namelist()

    def no_jdk(spark):
        raise jvm_writer.JvmWriterUnavailable("no javac beside the session's Java")

    monkeypatch.setattr(jvm_writer, "_javac", no_jdk)
    jar.unlink()  # a fresh build needs javac
    with pytest.raises(jvm_writer.JvmWriterUnavailable, match="no javac"):
        jvm_writer.build(spark)
    monkeypatch.setattr(jvm_writer, "load", lambda spark: no_jdk(spark))  # as on a session without the class
    fallback = KafkaSink(brokers, spark=spark, delivery="exactly-once")
    assert fallback.producer == "confluent" and fallback.transactions.in_python
    with pytest.raises(ConfigError, match=r"cannot run here: no javac .* Use --producer confluent"):
        KafkaSink(brokers, spark=spark, delivery="exactly-once", producer="spark")
