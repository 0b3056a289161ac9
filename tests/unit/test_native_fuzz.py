"""The debezium-json scanner (``formats/native/debezium_scan.c``) fuzzed under AddressSanitizer and
UndefinedBehaviorSanitizer for a bounded time, and compiled without a warning.

The fuzzer (``tests/support/debezium_scan_fuzz.c``, a mutation loop: this machine's compiler is gcc, without
libFuzzer) is seeded with TiCDC payloads (``bench.changelog``) and real Debezium MySQL-connector output
(``tests/data/inputs/debezium/external``). ``AVRO_SINK_FUZZ_SECONDS`` (default 15) sets how long it runs,
``AVRO_SINK_FUZZ_SEED`` its random seed (default: a new one, printed with any failure to replay it).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from avro_registry_sink.formats.changelog_arrow import _debezium_shape
from avro_registry_sink.formats.native_scan import _TYPES
from bench.changelog import debezium_messages

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "avro_registry_sink" / "formats" / "native"
DRIVER = ROOT / "tests" / "support" / "debezium_scan_fuzz.c"
EXTERNAL = ROOT / "tests" / "data" / "inputs" / "debezium" / "external"
_JSON_TYPE = {bool: "bool", int: "int64", float: "double", str: "string"}


def _compiler() -> str:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        pytest.fail("no C compiler: the scanner's fuzz test and warning check need one (CI's machine has gcc)")
    return compiler


def _shape_line(shape: list[tuple[str, str]]) -> str:
    return "#shape " + ",".join(f"{name}:{_TYPES[kind]}" for name, kind in shape)


def _inferred_shape(payloads: list[dict]) -> list[tuple[str, str]]:
    """The columns of the payloads' row images, typed by their first non-null value (objects: strings)."""
    kinds: dict[str, str | None] = {}
    for payload in payloads:
        for image in (payload.get("before"), payload.get("after")):
            for name, value in (image or {}).items():
                if value is not None and kinds.get(name) is None:
                    kinds[name] = _JSON_TYPE.get(type(value), "string")
                else:
                    kinds.setdefault(name, None)
    return sorted((name, kind or "string") for name, kind in kinds.items())


def _seeds(path: Path) -> None:
    lines: list[str] = []
    for tables in (1, 3):
        messages = debezium_messages(150, tables, seed=tables)
        lines.append(_shape_line(list(_debezium_shape(messages.tables[0]))))
        lines.extend(messages.texts.to_pylist())
    flink = (EXTERNAL / "flink-debezium-data-schema-exclude.txt").read_text(encoding="utf-8").splitlines()
    lines.append(_shape_line(_inferred_shape([json.loads(m) for m in flink])))
    lines.extend(flink)
    envelope = json.loads((EXTERNAL / "ticdc-datatype.dbz.json").read_text(encoding="utf-8"))
    payload = envelope["payload"]
    lines.append(_shape_line(_inferred_shape([payload])))
    lines.append(json.dumps(payload, separators=(",", ":"), ensure_ascii=False))
    lines.append(json.dumps(payload, ensure_ascii=True))  # escapes, and spaces between tokens
    lines.append(json.dumps(envelope, separators=(",", ":")))  # the Connect envelope: declined
    assert all("\n" not in line for line in lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_scanner_compiles_without_a_warning(tmp_path):
    """As setup.py builds it (-O2 -Wall -Wextra), warnings as errors."""
    done = subprocess.run([_compiler(), "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-fPIC", "-c",
                           str(NATIVE / "debezium_scan.c"), "-o", str(tmp_path / "scan.o")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_scanner_under_sanitizers_survives_mutated_payloads(tmp_path):
    seconds = float(os.environ.get("AVRO_SINK_FUZZ_SECONDS", "15"))
    seed = int(os.environ.get("AVRO_SINK_FUZZ_SEED") or random.randrange(2**32))
    binary = tmp_path / "debezium_scan_fuzz"
    built = subprocess.run([_compiler(), "-std=gnu11", "-O1", "-g", "-fno-omit-frame-pointer",
                            "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Werror",
                            "-pthread", f"-I{NATIVE}", str(DRIVER), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr
    seeds = tmp_path / "seeds.txt"
    _seeds(seeds)
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:allocator_may_return_null=0",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    ran = subprocess.run([str(binary), str(seeds), str(seconds), str(seed)], capture_output=True, text=True,
                         timeout=seconds + 120, env=env, check=False)
    replay = f"replay: AVRO_SINK_FUZZ_SEED={seed} AVRO_SINK_FUZZ_SECONDS={seconds}"
    assert ran.returncode == 0, f"{replay}\n{ran.stderr[-6000:]}"
    assert "Sanitizer" not in ran.stderr and "runtime error" not in ran.stderr, f"{replay}\n{ran.stderr[-6000:]}"
    scans, _messages, read, declined = (int(x) for x in ran.stdout.split()[0:8:2])
    print(f"fuzz: {ran.stdout.strip()} ({replay})")
    # the loop ran, and through both ways out of the scanner: messages read and messages declined
    assert scans > 1000 and read > 100 and declined > 1000, ran.stdout
