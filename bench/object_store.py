"""The job on an S3 store vs the local disk: the same storage tree, rows per second of each.

    python -m bench.object_store                       # 200,000 rows, 2 tables, 3 rounds
    python -m bench.object_store --rows 1000000 --rounds 1 --write

The tree is :func:`bench.tree.storage_tree` (TiCDC's CSV storage sink, cached); it is uploaded to the S3
API server of ``scripts/s3proxy.sh`` (started here if none runs, stopped at exit; ``S3PROXY_PORT``), then in
every round the CLI runs ``run --available-now`` once from the local directory and once from its
``s3://...?endpoint=...`` URI, each with a fresh checkpoint and file sink output on the same kind of place
(local, or the same S3 store), with the same Spark settings and one embedded registry. Rows/s are the job's
own ``rows / elapsed_seconds`` (from its JSON summary: the streaming query, not the JVM start); the wall
time of the process is reported too. Nothing is asserted; the numbers go to stdout (and with ``--write`` to
``bench/object_store.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from avro_registry_sink.registry.embedded import EmbeddedRegistry
from avro_registry_sink.storage_fs import parse_storage_uri
from bench.tree import storage_tree

REPO = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).with_name("avro-registry-sink"))


def _s3proxy() -> tuple[str, bool]:
    """The endpoint of a running S3Proxy, and whether this process started it."""
    running = subprocess.run(["bash", str(REPO / "scripts/s3proxy.sh"), "status"], capture_output=True, text=True)
    if running.returncode == 0:
        return running.stdout.strip().splitlines()[-1], False
    started = subprocess.run(["bash", str(REPO / "scripts/s3proxy.sh"), "start"], capture_output=True, text=True,
                             check=True)
    return started.stdout.strip().splitlines()[-1], True


def _upload(local: Path, uri: str) -> float:
    started = time.perf_counter()
    store = parse_storage_uri(uri).filesystem()
    for path in sorted(local.rglob("*")):
        if path.is_file() and path.name != "tree.json":
            store.write_bytes(path.relative_to(local).as_posix(), path.read_bytes())
    return time.perf_counter() - started


def _run(source: str, checkpoint: str, output: str, registry: str) -> dict:
    args = [CLI, "run", "--source", source, "--checkpoint", checkpoint, "--sink-uri", output,
            "--registry", registry, "--csv", "include-commit-ts=true",
            "--available-now", "--progress", "none", "--state-dir", tempfile.mkdtemp(prefix="bench-state-")]
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "AVRO_SINK_SPARK_MASTER": "local[2]"})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"run failed: {done.stderr[-2000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"rows": summary["rows"], "seconds": summary.get("elapsed_seconds") or wall, "wall": wall}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--tables", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="also write bench/object_store.md")
    opts = parser.parse_args(argv)

    tree = storage_tree(opts.rows, opts.tables)
    endpoint, started = _s3proxy()
    identity = os.environ.get("S3PROXY_IDENTITY", "avro-sink-test")
    secret = os.environ.get("S3PROXY_CREDENTIAL", "avro-sink-test-secret")
    query = f"endpoint={endpoint}&access-key={identity}&secret-access-key={secret}"
    bucket = f"bench-{int(time.time())}"
    _create_bucket(endpoint, identity, secret, bucket)
    source = f"s3://{bucket}/tree?{query}"
    upload = _upload(tree.root, source)
    work = Path(tempfile.mkdtemp(prefix="bench-object-store-"))
    results: dict[str, list[dict]] = {"local": [], "s3": []}
    try:
        with EmbeddedRegistry() as server:
            for i in range(opts.rounds):
                results["local"].append(_run(str(tree.root), str(work / f"ck-{i}"),
                                             f"file://{work / f'out-{i}'}?protocol=avro", server.url))
                results["s3"].append(_run(source, f"s3://{bucket}/ck-{i}?{query}",
                                          f"s3://{bucket}/out-{i}?protocol=avro&{query}", server.url))
    finally:
        if started:
            subprocess.run(["bash", str(REPO / "scripts/s3proxy.sh"), "stop"], capture_output=True)
    lines = [f"# The job on S3 (S3Proxy on loopback) vs the local disk: {tree.rows:,} rows, {opts.tables} tables, "
             f"{tree.files} files ({tree.bytes / 2**20:.0f} MiB)", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; `local[2]`; "
             f"{opts.rounds} round(s); upload of the tree to S3: {upload:.1f} s.", "",
             "| source, checkpoint, output | rows/s (median) | min-max rows/s | job s (median) | process s (median) |",
             "| --- | --- | --- | --- | --- |"]
    for name, runs in results.items():
        rates = [r["rows"] / r["seconds"] for r in runs]
        lines.append(f"| {name} | {statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f} | "
                     f"{statistics.median(r['seconds'] for r in runs):.1f} | "
                     f"{statistics.median(r['wall'] for r in runs):.1f} |")
    ratio = statistics.median(results["s3"][i]["seconds"] / results["local"][i]["seconds"] for i in range(opts.rounds))
    lines += ["", f"S3 / local job time, median of the rounds: {ratio:.2f}x."]
    text = "\n".join(lines) + "\n"
    print(text)
    if opts.write:
        (REPO / "bench" / "object_store.md").write_text(text, encoding="utf-8")


def _create_bucket(endpoint: str, identity: str, secret: str, bucket: str) -> None:
    from urllib.parse import urlsplit

    from pyarrow import fs

    split = urlsplit(endpoint)
    fs.S3FileSystem(access_key=identity, secret_key=secret, endpoint_override=split.netloc, scheme=split.scheme,
                    region="us-east-1", allow_bucket_creation=True).create_dir(bucket)


if __name__ == "__main__":
    main()
