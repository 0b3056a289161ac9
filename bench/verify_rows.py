"""How fast ``avro-registry-sink verify`` proves a run: rows verified per second, on generated storage trees.

For each size: the reference table's tree (:func:`bench.tree.storage_tree`, cached), one run of the product
(``run --available-now``, default batch size) into the file sink (or Kafka with ``--sink kafka``), then
``verify --json`` on it, in-process in one SparkSession (the product's settings, ``local[*]``), timed; the
report must reconcile (exit 0, every discrepancy count zero) and count every row. The machine's load
(``uptime``) is read before and after each verify. Results go to ``bench/results.md``, in its own section
(replaced on each run)::

    .venv/bin/python -m bench.verify_rows --rows 1e6              # file sink
    .venv/bin/python -m bench.verify_rows --rows 1e6,1e7 --rounds 2
    KAFKA_BOOTSTRAP=127.0.0.1:19092 .venv/bin/python -m bench.verify_rows --rows 1e6 --sink kafka
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness import ProcessTreeSampler, describe_machine, machine
from bench.tree import storage_tree

RESULTS = Path(__file__).with_name("results.md")
START, END = "<!-- verify-bench:start -->", "<!-- verify-bench:end -->"


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cli(args: list[str]) -> tuple[int, dict[str, Any]]:
    """The CLI in this process: (exit status, its last JSON line)."""
    import typer

    from avro_registry_sink.cli import app

    out = io.StringIO()
    code: Any = 0
    with contextlib.redirect_stdout(out):
        try:
            code = typer.main.get_command(app).main(args, prog_name="avro-registry-sink", standalone_mode=False)
        except SystemExit as exc:  # typer.Exit(1) from verify
            code = exc.code
    lines = [line for line in out.getvalue().splitlines() if line.startswith("{")]
    return int(code or 0), (json.loads(lines[-1]) if lines else {})


def bench_one(rows: int, sink: str, work: Path, bootstrap: str | None, rounds: int = 1) -> dict[str, Any]:
    tree = storage_tree(rows, 1)
    state = work / f"state-{rows}"
    shutil.rmtree(state, ignore_errors=True)
    common = ["--source", str(tree.root), "--csv", "include-commit-ts=true", "--state-dir", str(state)]
    if sink == "kafka":
        prefix = "vb" + uuid.uuid4().hex[:6]
        common += ["--sink-uri", f"kafka://{bootstrap}/?protocol=avro&partition-num=3",
                   "--topic-rule", prefix + "_{schema}_{table}"]
    else:
        common += ["--sink-uri", f"file://{work / f'out-{rows}'}?protocol=avro"]
    started = time.perf_counter()
    with ProcessTreeSampler() as sampler:
        code, summary = _cli(["run", *common, "--available-now", "--progress", "none"])
    run_seconds, run_cpu = time.perf_counter() - started, sampler.cpu_seconds
    assert code == 0 and summary.get("rows") == rows, (code, summary)
    timings, cpu = [], []
    load_before, load_after = _uptime(), ""
    report: dict[str, Any] = {}
    for _ in range(rounds):
        started = time.perf_counter()
        with ProcessTreeSampler() as sampler:
            code, report = _cli(["verify", *common, "--json"])
        timings.append(time.perf_counter() - started)
        cpu.append(sampler.cpu_seconds)
        load_after = _uptime()
        assert code == 0 and report["status"] == "ok", (code, json.dumps(report)[:2000])
        assert report["totals"]["expected"] == report["totals"]["delivered"] == rows, report["totals"]
    shutil.rmtree(state, ignore_errors=True)
    shutil.rmtree(work / f"out-{rows}", ignore_errors=True)
    return {"rows": rows, "sink": sink, "files": tree.files, "run_s": run_seconds, "run_cpu_s": run_cpu,
            "verify_s": timings, "verify_cpu_s": cpu,
            "load_before": load_before, "load_after": load_after, "totals": report["totals"]}


def _markdown(results: list[dict[str, Any]], info: dict[str, Any], command: str) -> str:
    lines = [START, "## verify: rows verified per second (`bench/verify_rows.py`)", "",
             f"- machine (read at run time): {describe_machine(info)}",
             f"- command: `{command}`", f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}", "",
             "| rows | sink | data files | run: s (CPU s) | verify: s (CPU s), each round | verify rows/s (best) | "
             "verify CPU s per 10^6 rows | load before | load after |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        best = min(r["verify_s"])
        lines.append(f"| {r['rows']:,} | {r['sink']} | {r['files']} | {r['run_s']:.1f} ({r['run_cpu_s']:.0f}) | "
                     + ", ".join(f"{s:.1f} ({c:.0f})" for s, c in zip(r["verify_s"], r["verify_cpu_s"], strict=False))
                     + f" | {r['rows'] / best:,.0f} | {min(r['verify_cpu_s']) / r['rows'] * 1e6:.1f} | "
                     f"{r['load_before'].split('load average:')[-1].strip()} | "
                     f"{r['load_after'].split('load average:')[-1].strip()} |")
    lines += ["", "Each verify reconciled: exit 0, every discrepancy count zero, expected = delivered = rows. "
              "The run (`run --available-now`, default batch size) is timed for scale, not compared. CPU s: user + system "
              "time of the process tree (driver JVM with the executors, Python workers), less sensitive than wall "
              "time to the other work on the machine. "
              "Load averages are `uptime`'s 1, 5 and 15 minute figures on this shared machine.", END]
    return "\n".join(lines) + "\n"


def _write(section: str) -> None:
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + section + rest.split(END, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1e6", help="comma-separated tree sizes, e.g. 1e6,1e7")
    parser.add_argument("--sink", default="file", choices=("file", "kafka"))
    parser.add_argument("--rounds", type=int, default=1, help="verify runs per size (the best one is reported)")
    parser.add_argument("--no-write", action="store_true", help="print, do not update bench/results.md")
    args = parser.parse_args(argv)
    sizes = [int(float(x)) for x in args.rows.split(",") if x.strip()]
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP") if args.sink == "kafka" else None
    if args.sink == "kafka" and not bootstrap:
        parser.error("--sink kafka needs KAFKA_BOOTSTRAP")
    from bench.endtoend import bench_session

    info = machine()
    bench_session()  # the product's session, with Spark's Kafka package (the CLI reuses it)
    work = Path(tempfile.mkdtemp(prefix="verify-bench-"))
    try:
        results = []
        for rows in sizes:
            result = bench_one(rows, args.sink, work, bootstrap, max(1, args.rounds))
            print(json.dumps({k: v for k, v in result.items() if k != "totals"}), flush=True)
            results.append(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    section = _markdown(results, info, "python -m bench.verify_rows " + " ".join(sys.argv[1:] if argv is None else argv))
    print(section)
    if not args.no_write:
        _write(section)


if __name__ == "__main__":
    main()
