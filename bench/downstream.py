"""Source files to rows in PostgreSQL: the job, then Kafka Connect's JDBC sink, on a 10^6-row table.

    .venv/bin/python -m bench.downstream [--rows 1000000]

The tree is :func:`bench.tree.storage_tree` (the reference table, 90% inserts, 6% updates, 4% deletes, CSV with
commit ts). The servers are the test suite's (``tests/support/servers.py``: Kafka, Apicurio, the Connect worker
with Debezium's JDBC sink, PostgreSQL, each started by its repo script, or reused through ``KAFKA_BOOTSTRAP``,
``APICURIO_URL``, ``CONNECT_URL``, ``POSTGRES_URL``). Two phases, timed apart:

1. **job**: the product's CLI in this process (``run --available-now --max-files-per-trigger 1``: a batch per
   file of 300,000 changes, as a stream takes them) from the tree into Kafka, registering in Apicurio: from
   start to the last batch committed.
2. **apply**: a JDBC sink connector (the configuration of ``tests/downstream/sinkdb.py``, as the README shows,
   with ``batch.size`` and the consumer's ``max.poll.records`` set to ``--batch``) created on the topic; until
   its consumer group committed the topic's end offsets (every record is in PostgreSQL). The table's row
   count must equal the tree's live keys (last change per key not a delete).

Rows/s are source rows (changes) over the time of each phase and over both. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from bench.endtoend import _cli, bench_session
from bench.tree import storage_tree


def _live_keys(root: Path) -> int:
    """Keys whose last change in the tree (files in write order, lines in order) is not a delete."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    files = sorted(root.glob("*/*/*/*/CDC*.csv"))
    options = pacsv.ReadOptions(autogenerate_column_names=True)
    convert = pacsv.ConvertOptions(include_columns=["f0", "f4"])
    table = pa.concat_tables(pacsv.read_csv(f, read_options=options, convert_options=convert) for f in files)
    frame = table.to_pandas().drop_duplicates("f4", keep="last")
    return int((frame["f0"] != "D").sum())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=5000, help="the sink's batch.size and max.poll.records")
    args = parser.parse_args(argv)

    from tests.downstream.sinkdb import Database, add_connector, connector_config, delete_connector, wait_applied
    from tests.support.servers import ensure_apicurio, ensure_connect, ensure_kafka, ensure_postgres

    t0 = time.perf_counter()
    tree = storage_tree(args.rows, 1)
    generated = time.perf_counter() - t0
    bootstrap = ensure_kafka()
    apicurio = ensure_apicurio()
    connect = ensure_connect(bootstrap)
    database = Database("postgres", ensure_postgres())
    spark = bench_session()
    prefix = f"bd{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}_{tree.schema}_{tree.tables[0].table}"
    sink_uri = f"kafka://{bootstrap}/?protocol=avro&partition-num=3&schema-registry={apicurio}"
    with tempfile.TemporaryDirectory() as state:
        started = time.perf_counter()
        _cli(["run", "--source", str(tree.root), "--available-now", "--progress", "none",
              "--csv", "include-commit-ts=true", "--state-dir", str(Path(state)), "--sink-uri", sink_uri,
              "--topic-rule", prefix + "_{schema}_{table}", "--max-files-per-trigger", "1"])
        job = time.perf_counter() - started
    spark.stop()
    name = f"{prefix}-postgres"
    started = time.perf_counter()
    add_connector(connect, name, connector_config([topic], database, apicurio, **{
        "batch.size": str(args.batch), "consumer.override.max.poll.records": str(args.batch)}))
    try:
        wait_applied(connect, name, bootstrap, [topic], timeout=3600)
    finally:
        delete_connector(connect, name)
    apply = time.perf_counter() - started
    count = database.count(topic)
    live = _live_keys(tree.root)
    if count != live:
        raise SystemExit(f"PostgreSQL has {count:,} rows, the source {live:,} live keys")
    rows = tree.rows
    print(f"tree: {rows:,} changes ({tree.ops}), {tree.files} files, {tree.bytes / 1e6:.0f} MB"
          f" (generated in {generated:.0f} s); PostgreSQL rows after: {count:,}")
    print("| phase | seconds | changes/s |\n| --- | ---: | ---: |")
    for label, seconds in (("job: files -> Kafka (Avro, Apicurio)", job),
                           ("Connect: Kafka -> PostgreSQL (JDBC sink upserts/deletes)", apply),
                           ("total: files -> rows in PostgreSQL", job + apply)):
        print(f"| {label} | {seconds:.1f} | {rows / seconds:,.0f} |")


if __name__ == "__main__":
    main()
