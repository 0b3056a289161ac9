"""What following majors costs a Spark reader: ``from_flat_avro(major=N)`` rows/s over records of two majors against
the same records all of one major, timed in the same rounds.

    python -m bench.from_flat_avro_major                           # 10^5 rows, 3 rounds, writes bench/results.md
    python -m bench.from_flat_avro_major --rows 20000 --rounds 2 --out -

The table ``bench.money`` (``id BIGINT`` key, ``amount DECIMAL(12,2) NOT NULL`` in precise mode, ``doc BLOB``,
``a INT NOT NULL``, ``note VARCHAR(40)``) is registered by the schema manager with ``--on-incompatible new-major``
as major 1, then ``MODIFY a VARCHAR(20) NOT NULL`` as major 2 with its JSONata rules, in the embedded registry.
The same rows are encoded twice by the per-row reference encoder (``tests/support/reference_encoder.py``, the
product's bytes): *one major* (every record written as major 2) and *two
majors* (the first half written as major 1, the rest as major 2). Both are read with
``from_flat_avro(value, major=2)`` and written to Spark's ``noop`` sink: records of major 2 by Avro resolution,
records of major 1 through the UPGRADE rule (run three times per record: the record holds a decimal and bytes,
:mod:`avro_registry_sink.schema.follow`). Each round times both, in alternating order, after a warm-up pair; the
ratio *two majors / one major* is per round. Writes its section between ``<!-- follow-major:start -->`` and
``<!-- follow-major:end -->`` of ``bench/results.md`` with the machine and the load average of each round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.harness import describe_machine, machine

RESULTS = Path(__file__).with_name("results.md")
START, END = "<!-- follow-major:start -->", "<!-- follow-major:end -->"
CREATE = "CREATE TABLE bench.money (id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL, doc BLOB, " \
         "a INT NOT NULL, note VARCHAR(40))"
ALTER = "ALTER TABLE money MODIFY a VARCHAR(20) NOT NULL"


def encoded(client: Any, rows: int) -> tuple[str, list[bytes], list[bytes]]:
    """The subject and the records (values) of both candidates: all major 2, and half major 1, half major 2."""
    from avro_registry_sink.manager import SchemaManager
    from avro_registry_sink.model import Op
    from avro_registry_sink.routing.rules import TopicRouter
    from avro_registry_sink.tabledef.ddl import apply_ddl, parse_ddl
    from tests.support.reference_encoder import RowEncoder

    v1 = parse_ddl(CREATE)[0].model_copy(update={"version": 1})
    v2 = apply_ddl(v1, ALTER).model_copy(update={"version": 2})
    manager = SchemaManager(client, TopicRouter(topic_rule="bench_{schema}_{table}"), on_incompatible="new-major",
                            ddl_history=lambda s, t: [(2, ALTER)])
    enc1 = RowEncoder(manager.prepare_batch([v1])[("bench", "money", 1)].encoding)
    enc2 = RowEncoder(manager.prepare_batch([v2])[("bench", "money", 2)].encoding)
    one, two = [], []
    for i in range(rows):
        row = {"id": i, "amount": Decimal(i * 7 % 1_000_000_000) / 100, "doc": (b"%PDF-" + str(i).encode()) * 3,
               "note": f"order {i}"}
        one.append(enc2.encode(Op.INSERT, {**row, "a": str(i % 1000)})[1])
        two.append(enc1.encode(Op.INSERT, {**row, "a": i % 1000})[1] if i < rows // 2 else one[-1])
    return "bench_bench_money-value", one, two


def timed(spark: Any, df: Any, client: Any, subject: str) -> float:
    from avro_registry_sink.spark.functions import from_flat_avro

    started = time.perf_counter()
    df.select(from_flat_avro("value", registry=client, subject=subject, major=2).alias("r")) \
        .write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def bench(rows: int, rounds: int, partitions: int) -> dict[str, Any]:
    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.registry.embedded import EmbeddedRegistry
    from avro_registry_sink.settings.config import RegistryConfig
    from avro_registry_sink.spark.functions import from_flat_avro
    from avro_registry_sink.spark.runtime.session import local_session

    spark = local_session(master="local[2]", **{"spark.sql.shuffle.partitions": "2"})
    with EmbeddedRegistry() as server, RegistryClient(RegistryConfig(urls=(server.url,))) as client:
        subject, one, two = encoded(client, rows)
        frames = {}
        for name, records in (("one major", one), ("two majors", two)):
            frames[name] = spark.createDataFrame([(r,) for r in records], "value BINARY") \
                .repartition(partitions).cache()
            frames[name].count()
        check = frames["two majors"].select(from_flat_avro("value", registry=client, subject=subject, major=2)
                                            .alias("r")).where("r.id = 3").first()
        assert check is not None and check["r"]["a"] == "3" and check["r"]["amount"] == Decimal("0.21"), check
        for name in frames:  # warm-up: Python workers, the followers' parsed schemas and compiled rules
            timed(spark, frames[name], client, subject)
        timings: dict[str, list[float]] = {"one major": [], "two majors": []}
        loads: list[float] = []
        for n in range(rounds):
            order = list(frames) if n % 2 == 0 else list(reversed(frames))
            loads.append(os.getloadavg()[0])
            for name in order:
                timings[name].append(timed(spark, frames[name], client, subject))
        for df in frames.values():
            df.unpersist()
    ratios = [o / t for o, t in zip(timings["one major"], timings["two majors"], strict=True)]
    return {"rows": rows, "rounds": rounds, "partitions": partitions, "timings": timings, "ratios": ratios,
            "loads": loads}


def _span(values: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def report(result: dict[str, Any], info: dict[str, Any], commit: str, command: str) -> str:
    rows = result["rows"]
    lines = [START, "## Spark readers following majors: `from_flat_avro(major=N)` (`python -m bench.from_flat_avro_major`)",
             "", f"Machine: {describe_machine(info)}. Code `{commit}`. Command: `{command}`. "
             f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", "",
             "| records (read as major 2) | seconds (median, min-max) | rows/s (median) |", "|---|---|---|"]
    for name, seconds in result["timings"].items():
        what = {"one major": "one major: every record written as major 2 (Avro resolution)",
                "two majors": "two majors: half written as major 1 (UPGRADE rule), half as major 2"}[name]
        lines.append(f"| {what} | {_span(seconds)} | {rows / statistics.median(seconds):,.0f} |")
    lines += ["", f"Rows/s of two majors relative to one major, per round: **{_span(result['ratios'], '{:.2f}x')}** "
              f"({rows:,} rows of `{CREATE.split('(', 1)[1][:-1]}`, {result['partitions']} partitions, local[2], "
              f"{result['rounds']} rounds after a warm-up pair, alternating order; the DataFrames cached before "
              "timing; each read written to Spark's `noop` sink). Load average (1 min) at the start of each round: "
              + ", ".join(f"{x:.2f}" for x in result["loads"]) + ".", "", END]
    return "\n".join(lines)


def _commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip() or "?"
    except Exception:  # noqa: BLE001
        return "?"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--out", default=str(RESULTS), help="results file, or - to print only")
    args = parser.parse_args(argv)
    result = bench(args.rows, args.rounds, args.partitions)
    command = "python -m bench.from_flat_avro_major " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(result, machine(), _commit(), command.strip())
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
