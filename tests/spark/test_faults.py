"""Fault suite: bad input is accounted for row by row, misconfiguration stops the batch.

For TiCDC storage-sink CSV and canal-json data files and for changelog files, each fault class (invalid
UTF-8, a truncated line, a wrong field count, an unparseable number, a value out of range, an oversize
record, a non-JSON line, JSON of the wrong shape, a data file before its schema file, a corrupt schema
file, a missing table definition) is planted among good rows, and the run must satisfy, per table:
rows in = rows delivered + rows dead-lettered (each bad row on its own, with its location and raw bytes),
while the other tables are delivered in full. Then the user's fix (a larger max-message-bytes, the missing
table definition) is followed by ``replay``: exactly the rows the fix made valid are delivered, once; the
rows still bad stay dead-lettered with their reason; a second replay delivers nothing. Schema files that
arrive late or are repaired are not replay's business: their data files are held and read by the next run.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from avro_registry_sink.errors import ConfigError
from avro_registry_sink.formats.csv import CsvOptions
from avro_registry_sink.model import Op
from avro_registry_sink.settings.config import SinkConfig
from avro_registry_sink.sources.demo import generate_demo
from avro_registry_sink.spark.audit.replay import pending_records, replay_dead_letters
from avro_registry_sink.spark.driver.job import run_job
from avro_registry_sink.spark.driver.job_options import JobOptions
from avro_registry_sink.spark.sources.sources import parse_source
from avro_registry_sink.tabledef.ddl import parse_ddl
from avro_registry_sink.tabledef.storage import write_table_schema_file
from tests.support.job import canal_dml, decode_file_sink, expected_state, replay, side_state

pytestmark = [pytest.mark.spark, pytest.mark.faults, pytest.mark.filterwarnings("ignore::FutureWarning")]

VERSION = 449640297946939392
TS = VERSION + 1000
LIMIT = 400  # max-message-bytes: a 500-character value does not fit
DDL = "CREATE TABLE shop.{name} (id INT NOT NULL PRIMARY KEY, n SMALLINT NULL, v VARCHAR(600) NULL)"
CSV = CsvOptions(**{"include-commit-ts": True})


def _table(name: str):
    return parse_ddl(DDL.format(name=name))[0].model_copy(update={"version": VERSION})


def _csv_row(table: str, row_id: int, n: str = "1", v: str = '"x"') -> bytes:
    return f'"I","{table}","shop",{TS + row_id},{row_id},{n},{v}'.encode()


def _write(path: Path, records: list[bytes], terminator: bytes = b"\r\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(r + terminator for r in records))


def _data(root: Path, table: str, number: int, ext: str) -> Path:
    return root / "shop" / table / str(VERSION) / f"CDC{number:020d}.{ext}"


def _delivered(out: Path, registry) -> dict[str, set[int]]:
    return {topic: {key["id"] for _, _, key, _ in records} for topic, records in decode_file_sink(out, registry).items()}


def _delivered_counts(out: Path, registry) -> Counter:
    return Counter((topic, key["id"]) for topic, records in decode_file_sink(out, registry).items()
                   for _, _, key, _ in records)


def _reason(record: dict) -> str:
    """The reason without the encoder's position in its batch (which differs between a run and a replay)."""
    return re.sub(r"batch row \d+", "batch row", record["reason"])


def _replay_after_fix(spark, fixed: JobOptions, registry, made_valid: dict[bytes, tuple[str, int]]) -> None:
    """Replay with the fixed options (``made_valid``: raw bytes -> (topic, id) the fix makes valid), twice.

    The first replay delivers exactly the ``made_valid`` rows, once each, and leaves the other dead letters
    pending with their original location and reason; the second one delivers nothing.
    """
    out = Path(fixed.sink.path)
    before = {r["id"]: r for r in pending_records(fixed.checkpoint)}
    fixed_ids = {i for i, r in before.items() if base64.b64decode(r["raw_base64"]) in made_valid}
    assert len(fixed_ids) == len(made_valid)
    expected = _delivered_counts(out, registry) + Counter(made_valid.values())

    first = replay_dead_letters(spark, fixed, registry=registry)
    assert (first.delivered, first.failed_again) == (len(fixed_ids), len(before) - len(fixed_ids))
    assert _delivered_counts(out, registry) == expected and max(expected.values()) == 1  # each row once
    still = {r["id"]: r for r in pending_records(fixed.checkpoint)}
    assert set(still) == set(before) - fixed_ids
    for record_id, record in still.items():  # still bad, for the same reason, at the original location
        original = before[record_id]
        assert (_reason(record), record["source"], record["raw_base64"], record["replay"]) == \
            (_reason(original), original["source"], original["raw_base64"], first.replay)

    second = replay_dead_letters(spark, fixed, registry=registry)
    assert (second.delivered, second.failed_again) == (0, len(still))
    assert _delivered_counts(out, registry) == expected
    assert {r["id"] for r in pending_records(fixed.checkpoint)} == set(still)


def _dead(result) -> list[dict]:
    return [json.loads(line) for path in result.dead_letters for line in path.read_text().splitlines()]


def _options(root: Path, work: Path, **kw) -> JobOptions:
    sink = SinkConfig(scheme="file", path=str(work / "out"), max_message_bytes=LIMIT)
    return JobOptions(source=parse_source(str(root)), checkpoint=work / "checkpoint", sink=sink, **kw)


def test_storage_files_every_row_delivered_or_dead_lettered_alone(spark, tmp_path, registry):
    root = tmp_path / "in"
    for name in ("csv_t", "json_t", "other", "broken"):
        write_table_schema_file(_table(name), root)
    # CSV: ids 1-6 good, each fault on its own line (ids 101-106), the good row 7 after the truncated line
    faults_csv = {
        101: f'"I","csv_t","shop",{TS + 101},101,1,"'.encode() + b'\xff\xfe"',  # invalid UTF-8
        102: b'"I","csv_t","shop",' + str(TS + 102).encode() + b',102,1,"trunc',  # truncated: no closing quote
        103: _csv_row("csv_t", 103)[:-4],  # wrong field count
        104: _csv_row("csv_t", 104, n="x1"),  # unparseable number
        105: _csv_row("csv_t", 105, n="99999"),  # SMALLINT out of range (found by the encoder)
        106: _csv_row("csv_t", 106, v='"' + "y" * 500 + '"'),  # over max-message-bytes
    }
    records = [_csv_row("csv_t", i) for i in range(1, 4)] + list(faults_csv.values())[:2] + \
        [_csv_row("csv_t", 7)] + list(faults_csv.values())[2:] + [_csv_row("csv_t", i) for i in range(4, 7)]
    _write(_data(root, "csv_t", 1, "csv"), records)
    # canal-json storage file: ids 1-5 good
    json_t = _table("json_t")

    def canal(row_id: int, **values) -> bytes:
        row = {"id": row_id, "n": 1, "v": "x", **values}
        return canal_dml(json_t, Op.INSERT, TS + row_id, None, row).encode()

    faults_json = {
        201: canal(201, v="\x00").replace(b"\\u0000", b"\xff"),  # invalid UTF-8
        202: canal(202)[:40],  # truncated line
        203: b"not json at all",  # non-JSON line
        204: b'{"id": 0, "database": "shop", "table": "json_t", "type": "INSERT", "data": "nope", "_tidb": {"commitTs": 1}}',
        205: canal(205, n="x1"),  # unparseable number
        206: canal(206, n="99999"),  # out of range
        207: canal(207, v="y" * 500),  # oversize
    }
    _write(_data(root, "json_t", 1, "json"), [canal(i) for i in range(1, 4)] + list(faults_json.values())
           + [canal(i) for i in range(4, 6)])
    _write(_data(root, "other", 1, "csv"), [_csv_row("other", i) for i in range(1, 6)])
    _write(_data(root, "late", 1, "csv"), [_csv_row("late", i) for i in range(1, 4)])  # no schema file yet
    _write(_data(root, "broken", 1, "csv"), [_csv_row("broken", i) for i in range(1, 4)])
    broken_schema = next((root / "shop" / "broken" / "meta").iterdir())
    broken_schema.write_text('{"Table": "broken", "Schema": "shop", ', encoding="utf-8")  # corrupt

    options = _options(root, tmp_path, csv_options=CSV)
    result = run_job(spark, options, registry=registry)

    delivered = _delivered(tmp_path / "out", registry)
    dead = _dead(result)
    by_file: dict[str, dict[int, dict]] = {}
    for record in dead:
        by_file.setdefault(record["file"], {})[record["line"]] = record
    csv_dead = by_file.pop(f"shop/csv_t/{VERSION}/CDC{1:020d}.csv")
    json_dead = by_file.pop(f"shop/json_t/{VERSION}/CDC{1:020d}.json")
    assert by_file == {}
    # rows in = delivered + dead-lettered, each bad row alone, with its raw bytes
    assert delivered["shop_csv_t"] == set(range(1, 8))
    assert sorted(base64.b64decode(r["raw_base64"]) for r in csv_dead.values()) == sorted(faults_csv.values())
    assert delivered["shop_json_t"] == set(range(1, 6))
    assert sorted(base64.b64decode(r["raw_base64"]) for r in json_dead.values()) == sorted(faults_json.values())
    for record in dead:
        assert record["id"] and record["reason"] and record["message"] and record["source"].endswith(f":{record['line']}")
        assert record["format"] in ("csv", "canal-json") and (record["schema"], record["table"]) == \
            ("shop", record["file"].split("/")[1])
    assert delivered["shop_other"] == set(range(1, 6))  # other tables go on
    assert "shop_late" not in delivered and "shop_broken" not in delivered  # held, not dropped
    held = side_state(tmp_path / "checkpoint", "held")
    assert sorted(held["held"]) == [f"shop/broken/{VERSION}/CDC{1:020d}.csv", f"shop/late/{VERSION}/CDC{1:020d}.csv"]
    assert held["broken_reported"] == [str(broken_schema.relative_to(root))]

    # The schema files arrive (and more data): the held files are read with the next batch.
    write_table_schema_file(_table("late"), root)
    assert write_table_schema_file(_table("broken"), root) == broken_schema  # repaired in place
    _write(_data(root, "other", 2, "csv"), [_csv_row("other", i) for i in range(6, 8)])
    again = run_job(spark, options, registry=registry)
    delivered = _delivered(tmp_path / "out", registry)
    assert delivered["shop_late"] == {1, 2, 3} and delivered["shop_broken"] == {1, 2, 3}
    assert delivered["shop_other"] == set(range(1, 8)) and not again.bad_input
    assert side_state(tmp_path / "checkpoint", "held")["held"] == {}

    # The fix for the oversize rows is a larger max-message-bytes; replay delivers them (and only them).
    fixed = replace(options, sink=options.sink.model_copy(update={"max_message_bytes": 4096}))
    _replay_after_fix(spark, fixed, registry, {faults_csv[106]: ("shop_csv_t", 106),
                                               faults_json[207]: ("shop_json_t", 207)})


def test_changelog_files_every_message_delivered_or_dead_lettered_alone(spark, tmp_path, registry):
    src = tmp_path / "canal"
    t1 = _table("t1")

    def canal(row_id: int, **values) -> bytes:
        row = {"id": row_id, "n": 1, "v": "x", **values}
        return canal_dml(t1, Op.INSERT, TS + row_id, None, row).encode()

    faults = {
        101: canal(101, v="\x00").replace(b"\\u0000", b"\xff"),  # invalid UTF-8
        102: canal(102)[:50],  # truncated line
        103: b"oops",  # non-JSON
        104: b"[1, 2, 3]",  # JSON of the wrong shape
        105: canal(105, n="x1"),  # unparseable number
        106: canal(106, n="99999"),  # out of range
        107: canal(107, v="y" * 500),  # oversize
    }
    other = _table("t2")
    good_other = [canal_dml(other, Op.INSERT, TS + i, None, {"id": i, "n": 2, "v": "z"}).encode() for i in range(1, 4)]
    _write(src / "part-1.json", [canal(i) for i in range(1, 4)] + list(faults.values()) + good_other
           + [canal(i) for i in range(4, 6)], terminator=b"\n")
    options = JobOptions(source=parse_source(f"canal-json+file://{src}"), checkpoint=tmp_path / "checkpoint",
                         sink=SinkConfig(scheme="file", path=str(tmp_path / "out"), max_message_bytes=LIMIT),
                         tables=(t1, other))
    result = run_job(spark, options, registry=registry)

    delivered = _delivered(tmp_path / "out", registry)
    dead = _dead(result)
    assert delivered == {"shop_t1": set(range(1, 6)), "shop_t2": {1, 2, 3}}
    assert sorted(base64.b64decode(r["raw_base64"]) for r in dead) == sorted(faults.values())
    assert all(r["file"] == "part-1.json" and r["source"] == f"part-1.json:{r['line']}" and r["format"] == "canal-json"
               for r in dead)

    fixed = replace(options, sink=options.sink.model_copy(update={"max_message_bytes": 4096}))
    _replay_after_fix(spark, fixed, registry, {faults[107]: ("shop_t1", 107)})


def test_debezium_kafka_dump_is_read_and_a_missing_definition_dead_letters_only_its_rows(spark, tmp_path, registry):
    src = tmp_path / "dbz"
    known = _table("known")

    def message(table: str, row_id: int) -> dict:
        return {"payload": {"op": "c", "before": None, "after": {"id": row_id, "n": 1, "v": "x"},
                            "source": {"db": "shop", "table": table, "commit_ts": TS + row_id}}}

    lines = [json.dumps({"key": None, "value": json.dumps(message("known", 1))}),  # value as JSON text
             json.dumps({"key": None, "value": base64.b64encode(json.dumps(message("known", 2)).encode()).decode()}),
             json.dumps({"key": None, "value": message("known", 3)}),  # value as an object
             json.dumps({"key": None, "value": message("ghost", 1)})]  # no definition of shop.ghost
    _write(src / "dump.json", [line.encode() for line in lines], terminator=b"\n")
    options = JobOptions(source=parse_source(f"debezium-json+file://{src}"), checkpoint=tmp_path / "checkpoint",
                         sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), tables=(known,))
    result = run_job(spark, options, registry=registry)
    assert _delivered(tmp_path / "out", registry) == {"shop_known": {1, 2, 3}}
    assert [(r["source"], r["reason"], r["table"]) for r in _dead(result)] == [("dump.json:4", "unknown table", "ghost")]

    # The fix is the missing definition (--tables); replay delivers the ghost row from the saved message.
    fixed = replace(options, tables=(known, _table("ghost")))
    [ghost] = [base64.b64decode(r["raw_base64"]) for r in pending_records(options.checkpoint)]
    assert json.loads(ghost) == message("ghost", 1)  # the message, out of its saved envelope
    _replay_after_fix(spark, fixed, registry, {ghost: ("shop_ghost", 1)})

    # A dump whose values are not messages is refused as a whole, saying what it looks like.
    _write(tmp_path / "bad" / "dump.json", [json.dumps({"key": "k", "value": "%%% not a message"}).encode()])
    bad = JobOptions(source=parse_source(f"debezium-json+file://{tmp_path / 'bad'}"),
                     checkpoint=tmp_path / "checkpoint-bad", sink=SinkConfig(scheme="file", path=str(tmp_path / "o2")))
    with pytest.raises(ConfigError, match=r"looks like a saved Kafka message .* Expected one debezium-json message"):
        run_job(spark, bad, registry=registry)


def test_wrong_csv_settings_fail_the_batch_and_detection_reads_every_row(spark, tmp_path, registry):
    root = tmp_path / "in"
    manifest = generate_demo(root, rows_per_table=6)
    assert manifest.csv_options.include_commit_ts and manifest.csv_options.output_old_value
    base = JobOptions(source=parse_source(str(root)), checkpoint=tmp_path / "checkpoint",
                      sink=SinkConfig(scheme="file", path=str(tmp_path / "out")), tables=tuple(manifest.tables.values()))
    wrong = CsvOptions(**{"include-commit-ts": False, "output-old-value": True})
    with pytest.raises(ConfigError, match=r"include-commit-ts=false.*--csv include-commit-ts=true"):
        run_job(spark, replace(base, csv_options=wrong), registry=registry)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.jsonl"))  # nothing written

    # Rerun on the same checkpoint without settings: the layout is detected, every row is delivered.
    result = run_job(spark, base, registry=registry)
    assert not result.bad_input
    topics = decode_file_sink(tmp_path / "out", registry)
    expected = expected_state(manifest)
    for topic, records in topics.items():
        assert replay((key, value) for _, _, key, value in records) == expected[topic.replace("_", ".", 1)]
    assert sorted(topics) == ["crm_events", "shop_customers", "shop_orders"]
