"""Is this code slower than commit X? The product's CLI job of two commits, every input path, interleaved.

``python -m bench.against_commit --base 0a7b2d0 --rows 1000000 --rounds 3 --out /tmp/against.md``

* The base commit is checked out in a git worktree under the temporary directory (removed afterwards); the
  head is the checkout this module lives in. Each version runs as a subprocess,
  ``python -m avro_registry_sink.cli run ... --available-now``, with ``PYTHONPATH`` set to its own tree, so
  it imports its own package (checked before any run: each version prints the file it imported). The base
  builds its native parts as that version did (at run time, where it did); the head uses what the install built.
* The configurations (:data:`CONFIGS`): a TiCDC storage tree of CSV to a file sink, to Kafka at least once
  and exactly once; a storage tree of canal-json to Kafka; a canal-json topic and a debezium-json topic to
  Kafka. Each input is made once (the benchmark generators: :func:`bench.tree.storage_tree`,
  :func:`bench.ceiling.canal_tree`, :mod:`bench.changelog`), outside the timing.
* Per configuration, a warm-up pair (not reported), then ``rounds`` rounds of ``base, head``. Each run gets a
  fresh state directory (checkpoint, embedded registry) and output (a directory, or topics of its own
  prefix, deleted after the run, untimed). Before each round the 1-minute load average is read.
* Per run: the wall time of the whole command (the JVM's start included), the process tree's CPU seconds and
  peak resident memory (:class:`bench.harness.ProcessTreeSampler`). A run is counted only when it delivered
  every row: the file sink's records are counted, a Kafka sink's topics' high watermarks must reach the rows
  the run reports (exactly once adds a transaction marker per partition and commit), and both versions must
  report the same rows. A run that did not is reported as failed, with its cause, not timed.
* ``--base-env NAME=VALUE`` / ``--head-env NAME=VALUE`` (repeatable) set a variable for one version's runs
  only: with ``--base HEAD`` the same code under two settings (``--head-env AVRO_SINK_DRIVER_MEMORY=2g``).
  Every other ``AVRO_SINK_*`` variable of the caller is dropped for both.
* The report: per configuration, both versions' wall time (median, min-max), rows/s, CPU and peak memory,
  and head/base rows/s per round (median, min-max): above 1.0 the head is faster.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.endtoend import _Kafka, kafka_bootstrap
from bench.harness import PROCESS_KINDS, ProcessTreeSampler, describe_machine, fmt_ratio, machine

__all__ = ["CONFIGS", "Config", "Run", "compare", "main", "parse_env", "report", "run_env", "versions"]

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT = 3600
_SERIAL = itertools.count(1)  # a run's output prefix: unique in the invocation (topic deletion is asynchronous)


@dataclass(frozen=True)
class Config:
    """One row of the report: an input kind and a sink (``file``, or Kafka with a delivery)."""

    name: str
    source: str  # storage-csv | storage-canal-json | canal-json-topic | debezium-json-topic
    sink: str  # file | kafka
    delivery: str = "at-least-once"


CONFIGS = (
    Config("storage CSV -> file", "storage-csv", "file"),
    Config("storage CSV -> Kafka, at least once", "storage-csv", "kafka"),
    Config("storage CSV -> Kafka, exactly once", "storage-csv", "kafka", "exactly-once"),
    Config("storage canal-json -> Kafka", "storage-canal-json", "kafka"),
    Config("canal-json topic -> Kafka", "canal-json-topic", "kafka"),
    Config("debezium-json topic -> Kafka", "debezium-json-topic", "kafka"),
)


@dataclass
class Run:
    """One timed run of one version."""

    version: str  # "base" | "head"
    seconds: float
    cpu: float
    peak_rss: int
    rows: int
    load: float
    error: str = ""
    peak_split: dict[str, int] = field(default_factory=dict)  # the peak's memory by process kind


@dataclass
class Input:
    """A configuration's input: the ``run`` arguments that name it, and its rows."""

    args: list[str]
    rows: int
    cleanup: list[str] = field(default_factory=list)  # topics to delete at the end


def versions(base: str, work: Path) -> dict[str, Path]:
    """``{"base": worktree of base, "head": this checkout}``; the worktree is made under ``work``."""
    tree = work / "base"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(tree), base], check=True)
    return {"base": tree, "head": REPO}


def remove_worktree(tree: Path) -> None:
    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False,
                   capture_output=True)


def run_env(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AVRO_SINK_")}
    env.update(extra or {})
    env["PYTHONPATH"] = str(root)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def imported_from(root: Path) -> Path:
    """The package file a subprocess with ``root``'s environment imports (must be under ``root``)."""
    out = subprocess.run([sys.executable, "-c", "import avro_registry_sink; print(avro_registry_sink.__file__)"],
                         env=run_env(root), cwd=root, capture_output=True, text=True, check=True)
    path = Path(out.stdout.strip()).resolve()
    if not path.is_relative_to(root.resolve()):
        raise RuntimeError(f"{root} imports avro_registry_sink from {path}: PYTHONPATH does not take")
    return path


def commit_of(root: Path) -> str:
    return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


# --------------------------------------------------------------------------------------------------
# Inputs and outputs


def make_input(config: Config, rows: int, tables: int, work: Path, bootstrap: str | None) -> Input:
    """The configuration's input, made once (storage trees are cached between invocations)."""
    if config.source == "storage-csv":
        from bench.tree import storage_tree

        tree = storage_tree(rows, tables)
        return Input(["--source", str(tree.root), "--csv", "include-commit-ts=true"], tree.rows)
    if config.source == "storage-canal-json":
        from bench.ceiling import canal_tree

        canal = canal_tree(rows, tables)
        return Input(["--source", str(canal.root)], canal.rows)
    from bench.changelog import canal_messages, create_table_sql, debezium_messages, produce

    if bootstrap is None:
        raise SystemExit(f"{config.name}: a changelog topic needs a broker (KAFKA_BOOTSTRAP)")
    fmt = config.source.removesuffix("-topic")
    messages = (canal_messages if fmt == "canal-json" else debezium_messages)(rows, tables)
    topic = f"against-{fmt}-{os.getpid()}-{rows}"
    produce(bootstrap, topic, messages.texts, 3)
    ddl = work / f"{fmt}-tables.sql"
    ddl.write_text(create_table_sql(messages.tables), encoding="utf-8")
    return Input(["--source", f"{fmt}+kafka://{bootstrap}/{topic}", "--tables", str(ddl)], len(messages), [topic])


def kafka_records(kafka: _Kafka, prefix: str) -> int:
    """Offsets ever written to the topics named ``prefix...``: their high watermarks (transaction markers included)."""
    topics = [t for t in kafka.admin.list_topics(timeout=30).topics if t.startswith(prefix)]
    return sum(kafka.records(t) for t in topics)


def file_records(path: Path) -> int:
    from avro_registry_sink.spark.sinks.sinks import read_file_sink

    return sum(1 for _ in read_file_sink(str(path)))


# --------------------------------------------------------------------------------------------------
# Runs


def _summary(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def run_once(version: str, root: Path, config: Config, source: Input, place: Path, bootstrap: str | None,
             serial: int, extra_env: dict[str, str] | None = None) -> Run:
    """One run of ``version`` (its tree at ``root``) in a fresh ``place``; checked, then its output deleted."""
    place.mkdir(parents=True)
    prefix = f"ac{os.getpid()}x{serial}_"
    if config.sink == "file":
        sink = ["--sink-uri", f"file://{place / 'out'}?protocol=avro"]
    else:
        assert bootstrap is not None
        sink = ["--sink-uri", f"kafka://{bootstrap}/?protocol=avro", "--topic-rule", prefix + "{schema}_{table}"]
        if config.delivery != "at-least-once":
            sink += ["--delivery", config.delivery]
    args = [sys.executable, "-m", "avro_registry_sink.cli", "run", *source.args, "--available-now",
            "--progress", "none", "--state-dir", str(place / "state"), *sink]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(args, env=run_env(root, extra_env), cwd=place, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    with ProcessTreeSampler(proc.pid) as sampler:
        try:
            stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
    seconds = time.perf_counter() - started
    run = Run(version, seconds, sampler.cpu_seconds, sampler.peak_rss, 0, load, peak_split=sampler.peak_split)
    try:
        if proc.returncode != 0:
            run.error = f"exit {proc.returncode}: " + " ".join((stderr or stdout)[-600:].split())
            return run
        run.rows = int(_summary(stdout).get("rows", 0))
        if config.sink == "file":
            delivered = file_records(place / "out")
            if delivered != run.rows or run.rows < source.rows:
                run.error = f"{delivered:,} records written for {run.rows:,} rows reported, {source.rows:,} in"
        else:
            assert bootstrap is not None
            delivered = kafka_records(_Kafka(bootstrap), prefix)
            if run.rows < source.rows or delivered < run.rows or (
                    config.delivery == "at-least-once" and delivered != run.rows):
                run.error = f"{delivered:,} offsets written for {run.rows:,} rows reported, {source.rows:,} in"
        return run
    finally:
        if bootstrap is not None and config.sink == "kafka":
            _Kafka(bootstrap).delete_prefixed(prefix)
        shutil.rmtree(place, ignore_errors=True)


def compare(config: Config, roots: dict[str, Path], source: Input, rounds: int, work: Path,
            bootstrap: str | None, warmup: bool = True, envs: dict[str, dict[str, str]] | None = None) -> list[Run]:
    """``rounds`` rounds of ``base, head`` after a warm-up pair (dropped); ``envs``: variables per version."""
    runs: list[Run] = []
    for number in range(rounds + (1 if warmup else 0)):
        for version in ("base", "head"):
            serial = next(_SERIAL)
            run = run_once(version, roots[version], config, source, work / f"run-{serial}", bootstrap, serial,
                           (envs or {}).get(version))
            print(f"  {config.name} {'warm-up' if warmup and number == 0 else f'round {number}'} {version}: "
                  f"{run.seconds:.1f} s, {run.rows:,} rows, load {run.load:.2f}"
                  + (f" FAILED {run.error}" if run.error else ""), file=sys.stderr, flush=True)
            if not (warmup and number == 0):
                runs.append(run)
        base, head = runs[-2:] if len(runs) >= 2 else (None, None)
        if base is not None and head is not None and not base.error and not head.error and base.rows != head.rows:
            head.error = f"{head.rows:,} rows reported against the base's {base.rows:,}"
    return runs


# --------------------------------------------------------------------------------------------------
# The report


def _median_range(values: Sequence[float], fmt: str) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    text = format(statistics.median(values), fmt)
    return text if lo == hi else f"{text} ({format(lo, fmt)}-{format(hi, fmt)})"


def report(results: dict[str, list[Run]], rows: int, commits: dict[str, str], extra: Sequence[str] = ()) -> str:
    """The markdown section: one line per configuration."""
    heads = ["configuration", "rows", "base s", "head s", "base rows/s", "head rows/s",
             "head/base rows/s per round", "CPU s base / head", "peak RSS GiB base / head",
             "at the peak, GiB base / head: " + ", ".join(PROCESS_KINDS), "load (1 min)", "failed"]
    out = [f"## This code against `{commits['base']}`: the CLI job of both, interleaved",
           "", f"Base `{commits['base']}`, head `{commits['head']}`; {rows:,} rows per input. " + " ".join(extra), "",
           "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for name, runs in results.items():
        ok = {v: [r for r in runs if r.version == v and not r.error] for v in ("base", "head")}
        ratios = []
        for b, h in zip([r for r in runs if r.version == "base"], [r for r in runs if r.version == "head"],
                        strict=False):
            if not b.error and not h.error:
                ratios.append(b.seconds / h.seconds)
        speed = {v: [r.rows / r.seconds for r in ok[v]] for v in ok}
        failed = "; ".join(f"{r.version}: {r.error}" for r in runs if r.error)
        row_count = next((r.rows for r in runs if not r.error), 0)
        out.append("| " + " | ".join([
            name, f"{row_count:,}",
            _median_range([r.seconds for r in ok["base"]], ".1f"), _median_range([r.seconds for r in ok["head"]], ".1f"),
            _median_range(speed["base"], ",.0f"), _median_range(speed["head"], ",.0f"),
            fmt_ratio(ratios) if ratios else "-",
            f"{_median_range([r.cpu for r in ok['base']], '.1f')} / {_median_range([r.cpu for r in ok['head']], '.1f')}",
            f"{_median_range([r.peak_rss / 2**30 for r in ok['base']], '.2f')} / "
            f"{_median_range([r.peak_rss / 2**30 for r in ok['head']], '.2f')}",
            " / ".join(", ".join(_median_range([r.peak_split.get(k, 0) / 2**30 for r in ok[v]], ".2f")
                                 for k in PROCESS_KINDS) for v in ("base", "head")),
            _median_range([r.load for r in runs], ".2f"), failed or "none"]) + " |")
    return "\n".join(out) + "\n"


def parse_env(items: Sequence[str]) -> dict[str, str]:
    """``["NAME=VALUE", ...]`` as a dict; an item without ``=`` or with an empty name is refused, naming it."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SystemExit(f"--base-env/--head-env takes NAME=VALUE, not {item!r}")
        out[name.strip()] = value
    return out


@contextlib.contextmanager
def _work_dir(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="against-commit-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.against_commit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="The commit to compare against (any git revision).")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--config", action="append", choices=[c.name for c in CONFIGS],
                        help="Only these configurations (repeatable; default all).")
    parser.add_argument("--no-warmup", action="store_true", help="Skip the warm-up pair.")
    parser.add_argument("--out", type=Path, help="Write the markdown report here too.")
    parser.add_argument("--keep", action="store_true", help="Keep the work directory.")
    for version in ("base", "head"):
        parser.add_argument(f"--{version}-env", action="append", default=[], metavar="NAME=VALUE",
                            help=f"A variable for the {version}'s runs only (repeatable).")
    options = parser.parse_args(argv)
    envs = {"base": parse_env(options.base_env), "head": parse_env(options.head_env)}

    bootstrap = kafka_bootstrap()
    chosen = [c for c in CONFIGS if not options.config or c.name in options.config]
    needs_kafka = [c.name for c in chosen if c.sink == "kafka" or c.source.endswith("-topic")]
    if needs_kafka and bootstrap is None:
        raise SystemExit(f"no broker at KAFKA_BOOTSTRAP for: {', '.join(needs_kafka)}")
    results: dict[str, list[Run]] = {}
    with _work_dir(options.keep) as work:
        roots = versions(options.base, work)
        try:
            for root in roots.values():
                imported_from(root)
            commits = {v: commit_of(r) for v, r in roots.items()}
            for config in chosen:
                source = make_input(config, options.rows, options.tables, work, bootstrap)
                try:
                    results[config.name] = compare(config, roots, source, options.rounds, work, bootstrap,
                                                   warmup=not options.no_warmup, envs=envs)
                finally:
                    if bootstrap is not None:
                        for topic in source.cleanup:
                            _Kafka(bootstrap).delete_prefixed(topic)
        finally:
            remove_worktree(roots["base"])
    settings = [f"{version}: {' '.join(f'{k}={v}' for k, v in env.items())}." for version, env in envs.items() if env]
    text = report(results, options.rows, commits,
                  [*settings, f"{options.tables} tables, {options.rounds} rounds"
                   f"{'' if options.no_warmup else ' after a warm-up pair'}; {describe_machine(machine())}."])
    print(text)
    if options.out:
        options.out.write_text(text, encoding="utf-8")
    return 0 if all(not r.error for runs in results.values() for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
