"""Bare debezium-json payloads -> typed Arrow columns with a compiled scanner (``native/debezium_scan.c``).

Arrow's JSON reader spends its time per key, and a TiCDC or Debezium payload carries three times more keys
(``source`` alone has sixteen) than values the product reads. The scanner reads one message in one pass, the
values of ``before``, ``after``, ``op``, ``ts_ms`` and four of ``source`` into the columns Arrow's reader gives
for them (:func:`~avro_registry_sink.formats.changelog_arrow._debezium_schema`), and validates the rest. What it
cannot read exactly as Arrow's reader does it declines, message by message; the caller reads those with Arrow's
reader, so the result of every message is the one it had before.

The scanner is built with the package (``setup.py``: the C library ``formats/_debezium_scan*.so`` in the wheel,
and beside the source in ``pip install -e .``), so an installed package needs no compiler, and is loaded with
:mod:`ctypes`. A source checkout without the built library (or with one built from another version of the
source, which it tells by the digest compiled in) compiles the source on first use with the system's C compiler
(``CC``, else ``cc``) into the product's cache directory (``lib/``, keyed by the source's digest and the
platform). Without either (or with ``AVRO_SINK_NATIVE=0``) the scanner is not used and Arrow's reader reads every
message, as before. :func:`engine` says which ran.

A crash in the scanner (a signal: a bug met on untrusted bytes) is contained in the scan of the message it
happened in: that message is marked crashed (the caller dead-letters it, reason ``native scanner crashed``) and
the others are read as usual; the process goes on. ``AVRO_SINK_NATIVE_CRASH=<how>:<text>`` (tests only) makes
the scan of each message holding ``<text>`` crash on purpose, ``<how>`` being ``fault`` (a read of an unmapped
address) or a signal's name (``SIGBUS``, ``SIGFPE``, ``SIGILL``, ``SIGABRT``, ``SIGSEGV``).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import logging
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from avro_registry_sink.cache_dir import cache_root

__all__ = ["BUILT", "COMPILED_AT_RUN_TIME", "CRASH_ENV", "NO_SCANNER", "Scanned", "available", "engine",
           "scan_debezium"]

log = logging.getLogger(__name__)

_SOURCE_NAME = "debezium_scan.c"
_BUILT_MODULE = "avro_registry_sink.formats._debezium_scan"  # setup.py's ext_modules
#: :func:`engine`'s answers: the library built with the package, the source compiled here, Arrow's reader alone.
BUILT, COMPILED_AT_RUN_TIME, NO_SCANNER = "built", "compiled-at-run-time", "arrow"
_SOURCE = resources.files("avro_registry_sink.formats") / "native" / _SOURCE_NAME
#: Tests only: ``<how>:<text>``, the messages holding ``<text>`` crash the scan (see the module's docs).
CRASH_ENV = "AVRO_SINK_NATIVE_CRASH"
_CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT")
_TYPES = {"int64": 0, "double": 1, "string": 2, "bool": 3}
_OFF = ("0", "false", "no", "off")
_P = ctypes.c_void_p


class _Scan(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int64), ("data", _P), ("offsets", _P), ("ncols", ctypes.c_int32), ("types", _P),
                ("names", _P), ("name_offsets", _P), ("scratch", _P), ("image_valid", _P * 2), ("valid", _P * 2),
                ("value", _P * 2), ("view", _P * 2), ("op_valid", _P), ("op_view", _P), ("ts_valid", _P),
                ("ts", _P), ("source_valid", _P), ("db_valid", _P), ("db_view", _P), ("table_valid", _P),
                ("table_view", _P), ("commit_valid", _P), ("commit", _P), ("source_ts_valid", _P),
                ("source_ts", _P), ("meta", _P), ("status", _P), ("crash_signal", ctypes.c_int32),
                ("crash_at", _P), ("fault_signal", ctypes.c_int32)]


class Scanned(NamedTuple):
    """What :func:`scan_debezium` read: the table Arrow's reader gives, and masks of the messages the scanner
    declined (to read with Arrow's reader) and of those whose scan crashed (to dead-letter); both have null rows."""

    table: pa.Table
    declined: np.ndarray
    crashed: np.ndarray


_lock = threading.Lock()
_loaded: list[tuple[ctypes.CDLL | None, str]] = []


def _build(source: bytes, target: Path) -> None:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        raise OSError("no C compiler (set CC, or install cc)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        # the source is written out: the package may be imported from a zip, which no compiler reads
        (Path(work) / _SOURCE_NAME).write_bytes(source)
        built = Path(work) / target.name
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-pthread", "-o", str(built), _SOURCE_NAME],
                              cwd=work, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise OSError(f"{compiler} failed: {done.stderr.strip()[-500:]}")
        os.replace(built, target)  # atomic: workers compiling at once each install a whole library


def _built_path() -> Path | None:
    """The library built with the package, where it is installed (``None``: a source checkout not built)."""
    spec = importlib.util.find_spec(_BUILT_MODULE)
    return Path(spec.origin) if spec is not None and spec.origin else None


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.debezium_scan.argtypes = [ctypes.POINTER(_Scan)]
    lib.debezium_scan.restype = ctypes.c_int64
    return lib


def _open_built(digest: str | None) -> ctypes.CDLL | None:
    path = _built_path()
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(str(path))
        lib.debezium_scan_digest.restype = ctypes.c_char_p
        theirs = (lib.debezium_scan_digest() or b"").decode()
    except (OSError, AttributeError) as exc:
        log.warning("the built debezium-json scanner %s does not load (%s)", path, exc)
        return None
    if digest is not None and theirs != digest:
        log.warning("the built debezium-json scanner %s is of another source (%s; the source's is %s): not used; "
                    "pip install -e . builds it again", path, theirs or "no digest", digest)
        return None
    return _bind(lib)


def _load() -> tuple[ctypes.CDLL | None, str]:
    if os.environ.get("AVRO_SINK_NATIVE", "1").strip().lower() in _OFF:
        return None, NO_SCANNER
    try:
        source: bytes | None = _SOURCE.read_bytes()
    except OSError:
        source = None  # an installation without the C source: the built library alone
    digest = hashlib.sha256(source).hexdigest()[:16] if source is not None else None
    lib = _open_built(digest)
    if lib is not None:
        return lib, BUILT
    if source is None:
        return None, NO_SCANNER
    # Only a source checkout gets here (a wheel and ``pip install -e .`` carry the built library): the source is
    # compiled on this machine, as before the package built it.
    try:
        target = cache_root() / "lib" / f"debezium_scan-{digest}-{sys.platform}-{platform.machine()}.so"
        if not target.exists():
            _build(source, target)
        return _bind(ctypes.CDLL(str(target))), COMPILED_AT_RUN_TIME
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("the compiled debezium-json scanner is not used (%s); Arrow's JSON reader reads "
                    "every message", exc)
        return None, NO_SCANNER


def _library() -> ctypes.CDLL | None:
    if not _loaded:
        with _lock:
            if not _loaded:
                _loaded.append(_load())
    return _loaded[0][0]


def available() -> bool:
    """Whether the compiled scanner is used in this process (loading it, or compiling it, on first call)."""
    return _library() is not None


def engine() -> str:
    """Which reader reads debezium-json payloads in this process: :data:`BUILT` (the scanner built with the
    package), :data:`COMPILED_AT_RUN_TIME` (a source checkout's, compiled on first use) or :data:`NO_SCANNER`
    (Arrow's JSON reader alone)."""
    _library()
    return _loaded[0][1]


def _address(arr: np.ndarray) -> int:
    return int(arr.ctypes.data)


def _bits(flags: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(flags.view(np.bool_), bitorder="little"))


def _strings(valid: np.ndarray, views: np.ndarray, data: pa.Buffer, scratch: pa.Buffer) -> pa.Array:
    n = valid.size
    arr = pa.Array.from_buffers(pa.string_view(), n, [_bits(valid), pa.py_buffer(views), data, scratch])
    return arr.cast(pa.string())


_FIXED = {"int64": pa.int64(), "double": pa.float64(), "int8": pa.int8()}


def _numbers(kind: str, valid: np.ndarray, values: np.ndarray) -> pa.Array:
    """int64, double (its bits in ``values``), int8 or bool (0/1) values as written by the scanner."""
    n = valid.size
    if kind == "bool":
        return pa.Array.from_buffers(pa.bool_(), n, [_bits(valid), _bits(values.astype(np.uint8))])
    return pa.Array.from_buffers(_FIXED[kind], n, [_bits(valid), pa.py_buffer(values)])


def _crash_hook(texts: pa.Array) -> tuple[np.ndarray | None, int]:
    """The messages whose scan crashes on purpose (:data:`CRASH_ENV`, tests only) and the signal (0: a fault)."""
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return None, 0
    how, sep, text = spec.partition(":")
    if not sep or not text or (how != "fault" and how not in _CRASH_SIGNALS):
        raise ValueError(f"{CRASH_ENV}={spec!r}: expected <how>:<text>, <how> one of fault, "
                         f"{', '.join(_CRASH_SIGNALS)}")
    import pyarrow.compute as pc

    hits = pc.match_substring(texts, text).to_numpy(zero_copy_only=False)
    return hits.astype(np.uint8), 0 if how == "fault" else int(getattr(signal, how))


def scan_debezium(texts: pa.Array, shape: Sequence[tuple[str, str]]) -> Scanned | None:
    """Read the bare debezium payloads ``texts`` (a string array without nulls, one message each) of the parse
    shape ``shape`` (column name, JSON type as Arrow names it: int64, double, string or bool).

    Returns the table Arrow's JSON reader gives for them (``before``, ``after``, ``op``, ``ts_ms``, ``source`` with
    ``db``, ``table``, ``commit_ts``, ``ts_ms`` and a field for each key named like a column), the mask of the
    messages the scanner declined and that of the messages whose scan crashed (their rows hold nulls): a
    :class:`Scanned`; ``None`` without the compiled scanner or for input it does not take (a buffer past 2 GiB)."""
    lib = _library()
    n = len(texts)
    if lib is None or n == 0 or texts.null_count or any(kind not in _TYPES for _, kind in shape):
        return None
    large = pa.types.is_large_string(texts.type)
    if not (large or pa.types.is_string(texts.type)):
        return None
    data = texts.buffers()[2] or pa.py_buffer(b"")
    if data.size >= 2**31 - 1:
        return None
    offsets = np.frombuffer(texts.buffers()[1], np.int64 if large else np.int32)[texts.offset: texts.offset + n + 1]
    offsets = np.ascontiguousarray(offsets, np.int64)
    k = len(shape)
    names = [name.encode("utf-8") for name, _ in shape]
    name_bytes = np.frombuffer(b"".join(names) or b"\0", np.uint8)
    name_offsets = np.zeros(k + 1, np.int32)
    name_offsets[1:] = np.cumsum([len(x) for x in names])
    types = np.array([_TYPES[kind] for _, kind in shape], np.int32)
    scratch = np.empty(max(int(data.size), 1), np.uint8)
    data_np = np.frombuffer(data, np.uint8) if data.size else np.zeros(1, np.uint8)

    def flags(size: int = n) -> np.ndarray:
        return np.zeros(size, np.uint8)

    image_valid = [flags(), flags()]
    valid = [flags(n * k), flags(n * k)]
    value = [np.zeros(n * k, np.int64), np.zeros(n * k, np.int64)]
    view = [np.zeros(n * k * 16, np.uint8), np.zeros(n * k * 16, np.uint8)]
    op_valid, op_view = flags(), np.zeros(n * 16, np.uint8)
    ts_valid, ts = flags(), np.zeros(n, np.int64)
    source_valid = flags()
    db_valid, db_view, table_valid, table_view = flags(), np.zeros(n * 16, np.uint8), flags(), np.zeros(n * 16, np.uint8)
    commit_valid, commit, source_ts_valid, source_ts = flags(), np.zeros(n, np.int64), flags(), np.zeros(n, np.int64)
    meta, status = flags(n * k), flags()
    crash_at, fault_signal = _crash_hook(texts)
    scan = _Scan(n, _address(data_np), _address(offsets), k, _address(types), _address(name_bytes),
                 _address(name_offsets), _address(scratch), (_P * 2)(*map(_address, image_valid)),
                 (_P * 2)(*map(_address, valid)), (_P * 2)(*map(_address, value)), (_P * 2)(*map(_address, view)),
                 _address(op_valid), _address(op_view), _address(ts_valid), _address(ts), _address(source_valid),
                 _address(db_valid), _address(db_view), _address(table_valid), _address(table_view),
                 _address(commit_valid), _address(commit), _address(source_ts_valid), _address(source_ts),
                 _address(meta), _address(status), 0, None if crash_at is None else _address(crash_at), fault_signal)
    if lib.debezium_scan(ctypes.byref(scan)) < 0:
        return None
    crashed = status == 2
    if crashed.any():
        log.error("the compiled debezium-json scanner crashed (signal %s) reading %d of %d messages: they are "
                  "dead-lettered (reason 'native scanner crashed'), the others read", _signal_name(scan.crash_signal),
                  int(crashed.sum()), n)
    scratch_buf = pa.py_buffer(scratch)

    def strings(flags: np.ndarray, views: np.ndarray) -> pa.Array:
        return _strings(flags, views, data, scratch_buf)

    images = []
    for w in (0, 1):
        children = [strings(valid[w][j * n:(j + 1) * n], view[w][j * n * 16:(j + 1) * n * 16]) if kind == "string"
                    else _numbers(kind, valid[w][j * n:(j + 1) * n], value[w][j * n:(j + 1) * n])
                    for j, (_, kind) in enumerate(shape)]
        row_type = pa.struct([pa.field(name, child.type) for (name, _), child in zip(shape, children, strict=True)])
        images.append(pa.StructArray.from_buffers(row_type, n, [_bits(image_valid[w])], children=children))
    source_children = [strings(db_valid, db_view), strings(table_valid, table_view),
                       _numbers("int64", commit_valid, commit), _numbers("int64", source_ts_valid, source_ts)]
    source_fields = [pa.field("db", pa.string()), pa.field("table", pa.string()), pa.field("commit_ts", pa.int64()),
                     pa.field("ts_ms", pa.int64())]
    for j, (name, _) in enumerate(shape):  # keys of source named like a column (see changelog_arrow._MetaKeys)
        found = meta[j * n:(j + 1) * n]
        if found.any():
            source_fields.append(pa.field(name, pa.int8()))
            source_children.append(_numbers("int8", (found == 1).astype(np.uint8), np.zeros(n, np.int8)))
    source = pa.StructArray.from_buffers(pa.struct(source_fields), n, [_bits(source_valid)], children=source_children)
    table = pa.table({"before": images[0], "after": images[1], "op": strings(op_valid, op_view),
                      "ts_ms": _numbers("int64", ts_valid, ts), "source": source})
    return Scanned(table, status == 1, crashed)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
