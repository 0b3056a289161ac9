"""The benchmark harness runs: generated storage trees read back cleanly, the quick encoder section reports."""

from __future__ import annotations

from pathlib import Path

from avro_registry_sink.model import Op
from avro_registry_sink.sources.storage import StorageLayout
from bench.harness import Timing, fmt_ratio, per_round_ratios
from bench.run import main
from bench.tree import CSV_OPTIONS, storage_tree


def test_generated_tree_is_what_ticdc_writes_and_is_reused(tmp_path: Path):
    tree = storage_tree(2_500, 3, cache=tmp_path, rows_per_file=1_000)
    events, errors = StorageLayout(tree.root).read_all(CSV_OPTIONS)
    assert errors == []
    assert len(events) == tree.rows == 2_500
    assert {e.table for e in events} == {"t000", "t001", "t002"}
    counts = {op: sum(e.op is op for e in events) for op in Op}
    assert counts == {Op.INSERT: tree.ops["insert"], Op.UPDATE: tree.ops["update"], Op.DELETE: tree.ops["delete"]}
    assert counts[Op.UPDATE] and counts[Op.DELETE]
    assert tree.files == 3  # 834 + 833 + 833 rows: one file each
    per_table = {}
    for e in events:
        per_table.setdefault(e.table, []).append(e.commit_ts)
    assert all(ts == sorted(ts) for ts in per_table.values())
    again = storage_tree(2_500, 3, cache=tmp_path, rows_per_file=1_000)
    assert again.root == tree.root and again.seconds == 0.0  # from the cache


def test_ratios_are_taken_round_by_round():
    candidate, baseline = Timing("c", [1.0, 4.0, 2.0]), Timing("b", [2.0, 4.0, 8.0])
    assert per_round_ratios(candidate, 10, baseline, 10) == [2.0, 1.0, 4.0]
    assert fmt_ratio([2.0, 1.0, 4.0]) == "2.00x (1.00-4.00x)"


def test_quick_encoder_section_writes_results(tmp_path: Path):
    out = tmp_path / "results.md"
    assert main(["--quick", "--only", "encoders", "--rows", "3000", "--rounds", "1", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "- machine (read at run time): " in text and " cores (" in text
    assert "columnar encoder / confluent-kafka AvroSerializer, per core, same rounds: **" in text
    assert "Columnar output equals the reference encoder's bytes on the first 2,000 rows: **True**" in text


def _decoders(table):
    import json as _json

    import fastavro

    from avro_registry_sink.schema.builder import derive_schemas
    from avro_registry_sink.settings.config import EncodingOptions

    schemas = derive_schemas(table, EncodingOptions())
    return fastavro.parse_schema(_json.loads(schemas.key_json)), fastavro.parse_schema(_json.loads(schemas.value_json))


def _avro(schema, framed: bytes, schema_id: int):
    import io

    import fastavro

    assert framed[:5] == b"\x00" + schema_id.to_bytes(4, "big")  # the Confluent frame, the table's own id
    return fastavro.schemaless_reader(io.BytesIO(framed[5:]), schema)


def test_ceiling_harness_turns_a_storage_tree_into_records_that_decode_to_its_rows(tmp_path: Path):
    import csv
    from decimal import Decimal

    from avro_registry_sink.spark.sinks.sinks import read_file_sink
    from bench.ceiling import PARTS, CeilingInput, default_ids, run_ceiling

    tree = storage_tree(300, 2, cache=tmp_path, rows_per_file=100)  # 2 tables, 4 files over 2 workers
    result = run_ceiling(CeilingInput.of_tree(tree), sink="file", target=str(tmp_path / "out"), partitions=3)
    assert result.rows == result.records == 300
    assert result.wall > 0 and all(result.cpu[p] > 0 for p in PARTS) and len(result.workers) == 2
    ids = default_ids(tree.tables)
    letters = {"I": b"c", "U": b"u", "D": b"d"}
    records = list(read_file_sink(tmp_path / "out"))
    assert len(records) == 300
    for table in tree.tables:
        key_schema, value_schema = _decoders(table)
        key_id, value_id = ids[table.qualified_name]
        expected = []
        for path in sorted((tree.root / "bench" / table.table).rglob("CDC*.csv")):
            with open(path, newline="", encoding="utf-8") as fh:
                for row in csv.reader(fh):
                    op, _, _, ts, *values = row
                    v = dict(zip([c.name for c in table.columns], values, strict=True))
                    counter = int(v["counter"])
                    image = {"id": int(v["id"]), "qty": int(v["qty"]), "customer_id": int(v["customer_id"]),
                             "status": int(v["status"]), "counter": counter - 2**64 if counter >= 2**63 else counter,
                             "amount": Decimal(v["amount"]), "name": v["name"], "email": v["email"],
                             "created_at": v["created_at"], "note": None if v["note"] == "\\N" else v["note"],
                             "score": float(v["score"]), "region": int(v["region"])}
                    expected.append((int(v["id"]), letters[op], int(ts), None if op == "D" else image))
        got = [(_avro(key_schema, r.key, key_id)["id"], dict(r.headers)["op"], int(dict(r.headers)["commit_ts"]),
                None if r.value is None else _avro(value_schema, r.value, value_id))
               for r in records if r.topic == f"bench_{table.table}"]
        assert got == expected
        assert {r.partition for r in records if r.topic == f"bench_{table.table}"} <= {0, 1, 2}


def test_ceiling_harness_reads_a_canal_json_storage_tree(tmp_path: Path):
    import json

    from avro_registry_sink.spark.sinks.sinks import read_file_sink
    from bench.ceiling import CeilingInput, canal_tree, default_ids, run_ceiling

    tree = canal_tree(200, 2, cache=tmp_path, rows_per_file=60)
    result = run_ceiling(CeilingInput.of_tree(tree, "storage-canal-json"), sink="file", target=str(tmp_path / "out"))
    assert result.records == 200
    records = list(read_file_sink(tmp_path / "out"))
    ids = default_ids(tree.tables)
    for table in tree.tables:
        key_schema, _ = _decoders(table)
        messages = [json.loads(line) for path in sorted((tree.root / "bench" / table.table).rglob("CDC*.json"))
                    for line in path.read_text(encoding="utf-8").splitlines()]
        got = [(_avro(key_schema, r.key, ids[table.qualified_name][0])["id"], dict(r.headers)["op"])
               for r in records if r.topic == f"bench_{table.table}"]
        assert got == [(int(m["data"][0]["id"]), {"INSERT": b"c", "UPDATE": b"u", "DELETE": b"d"}[m["type"]])
                       for m in messages]


def test_the_tree_samplers_peak_is_split_by_process_kind_and_a_reaped_workers_cpu_counts_once(tmp_path):
    import subprocess
    import sys

    from bench.harness import ProcessTreeSampler

    java = tmp_path / "java"  # a process named as the JVM is (the sampler reads the program's name)
    java.symlink_to("/bin/sleep")
    # The worker is started from a thread, as a JVM starts Spark's Python workers: a thread's children are
    # listed under that thread only. It uses 1 s of CPU, then is reaped by its parent while the sampler runs,
    # so its seconds are in the parent's count of reaped children too.
    worker = ("b = bytearray(64 << 20)\nimport time\nt = time.process_time()\n"
              "while time.process_time() - t < 1.0: pass\ntime.sleep(1)\n")
    script = ("import subprocess, sys, threading, time\n"
              f"jvm = subprocess.Popen([{str(java)!r}, '3'])\n"
              f"def start(): subprocess.Popen([sys.executable, '-c', {worker!r}, 'pyspark.' + 'daemon']).wait()\n"
              "thread = threading.Thread(target=start); thread.start()\n"
              "jvm.wait(); thread.join(); time.sleep(0.5)\n")  # the mark only in the child's command line
    parent = subprocess.Popen([sys.executable, "-c", script])
    with ProcessTreeSampler(parent.pid, interval=0.05) as sampler:
        parent.wait()
    split = sampler.peak_split
    assert set(split) == {"jvm", "python workers", "other"}, split
    assert split["python workers"] > 64 << 20 > split["jvm"] > 0  # the 64 MiB array is the worker's
    assert sum(split.values()) == sampler.peak_rss  # the parent, the CLI's place, is "other"
    assert 0.9 < sampler.cpu_seconds < 1.6, sampler.cpu_seconds  # counted twice, it would be over 2 s
