"""The job's throughput with its Prometheus metrics on (``run --metrics-port``) against off, same tree, same
process and Spark session, the two runs one after the other in every round (their order alternating).

    python -m bench.metrics_overhead --rows 1000000 --tables 10 --rounds 7

Each run is ``run --available-now`` to a fresh file sink and checkpoint. A first round of both (off, on) warms
Python workers, Spark's code paths and the page cache and is dropped. For each run the bench takes its wall time
and the CPU seconds of the process tree that ran it (this driver's Python, Spark's JVM, the Python workers; read
from ``/proc`` before and after the run), and the driver's Python alone (``getrusage``). All of the metrics' work
runs in the driver's Python (the counts the executors add up are the batch's tally, taken whether metrics are on or
not), so the driver's CPU seconds on - off is their cost, and it hardly moves with other work on the machine;
rows/s and the tree's CPU a row do (at a load average of 12-15, rounds of one mode 13-15% apart). Prints a markdown
table: medians, the fastest and slowest round, the on/off ratios round by round (the issue's bound: rows/s within
2%, to be read on a quiet machine), and the 1-minute load average before each round.

While the metrics run, a separate process scrapes them every ``--scrape-every`` seconds (1 s by default, as a
harsh Prometheus would; its own CPU is left out of the tree, as Prometheus's would be, and reported apart): a
scrape from the driver's own process with a new HTTP client each time costs that process about 35 ms of CPU (an
SSL context a client), a cost of the bench, not of the metrics.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.endtoend import _cli, _product_args, bench_session
from bench.tree import storage_tree

#: The scraper, run as its own process: GET /metrics every ``interval`` seconds until SIGTERM, then print the count
#: of answered scrapes and its own CPU seconds.
_SCRAPER = """
import resource, signal, sys, time, urllib.request
url, interval = sys.argv[1], float(sys.argv[2])
done = False
def stop(*_):
    global done
    done = True
signal.signal(signal.SIGTERM, stop)
count = 0
while not done:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            answer.read()
        count += 1
    except OSError:
        pass
    time.sleep(interval)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(count, usage.ru_utime + usage.ru_stime, flush=True)
"""

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """``(parent pid, own CPU seconds, reaped children's CPU seconds)`` of a live process, from ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the name: state, ppid, ...; utime, stime, cutime, cstime are fields 14-17 of stat (11-14 here)
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, (int(fields[13]) + int(fields[14])) / _TICK


def tree_cpu(root: int, exclude: frozenset[int] = frozenset()) -> dict[int, float]:
    """CPU seconds so far of ``root`` (its own) and of each live descendant (its own and its reaped children's),
    but those in ``exclude`` and their descendants. Parents are read from every process's ``/proc/<pid>/stat``:
    a JVM starts its children from other threads than its first, which ``/proc/<pid>/task/<pid>/children``
    misses."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            found = _stat(int(name))
            if found is not None:
                stats[int(name)] = found
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in exclude or pid not in stats:
            continue
        _, own, reaped = stats[pid]
        out[pid] = own if pid == root else own + reaped  # the root reaps the scrapers: left out
        todo.extend(children.get(pid, ()))
    return out


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (after one warm-up round)")
    parser.add_argument("--scrape-every", type=float, default=1.0, help="seconds between scrapes (0: none)")
    args = parser.parse_args()

    tree = storage_tree(args.rows, args.tables)
    bench_session()  # the session the CLI runs reuse
    work = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    loads: list[float] = []
    scrapes = 0
    scraper_cpu = 0.0

    def run(mode: str, n: int) -> dict[str, float]:
        nonlocal scrapes, scraper_cpu
        place = work / f"{mode}-{n}"
        cli_args = _product_args(tree, place / "state", f"file://{place / 'out'}?protocol=avro")
        scraper = None
        if mode == "on":
            port = _free_port()
            cli_args += ["--metrics-port", str(port)]
            if args.scrape_every > 0:
                scraper = subprocess.Popen([sys.executable, "-c", _SCRAPER, f"http://127.0.0.1:{port}/metrics",
                                            str(args.scrape_every)], stdout=subprocess.PIPE, text=True)
        exclude = frozenset([scraper.pid] if scraper is not None else [])
        before, self_before = tree_cpu(os.getpid(), exclude), _self_cpu()
        started = time.perf_counter()
        result = _cli(cli_args)
        seconds = time.perf_counter() - started
        self_cpu, after = _self_cpu() - self_before, tree_cpu(os.getpid(), exclude)
        if scraper is not None:
            scraper.terminate()
            out, _ = scraper.communicate(timeout=30)
            count, cpu = out.split()
            scrapes += int(count)
            scraper_cpu += float(cpu)
        shutil.rmtree(place, ignore_errors=True)
        return {"seconds": seconds, "rows": int(result.get("rows", 0)), "driver_cpu": self_cpu,
                "cpu": sum(v - before.get(pid, 0.0) for pid, v in after.items())}

    for mode in ("off", "on"):  # warm-up: Python workers, Spark's code paths, the tree in the page cache
        run(mode, 0)
    scrapes, scraper_cpu = 0, 0.0
    for n in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for mode in (("off", "on") if n % 2 == 0 else ("on", "off")):
            runs[mode].append(run(mode, n + 1))
    shutil.rmtree(work, ignore_errors=True)

    rate = {m: [r["rows"] / r["seconds"] for r in runs[m]] for m in runs}
    cpu_us = {m: [r["cpu"] / max(r["rows"], 1) * 1e6 for r in runs[m]] for m in runs}
    driver = {m: [r["driver_cpu"] for r in runs[m]] for m in runs}
    rate_ratio = [on / off for on, off in zip(rate["on"], rate["off"], strict=True)]
    cpu_ratio = [on / off for on, off in zip(cpu_us["on"], cpu_us["off"], strict=True)]
    driver_diff = [on - off for on, off in zip(driver["on"], driver["off"], strict=True)]
    rows_seen = {m: sorted({int(r["rows"]) for r in runs[m]}) for m in runs}
    print(f"{tree.rows:,} rows, {args.tables} tables, file sink, {args.rounds} rounds after a warm-up round; rows per "
          f"run: off {rows_seen['off']}, on {rows_seen['on']}; {scrapes} scrapes (every {args.scrape_every:g} s, "
          f"scraper process {scraper_cpu:.2f} CPU s in all, not counted); 1-minute load average before each round: "
          + ", ".join(f"{x:.2f}" for x in loads))
    print("| metrics | rows/s (median, min-max) | CPU µs/row, process tree | driver Python CPU s | "
          "rows/s on / off per round | CPU/row on / off per round | driver CPU s on - off per round |")
    print("|---|---|---|---|---|---|---|")
    for mode in ("off", "on"):
        ratios = ((_spread(rate_ratio, ".3f"), _spread(cpu_ratio, ".3f"), _spread(driver_diff, "+.2f"))
                  if mode == "on" else ("", "", ""))
        print(f"| {mode} | {_spread(rate[mode], ',.0f')} | {_spread(cpu_us[mode], '.2f')} | "
              f"{_spread(driver[mode], '.2f')} | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
