"""The compiled debezium-json scanner (``formats/native_scan.py``, ``formats/native/debezium_scan.c``).

What it reads must be what Arrow's JSON reader reads (the columns the vectorized path uses, value for value),
and a message it declines goes to Arrow's reader: the end result of every message, spoiled or not, is the
per-message reader's (``test_changelog_arrow``'s harness, here over byte-level mutations of real payloads).
"""

from __future__ import annotations

import base64
import ctypes
import json
import random
import signal
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avro_registry_sink.encoding.plan import EncodingPlan
from avro_registry_sink.formats import changelog_arrow, native_scan
from avro_registry_sink.formats.changelog_arrow import _debezium_schema, _debezium_shape, _read
from avro_registry_sink.formats.native_scan import scan_debezium
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import EncodingOptions
from bench.changelog import debezium_messages
from tests.support.depth import examples
from tests.unit.test_changelog_arrow import _one_pass, _plans, _reference, _same_per_message

_SOURCE_FIELDS = ("db", "table", "commit_ts", "ts_ms")


def _compare(texts: pa.Array, table) -> np.ndarray:
    """Scan ``texts``; every message the scanner reads must be read alike by Arrow's reader. Returns the mask of
    the declined messages."""
    shape = _debezium_shape(table)
    scanned = scan_debezium(texts, shape)
    assert scanned is not None
    got, declined, crashed = scanned
    assert not crashed.any()
    for i in np.flatnonzero(~declined):
        expected = _read(texts.slice(int(i), 1), _debezium_schema(shape, table))
        assert expected is not None, ("scanned, but Arrow's reader refuses", texts[int(i)].as_py())
        one = got.slice(int(i), 1)
        for image in ("before", "after"):
            a, b = one.column(image).combine_chunks(), expected.column(image).combine_chunks()
            assert a.is_valid().equals(b.is_valid()), (image, texts[int(i)].as_py())
            for name, _ in shape:
                assert pc.struct_field(a, [name]).equals(pc.struct_field(b, [name])), (image, name, texts[int(i)])
        for name in ("op", "ts_ms"):
            assert one.column(name).equals(expected.column(name)), (name, texts[int(i)].as_py())
        source, theirs = one.column("source").combine_chunks(), expected.column("source").combine_chunks()
        assert source.is_valid().equals(theirs.is_valid())
        for name in _SOURCE_FIELDS:
            assert pc.struct_field(source, [name]).equals(pc.struct_field(theirs, [name])), (name, texts[int(i)])
    return declined


def test_the_scanner_is_built_with_the_package():
    """``pip install -e .`` (scripts/install.sh) builds the scanner (setup.py): the suite runs the built library,
    not the run-time compile nor Arrow's reader alone (tests/unit/test_wheel_install.py: the wheel's)."""
    assert native_scan.available()
    assert native_scan.engine() == native_scan.BUILT


@pytest.mark.parametrize("tables", [1, 3])
def test_ticdc_payloads_are_read_as_arrow_reads_them(tables):
    messages = debezium_messages(2000, tables)
    declined = _compare(messages.texts, messages.tables[0])
    assert not declined.any()


_ODD = [
    # (message, read by the scanner)
    ('{"before":null,"after":{"id":1,"name":"a\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00"},"op":"c","source":'
     '{"db":"d","table":"t","commit_ts":5}}', True),
    ('{"after":{"id":-0,"name":"x"},"op":"c","ts_ms":0,"source":{"db":"d","table":"t","ts_ms":1}}', True),
    ('{"after":{"id":9223372036854775807},"op":"c","source":{"db":"d","table":"t"}}', True),
    ('{"after":{"id":-9223372036854775808},"op":"c","source":{"db":"d","table":"t"}}', True),
    ('{"after":{"id":9223372036854775808},"op":"c","source":{"db":"d","table":"t"}}', False),  # past int64
    ('{"after":{"id":1.0},"op":"c","source":{"db":"d","table":"t"}}', False),
    ('{"after":{"id":"1"},"op":"c","source":{"db":"d","table":"t"}}', False),
    ('{"after":{"id":01},"op":"c","source":{"db":"d","table":"t"}}', False),  # not JSON
    ('{"after":{"id":1,"id":2},"op":"c","source":{"db":"d","table":"t"}}', False),  # a repeated key
    ('{"after":{"id":1,"other":2},"op":"c","source":{"db":"d","table":"t"}}', False),  # an unknown column
    ('{"after":{"\\u0069d":1},"op":"c","source":{"db":"d","table":"t"}}', False),  # an escape in a key
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","x":{"y":1}}}', False),  # nested in source
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t"},"transaction":{"id":"1"}}', False),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t"},"payload":null}', False),  # an envelope key
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t"}} x', False),  # text after the object
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t"},}', False),  # a trailing comma
    ('{"after":{"name":"a\\ud800"},"op":"c","source":{"db":"d","table":"t"}}', False),  # a lone surrogate
    ('{"after":{"name":"a\tb"},"op":"c","source":{"db":"d","table":"t"}}', False),  # a raw control character
    ('{"after":{"score":1e400},"op":"c","source":{"db":"d","table":"t"}}', False),  # past double
    ('{"after":{"score":12345678901234567890123},"op":"c","source":{"db":"d","table":"t"}}', True),
    ('{"after":{"score":-0.0,"flag":true},"op":"c","source":{"db":"d","table":"t"}}', True),
    ('{"after":{"flag":1},"op":"c","source":{"db":"d","table":"t"}}', False),
    ('{ "after" : { "id" : 1 } , "op" : "c" , "source" : { "db" : "d" , "table" : "t" } }', True),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","name":null,"pos":"x","q":[1]}}', False),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","name":null,"query":"x\\"y","seq":1}}', True),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","db":"e"}}', False),
    # an undeclared key of source: Arrow's reader infers its type, and refuses a double's overflow
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","seq":1e400}}', False),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","seq":-1e400}}', False),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","seq":12345678901234567890123,"lsn":-1.5e300}}', True),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","seq":-9223372036854775808}}', True),
    # a repeated key of source, any key (Arrow's reader refuses them all)
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","seq":1,"seq":1}}', False),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","seq":null,"x":2,"seq":"a"}}', False),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","name":"a","name":"a"}}', False),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","pos":1,"file":"f","pos":1}}', False),
    ('{"after":{"id":1},"op":"c","source":{"db":"d","table":"t","seq":1,"seq2":1,"seq3":true}}', True),
    ('{"after":{},"before":{"id":2},"op":"u","source":{"db":"d","table":"t","commit_ts":null}}', True),
    ('[1]', False),
    ('{}', False),
]


def test_what_the_scanner_reads_and_what_it_declines():
    from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

    table = TableDef(schema_name="d", table="t", primary_key=("id",), columns=(
        ColumnDef(name="id", type=MySQLType.BIGINT, nullable=False), ColumnDef(name="name", type=MySQLType.VARCHAR),
        ColumnDef(name="score", type=MySQLType.DOUBLE), ColumnDef(name="flag", type=MySQLType.BIT, length=1)))
    texts = pa.array([m for m, _ in _ODD], pa.string())
    declined = _compare(texts, table)
    assert [(m, not d) for (m, _), d in zip(_ODD, declined, strict=True)] == _ODD
    got = scan_debezium(texts, _debezium_shape(table)).table
    assert got.column("after").combine_chunks().field("name")[0].as_py() == 'a"b\\c/\né😀'
    assert got.column("source").type.get_field_index("name") >= 0  # a source key named like a column


_GAPS = [
    # accepted by the scanner before, refused by Arrow's reader: now declined, and read as Arrow's reader reads
    # them (refused: the per-message reader decides)
    '{"after":{"id":%d},"op":"c","ts_ms":1,"source":{"db":"d","table":"t","commit_ts":5,"seq":1e400}}',
    '{"after":{"id":%d},"op":"c","ts_ms":1,"source":{"db":"d","table":"t","commit_ts":5,"seq":1,"seq":2}}',
]


@pytest.mark.parametrize("gap", _GAPS)
def test_what_arrow_refuses_the_scanner_declines(gap):
    from avro_registry_sink.table import ColumnDef, MySQLType, TableDef

    table = TableDef(schema_name="d", table="t", primary_key=("id",), columns=(
        ColumnDef(name="id", type=MySQLType.BIGINT, nullable=False),))
    good = '{"after":{"id":%d},"op":"c","ts_ms":1,"source":{"db":"d","table":"t","commit_ts":5}}'
    texts = [good % 1, gap % 2, good % 3]
    shape = _debezium_shape(table)
    assert _read(pa.array([gap % 2]), _debezium_schema(shape, table)) is None
    scanned = scan_debezium(pa.array(texts, pa.string()), shape)
    assert scanned is not None
    assert scanned.declined.tolist() == [False, True, False]
    history = {(table.schema_name, table.table): [(table.version, table)]}
    plans = _plans(EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions()), 1, 2))
    reference = _reference(texts, "debezium-json", history, plans)
    got = _one_pass(texts, "debezium-json", history, plans, False)
    _same_per_message(reference, got)
    assert len(got) == 3 and all("error" not in got[i] for i in (0, 2))


_PIECES = ['"', "\\", "{", "}", "[", "]", ",", ":", "null", "1", "-", ".5", "e9", " ", "\\u00", "true", '"id":',
           '"op":"u"', '"source":{}', '"transaction":null', "\\ud83d", "é"]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 3))
def test_mutated_payloads_give_what_the_per_message_reader_gives(seed, edits):
    """Real TiCDC payloads with a few bytes inserted, deleted or replaced: what the scanner reads Arrow reads
    alike, and the records of every message (or its dead letter) are the per-message reader's."""
    rng = random.Random(seed)
    messages = debezium_messages(40, 1, seed=seed % 1000)
    table = messages.tables[0]
    texts = messages.texts.to_pylist()
    for i in rng.sample(range(len(texts)), 20):
        text = texts[i]
        for _ in range(edits):
            at = rng.randrange(len(text) + 1)
            piece = rng.choice(_PIECES)
            action = rng.random()
            if action < 0.4:
                text = text[:at] + piece + text[at:]
            elif action < 0.7:
                text = text[:at] + text[at + rng.randint(1, 8):]
            else:
                text = text[:at] + piece + text[at + len(piece):]
        texts[i] = text
    _compare(pa.array(texts, pa.string()), table)
    history = {(table.schema_name, table.table): [(table.version, table)]}
    plans = _plans(EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions()), 1, 2))
    _same_per_message(_reference(texts, "debezium-json", history, plans),
                      _one_pass(texts, "debezium-json", history, plans, rng.random() < 0.5))


def test_without_the_scanner_arrow_reads_every_message(monkeypatch):
    """``AVRO_SINK_NATIVE=0`` (or no compiler): the vectorized path reads with Arrow's reader alone, alike."""
    messages = debezium_messages(300, 1)
    table = messages.tables[0]
    texts = messages.texts.to_pylist()
    history = {(table.schema_name, table.table): [(table.version, table)]}
    plans = _plans(EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions()), 1, 2))
    scanned = _one_pass(texts, "debezium-json", history, plans, True)
    monkeypatch.setattr(native_scan, "_loaded", [(None, native_scan.NO_SCANNER)])
    assert not native_scan.available()
    assert scan_debezium(messages.texts, _debezium_shape(table)) is None
    assert _one_pass(texts, "debezium-json", history, plans, True) == scanned
    assert changelog_arrow.debezium_rows(messages.texts, changelog_arrow.TableVersions(
        history=history, planned=frozenset(plans))).slow.size == 0


def test_a_source_checkout_without_the_built_library_compiles_it(monkeypatch, tmp_path, caplog):
    """The run-time compile, kept for a source checkout not built: without a compiler, Arrow's reader alone."""
    monkeypatch.setattr(native_scan, "_built_path", lambda: None)
    monkeypatch.setenv("AVRO_SINK_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(native_scan, "_loaded", [])
    with caplog.at_level("WARNING"):
        assert not native_scan.available()
    assert native_scan.engine() == native_scan.NO_SCANNER
    assert "Arrow's JSON reader reads every message" in caplog.text
    monkeypatch.delenv("CC")
    monkeypatch.setattr(native_scan, "_loaded", [])
    assert native_scan.available()  # built into the new cache directory
    assert native_scan.engine() == native_scan.COMPILED_AT_RUN_TIME
    assert list((tmp_path / "lib").glob("debezium_scan-*.so"))


def test_a_built_library_of_another_source_is_not_used(monkeypatch, tmp_path, caplog):
    """A checkout whose C source changed since ``pip install -e .`` built it: the digest compiled in differs, the
    source is compiled instead (a test never runs a stale scanner)."""
    edited = tmp_path / "debezium_scan.c"
    edited.write_bytes(native_scan._SOURCE.read_bytes() + b"\n/* edited */\n")
    monkeypatch.setattr(native_scan, "_SOURCE", edited)
    monkeypatch.setenv("AVRO_SINK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native_scan, "_loaded", [])
    with caplog.at_level("WARNING"):
        assert native_scan.engine() == native_scan.COMPILED_AT_RUN_TIME
    assert "is of another source" in caplog.text
    messages = debezium_messages(50, 1)
    assert not _compare(messages.texts, messages.tables[0]).any()


@pytest.mark.parametrize("how", ["fault", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"])
def test_a_crash_in_the_scanner_sets_that_message_aside(monkeypatch, how):
    """A crash in the scan of a message (made on purpose here) is contained: that message is marked crashed,
    the others, after it too, are read as Arrow's reader reads them, and the process goes on."""
    messages = debezium_messages(60, 1)
    texts = messages.texts.to_pylist()
    for i in (0, 17, 18, 59):
        texts[i] = texts[i].replace('"op":"', '"crash-here":null,"op":"')
    monkeypatch.setenv(native_scan.CRASH_ENV, f"{how}:crash-here")
    scanned = scan_debezium(pa.array(texts, pa.string()), _debezium_shape(messages.tables[0]))
    assert scanned is not None
    assert np.flatnonzero(scanned.crashed).tolist() == [0, 17, 18, 59]
    assert not scanned.declined.any()
    assert not scanned.table.column("after").combine_chunks().is_valid().to_numpy(zero_copy_only=False)[
        [0, 17, 18, 59]].any()
    monkeypatch.delenv(native_scan.CRASH_ENV)
    keep = np.ones(60, bool)
    keep[[0, 17, 18, 59]] = False
    _compare(pa.array([t for t, k in zip(texts, keep, strict=True) if k], pa.string()), messages.tables[0])
    for name in ("after", "op", "source"):
        theirs = scan_debezium(messages.texts, _debezium_shape(messages.tables[0])).table.column(name)
        assert scanned.table.column(name).filter(pa.array(keep)).equals(theirs.filter(pa.array(keep))), name


def test_a_crashed_message_is_dead_lettered_and_the_rest_encoded(monkeypatch):
    """The executor's pass: the message whose scan crashed becomes a dead letter (reason ``native scanner
    crashed``, its raw bytes), every other message gives the records the per-message reader gives."""
    messages = debezium_messages(40, 1)
    table = messages.tables[0]
    texts = messages.texts.to_pylist()
    texts[7] = texts[7].replace('"op":"', '"crash-here":null,"op":"')
    history = {(table.schema_name, table.table): [(table.version, table)]}
    plans = _plans(EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions()), 1, 2))
    reference = _reference(texts, "debezium-json", history, plans)
    monkeypatch.setenv(native_scan.CRASH_ENV, "fault:crash-here")
    got = _one_pass(texts, "debezium-json", history, plans, True)
    assert got[7] == ["error"] and reference[7] != ["error"]
    del got[7], reference[7]
    _same_per_message(reference, got)
    from avro_registry_sink.formats.changelog_arrow import TableVersions
    from tests.unit.test_changelog_arrow import _Chunk, _encode_chunk, _Sources

    chunk = _Chunk(pa.array(texts, pa.string()), pa.array(["f"] * 40, pa.string()), np.arange(1, 41, dtype=np.int64),
                   _Sources([f"f:{i + 1}" for i in range(40)]))
    errors = [json.loads(e) for batch in _encode_chunk(chunk, "debezium-json", TableVersions(
        history=history, planned=frozenset(plans)), plans, history, frozenset())
        for e in batch.column("error").to_pylist() if e is not None]
    assert [(e["reason"], e["source"], base64.b64decode(e["raw_base64"]).decode()) for e in errors] == [
        ("native scanner crashed", "f:8", texts[7])]


def _handlers() -> list[int]:
    """The address of this process's handler of each crash signal (``sigaction``; 0: the default)."""
    libc = ctypes.CDLL(None, use_errno=True)
    out = []
    for sig in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT):
        old = ctypes.create_string_buffer(256)  # struct sigaction: the handler first
        assert libc.sigaction(int(sig), None, old) == 0
        out.append(ctypes.c_size_t.from_buffer(old).value)
    return out


def test_the_crash_handlers_are_only_there_while_scans_run(monkeypatch):
    """Scans in several threads at once, crashing: each crash is its own thread's message's, and when the last
    scan ends the process's handlers are those of before (pytest's faulthandler's here)."""
    before = _handlers()
    messages = debezium_messages(400, 1)
    texts = messages.texts.to_pylist()
    for i in range(0, 400, 37):
        texts[i] = texts[i].replace('"op":"', '"crash-here":null,"op":"')
    arr = pa.array(texts, pa.string())
    shape = _debezium_shape(messages.tables[0])
    monkeypatch.setenv(native_scan.CRASH_ENV, "fault:crash-here")
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: scan_debezium(arr, shape), range(16)))
    for scanned in results:
        assert np.flatnonzero(scanned.crashed).tolist() == list(range(0, 400, 37))
        assert not scanned.declined.any()
    assert _handlers() == before
