"""The vectorized changelog path (``formats.changelog_arrow`` + ``spark.sources.changelog_stage``) against the per-message one.

A batch of canal-json messages goes through the one-pass stage (Arrow's JSON reader, typed columns, the columnar
encoder, and the per-message readers for what the vectorized reader declines) and, message by message, through
the reference: :func:`~avro_registry_sink.spark.sources.sources.peek_message`, :func:`~avro_registry_sink.spark.sources.sources.parse_message`
(``events_from_canal``) and the reference encode path. Every message must give the same records, byte for
byte and in the same order, or be dead-lettered by both. The messages are random tables and values (the
columnar encoder's property-test strategy), written as TiCDC and Alibaba Canal write them and spoiled in the
ways producers get them wrong: values as JSON numbers, integers with signs or spaces, partial ``old`` rows,
missing and unknown columns, keys in another case, updates of the key, truncated lines.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avro_registry_sink.encoding.plan import EncodingPlan
from avro_registry_sink.formats.changelog_arrow import Body, TableVersions, _mysql_types, canal_rows, latin1_bytes
from avro_registry_sink.model import CHANGE_SCHEMA, Op
from avro_registry_sink.routing.rules import Route
from avro_registry_sink.schema.builder import derive_schemas
from avro_registry_sink.settings.config import EncodingOptions
from avro_registry_sink.sources.demo import go_format_float
from avro_registry_sink.spark.sources.changelog_stage import _Chunk, _encode_chunk, _Sources
from avro_registry_sink.spark.sources.sources import parse_message, peek_message
from avro_registry_sink.spark.stages.plan import StagePlan
from avro_registry_sink.spark.stages.stage import encode_change_batch
from avro_registry_sink.table import ColumnDef, MySQLType, TableDef
from tests.support.depth import examples
from tests.unit.test_columnar import scenarios

CORPUS = Path("/work/shared/corpora/external")
RATE = [1.0]  # the spoil rate of the messages being written (see _messages)


def _canal_value(col: ColumnDef, value: Any, rng: random.Random) -> Any:
    """A typed value as TiCDC's canal-json writes it (text), sometimes as other producers do."""
    if value is None:
        return None
    if hasattr(value, "as_tuple"):  # Decimal
        value = str(value)
    if col.type is MySQLType.ENUM and isinstance(value, str) and rng.random() < 0.5:
        return str(col.elements.index(value) + 1)  # TiCDC's 1-based index
    if col.type is MySQLType.SET and isinstance(value, str) and rng.random() < 0.5:
        return str(sum(1 << col.elements.index(m) for m in value.split(",") if m))
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return rng.choice(["NaN", "Infinity", str(value)])
        return go_format_float(value, "f") if rng.random() < 0.7 else repr(value)
    if isinstance(value, int):
        spoil = rng.random() / RATE[0]
        if spoil < 0.05:
            return rng.choice([f" {value}", f"+{value}", f"{value:_}", f"0{value}" if value >= 0 else str(value)])
        if spoil < 0.08:
            return value  # a JSON number, as some producers write it
        return str(value)
    return str(value)


def _messages(table: TableDef, rows: list[dict[str, Any]], ops: list[str], ts: list[int], rng: random.Random,
              names: list[str]) -> list[str]:
    """Canal-json messages of 1-3 rows each, with UPDATEs' ``old`` rows full, partial or missing, plus spoilers."""
    compact = rng.random() < 0.7
    rate = rng.choice([0.0, 0.0, 0.2, 1.0])  # how often messages are spoiled (0: only TiCDC's own forms)
    dump = (lambda o: json.dumps(o, ensure_ascii=False, separators=(",", ":"))) if compact else \
        (lambda o: json.dumps(o, ensure_ascii=False))
    RATE[0] = max(rate, 1e-9)
    out = []
    i = 0
    key_names = table.handle_key_names() or ()
    while i < len(rows):
        k = rng.choice([1, 1, 1, 2, 3])
        part = rows[i: i + k]
        op = Op.parse(ops[i])
        kind = {Op.INSERT: "INSERT", Op.UPDATE: "UPDATE", Op.DELETE: "DELETE"}[op]
        data = [{name: _canal_value(col, row[name], rng) for name, col in zip(names, table.columns, strict=False)} for row in part]
        old = None
        if op is Op.UPDATE and rng.random() < 0.8:
            old = []
            for row in data:
                choice = rng.random()
                if choice < 0.4:  # the whole row (TiCDC): the key unchanged, another value changed
                    old.append(dict(row))
                elif choice < 0.6:  # the key changed (an UPDATE of the primary key)
                    changed = dict(row)
                    for name in names:
                        if name in key_names and rng.random() < 0.7:
                            changed[name] = rng.choice(["1", "2", None, "0"])
                    old.append(changed)
                else:  # only the changed columns (Alibaba Canal, only-output-updated-columns)
                    old.append({n: v for n, v in row.items() if rng.random() < 0.3})
        message: dict[str, Any] = {
            "id": 0, "database": table.schema_name, "table": table.table, "pkNames": list(table.primary_key),
            "isDdl": False, "type": kind, "es": ts[i] >> 18, "ts": (ts[i] >> 18) + 3, "sql": "",
            "sqlType": {c.name: 12 for c in table.columns},
            "mysqlType": {c.name: c.sql_type() for c in table.columns},
            "old": old, "data": data,
        }
        if rng.random() < 0.9:
            message["_tidb"] = {"commitTs": ts[i]}
        spoil = rng.random() / max(rate, 1e-9)
        if spoil < 0.03:
            message["data"][0]["no_such_column"] = "x"
        elif spoil < 0.05 and names:
            message["data"][0].pop(names[-1], None)
        elif spoil < 0.06:
            message["data"] = []
        elif spoil < 0.07:
            message = {"id": 0, "database": table.schema_name, "table": table.table, "isDdl": True, "type": "ALTER",
                       "sql": "ALTER TABLE t COMMENT 'x'", "es": ts[i] >> 18, "data": None, "old": None}
        elif spoil < 0.08:
            message["type"] = "TIDB_WATERMARK"
            message["_tidb"] = {"watermarkTs": ts[i]}
        elif spoil < 0.09:
            message["database"] = 5
        elif spoil < 0.10:
            message["mysqlType"] = None
        elif spoil < 0.11:
            message["mysqlType"] = dict(message["mysqlType"], extra_col="int")
        text = dump(message)
        # Spoilers of the sqlType/mysqlType objects, which the vectorized path cuts out of the text
        cut = rng.random() / max(rate, 1e-9)
        first = json.dumps(names[0], ensure_ascii=False) if names else '"id"'
        if cut < 0.01:  # a brace in a key of sqlType
            text = text.replace('"sqlType":{', '"sqlType":{"x}{":1,', 1)
        elif cut < 0.02:  # a repeated key
            text = text.replace('"sqlType":{', '"sqlType":{' + first + ":4,", 1)
        elif cut < 0.03:  # not JSON inside sqlType
            text = text.replace('"sqlType":{', '"sqlType":{"zz":1 ', 1)
        elif cut < 0.04:  # a second sqlType after the rows
            text = text[:-1] + ',"sqlType":{' + first + ":4}}"
        elif cut < 0.05:  # a repeated key in mysqlType
            text = text.replace('"mysqlType":{', '"mysqlType":{' + first + ':"int",', 1)
        if rng.random() < 0.02 * rate:
            text = text[: len(text) // 2]
        out.append(text)
        i += k
    return out


def _plans(plan: EncodingPlan) -> dict[tuple[str, str, int], StagePlan]:
    table = plan.table
    route = Route(schema=table.schema_name, table=table.table, topic="t", key_subject="t-key", value_subject="t-value")
    return {(table.schema_name, table.table, table.version): StagePlan(plan, "t", 3, route, max_message_bytes=0)}


def _reference(messages: list[str], fmt: str, history: dict, plans: dict) -> dict[int, list[Any]]:
    """Per message index: its records ``(topic, partition, key, value, headers, commit_ts)`` or ``"error"``."""
    out: dict[int, list[Any]] = {}
    for i, text in enumerate(messages):
        source = f"f:{i + 1}"
        kind, schema, table, commit_ts, message, _error, _shape = peek_message(text, source, fmt)
        if kind == "error":
            out[i] = ["error"]
            continue
        if kind != "dml":
            continue
        rows = list(parse_message(message, source, fmt, schema, table, commit_ts, (commit_ts, "f", i + 1), history))
        if any(r[-1] is not None for r in rows):
            out[i] = ["error"]
            continue
        batch = pa.RecordBatch.from_pylist([dict(zip(CHANGE_SCHEMA.names, r[:8], strict=True)) for r in rows], schema=CHANGE_SCHEMA)
        records = encode_change_batch(batch, plans, isolate=True).to_pylist()
        out[i] = ["error" if r["error"] is not None else
                  (r["topic"], r["partition"], r["key"], r["value"], r["headers"], r["commit_ts"]) for r in records]
    return out


def _one_pass(messages: list[str], fmt: str, history: dict, plans: dict, binary: bool) -> dict[int, list[Any]]:
    n = len(messages)
    values = pa.array([m.encode() for m in messages], pa.binary()) if binary else pa.array(messages, pa.string())
    chunk = _Chunk(values, pa.array(["f"] * n, pa.string()), np.arange(1, n + 1, dtype=np.int64),
                   _Sources([f"f:{i + 1}" for i in range(n)]))
    versions = TableVersions(history=history, planned=frozenset(plans))
    got: dict[int, list[tuple[int, Any]]] = {}
    for batch in _encode_chunk(chunk, fmt, versions, plans, history, frozenset()):
        for r in batch.to_pylist():
            i = r["order_line"] - 1
            item = "error" if r["error"] is not None else (r["topic"], r["partition"], r["key"], r["value"], r["headers"],
                                                           r["commit_ts"])
            if r["error"] is not None:
                record = json.loads(r["error"])
                assert record["source"] == f"f:{i + 1}" and record["raw_base64"] is not None, record
                assert base64.b64decode(record["raw_base64"]).decode("utf-8", "replace") in (messages[i], "") or \
                    record.get("reason") == "empty message"
            got.setdefault(i, []).append(item)
    return got  # rows of a message come out in its order (one table version per message)


def _same_per_message(reference: dict[int, list[Any]], got: dict[int, list[Any]]) -> None:
    assert set(got) == set(reference), (sorted(set(got) ^ set(reference)))
    for i in reference:
        mine, theirs = got[i], reference[i]
        if "error" in theirs and theirs != ["error"] * len(theirs) and "error" in mine:
            # a message whose rows the encoder refuses in part: the refused rows may differ only in number
            assert [x for x in mine if x != "error"] == [x for x in theirs if x != "error"], i
            continue
        if theirs == ["error"]:
            assert "error" in mine and all(x == "error" for x in mine), (i, mine)
            continue
        assert mine == theirs, i


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenario=scenarios(), seed=st.integers(0, 2**32 - 1), binary=st.booleans())
def test_canal_json_one_pass_equals_the_per_message_path(scenario, seed, binary):
    plan, batch, ops, ts = scenario
    table = plan.table
    rng = random.Random(seed)
    names = batch.schema.names  # the scenario may write keys in another case than the definition
    rows = batch.to_pylist()
    messages = _messages(table, rows, ops, ts, rng, names)
    history = {(table.schema_name, table.table): [(table.version, table)]}
    plans = _plans(plan)
    _same_per_message(_reference(messages, "canal-json", history, plans),
                      _one_pass(messages, "canal-json", history, plans, binary))


#: How many of TiCDC's messages are compared with the per-message reference, message by message (the reference
#: reads about 300 a second; every one of the 3,000 is checked to take the vectorized path).
COMPARED = 1000


def test_ticdc_messages_take_the_vectorized_path_whole():
    """TiCDC's own canal-json (every value text, whole old rows): no message goes the per-message way."""
    from bench.changelog import canal_messages

    messages = canal_messages(3000, 2)
    history = {(t.schema_name, t.table): [(t.version, t)] for t in messages.tables}
    plans = {}
    for t in messages.tables:
        schemas = derive_schemas(t, EncodingOptions())
        plans.update(_plans(EncodingPlan.from_schemas(schemas, 1, 2)))
    found = canal_rows(messages.texts, TableVersions(history=history, planned=frozenset(plans)))
    assert found.slow.size == 0 and sum(r.columns.num_rows for r in found.tables) == 3000
    texts = messages.texts.to_pylist()[:COMPARED]
    _same_per_message(_reference(texts, "canal-json", history, plans), _one_pass(texts, "canal-json", history, plans, True))


@pytest.mark.parametrize("limit", [0, 260])
def test_tables_of_one_shape_are_encoded_together_with_their_own_ids_topics_and_errors(monkeypatch, limit):
    """Sharded tables (one shape, other names) are encoded in one call per chunk, each record then given its own
    table's schema ids, topic and partition: the same bytes as table by table. A row over ``max-message-bytes``
    sends the group back table by table, so that its dead letter names its own table."""
    from avro_registry_sink.spark.stages import stage as stage_module
    from bench.changelog import canal_messages

    messages = canal_messages(COMPARED, 3)
    history = {(t.schema_name, t.table): [(t.version, t)] for t in messages.tables}
    plans = {}
    for i, t in enumerate(messages.tables):
        encoding = EncodingPlan.from_schemas(derive_schemas(t, EncodingOptions()), 10 + i, 20 + i)
        route = Route(schema=t.schema_name, table=t.table, topic=f"topic{i}", key_subject=f"topic{i}-key",
                      value_subject=f"topic{i}-value")
        plans[(t.schema_name, t.table, t.version)] = StagePlan(encoding, f"topic{i}", 3, route, max_message_bytes=limit)
    calls: list[tuple[int, bool]] = []
    real = stage_module.encode_typed_group

    def spy(parts):
        got = real(parts)
        calls.append((len(parts), got is not None))
        return got

    monkeypatch.setattr(stage_module, "encode_typed_group", spy)
    texts = messages.texts.to_pylist()
    reference = _reference(texts, "canal-json", history, plans)
    got = _one_pass(texts, "canal-json", history, plans, True)
    _same_per_message(reference, got)
    assert calls and all(n == 3 for n, _ in calls)
    records = [r for rows in got.values() for r in rows if r != "error"]
    assert {r[0] for r in records} == {"topic0", "topic1", "topic2"}
    if limit:
        assert not any(ok for _, ok in calls) and any("error" in rows for rows in got.values())
    else:
        assert all(ok for _, ok in calls)
        assert {(r[0], r[3][1:5]) for r in records if r[3] is not None} == {
            (f"topic{i}", (20 + i).to_bytes(4, "big")) for i in range(3)}


def test_sql_and_mysql_types_cut_out_of_the_text_change_no_result():
    """The vectorized path parses canal-json with ``sqlType``/``mysqlType`` cut out of the text (their keys
    counted from the cut): a missing column is still told from a null one, and every form of those objects that
    the cut must not take gives what the per-message reader gives."""
    from bench.changelog import canal_messages

    messages = canal_messages(40, 1)
    table = messages.tables[0]
    history = {(table.schema_name, table.table): [(table.version, table)]}
    plans = _plans(EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions()), 1, 2))
    texts = messages.texts.to_pylist()

    def variant(i: int, change: Any) -> str:
        message = json.loads(texts[i])
        change(message)
        return json.dumps(message, ensure_ascii=False, separators=(",", ":"))

    null_note = variant(1, lambda m: m["data"][0].update(note=None))
    missing_note = variant(2, lambda m: m["data"][0].pop("note"))
    spoiled = [
        texts[3].replace('"sqlType":{', '"sqlType":{"x}{":1,', 1),  # a brace in a key
        texts[4].replace('"sqlType":{', '"sqlType":{"note":4,', 1),  # a repeated key
        texts[5].replace('"sqlType":{', '"sqlType":{"zz":1 ', 1),  # not JSON
        texts[6][:-1] + ',"sqlType":{"note":4}}',  # a second sqlType
        variant(7, lambda m: m.update(mysqlType=None)),
        variant(8, lambda m: (m["data"][0].pop("note"), m["mysqlType"].update(nOte="text"))),
        variant(9, lambda m: (m["data"][0].pop("note"), m["sqlType"].update(extra=1))),
        texts[10].replace('"sqlType":{', '"sqlType" : {', 1),  # another writer's spacing
    ]
    clean = [null_note, missing_note, *texts[11:]]
    found = canal_rows(pa.array(clean, pa.string()), TableVersions(history=history, planned=frozenset(plans)))
    assert found.slow.tolist() == [1]  # a null: on the vectorized path; a missing column: read one by one
    batch = [*clean, *spoiled]
    _same_per_message(_reference(batch, "canal-json", history, plans), _one_pass(batch, "canal-json", history, plans, False))


# --------------------------------------------------------------------------------------------------
# Third-party messages (apache/flink's canal-json test data) with the rows Flink expects


def _flink_rows(expected: Path) -> list[tuple[str, tuple[str, ...]]]:
    out = []
    for line in expected.read_text(encoding="utf-8").splitlines():
        kind, _, rest = line.partition("(")
        out.append((kind, tuple(rest[:-1].split(",", 3))))
    return out


@pytest.mark.skipif(not (CORPUS / "flink-json").is_dir(), reason="external corpus not present")
def test_flink_canal_corpus_one_pass_equals_per_message_and_flink():
    import fastavro

    table = TableDef(schema_name="inventory", table="products2", primary_key=("id",), columns=(
        ColumnDef(name="id", type=MySQLType.INT, nullable=False), ColumnDef(name="name", type=MySQLType.VARCHAR, length=255),
        ColumnDef(name="description", type=MySQLType.VARCHAR, length=512), ColumnDef(name="weight", type=MySQLType.FLOAT)))
    messages = (CORPUS / "flink-json" / "canal-data.txt").read_text(encoding="utf-8").splitlines()
    schemas = derive_schemas(table, EncodingOptions())
    plan = EncodingPlan.from_schemas(schemas, 1, 2)
    history = {("inventory", "products2"): [(0, table)]}
    plans = _plans(plan)
    got = _one_pass(messages, "canal-json", history, plans, True)
    _same_per_message(_reference(messages, "canal-json", history, plans), got)
    # Flink's changelog: +I and +U rows are our values, -D rows our tombstones' keys; -U rows have no record
    parsed = fastavro.parse_schema(json.loads(schemas.value_json))
    ours = []
    for i in sorted(got):
        for _topic, _partition, _key, value, headers, _ts in got[i]:
            op = dict((h["key"], h["value"]) for h in headers)["op"]
            if value is None:
                ours.append(("-D", None))
                continue
            import io

            record = fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None)
            ours.append(({b"c": "+I", b"u": "+U"}[op], (str(record["id"]), record["name"], record["description"])))
    flink = [(k, v) for k, v in _flink_rows(CORPUS / "flink-json" / "canal-data.expected.txt") if k != "-U"]
    assert [k for k, _ in ours] == [k for k, _ in flink]
    for (_, mine), (_, theirs) in zip(ours, flink, strict=True):
        if mine is not None:
            assert mine == (theirs[0], theirs[1], None if theirs[2] == "null" else theirs[2])


# --------------------------------------------------------------------------------------------------
# Pieces


@given(st.lists(st.one_of(st.none(), st.text(max_size=20)), max_size=30))
def test_latin1_bytes_is_the_readers_encoding(values):
    got = latin1_bytes(pa.array(values, pa.string())).to_pylist()
    expected = []
    for v in values:
        if v is None:
            expected.append(None)
            continue
        try:
            expected.append(v.encode("latin-1"))
        except UnicodeEncodeError:
            expected.append(v.encode("utf-8"))
    assert got == expected


def test_mysql_type_cut_is_exact_or_declined():
    texts = ['{"mysqlType":{"a":"int","b":"varchar(3)"},"x":1}', '{"mysqlType": {"a": "int"}}', '{"mysqlType":null}',
             '{"data":[{"mysqlType":"x"}],"mysqlType":{"a":"int"}}', '{"mysqlType":{"e":"enum(\'}\')"}}', '{"a":1}']
    cuts, unsure = _mysql_types(Body(pa.array(texts)), np.arange(len(texts)))
    assert cuts[:3] == ['{"a":"int","b":"varchar(3)"}', '{"a": "int"}', None]
    assert unsure.tolist() == [False, False, False, True, True, False] and cuts[5] is None


# --------------------------------------------------------------------------------------------------
# debezium-json


def _days(text: str) -> int | None:
    import datetime as dt

    try:
        return (dt.date.fromisoformat(text[:10]) - dt.date(1970, 1, 1)).days
    except ValueError:
        return None


def _debezium_value(col: ColumnDef, value: Any, rng: random.Random) -> Any:
    """A typed value as TiCDC's debezium encoder writes it (sometimes as other producers do)."""
    import datetime as dt

    if value is None:
        return None
    if hasattr(value, "as_tuple"):
        value = str(value)
    kind = col.type
    if kind is MySQLType.DECIMAL:
        return float(value) if rng.random() < 0.9 else str(value)
    if kind is MySQLType.BIT:
        number = int(value)
        if (col.length or 1) == 1:
            return bool(number) if rng.random() < 0.9 else number
        return base64.b64encode(number.to_bytes(8, "little").rstrip(b"\x00")).decode()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if kind in (MySQLType.DATE, MySQLType.DATETIME, MySQLType.TIMESTAMP, MySQLType.TIME) and isinstance(value, str):
        if kind is MySQLType.DATE:
            days = _days(value)
            return days if days is not None else value
        if kind is MySQLType.TIME:
            sign = -1 if value.startswith("-") else 1
            parts = value.lstrip("-").split(":")
            if len(parts) == 3 and all(p.replace(".", "").isdigit() for p in parts):
                return sign * int((int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2])) * 1_000_000)
            return value
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            return value
        if kind is MySQLType.TIMESTAMP:
            return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{moment.microsecond:06d}" if moment.microsecond else "") + "Z"
        micros = int((moment - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000)
        return micros // 1000 if (col.fsp or 0) <= 3 else micros
    if isinstance(value, int) and not isinstance(value, bool):
        if col.unsigned and value >= 1 << 63:
            value -= 1 << 64  # TiCDC casts the uint64 to int64
        return value if rng.random() < 0.95 else str(value)
    if isinstance(value, float):
        return value
    return value


def _debezium_messages(table: TableDef, rows: list[dict[str, Any]], ops: list[str], ts: list[int],
                       rng: random.Random, names: list[str]) -> list[str]:
    rate = rng.choice([0.0, 0.0, 0.2, 1.0])
    out = []
    key_names = table.handle_key_names() or ()
    for i, row in enumerate(rows):
        op = Op.parse(ops[i])
        image = {name: _debezium_value(col, row[name], rng) for name, col in zip(names, table.columns, strict=False)}
        before = after = None
        letter = {Op.INSERT: rng.choice("cr"), Op.UPDATE: "u", Op.DELETE: "d"}[op]
        if op is Op.INSERT:
            after = image
        elif op is Op.DELETE:
            before = image
        else:
            after = image
            if rng.random() < 0.8:
                before = dict(image)
                if rng.random() < 0.3:
                    for name in names:
                        if name in key_names:
                            before[name] = rng.choice([1, 2, None, "0"])
        payload: dict[str, Any] = {"before": before, "after": after, "op": letter, "ts_ms": ts[i] >> 18,
                                   "transaction": None,
                                   "source": {"version": "2.4.0.Final", "connector": "TiCDC", "name": "x",
                                              "ts_ms": ts[i] >> 18, "snapshot": "false", "db": table.schema_name,
                                              "table": table.table, "commit_ts": ts[i]}}
        spoil = rng.random() / max(rate, 1e-9)
        if spoil < 0.03 and (after or before):
            (after or before)["no_such_column"] = 1
        elif spoil < 0.05 and names and (after or before):
            (after or before).pop(names[-1], None)
        elif spoil < 0.06:
            payload = {"schema": {"type": "struct"}, "payload": payload}
        elif spoil < 0.07:
            payload = {"op": None, "ddl": "ALTER TABLE t COMMENT 'x'", "source": payload["source"], "ts_ms": 1}
        elif spoil < 0.08:
            payload["source"].pop("commit_ts")
            payload["source"]["ts_ms"] = 0
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":") if rng.random() < 0.7 else None)
        if rng.random() < 0.02 * rate:
            text = text[: len(text) // 2]
        out.append(text)
    return out


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenario=scenarios(), seed=st.integers(0, 2**32 - 1), binary=st.booleans())
def test_debezium_json_one_pass_equals_the_per_message_path(scenario, seed, binary):
    plan, batch, ops, ts = scenario
    table = plan.table
    rng = random.Random(seed)
    messages = _debezium_messages(table, batch.to_pylist(), ops, ts, rng, batch.schema.names)
    history = {(table.schema_name, table.table): [(table.version, table)]}
    plans = _plans(plan)
    _same_per_message(_reference(messages, "debezium-json", history, plans),
                      _one_pass(messages, "debezium-json", history, plans, binary))


def test_ticdc_debezium_messages_take_the_vectorized_path_whole():
    from bench.changelog import debezium_messages

    messages = debezium_messages(3000, 2)
    history = {(t.schema_name, t.table): [(t.version, t)] for t in messages.tables}
    plans = {}
    for t in messages.tables:
        plans.update(_plans(EncodingPlan.from_schemas(derive_schemas(t, EncodingOptions()), 1, 2)))
    from avro_registry_sink.formats.changelog_arrow import debezium_rows

    found = debezium_rows(messages.texts, TableVersions(history=history, planned=frozenset(plans)))
    assert found.slow.size == 0 and sum(r.columns.num_rows for r in found.tables) == 3000
    texts = messages.texts.to_pylist()[:COMPARED]
    _same_per_message(_reference(texts, "debezium-json", history, plans),
                      _one_pass(texts, "debezium-json", history, plans, True))


# --------------------------------------------------------------------------------------------------
# Storage-sink canal-json data files


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenario=scenarios(), seed=st.integers(0, 2**32 - 1))
def test_storage_canal_file_one_pass_equals_the_line_reader(scenario, seed):
    """A storage-sink canal-json file: the one pass (``sources._canal_file``) gives the records the line reader
    (``parse_canal_lines``) and the reference encode path give, line by line; bad lines are set aside alone."""
    from avro_registry_sink.formats.canal_json import parse_canal_lines
    from avro_registry_sink.spark.sources.sources import _canal_file, _event_row, source_error_json

    plan, batch, ops, ts = scenario
    table = plan.table
    rng = random.Random(seed)
    messages = _messages(table, batch.to_pylist(), ops, ts, rng, batch.schema.names)
    terminator = rng.choice(["\n", "\r\n"])
    lines = [m.encode() for m in messages]
    if lines and rng.random() < 0.3:
        lines.insert(rng.randrange(len(lines)), b"  ")
    if lines and rng.random() < 0.3:
        lines.insert(rng.randrange(len(lines)), messages[0].encode().replace(b'"t"', b'"other"', 1))
    if lines and rng.random() < 0.2:
        lines.insert(rng.randrange(len(lines)), b'{"x":"\xff"}')
    content = b"".join(line + terminator.encode() for line in lines)
    plans = _plans(plan)
    key = (table.schema_name, table.table, table.version)
    order = (table.version, "f", 0)

    def finish(records, order, line_numbers, errors, rank):
        return [(int(line), None if e is not None else (r["topic"], r["partition"], r["key"], r["value"], r["headers"]),
                 e is not None) for line, r, e in zip(line_numbers, records.to_pylist(), errors.to_pylist(), strict=False)]

    got = sorted((x for part in _canal_file("f", content, table, plans[key], order, 0, finish, plans) for x in part),
                 key=lambda x: x[0])
    # the reference: the line reader, then the reference encode path
    from avro_registry_sink.changes import split_key_change

    text = content.decode("utf-8", "surrogateescape")
    events, errors = parse_canal_lines(text, table, source="f", table_version=table.version)
    rows = [_event_row(p, table.version, (order[0], order[1], int(e.source.rpartition(":")[2])))
            for e in events for p in split_key_change(e, table)]
    expected = []
    if rows:
        batch_ = pa.RecordBatch.from_pylist([dict(zip(CHANGE_SCHEMA.names, r[:8], strict=True)) for r in rows], schema=CHANGE_SCHEMA)
        for r, rec in zip(rows, encode_change_batch(batch_, plans, isolate=True).to_pylist(), strict=True):
            expected.append((r[10], None if rec["error"] is not None else
                             (rec["topic"], rec["partition"], rec["key"], rec["value"], rec["headers"]), rec["error"] is not None))
    for err in errors:
        json.loads(source_error_json(err, fmt="canal-json"))
        expected.append((int(err.context["line"]), None, True))
    expected.sort(key=lambda x: x[0])
    # per line: the same records, or dead-lettered in both (a line's refused rows may differ only in number)
    by_line_got: dict[int, list[Any]] = {}
    by_line_expected: dict[int, list[Any]] = {}
    for line, record, bad in got:
        by_line_got.setdefault(line, []).append("error" if bad else record)
    for line, record, bad in expected:
        by_line_expected.setdefault(line, []).append("error" if bad else record)
    _same_per_message(by_line_expected, by_line_got)


# --------------------------------------------------------------------------------------------------
# The summary, and strict passes


def _summary_reference(messages: list[str], fmt: str) -> tuple[int, dict[tuple, list[Any]], list[tuple]]:
    """What the driver must learn, message by message (peek_message): per (schema, table, shape) the count,
    commit-ts range and first message; the DDLs, by commit ts."""
    from avro_registry_sink.spark.sources.sources import peek_message

    groups: dict[tuple, list[Any]] = {}
    ddls = []
    for i, text in enumerate(messages):
        kind, schema, table, ts, message, _error, shape = peek_message(text, f"f:{i + 1}", fmt)
        if kind == "ddl":
            ddls.append((ts or 0, i, (schema, table, ts, message)))
        elif kind == "dml":
            have = groups.setdefault((schema, table, shape), [0, ts, ts, (ts, i), message])
            have[0] += 1
            have[1], have[2] = min(have[1], ts), max(have[2], ts)
            if (ts, i) < have[3]:
                have[3], have[4] = (ts, i), message
    # the driver applies DDLs in commit-ts order, then in the order they were read
    return len(messages), groups, [ddl for _ts, _i, ddl in sorted(ddls, key=lambda d: d[:2])]


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenario=scenarios(), seed=st.integers(0, 2**32 - 1), fmt=st.sampled_from(["canal-json", "debezium-json"]))
def test_summary_equals_the_per_message_peek(scenario, seed, fmt):
    from avro_registry_sink.spark.sources.changelog_stage import _merge_summary, _summarize_chunk

    plan, batch, ops, ts = scenario
    table = plan.table
    rng = random.Random(seed)
    write = _messages if fmt == "canal-json" else _debezium_messages
    messages = write(table, batch.to_pylist(), ops, ts, rng, batch.schema.names)
    n = len(messages)
    chunk = _Chunk(pa.array([m.encode() for m in messages], pa.binary()), pa.array(["f"] * n, pa.string()),
                   np.arange(1, n + 1, dtype=np.int64), _Sources([f"f:{i + 1}" for i in range(n)]))
    groups: dict = {}
    ddls: list = []
    counts = {"n": 0, "error": 0}
    _summarize_chunk(chunk, fmt, groups, ddls, counts)
    rows = [{"kind": "count", "n": counts["n"]}]
    for (kind, schema, table_, shape, mtype), (k, low, high, order, first, source) in groups.items():
        rows.append({"kind": kind, "schema": schema, "table": table_, "shape": shape, "mtype": mtype, "n": k, "low": low,
                     "high": high, "first": first, "first_source": source, "first_ts": order[0], "first_file": order[1],
                     "first_line": order[2]})
    for d in ddls:
        rows.append({"kind": "ddl", "schema": d["schema"], "table": d["table"], "n": 1, "low": d["commit_ts"],
                     "high": d["commit_ts"], "first": d["message"], "first_source": d["source"],
                     "first_ts": d["commit_ts"], "first_file": d["order_file"], "first_line": d["order_line"]})
    summary = _merge_summary(rows, fmt)
    inputs, expected, expected_ddls = _summary_reference(messages, fmt)
    assert summary.inputs == inputs
    got = {(g["schema"], g["table"], g["shape"]): [g["n"], g["low"], g["high"], g["first"]] for g in summary.groups}
    assert got == {key: [v[0], v[1], v[2], v[4]] for key, v in expected.items()}
    assert [(d["schema"], d["table"], d["commit_ts"], d["message"]) for d in summary.ddls] == expected_ddls


def test_a_strict_pass_stops_at_what_the_driver_must_see():
    from avro_registry_sink.spark.sources.changelog_stage import NeedsSummary
    from bench.changelog import canal_messages

    messages = canal_messages(50, 1)
    t = messages.tables[0]
    history = {(t.schema_name, t.table): [(t.version, t)]}
    plans = _plans(EncodingPlan.from_schemas(derive_schemas(t, EncodingOptions()), 1, 2))
    shape = ",".join(sorted(c.name.lower() for c in t.columns))
    texts = messages.texts.to_pylist()

    def run(texts: list[str], **kw: Any) -> dict:
        n = len(texts)
        chunk = _Chunk(pa.array(texts, pa.string()), pa.array(["f"] * n, pa.string()), np.arange(1, n + 1, dtype=np.int64),
                       _Sources([f"f:{i + 1}" for i in range(n)]))
        versions = TableVersions(history=history, planned=frozenset(plans), strict=True, shapes={("bench", "t000"): shape},
                                 **kw)
        filtered: dict = {}
        rows = sum(b.num_rows for b in _encode_chunk(chunk, "canal-json", versions, plans, history, frozenset(), filtered))
        return {"rows": rows, "filtered": filtered}

    assert run(texts)["rows"] == 50
    ddl = json.dumps({"database": "bench", "table": "t000", "isDdl": True, "type": "ALTER", "sql": "ALTER TABLE t ADD c INT",
                      "es": 1, "_tidb": {"commitTs": 5}})
    other = texts[0].replace('"table":"t000"', '"table":"t999"')
    wider = texts[0].replace('"region":"int"}', '"region":"int","extra":"int"}')
    for spoiler in (ddl, other, wider):
        with pytest.raises(NeedsSummary):
            run([*texts, spoiler])
        with pytest.raises(NeedsSummary):  # on the per-message path too
            run([spoiler.replace("{", " {", 1)])
    from avro_registry_sink.routing.table_filter import TableFilter

    left_out = run([*texts, other], table_filter=TableFilter.parse(["bench.t000"]))
    assert left_out == {"rows": 50, "filtered": {("bench", "t999"): 1}}


def test_a_lone_surrogate_escape_is_dead_lettered_not_a_crash():
    """A key or value with a lone UTF-16 surrogate escape (``"\\ud83d"``) decodes to a string UTF-8 cannot
    hold: the message is dead-lettered ("lone surrogate") with the escape kept in its record (the stage once failed
    encoding the record, or the row)."""
    from bench.changelog import canal_messages, debezium_messages

    messages = debezium_messages(4, 1)
    table = messages.tables[0]
    history = {(table.schema_name, table.table): [(table.version, table)]}
    plans = _plans(EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions()), 1, 2))
    texts = messages.texts.to_pylist()
    texts[1] = texts[1].replace('"counter":', '"\\ud83dcounter":', 1)
    texts[2] = texts[2].replace('"name":"', '"name":"\\udc00', 1)
    got = _one_pass(texts, "debezium-json", history, plans, True)
    _same_per_message(_reference(texts, "debezium-json", history, plans), got)
    assert got[1] == got[2] == ["error"] and got[0] != ["error"] and got[3] != ["error"]
    kind, *_, error, _shape = peek_message(texts[2], "f:3", "debezium-json")
    assert kind == "error" and json.loads(error)["reason"] == "lone surrogate"
    canal = canal_messages(4, 1).texts.to_pylist()
    canal[1] = canal[1].replace('"name":"', '"name":"\\ud83d', 1)  # in mysqlType
    at = canal[2].rindex('"name":"') + len('"name":"')
    canal[2] = canal[2][:at] + "\\udfff" + canal[2][at:]  # in data
    got = _one_pass(canal, "canal-json", history, plans, True)
    _same_per_message(_reference(canal, "canal-json", history, plans), got)
    assert got[1] == got[2] == ["error"] and got[0] != ["error"] and got[3] != ["error"]


@pytest.mark.parametrize("fmt", ["canal-json", "debezium-json"])
def test_a_commit_ts_past_64_bits_is_dead_lettered_not_a_crash(fmt):
    """A commit ts (or ``es``/``ts_ms``) past a 64-bit TSO: the message is dead-lettered on its own ("commit ts out
    of range"); the batch's row once failed to convert and the whole task failed."""
    from bench.changelog import canal_messages, debezium_messages

    made = (canal_messages if fmt == "canal-json" else debezium_messages)(4, 1)
    table = made.tables[0]
    history = {(table.schema_name, table.table): [(table.version, table)]}
    plans = _plans(EncodingPlan.from_schemas(derive_schemas(table, EncodingOptions()), 1, 2))
    texts = made.texts.to_pylist()
    key = '"commitTs":' if fmt == "canal-json" else '"commit_ts":'
    texts[1] = texts[1].replace(key, key + "9" * 30, 1)
    if fmt == "debezium-json":  # no commit_ts: ts_ms << 18 past 64 bits
        texts[2] = texts[2].replace('"commit_ts":', '"x":', 1).replace('"ts_ms":', '"ts_ms":9' + "0" * 20, 2)
    got = _one_pass(texts, fmt, history, plans, True)
    _same_per_message(_reference(texts, fmt, history, plans), got)
    assert got[1] == ["error"] and got[0] != ["error"] and got[3] != ["error"]
    kind, *_, error, _shape = peek_message(texts[1], "f:2", fmt)
    assert kind == "error" and json.loads(error)["reason"] == "commit ts out of range"
    if fmt == "debezium-json":
        assert got[2] == ["error"]
