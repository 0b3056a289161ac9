"""The ceiling: the same input turned into the same records with no Spark at all, part by part.

What the job is judged against (issue 37): two worker processes (``multiprocessing``), each taking its share of
the input's files or Kafka partitions, and in each::

    read    a data file's bytes (storage tree) / librdkafka's consumer, messages into one Arrow binary array
    parse   the product's vectorized readers: ``formats.csv.read_columns`` (pyarrow.csv, then the typed
            columns) or ``formats.changelog_arrow.canal_rows`` / ``debezium_rows`` (pyarrow.json, the
            compiled debezium scanner) -- the calls the job's Spark stages make
    encode  the product's stage without Spark: ``spark.stages.stage.stage_for(plan).encode`` (the columnar encoder,
            TiCDC's partition dispatch, the ``op``/``commit_ts`` headers)
    write   librdkafka's producer (idempotent, ``acks=all``, the product's producer batching) or the file
            sink's JSON lines (``spark.stages.file_lines.lines_of``), one file per (topic, input file or partition)
            named as the file sink names them, so :func:`~avro_registry_sink.spark.sinks.sinks.read_file_sink` reads them

Each part's CPU time is the worker's main thread's (``time.thread_time``) around it; librdkafka's own threads
(fetch, produce, I/O) and Arrow's thread pool are reported apart as ``other threads`` (the process's CPU time
less its main thread's), the plans and encoders built before the first file as ``setup``. Wall time is the
whole harness's, the workers' start included. Rows/s and CPU microseconds per row are given per part and in
total.

Inputs (:data:`INPUTS`): a TiCDC storage tree of CSV files (:func:`bench.tree.storage_tree`), a storage tree of
canal-json files (:func:`canal_tree`, the same layout with ``.json`` data files), a canal-json topic and a
debezium-json topic (:mod:`bench.changelog`). Output records are what the job writes for the same input: same
topics, partitions, keys, values and headers; within each input file or partition in input order (the file
sink's records are compared byte for byte with the job's in the end-to-end section).

>>> # result = run_ceiling(CeilingInput.of_tree(tree), ids, sink="file", target="/tmp/out")
>>> # result.rows, result.rows_per_s, result.cpu_us_per_row("encode")
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.table import TableDef

__all__ = ["INPUTS", "PARTS", "CeilingInput", "CeilingResult", "canal_tree", "default_ids", "run_ceiling",
           "summary_line"]

#: The inputs the harness reads.
INPUTS = ("storage-csv", "storage-canal-json", "canal-json-topic", "debezium-json-topic")
#: The parts each worker times.
PARTS = ("read", "parse", "encode", "write")
#: Messages a worker takes from a Kafka partition at a time (one Arrow array, one parse, one encode per table).
BATCH_MESSAGES = 100_000
_TOPIC_RULE = "{schema}_{table}"
_FILE_BATCH = 0  # the batch id the file sink's names and lines carry


@dataclass(frozen=True)
class CeilingInput:
    """What to read: a storage tree's data files (``files``, each with its table's index) or a changelog topic."""

    kind: str
    tables: tuple[TableDef, ...]
    rows: int
    files: tuple[tuple[str, int], ...] = ()
    bootstrap: str | None = None
    topic: str | None = None

    @classmethod
    def of_tree(cls, tree: Any, kind: str = "storage-csv") -> CeilingInput:
        """A storage tree (:class:`bench.tree.Tree` or :func:`canal_tree`'s): its data files, table by table,
        in file order."""
        ext = "csv" if kind == "storage-csv" else "json"
        files = []
        for number, table in enumerate(tree.tables):
            base = Path(tree.root) / table.schema_name / table.table
            found = sorted(p for p in base.rglob(f"CDC*.{ext}") if "meta" not in p.parts)
            files += [(str(p), number) for p in found]
        return cls(kind, tuple(tree.tables), tree.rows, tuple(files))

    @classmethod
    def of_topic(cls, kind: str, bootstrap: str, topic: str, tables: Sequence[TableDef], rows: int) -> CeilingInput:
        """A canal-json or debezium-json topic of ``rows`` messages of ``tables``."""
        if kind not in ("canal-json-topic", "debezium-json-topic"):
            raise ValueError(f"unknown topic input {kind!r}; choose canal-json-topic or debezium-json-topic")
        return cls(kind, tuple(tables), rows, bootstrap=bootstrap, topic=topic)


@dataclass
class CeilingResult:
    """One run of the harness: wall seconds, records written, and each part's CPU seconds (both workers)."""

    input: str
    sink: str
    rows: int
    records: int
    wall: float
    cpu: dict[str, float]
    part_wall: dict[str, float]
    background_cpu: float
    setup_cpu: float = 0.0
    workers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.wall if self.wall else float("nan")

    @property
    def cpu_total(self) -> float:
        return sum(self.cpu.values()) + self.background_cpu + self.setup_cpu

    def cpu_us_per_row(self, part: str | None = None) -> float:
        """CPU microseconds per row of one part (``None``: all parts and librdkafka's threads)."""
        seconds = self.cpu_total if part is None else self.cpu[part]
        return seconds / self.rows * 1e6 if self.rows else float("nan")

    def part_rows_per_s(self, part: str) -> float:
        """Rows/s one core gives in this part (rows over the part's CPU seconds)."""
        return self.rows / self.cpu[part] if self.cpu[part] else float("inf")


def default_ids(tables: Sequence[TableDef]) -> dict[str, tuple[int, int]]:
    """The schema ids a fresh registry gives when the tables' key and value subjects are registered in order."""
    return {t.qualified_name: (2 * i + 1, 2 * i + 2) for i, t in enumerate(tables)}


def _topic(table: TableDef, prefix: str) -> str:
    return prefix + _TOPIC_RULE.format(schema=table.schema_name, table=table.table)


def _stage_plan(table: TableDef, ids: tuple[int, int], partitions: int, prefix: str) -> Any:
    from avro_registry_sink.encoding.plan import EncodingPlan
    from avro_registry_sink.routing.rules import Route
    from avro_registry_sink.schema.builder import derive_schemas
    from avro_registry_sink.settings.config import EncodingOptions
    from avro_registry_sink.spark.stages.plan import StagePlan

    topic = _topic(table, prefix)
    encoding = EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions()), *ids)
    route = Route(schema=table.schema_name, table=table.table, topic=topic, key_subject=f"{topic}-key",
                  value_subject=f"{topic}-value", rule=prefix + _TOPIC_RULE)
    return StagePlan(encoding=encoding, topic=topic, partitions=partitions, route=route)


# --------------------------------------------------------------------------------------------------
# The worker


class _Clock:
    """Main-thread CPU and wall seconds per part."""

    def __init__(self) -> None:
        self.cpu = dict.fromkeys(PARTS, 0.0)
        self.wall = dict.fromkeys(PARTS, 0.0)
        self._part = ""

    def __call__(self, part: str) -> _Clock:
        self._part = part
        return self

    def __enter__(self) -> None:
        self._cpu, self._wall = time.thread_time(), time.perf_counter()

    def __exit__(self, *exc: Any) -> None:
        self.cpu[self._part] += time.thread_time() - self._cpu
        self.wall[self._part] += time.perf_counter() - self._wall


class _Output:
    """The worker's writer: the file sink's JSON lines, or librdkafka's producer."""

    def __init__(self, sink: str, target: str) -> None:
        self.sink = sink
        self.target = target
        self.records = 0
        self.failed: list[str] = []
        self.producer: Any = None
        if sink == "kafka":
            from confluent_kafka import Producer

            from avro_registry_sink.spark.sinks.sinks import ORDERED_PRODUCER

            # as the product's confluent path: required-acks=-1 makes it idempotent, acks=all
            self.producer = Producer({"bootstrap.servers": target, "enable.idempotence": True, "acks": "all",
                                      **ORDERED_PRODUCER, "queue.buffering.max.kbytes": 1 << 20})
        elif sink != "file":
            raise ValueError(f"unknown sink {sink!r}; choose file or kafka")

    def write(self, records: pa.RecordBatch, part: int) -> None:
        """``records`` (Kafka-shaped) of one input file or partition, numbered ``part`` within each topic."""
        n = records.num_rows
        if not n:
            return
        self.records += n
        if self.producer is None:
            self._lines(records, part)
        else:
            self._produce(records)

    def _lines(self, records: pa.RecordBatch, part: int) -> None:
        from avro_registry_sink.spark.stages.file_lines import lines_of

        topics = records.column("topic")
        names = pc.unique(topics).to_pylist()
        for topic in names:
            rows = records if len(names) == 1 else records.filter(pc.equal(topics, topic))
            text = pc.binary_join_element_wise(lines_of(rows, _FILE_BATCH), "\n", "")
            directory = Path(self.target) / topic
            directory.mkdir(parents=True, exist_ok=True)
            offsets = np.frombuffer(text.buffers()[1], np.int32)[text.offset: text.offset + len(text) + 1]
            with open(directory / f"batch-{_FILE_BATCH:010d}-part-{part:05d}.jsonl", "ab") as fh:
                fh.write(memoryview(text.buffers()[2])[int(offsets[0]): int(offsets[-1])])

    def _produce(self, records: pa.RecordBatch) -> None:
        topics = records.column("topic").to_pylist()
        partitions = records.column("partition").to_numpy(zero_copy_only=False).tolist()
        keys = records.column("key").to_pylist()
        values = records.column("value").to_pylist()
        headers = records.column("headers")
        entries = headers.flatten()
        names, texts = entries.field("key").to_pylist(), entries.field("value").to_pylist()
        offsets = headers.offsets.to_numpy().tolist()
        produce, poll, failed = self.producer.produce, self.producer.poll, self.failed

        def done(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(str(err))

        for i in range(len(keys)):
            a, b = offsets[i], offsets[i + 1]
            while True:
                try:
                    produce(topics[i], value=values[i], key=keys[i], partition=partitions[i],
                            headers=list(zip(names[a:b], texts[a:b], strict=True)), on_delivery=done)
                    break
                except BufferError:
                    poll(0.05)
            if not i % 10_000:
                poll(0)

    def close(self) -> None:
        if self.producer is not None:
            left = self.producer.flush(300)
            if left or self.failed:
                raise RuntimeError(f"{left} records not delivered to {self.target} within 300 s, {len(self.failed)} "
                                   f"refused (first: {self.failed[:1]})")


def _storage_batches(spec: dict[str, Any], clock: _Clock, stages: list[Any]) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Records of each of the worker's data files, with the file's number within its table."""
    from avro_registry_sink.formats.changelog_arrow import TableVersions, canal_rows
    from avro_registry_sink.formats.csv import read_columns
    from avro_registry_sink.spark.sources.sources import _file_lines
    from bench.tree import CSV_OPTIONS

    tables: tuple[TableDef, ...] = spec["tables"]
    for path, number, part in spec["files"]:
        table, stage = tables[number], stages[number]
        with clock("read"):
            content = Path(path).read_bytes()
        if spec["kind"] == "storage-csv":
            with clock("parse"):
                columns = read_columns(content, table, CSV_OPTIONS)
            if columns is None:
                raise RuntimeError(f"{path}: the vectorized CSV reader refused the file (table {table.qualified_name})")
            with clock("encode"):
                records = stage.encode(columns.values, columns.op_codes, columns.commit_ts)
            yield records, part
            continue
        with clock("parse"):
            lines, _ = _file_lines(content)
            key = (table.schema_name, table.table, table.version)
            found = canal_rows(lines, TableVersions(history={key[:2]: [(table.version, table)]},
                                                    planned=frozenset({key}), dml_only=True))
        if found.slow.size or found.crashed.size:
            raise RuntimeError(f"{path}: {found.slow.size + found.crashed.size} messages left the vectorized "
                               f"canal-json reader (table {table.qualified_name})")
        for rows in found.tables:
            with clock("encode"):
                records = stage.encode(rows.columns, rows.op_codes, rows.commit_ts)
            yield records, part


def _topic_batches(spec: dict[str, Any], clock: _Clock, stages: list[Any]) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Records of each of the worker's source partitions, :data:`BATCH_MESSAGES` messages at a time."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from avro_registry_sink.formats.changelog_arrow import TableVersions, canal_rows, debezium_rows

    tables: tuple[TableDef, ...] = spec["tables"]
    by_key = {(t.schema_name, t.table, t.version): stages[i] for i, t in enumerate(tables)}
    versions = TableVersions(history={(t.schema_name, t.table): [(t.version, t)] for t in tables},
                             planned=frozenset(by_key))
    rows_of = canal_rows if spec["kind"] == "canal-json-topic" else debezium_rows
    topic = spec["topic"]
    consumer = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": f"bench-ceiling-{os.getpid()}",
                         "enable.auto.commit": False, "fetch.max.bytes": 1 << 26,
                         "max.partition.fetch.bytes": 1 << 24, "queued.max.messages.kbytes": 1 << 18})
    try:
        for partition in spec["partitions"]:
            end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
            consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
            seen = 0
            deadline = time.time() + 600
            while seen < end:
                batch: list[bytes] = []
                with clock("read"):
                    while len(batch) < BATCH_MESSAGES and seen + len(batch) < end:
                        if time.time() > deadline:
                            raise TimeoutError(f"{topic}[{partition}]: {seen + len(batch)} of {end} messages read "
                                               "in 600 s")
                        # (as many as are left: consume waits out its timeout for a count it cannot fill)
                        want = min(10_000, BATCH_MESSAGES - len(batch), end - seen - len(batch))
                        for msg in consumer.consume(want, 1.0):
                            if msg.error() is None:
                                batch.append(msg.value())
                    messages = pa.array(batch, pa.binary())
                seen += len(batch)
                with clock("parse"):
                    found = rows_of(messages, versions)
                if found.slow.size or found.crashed.size:
                    raise RuntimeError(f"{topic}[{partition}]: {found.slow.size + found.crashed.size} messages left "
                                       f"the vectorized {spec['kind'][:-6]} reader")
                for rows in found.tables:
                    with clock("encode"):
                        records = by_key[rows.key].encode(rows.columns, rows.op_codes, rows.commit_ts)
                    yield records, partition
    finally:
        consumer.close()


def _worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One worker's share, end to end; its clock."""
    from avro_registry_sink.spark.stages.stage import _TableStage

    wall = time.perf_counter()
    process_cpu, thread_cpu = time.process_time(), time.thread_time()
    clock = _Clock()
    tables: tuple[TableDef, ...] = spec["tables"]
    stages = [_TableStage(_stage_plan(t, spec["ids"][t.qualified_name], spec["partitions_out"], spec["prefix"]))
              for t in tables]
    output = _Output(spec["sink"], spec["target"])
    batches = _storage_batches if spec["kind"].startswith("storage") else _topic_batches
    for records, part in batches(spec, clock, stages):
        with clock("write"):
            output.write(records, part)
    with clock("write"):
        output.close()
    main_cpu = time.thread_time() - thread_cpu
    return {"worker": spec["worker"], "records": output.records, "cpu": clock.cpu, "wall": clock.wall,
            "setup_cpu": max(main_cpu - sum(clock.cpu.values()), 0.0),
            "background_cpu": max(time.process_time() - process_cpu - main_cpu, 0.0),
            "seconds": time.perf_counter() - wall}


def _shares(source: CeilingInput, workers: int) -> list[dict[str, Any]]:
    """Each worker's files (round robin, each with its number within its table) or Kafka partitions."""
    if source.kind.startswith("storage"):
        numbered, per_table = [], [0] * len(source.tables)
        for path, table in source.files:
            numbered.append((path, table, per_table[table]))
            per_table[table] += 1
        return [{"files": numbered[w::workers]} for w in range(workers)]
    from confluent_kafka.admin import AdminClient

    assert source.bootstrap and source.topic
    meta = AdminClient({"bootstrap.servers": source.bootstrap}).list_topics(source.topic, timeout=30)
    partitions = sorted(meta.topics[source.topic].partitions)
    return [{"partitions": partitions[w::workers]} for w in range(workers)]


def run_ceiling(source: CeilingInput, ids: Mapping[str, tuple[int, int]] | None = None, *, sink: str, target: str,
                partitions: int = 3, prefix: str = "", workers: int = 2) -> CeilingResult:
    """Turn ``source`` into the job's records with ``workers`` processes and no Spark; time each part.

    ``sink="file"``: ``target`` is the file sink's directory (emptied first); ``"kafka"``: a bootstrap address,
    the topics (``prefix`` + ``{schema}_{table}``, ``partitions`` each) must exist. ``ids``: each table's key and
    value schema ids (default :func:`default_ids`)."""
    if source.kind not in INPUTS:
        raise ValueError(f"unknown input {source.kind!r}; choose from {', '.join(INPUTS)}")
    ids = dict(ids or default_ids(source.tables))
    if sink == "file":
        shutil.rmtree(target, ignore_errors=True)
        Path(target).mkdir(parents=True)
    base = {"kind": source.kind, "tables": source.tables, "ids": ids, "sink": sink, "target": target,
            "partitions_out": partitions, "prefix": prefix, "bootstrap": source.bootstrap, "topic": source.topic}
    started = time.perf_counter()
    specs = [{**base, **share, "worker": w} for w, share in enumerate(_shares(source, workers))]
    # fork: the workers start in milliseconds with the product already imported (as Spark's Python workers do)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        done = pool.map(_worker, specs, chunksize=1)
    wall = time.perf_counter() - started
    records = sum(d["records"] for d in done)
    return CeilingResult(
        input=source.kind, sink=sink, rows=source.rows, records=records, wall=wall,
        cpu={p: sum(d["cpu"][p] for d in done) for p in PARTS},
        part_wall={p: max(d["wall"][p] for d in done) for p in PARTS},
        background_cpu=sum(d["background_cpu"] for d in done), setup_cpu=sum(d["setup_cpu"] for d in done),
        workers=done)


def summary_line(result: CeilingResult) -> str:
    """``"310,000 rows/s; CPU µs/row: read 0.4, parse 2.1, ..., total 9.8"`` for one run."""
    per_row = 1e6 / max(result.rows, 1)
    parts = ", ".join(f"{p} {result.cpu_us_per_row(p):,.2f}" for p in PARTS)
    return (f"{result.rows_per_s:,.0f} rows/s ({result.wall:,.2f} s); CPU µs/row: {parts}, other threads "
            f"{result.background_cpu * per_row:,.2f}, setup {result.setup_cpu * per_row:,.2f}, "
            f"total {result.cpu_us_per_row():,.2f}")


# --------------------------------------------------------------------------------------------------
# A storage tree of canal-json files


@dataclass(frozen=True)
class CanalTree:
    """A storage tree whose data files are canal-json (``.json``), as :class:`bench.tree.Tree` for CSV."""

    root: Path
    rows: int
    tables: tuple[TableDef, ...]
    files: int
    bytes: int
    seconds: float


def canal_tree(rows: int, tables: int = 1, *, cache: Path | None = None, rows_per_file: int = 300_000) -> CanalTree:
    """A TiCDC storage tree with ``protocol=canal-json`` (``enable-tidb-extension=true``) of ``rows`` messages
    over ``tables`` tables (the messages of :func:`bench.changelog.canal_messages`), cached as the CSV trees."""
    from avro_registry_sink.sources.storage import data_file_name
    from avro_registry_sink.tabledef.storage import write_table_schema_file
    from bench.changelog import canal_messages
    from bench.tree import _write_file, cache_dir

    cache = cache or cache_dir()
    root = cache / f"ticdc-canal-v1-r{rows}-t{tables}-f{rows_per_file}"
    messages = None
    marker = root / "tree.json"
    if not marker.exists():
        started = time.perf_counter()
        messages = canal_messages(rows, tables)
        temp = root.with_name(root.name + f".tmp{os.getpid()}")
        shutil.rmtree(temp, ignore_errors=True)
        version = int(messages.commit_ts.min()) if rows else 1
        defs = tuple(t.model_copy(update={"version": version}) for t in messages.tables)
        files = size = 0
        # (over 2 GiB of text the messages come in chunks: filtered chunk by chunk, combined a file at a time)
        texts = messages.texts if isinstance(messages.texts, pa.ChunkedArray) else pa.chunked_array([messages.texts])
        for number, table in enumerate(defs):
            write_table_schema_file(table, temp)
            directory = temp / table.schema_name / table.table / str(version) / time.strftime("%Y-%m-%d", time.gmtime())
            (directory / "meta").mkdir(parents=True, exist_ok=True)
            mine = texts.filter(pa.chunked_array([messages.table_index[a: a + len(c)] == number for a, c in
                                                  zip(np.cumsum([0] + [len(c) for c in texts.chunks]), texts.chunks,
                                                      strict=False)]))
            last = data_file_name(1, "json")
            for file_no, start in enumerate(range(0, len(mine), rows_per_file), start=1):
                last = data_file_name(file_no, "json")
                lines = pc.binary_join_element_wise(mine.slice(start, rows_per_file).combine_chunks(), "\r\n", "")
                size += _write_file(directory / last, lines)
                files += 1
            (directory / "meta" / "CDC.index").write_text(last + "\n", encoding="utf-8")
        checkpoint = int(messages.commit_ts.max()) + 1 if rows else 1
        (temp / "metadata").write_text(json.dumps({"checkpoint-ts": checkpoint}), encoding="utf-8")
        (temp / "tree.json").write_text(json.dumps({"rows": rows, "tables": tables, "files": files, "bytes": size,
                                                    "version": version, "seconds": time.perf_counter() - started}),
                                        encoding="utf-8")
        shutil.rmtree(root, ignore_errors=True)
        temp.rename(root)
    info = json.loads(marker.read_text(encoding="utf-8"))
    from bench.data import reference_table

    defs = tuple(reference_table(schema="bench", name=f"t{i:03d}").model_copy(update={"version": info["version"]})
                 for i in range(tables))
    return CanalTree(root, rows, defs, info["files"], info["bytes"], info["seconds"] if messages is not None else 0.0)


# --------------------------------------------------------------------------------------------------
# The section: the harness alone, every input, part by part


def prepared_input(kind: str, rows: int, tables: int, bootstrap: str | None, topic: str) -> CeilingInput:
    """The input of one configuration: a cached storage tree, or a topic filled with generated messages
    (3 partitions, as the changelog section's)."""
    from bench.tree import storage_tree

    if kind == "storage-csv":
        return CeilingInput.of_tree(storage_tree(rows, tables))
    if kind == "storage-canal-json":
        return CeilingInput.of_tree(canal_tree(rows, tables), kind)
    from bench.changelog import canal_messages, debezium_messages, produce

    if bootstrap is None:
        raise ValueError(f"the {kind} input needs a broker (KAFKA_BOOTSTRAP)")
    messages = (canal_messages if kind == "canal-json-topic" else debezium_messages)(rows, tables)
    produce(bootstrap, topic, messages.texts, 3)
    return CeilingInput.of_topic(kind, bootstrap, topic, messages.tables, len(messages))


def bench_ceiling(ctx: Any) -> Any:
    """The ceiling harness on each input and sink, rounds with the load average read before each."""
    import statistics
    import tempfile
    import uuid

    from bench.endtoend import _Kafka, _partitions, kafka_bootstrap
    from bench.harness import Section

    section = Section("Ceiling: the same input into the same records with no Spark (two processes, part by part)")
    opts = ctx.options
    rows = opts.get("ceiling_rows") or (20_000 if ctx.quick else 10**6)
    configs = opts.get("ceiling_configs") or [(rows, 1, kind) for kind in INPUTS]
    sinks = opts.get("ceiling_sinks") or ["file", "kafka"]
    rounds = opts.get("e2e_rounds") or ctx.repeats
    bootstrap = kafka_bootstrap()
    kafka = _Kafka(bootstrap) if bootstrap else None
    partitions = _partitions()
    work = Path(tempfile.mkdtemp(prefix="bench-ceiling-"))
    tag = uuid.uuid4().hex[:6]
    lines = ["| rows | tables | input | sink | rows/s (median, min-max) | CPU µs/row: read / parse / encode / write / "
             "other threads / setup | CPU µs/row total | one core's rows/s: read / parse / encode / write | "
             "records | load average (1 min) before each round |", "|---|---|---|---|---|---|---|---|---|---|"]
    skipped = []
    try:
        for number, (n, tables, kind) in enumerate(configs):
            if kind not in INPUTS:
                raise ValueError(f"unknown ceiling input {kind!r}; choose from {', '.join(INPUTS)}")
            if kind.endswith("topic") and kafka is None:
                skipped.append(f"{n:,} x {tables} {kind} (no broker at KAFKA_BOOTSTRAP)")
                continue
            source = prepared_input(kind, n, tables, bootstrap, f"bceil{tag}_{number}")
            for sink in sinks:
                if sink == "kafka" and kafka is None:
                    skipped.append(f"{n:,} x {tables} {kind} to Kafka (no broker at KAFKA_BOOTSTRAP)")
                    continue
                results, loads = [], []
                for round_ in range(rounds + 1):  # a warm-up round first (page cache, broker, topic creation)
                    prefix = f"cout{tag}{number}{sink[0]}{round_}_"
                    if sink == "kafka":
                        assert kafka is not None
                        kafka.create([_topic(t, prefix) for t in source.tables], partitions)
                    load = os.getloadavg()[0]
                    result = run_ceiling(source, sink=sink, target=str(work / "out") if sink == "file" else bootstrap or "",
                                         partitions=partitions, prefix=prefix)
                    if sink == "kafka":
                        assert kafka is not None
                        delivered = sum(kafka.records(_topic(t, prefix)) for t in source.tables)
                        kafka.delete_prefixed(prefix)
                        if delivered != result.records:
                            raise RuntimeError(f"ceiling {kind} -> Kafka: {delivered} records in the topics, "
                                               f"{result.records} produced")
                    if result.records != source.rows:
                        raise RuntimeError(f"ceiling {kind} -> {sink}: {result.records} records for {source.rows} rows")
                    if round_:
                        results.append(result)
                        loads.append(load)
                    print(f"ceiling {kind} {n:,}x{tables} -> {sink} round {round_}: {summary_line(result)}; "
                          f"load {load:.2f}", flush=True)
                rates = [r.rows_per_s for r in results]
                med = {p: statistics.median(r.cpu_us_per_row(p) for r in results) for p in PARTS}
                other = statistics.median(r.background_cpu / r.rows * 1e6 for r in results)
                setup = statistics.median(r.setup_cpu / r.rows * 1e6 for r in results)
                total = statistics.median(r.cpu_us_per_row() for r in results)
                core = " / ".join(f"{statistics.median(r.part_rows_per_s(p) for r in results):,.0f}" for p in PARTS)
                lines.append(
                    f"| {n:,} | {tables} | {kind} | {sink} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-"
                    f"{max(rates):,.0f}) | " + " / ".join(f"{med[p]:,.2f}" for p in PARTS)
                    + f" / {other:,.2f} / {setup:,.2f} | {total:,.2f} | {core} | {results[-1].records:,} | "
                    + ", ".join(f"{x:.2f}" for x in loads) + " |")
                print(lines[-1], flush=True)
                ctx.summary.append(f"ceiling {kind}, {n:,} rows x {tables} tables -> {sink}: "
                                   f"**{statistics.median(rates):,.0f} rows/s**, {total:,.1f} CPU µs per row")
            if kind.endswith("topic") and kafka is not None:
                kafka.delete_prefixed(f"bceil{tag}_{number}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if kafka is not None:
            kafka.delete_prefixed(f"bceil{tag}")
    section.lines = [
        *lines, "",
        f"{rounds} timed round(s) per row after a warm-up round; two worker processes (fork), each with its share of "
        "the data files (round robin) or of the source topic's 3 partitions. Rows/s = input rows / wall seconds of "
        "the whole harness (workers' start to the last flush). CPU µs/row per part is the workers' main threads' CPU "
        "in that part (`time.thread_time`), summed over both workers; other threads = librdkafka's and Arrow's "
        "threads; one core's rows/s = rows / the part's CPU seconds. Output: the file sink's JSON lines, or Kafka "
        f"topics of {partitions} partitions created per round (idempotent producer, `acks=all`), records counted "
        "from the topics' watermarks.",
        *([f"Not run: {'; '.join(skipped)}."] if skipped else []),
    ]
    return section


def same_records(mine: Mapping[tuple[str, int], list[Any]], theirs: Mapping[tuple[str, int], list[Any]], *,
                 ordered: bool = True) -> tuple[bool, int, str]:
    """Whether two outputs (``(topic, partition) -> [(key, value, headers), ...]``) hold the same records per
    partition, in the same order (``ordered``) or as multisets (two workers interleave a topic's input
    partitions otherwise than the job's order by partition and offset)."""
    rows = sum(len(v) for v in mine.values())
    if set(mine) != set(theirs):
        return False, rows, f"topics/partitions differ: {sorted(mine)[:3]} vs {sorted(theirs)[:3]}"
    for k in sorted(mine):
        a, b = (mine[k], theirs[k]) if ordered else (sorted(mine[k], key=repr), sorted(theirs[k], key=repr))
        if a != b:
            first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            return False, rows, f"{k}: {len(a)} vs {len(b)} records, first difference at {first}"
    return True, rows, ""


def file_records(path: Path | str) -> dict[tuple[str, int], list[Any]]:
    """A file sink directory's records per (topic, partition): ``(key, value, headers)`` in write order."""
    from avro_registry_sink.spark.sinks.sinks import read_file_sink

    out: dict[tuple[str, int], list[Any]] = {}
    for r in read_file_sink(path):
        out.setdefault((r.topic, r.partition), []).append((r.key, r.value, r.headers))
    return out
