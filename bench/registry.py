"""The embedded registry under a large schema: registration time by width, and reads while one runs.

    python -m bench.registry                      # widths 1000,4000,12000 columns
    python -m bench.registry --widths 2000,20000

For each width: the time to register a wide record (every column a nullable string with TiCDC's
``connect.parameters``) and to register its next version (one column added) under ``FULL_TRANSITIVE``,
i.e. parse, canonical text, and Apache Avro's checker both ways. With the widest schema, a second client
reads another subject and a schema by id in a loop while the second version is being registered: how many
reads were answered before the registration was, and their latency. Real registry over real HTTP; the
numbers are printed, nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import threading
import time
from typing import Any

import httpx

from avro_registry_sink.registry.embedded import EmbeddedRegistry

ROW = json.dumps({"type": "record", "name": "Row", "fields": [{"name": "a", "type": "long"}]})


def wide_record(columns: int, extra: dict[str, Any] | None = None) -> str:
    fields: list[dict[str, Any]] = [
        {"name": f"column_{i}", "type": ["null", {"type": "string", "connect.parameters": {"tidb_type": "VARCHAR"}}],
         "default": None}
        for i in range(columns)
    ]
    if extra:
        fields.append(extra)
    return json.dumps({"type": "record", "name": "Wide", "namespace": "default.big", "fields": fields})


def measure(columns: int, *, with_reads: bool) -> dict[str, Any]:
    v1 = wide_record(columns)
    v2 = wide_record(columns, {"name": "added", "type": "long", "default": 0})
    out: dict[str, Any] = {"columns": columns, "mb": len(v2) / 1e6}
    with EmbeddedRegistry() as registry, httpx.Client(base_url=registry.url or "", timeout=3600) as client:
        client.post("/subjects/small-value/versions", json={"schema": ROW}).raise_for_status()
        client.put("/config/wide-value", json={"compatibility": "FULL_TRANSITIVE"}).raise_for_status()
        started = time.perf_counter()
        client.post("/subjects/wide-value/versions", json={"schema": v1}).raise_for_status()
        out["first_s"] = time.perf_counter() - started
        sent = threading.Event()
        done: dict[str, float] = {}

        def trace(event: str, info: dict[str, Any]) -> None:
            if event == "http11.send_request_body.complete":
                sent.set()

        def register() -> None:
            with httpx.Client(base_url=registry.url or "", timeout=3600) as other:
                begun = time.perf_counter()
                other.post("/subjects/wide-value/versions", json={"schema": v2}, extensions={"trace": trace}).raise_for_status()
                done["at"] = time.perf_counter()
                done["took"] = done["at"] - begun

        worker = threading.Thread(target=register)
        worker.start()
        reads: list[tuple[float, float]] = []
        if with_reads:
            sent.wait()
            with httpx.Client(base_url=registry.url or "", timeout=3600) as reader:
                while worker.is_alive():
                    begun = time.perf_counter()
                    reader.get("/subjects/small-value/versions/latest").raise_for_status()
                    reader.get("/schemas/ids/1").raise_for_status()
                    reads.append((begun, time.perf_counter()))
        worker.join()
        out["second_s"] = done["took"]
        if reads:
            latencies = sorted(end - begun for begun, end in reads)
            out["reads_during"] = sum(1 for _, end in reads if end < done["at"])
            out["read_median_ms"] = latencies[len(latencies) // 2] * 1000
            out["read_max_ms"] = latencies[-1] * 1000
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--widths", default="1000,4000,12000")
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}, "
          f"load average {load:.1f} at start")
    print("| columns | schema MB | register v1 s | register v2 (FULL_TRANSITIVE) s | read pairs answered meanwhile "
          "| read median ms | read max ms |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for width in widths:
        r = measure(width, with_reads=width == max(widths))
        print(f"| {r['columns']} | {r['mb']:.2f} | {r['first_s']:.2f} | {r['second_s']:.2f} | "
              f"{r.get('reads_during', '')} | {r.get('read_median_ms', float('nan')):.1f} | "
              f"{r.get('read_max_ms', float('nan')):.1f} |")


if __name__ == "__main__":
    main()
