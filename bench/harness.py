"""Timing and reporting for the benchmark suite: interleaved rounds, medians, spread, the machine.

Every comparison runs its candidates in the same rounds (A B A B ...), so a noisy neighbour on a shared
machine slows all of them alike; a ratio is computed per round (candidate and baseline of one round)
and reported as its median with the lowest and highest round.

>>> t = Timing("x", [2.0, 1.0, 4.0])
>>> (t.median, t.low, t.high)
(2.0, 1.0, 4.0)
>>> per_round_ratios(Timing("a", [1.0, 2.0]), 100, Timing("b", [2.0, 2.0]), 100)
[2.0, 1.0]
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "PROCESS_KINDS",
    "Context",
    "ProcessTreeSampler",
    "Row",
    "Section",
    "Timing",
    "fmt_ratio",
    "interleaved",
    "machine",
    "per_round_ratios",
    "process_kind",
    "ratio_cell",
    "timed",
    "verdict",
]


@dataclass
class Timing:
    """Seconds of one candidate in each timed round (warm-up excluded) and its last result."""

    name: str
    seconds: list[float]
    result: Any = None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    @property
    def low(self) -> float:
        return min(self.seconds) if self.seconds else float("nan")

    @property
    def high(self) -> float:
        return max(self.seconds) if self.seconds else float("nan")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of one call (after a garbage collection) and its result."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def interleaved(candidates: dict[str, Callable[[], Any]], repeats: int, warmup: bool = True,
                between: Callable[[str], Any] | None = None) -> dict[str, Timing]:
    """Run the candidates in rounds, one after the other in each round (a warm-up round first).

    ``between(name)`` runs after each call, untimed (e.g. deleting a run's output).
    """
    timings = {name: Timing(name, []) for name in candidates}
    for round_ in range(repeats + (1 if warmup else 0)):
        for name, fn in candidates.items():
            seconds, result = timed(fn)
            timings[name].result = result
            if round_ or not warmup:
                timings[name].seconds.append(seconds)
            if between is not None:
                between(name)
    return timings


def per_round_ratios(candidate: Timing, candidate_rows: int, baseline: Timing, baseline_rows: int) -> list[float]:
    """Rows/s of the candidate over rows/s of the baseline, round by round."""
    return [(candidate_rows / c) / (baseline_rows / b) for c, b in zip(candidate.seconds, baseline.seconds, strict=False) if c and b]


def fmt_ratio(ratios: list[float], unit: str = "x") -> str:
    """``"22.1x (20.3-25.9x)"``: the median ratio and the range over rounds (``unit="%"`` for percentages)."""
    if not ratios:
        return "n/a"
    med, lo, hi = statistics.median(ratios), min(ratios), max(ratios)
    if unit == "%":
        return f"{med:.0%}" + (f" ({lo:.0%}-{hi:.0%})" if len(ratios) > 1 else "")
    return f"{med:,.2f}x" + (f" ({lo:,.2f}-{hi:,.2f}x)" if len(ratios) > 1 else "")


def ratio_cell(ratios: list[float], target: float | None, unit: str = "x") -> tuple[str, bool | None]:
    """The ratio text and whether its median meets ``target`` (``None`` without a target or ratios)."""
    if not ratios:
        return "n/a", None
    return fmt_ratio(ratios, unit), (None if target is None else statistics.median(ratios) >= target)


def verdict(meets: bool | None) -> str:
    """The "meets target" cell: yes / no / n/a (baseline not measured). Reported, never asserted."""
    return "n/a" if meets is None else ("yes" if meets else "**no**")


@dataclass
class Row:
    """One line of a section's table: a candidate's median time over ``rows`` rows, with its spread."""

    name: str
    rows: int
    seconds: float
    out_bytes: int = 0
    note: str = ""
    ratio: str = ""  # against the target's baseline, e.g. "22.4x (20.1-25.3x)"
    target: str = ""  # e.g. ">= 20x"; rows with a target get a "meets target" cell
    meets: bool | None = None  # None: no target, or the baseline could not be measured
    low: float | None = None  # fastest and slowest round (seconds)
    high: float | None = None

    @classmethod
    def of(cls, timing: Timing, rows: int, out_bytes: int = 0, note: str = "") -> Row:
        return cls(timing.name, rows, timing.median, out_bytes, note, low=timing.low, high=timing.high)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else float("nan")

    @property
    def mb_per_s(self) -> float:
        return self.out_bytes / self.seconds / 1e6 if self.seconds and self.out_bytes else float("nan")

    @property
    def spread(self) -> str:
        if self.low is None or self.high is None or self.low == self.high or not self.rows:
            return ""
        return f"{self.rows / self.high:,.0f}-{self.rows / self.low:,.0f}"


@dataclass
class Section:
    """A titled markdown table of :class:`Row` plus free lines."""

    title: str
    rows: list[Row] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # extra markdown (tables, notes)

    def markdown(self) -> str:
        out = [f"## {self.title}", ""]
        if self.rows:
            heads = ["benchmark", "rows", "rows/s (median)", "rows/s (min-max)", "MB/s"]
            targets = any(r.ratio or r.target for r in self.rows)
            if targets:
                heads += ["ratio (median, min-max over rounds)", "target", "meets target"]
            heads.append("note")
            out.append("| " + " | ".join(heads) + " |")
            out.append("|" + "---|" * len(heads))
            for r in self.rows:
                cells = [r.name, f"{r.rows:,}", f"{r.rows_per_s:,.0f}", r.spread,
                         "" if r.mb_per_s != r.mb_per_s else f"{r.mb_per_s:,.1f}"]
                if targets:
                    cells += [r.ratio, r.target, verdict(r.meets) if r.target else ""]
                cells.append(r.note)
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        out.extend(self.lines)
        return "\n".join(out) + "\n"


@dataclass
class Context:
    """What every section gets: sizes, mode, repeats, and where to put summary lines and shared data."""

    rows: int
    quick: bool
    repeats: int
    options: dict[str, Any] = field(default_factory=dict)  # command-line choices of the end-to-end sections
    summary: list[str] = field(default_factory=list)
    shared: dict[Any, Any] = field(default_factory=dict)
    cleanup: list[Callable[[], Any]] = field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# The machine, read at run time


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module.replace("_", "-"))
    except Exception:  # noqa: BLE001 - reported as unknown
        return "?"


def machine() -> dict[str, Any]:
    """CPU model, usable cores, memory, OS, Python, Java and library versions of this run."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    java = "?"
    try:
        import subprocess

        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        java = (out.stderr or out.stdout).splitlines()[0].strip()
    except Exception:  # noqa: BLE001
        pass
    return {
        "cpu": _cpu_model(),
        "cores": cores,
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": java,
        "versions": {m: _version(m) for m in ("pyspark", "pyarrow", "numpy", "fastavro", "confluent-kafka")},
    }


def describe_machine(info: dict[str, Any]) -> str:
    memory = f", {info['memory_gib']:.0f} GiB" if info.get("memory_gib") else ""
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    return (f"{info['cores']} cores ({info['cpu']}){memory}, {info['os']}, Python {info['python']}, "
            f"{info['java']}; {versions}")


# --------------------------------------------------------------------------------------------------
# Memory and CPU of a process tree


def _children(pid: int) -> list[int]:
    """Every thread's children: a JVM forks Spark's Python workers from threads other than its main one, and
    ``/proc/<pid>/task/<pid>/children`` lists only the main thread's."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="utf-8") as fh:
                out.extend(int(p) for p in fh.read().split())
        except OSError:
            continue
    return out


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


#: The kinds of process in a job's tree, in report order: :attr:`ProcessTreeSampler.peak_split`.
PROCESS_KINDS = ("jvm", "spark planners", "python workers", "other")
#: Python processes by what their command line holds (first match); the JVM is known by its program's name.
_PYTHON_MARKS = (("spark planners", ("pyspark.sql.worker.", "python_streaming_source_runner")),
                 ("python workers", ("pyspark.daemon", "pyspark.worker")))


def process_kind(pid: int) -> str:
    """``jvm``, ``spark planners`` (Spark's Python data-source planning processes), ``python workers`` or
    ``other`` (the CLI itself, a shell)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
    except OSError:
        return "other"
    if os.path.basename(args[0].decode(errors="replace")) == "java":
        return "jvm"
    line = b" ".join(args).decode(errors="replace")
    return next((kind for kind, marks in _PYTHON_MARKS if any(m in line for m in marks)), "other")


def _cpu_times(pid: int) -> tuple[int, float, float] | None:
    """``(parent pid, own user + system seconds, reaped children's seconds)`` of a live process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        # ppid: field 4 of stat; utime, stime, cutime, cstime (clock ticks): fields 14-17 (2 and 12-15 after the name)
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick
    except (OSError, IndexError, ValueError):
        return None


class ProcessTreeSampler:
    """Peak resident memory (sum over a process and all its descendants) and CPU seconds while running.

    Samples ``/proc`` every ``interval`` seconds in a thread: the peak is the largest sum seen, i.e.
    Spark's driver/executor JVM plus Python workers (local mode runs executors in the driver JVM);
    :attr:`peak_split` is that sample's memory by :func:`process_kind`.
    CPU seconds are the tree's user + system time: each process's own, last seen, plus what its parent's count
    of reaped children holds beyond the children seen here (a process too short-lived to be sampled counts once
    reaped; one that was sampled is not counted twice when its parent reaps it).

    >>> with ProcessTreeSampler() as s:
    ...     _ = sum(range(10**5))
    >>> s.peak_rss > 0
    True
    """

    def __init__(self, pid: int | None = None, interval: float = 0.25) -> None:
        self.pid = pid or os.getpid()
        self.interval = interval
        self.peak_rss = 0
        self.peak_split: dict[str, int] = {}
        self.cpu_seconds = 0.0
        self._times: dict[int, tuple[int, float, float]] = {}  # pid -> (parent, own, reaped children), last seen
        self._start_cpu: dict[int, float] = {}  # processes alive at the start: what they had used already
        self._alive: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        pids = _tree(self.pid)
        sizes = {p: _rss_bytes(p) for p in pids}
        total = sum(sizes.values())
        if total > self.peak_rss:
            self.peak_rss = total
            split: dict[str, int] = {}
            for p, size in sizes.items():
                kind = process_kind(p)
                split[kind] = split.get(kind, 0) + size
            self.peak_split = split
        for p in pids:
            times = _cpu_times(p)
            if times is not None:
                self._times[p] = times
                self._start_cpu.setdefault(p, times[1] + times[2] if self._thread is None else 0.0)
        self._alive = set(pids)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> ProcessTreeSampler:
        self._sample()  # processes alive now: count only their CPU from here on
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        self.cpu_seconds = self._tree_cpu()

    def _tree_cpu(self) -> float:
        counted: dict[int, float] = {}  # per parent: the seconds of its sampled children that are gone (reaped)
        for pid, (parent, own, reaped) in self._times.items():
            if pid not in self._alive:
                counted[parent] = counted.get(parent, 0.0) + own + reaped
        total = sum(own + max(0.0, reaped - counted.get(pid, 0.0)) for pid, (_, own, reaped) in self._times.items())
        return total - sum(self._start_cpu.values())


def directory_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


# --------------------------------------------------------------------------------------------------
# Where Spark's time goes: stages from the event log


def stage_breakdown(event_dir: Path, start_ms: float, end_ms: float) -> list[dict[str, Any]]:
    """Spark stages submitted in ``[start_ms, end_ms]`` (epoch ms), from the session's event log, summed by name.

    Each entry: ``name`` (the stage's operators, e.g. ``Scan csv > Project > Exchange``), ``stages``,
    ``wall_ms`` (submission to completion), ``task_ms`` (executor run time of all tasks: both cores) and
    ``cpu_ms`` (executor CPU time; Python workers' time is in ``task_ms`` only).
    """
    import json

    out: dict[str, dict[str, Any]] = {}
    for log in sorted(p for p in Path(event_dir).rglob("*") if p.is_file()):
        with open(log, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if '"SparkListenerStageCompleted"' not in line:
                    continue
                try:
                    info = json.loads(line)["Stage Info"]
                except (ValueError, KeyError):
                    continue  # the line being written
                submitted, completed = info.get("Submission Time"), info.get("Completion Time")
                if submitted is None or completed is None or not start_ms <= submitted <= end_ms:
                    continue
                metrics = {a.get("Name"): a.get("Value") for a in info.get("Accumulables", [])}
                name = _stage_label(info)
                entry = out.setdefault(name, {"name": name, "stages": 0, "wall_ms": 0.0, "task_ms": 0.0, "cpu_ms": 0.0})
                entry["stages"] += 1
                entry["wall_ms"] += completed - submitted
                entry["task_ms"] += float(metrics.get("internal.metrics.executorRunTime") or 0)
                entry["cpu_ms"] += float(metrics.get("internal.metrics.executorCpuTime") or 0) / 1e6
    return sorted(out.values(), key=lambda e: -e["wall_ms"])


def _stage_label(info: dict[str, Any]) -> str:
    """A stage's operators (the scopes of its RDDs, oldest first), e.g. ``InMemoryTableScan > MapInArrow > Exchange``."""
    import json
    import re

    names: list[str] = []
    for rdd in sorted(info.get("RDD Info", []), key=lambda r: r.get("RDD ID", 0)):
        scope = rdd.get("Scope")
        name = json.loads(scope).get("name") if scope else rdd.get("Name", "")
        if name == "PythonRDD" or rdd.get("Name") == "PythonRDD":
            name = "Python RDD"
        name = re.sub(r"\s*\(\d+\)$", "", name or "").strip()
        if name and name not in ("WholeStageCodegen", "map", "mapPartitions", "mapPartitionsInternal", "SQLExecutionRDD")\
                and name not in names:
            names.append(name)
    return " > ".join(names) or info.get("Stage Name", "?")
