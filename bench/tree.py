"""Big TiCDC storage-sink trees for the end-to-end benchmarks, written column-wise and cached.

The tree is what a changefeed with the storage sink and ``protocol=csv``, ``include-commit-ts=true``
leaves behind::

    <root>/metadata
    <root>/bench/t000/meta/schema_<version>_<crc>.json      (the reference table, one version)
    <root>/bench/t000/<version>/<date>/CDC00000000000000000001.csv
    <root>/bench/t000/<version>/<date>/meta/CDC.index

Rows are the reference table's (:mod:`bench.data`), split evenly over ``tables`` tables that share its
columns, in files of at most ``rows_per_file`` rows (TiCDC rolls files at ``file-size``, 64 MiB by
default: about 300,000 of these rows). 90% of the rows are inserts, 6% updates and 4% deletes of
earlier keys (``"U"`` rows: ``output-old-value=false``); commit ts are TSOs that grow with the row
index. Text follows TiCDC's CSV writer: strings, DECIMAL and DATETIME quoted, ``\\N`` for NULL, CRLF.

Lines are built with Arrow compute kernels, a file at a time, so 5x10^7 rows take about a minute.
Trees are cached under ``AVRO_SINK_BENCH_CACHE`` (default ``~/.cache/avro-registry-sink/bench-trees``)
by their parameters and reused; a tree is complete once its ``tree.json`` exists.

>>> import tempfile
>>> t = storage_tree(100, 2, cache=Path(tempfile.mkdtemp()))
>>> (t.rows, [x.table for x in t.tables], t.files)
(100, ['t000', 't001'], 2)
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from avro_registry_sink.formats.csv import CsvOptions
from avro_registry_sink.sources.storage import data_file_name
from avro_registry_sink.table import TableDef
from bench.data import SEED, generate, reference_table

__all__ = ["CSV_OPTIONS", "DEFAULT_ROWS_PER_FILE", "Tree", "cache_dir", "storage_tree"]

#: The changefeed's CSV settings (pass them to the job: ``--csv include-commit-ts=true``).
CSV_OPTIONS = CsvOptions(include_commit_ts=True)
DEFAULT_ROWS_PER_FILE = 300_000
#: Bumped when the tree's content changes, so stale cached trees are not reused.
FORMAT_VERSION = 1
_START_MS = 1_715_241_600_000  # 2024-05-09 08:00:00 UTC
_OPS = np.array(['"I"', '"U"', '"D"'])


@dataclass(frozen=True)
class Tree:
    """A generated storage-sink tree: where, how big, which tables (definitions with their version)."""

    root: Path
    rows: int
    tables: tuple[TableDef, ...]
    files: int
    bytes: int
    ops: dict[str, int]
    seconds: float  # to generate (0 when reused from the cache)

    @property
    def schema(self) -> str:
        return self.tables[0].schema_name


def cache_dir() -> Path:
    """Where trees are kept between runs (``AVRO_SINK_BENCH_CACHE``)."""
    env = os.environ.get("AVRO_SINK_BENCH_CACHE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "avro-registry-sink" / "bench-trees"


def _quoted(arr: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', arr, '"', "")


def _csv_text(batch: pa.RecordBatch, table: TableDef, ops: np.ndarray, commit_ts: np.ndarray) -> pa.Array:
    """One CSV line per row (CRLF included), TiCDC's CSV text of every value."""
    fields: list[pa.Array | str] = [pa.array(_OPS[ops]), f'"{table.table}"', f'"{table.schema_name}"',
                                    pa.array(commit_ts).cast(pa.string())]
    for arr in batch.columns:
        t = arr.type
        if pa.types.is_string(t):
            text = _quoted(arr)
        elif pa.types.is_decimal(t):
            text = _quoted(arr.cast(pa.string()))
        else:
            text = arr.cast(pa.string())
        if arr.null_count:
            text = pc.fill_null(text, CSV_OPTIONS.null)
        fields.append(text)
    line = pc.binary_join_element_wise(*fields, ",")
    return pc.binary_join_element_wise(line, CSV_OPTIONS.terminator, "")


def _write_file(path: Path, lines: pa.Array) -> int:
    offsets = np.frombuffer(lines.buffers()[1], np.int32)[lines.offset: lines.offset + len(lines) + 1]
    data = lines.buffers()[2]
    view = memoryview(data)[int(offsets[0]): int(offsets[-1])]
    with open(path, "wb") as fh:
        fh.write(view)
    return len(view)


def storage_tree(rows: int, tables: int = 1, *, cache: Path | None = None, rows_per_file: int = DEFAULT_ROWS_PER_FILE,
                 seed: int = SEED) -> Tree:
    """The tree of ``rows`` rows over ``tables`` tables: from the cache, else generated into it."""
    from avro_registry_sink.tabledef.storage import write_table_schema_file

    cache = cache or cache_dir()
    root = cache / f"ticdc-csv-v{FORMAT_VERSION}-r{rows}-t{tables}-f{rows_per_file}-s{seed}"
    version = (_START_MS << 18) | 1
    defs = tuple(reference_table(schema="bench", name=f"t{i:03d}").model_copy(update={"version": version})
                 for i in range(tables))
    marker = root / "tree.json"
    if marker.exists():
        info = json.loads(marker.read_text(encoding="utf-8"))
        return Tree(root, rows, defs, info["files"], info["bytes"], info["ops"], 0.0)
    started = time.perf_counter()
    temp = root.with_name(root.name + f".tmp{os.getpid()}")
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    date = time.strftime("%Y-%m-%d", time.gmtime(_START_MS / 1000))
    files = size = 0
    counts = np.zeros(3, np.int64)
    per_table = [rows // tables + (1 if i < rows % tables else 0) for i in range(tables)]
    for number, (table, count) in enumerate(zip(defs, per_table, strict=False)):
        write_table_schema_file(table, temp)
        directory = temp / table.schema_name / table.table / str(version) / date
        (directory / "meta").mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(seed * 1000 + number)
        last = ""
        for file_no, start in enumerate(range(0, count, rows_per_file), start=1):
            n = min(rows_per_file, count - start)
            batch = generate(n, defs[0], seed=seed + number, start=start)
            index = np.arange(start, start + n, dtype=np.int64)
            draw = rng.random(n)
            ops = np.where(draw < 0.90, 0, np.where(draw < 0.96, 1, 2))
            ops[index == 0] = 0  # the first row of a table has nothing to change yet
            earlier = (rng.random(n) * np.maximum(index, 1)).astype(np.int64) + 10_000_000
            ids = np.where(ops == 0, batch.column(0).to_numpy(), earlier)
            batch = batch.set_column(0, "id", pa.array(ids))
            commit_ts = ((_START_MS + 1000 + index // 4) << 18) | (index % 4)
            last = data_file_name(file_no)
            size += _write_file(directory / last, _csv_text(batch, table, ops, commit_ts))
            counts += np.bincount(ops, minlength=3)
            files += 1
        (directory / "meta" / "CDC.index").write_text(last + "\n", encoding="utf-8")
    checkpoint = ((_START_MS + 2000 + max(per_table) // 4) << 18)
    (temp / "metadata").write_text(json.dumps({"checkpoint-ts": checkpoint}, separators=(",", ":")), encoding="utf-8")
    ops = {"insert": int(counts[0]), "update": int(counts[1]), "delete": int(counts[2])}
    (temp / "tree.json").write_text(json.dumps({"rows": rows, "tables": tables, "files": files, "bytes": size,
                                                "ops": ops}), encoding="utf-8")
    shutil.rmtree(root, ignore_errors=True)
    temp.rename(root)
    return Tree(root, rows, defs, files, size, ops, time.perf_counter() - started)
