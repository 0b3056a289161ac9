"""The job's throughput with its Prometheus metrics on (``run --metrics-port 0``) against off, same tree, same
process and Spark session, the two runs one after the other in every round (their order alternating).

    python -m bench.metrics_overhead --rows 1000000 --tables 10 --rounds 5

Each run is ``run --available-now`` to a fresh file sink and checkpoint; rows/s is the rows the run reports over
its wall time. Prints a markdown table: medians, the fastest and slowest round, and the on/off ratio taken round by
round (the issue's bound: within 2%). While the metrics run, they are scraped every second, as Prometheus would.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.endtoend import _cli, _product_args, bench_session
from bench.tree import storage_tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import socket

    tree = storage_tree(args.rows, args.tables)
    bench_session()  # the session the CLI runs reuse
    work = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    rows_seen: dict[str, list[int]] = {"off": [], "on": []}
    scraped = 0

    def run(mode: str, n: int) -> None:
        nonlocal scraped
        place = work / f"{mode}-{n}"
        cli_args = _product_args(tree, place / "state", f"file://{place / 'out'}?protocol=avro")
        stop = threading.Event()
        scraper = None
        if mode == "on":
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            cli_args += ["--metrics-port", str(port)]

            def scrape() -> None:
                nonlocal scraped
                while not stop.wait(1.0):
                    try:
                        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
                        scraped += 1
                    except httpx.HTTPError:
                        pass

            scraper = threading.Thread(target=scrape, daemon=True)
            scraper.start()
        started = time.perf_counter()
        result = _cli(cli_args)
        seconds[mode].append(time.perf_counter() - started)
        rows_seen[mode].append(int(result.get("rows", 0)))
        stop.set()
        if scraper is not None:
            scraper.join()
        shutil.rmtree(place, ignore_errors=True)

    run("off", 0)  # warm-up: Python workers, JIT, the tree in the page cache
    seconds["off"].clear()
    rows_seen["off"].clear()
    for n in range(args.rounds):
        for mode in (("off", "on") if n % 2 == 0 else ("on", "off")):
            run(mode, n + 1)
    shutil.rmtree(work, ignore_errors=True)
    rate = {m: [r / s for r, s in zip(rows_seen[m], seconds[m], strict=True)] for m in seconds}
    ratios = [on / off for on, off in zip(rate["on"], rate["off"], strict=True)]
    print(f"{tree.rows:,} rows, {args.tables} tables, file sink, {args.rounds} rounds; rows per run: "
          f"off {sorted(set(rows_seen['off']))}, on {sorted(set(rows_seen['on']))}; {scraped} scrapes")
    print("| metrics | rows/s (median, min-max) | on / off per round (median, min-max) |")
    print("|---|---|---|")
    for mode in ("off", "on"):
        values = rate[mode]
        ratio = (f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})" if mode == "on" else "")
        print(f"| {mode} | {statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f}) | {ratio} |")


if __name__ == "__main__":
    main()
