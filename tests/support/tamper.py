"""Injected faults for the ``verify`` tests: a sink's output with one record dropped, duplicated, a pair of one
key's records swapped, a DECIMAL off by one unit in the last place, a wrong schema id, or an insert's ``op``
header made ``d`` or its ``commit_ts`` header one more.

Records are dicts (``partition``, ``key``, ``value`` as bytes or ``None``, ``commit_ts``, ...) in sequences
(the file sink: one per file; Kafka: one per partition), in their order. :func:`tamper` changes them in
place and says which record it changed; :func:`tamper_file_sink` and :func:`copy_topic` apply it to a file
sink directory or a copy of a Kafka topic. :func:`tamper_many` (and :func:`tamper_file_sink_many`,
:func:`copy_topic_with_faults`) apply several faults at once, each to a key of its own, so that one verify run
finds them all, each on its own record (faults on one key would share its comparison groups).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import fastavro

KINDS = ("drop", "duplicate", "swap", "decimal", "wrong_schema_id", "unknown_schema_id", "op_header",
         "commit_ts_header")

#: A schema id no registry in the tests holds.
UNKNOWN_ID = 987_654

#: What each fault shows in verify's counts for its table (a verify test injects a set of them, each on a key of its
#: own, and expects their sum: :func:`fault_counts`).
SHOWS: dict[str, dict[str, int]] = {
    "drop": {"missing": 1},
    "duplicate": {"duplicated": 1},
    "swap": {"out_of_order": 1},
    "decimal": {"value_mismatch": 1},
    "wrong_schema_id": {"wrong_schema_id": 1, "undecodable": 1},  # the key's schema: known, and leaves bytes over
    "unknown_schema_id": {"unknown_schema_id": 1},
    "op_header": {"header_mismatch": 1},  # an insert's op header made d, its value kept
    "commit_ts_header": {"header_mismatch": 1},  # the record's own commit_ts field unchanged
}
#: The kind of verify's sample that lists each fault.
SAMPLE_KIND = {"drop": "missing", "duplicate": "duplicated", "swap": "out_of_order", "decimal": "value_mismatch",
               "wrong_schema_id": "wrong_schema_id", "unknown_schema_id": "wrong_schema_id",
               "op_header": "header_mismatch", "commit_ts_header": "header_mismatch"}


def fault_counts(kinds: Iterable[str], discrepancies: Iterable[str]) -> dict[str, int]:
    """The counts verify must show for a table holding one fault of each of ``kinds``."""
    return {k: sum(SHOWS[kind].get(k, 0) for kind in kinds) for k in discrepancies}

#: Faults that need a record of a particular kind (two changes of a key, an insert, a DECIMAL): applied first
#: by :func:`tamper_many`, while the most keys are free.
_CHOOSY = ("swap", "op_header", "commit_ts_header", "decimal")

T = TypeVar("T")


def _sid(data: bytes) -> int:
    return int.from_bytes(data[1:5], "big")


def _reframe(data: bytes, sid: int) -> bytes:
    return b"\x00" + sid.to_bytes(4, "big") + data[5:]


def tamper(sequences: list[list[dict[str, Any]]], kind: str, client: Any, decimal_field: str = "amount", *,
           taken: set[bytes] | None = None) -> dict[str, Any]:
    """Apply one fault of ``kind`` to ``sequences`` (changed in place); returns the record it changed (as it
    was). ``taken``: keys left alone (faults applied before); the changed record's key is added to it."""
    taken = set() if taken is None else taken
    changed = _tamper(sequences, kind, client, decimal_field, taken)
    taken.add(changed["key"])
    return changed


def tamper_many(sequences: list[list[dict[str, Any]]], kinds: Iterable[str], client: Any) -> dict[str, dict[str, Any]]:
    """Apply one fault of each of ``kinds`` to ``sequences``, each to a record of a key no other fault touches;
    returns the record each changed (as it was)."""
    kinds = list(kinds)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}: the kinds are {list(KINDS)}")
    taken: set[bytes] = set()
    ordered = sorted(kinds, key=lambda k: (k not in _CHOOSY, kinds.index(k)))
    return {kind: tamper(sequences, kind, client, taken=taken) for kind in ordered}


def _tamper(sequences: list[list[dict[str, Any]]], kind: str, client: Any, decimal_field: str,
            taken: set[bytes]) -> dict[str, Any]:
    flat = [(s, i, r) for s, seq in enumerate(sequences) for i, r in enumerate(seq) if r["key"] not in taken]
    values = [(s, i, r) for s, i, r in flat if r["value"] is not None]
    if kind == "drop":
        s, i, r = values[len(values) // 2]
        del sequences[s][i]
        return r
    if kind == "duplicate":
        s, i, r = values[len(values) // 2]
        sequences[s].insert(i + 1, dict(r))
        return r
    if kind == "swap":  # two consecutive changes of one key in one partition, of different commit ts
        last: dict[tuple[int, bytes], tuple[int, int]] = {}
        for s, i, r in flat:
            where = (r["partition"], r["key"])
            if where in last:
                ps, pi = last[where]
                prev = sequences[ps][pi]
                if prev["commit_ts"] < r["commit_ts"]:
                    keep = ("batch",)  # a file sink line keeps its file's batch
                    a = {k: prev[k] for k in keep if k in prev}
                    b = {k: r[k] for k in keep if k in r}
                    sequences[ps][pi], sequences[s][i] = {**r, **a}, {**prev, **b}
                    return r
            last[where] = (s, i)
        raise AssertionError("no free key with two changes in one partition")
    if kind == "decimal":
        for s, i, r in values:
            schema = fastavro.parse_schema(json.loads(client.get_schema(_sid(r["value"])).schema))
            record = fastavro.schemaless_reader(io.BytesIO(r["value"][5:]), schema, schema)
            if isinstance(record.get(decimal_field), Decimal):
                amount = record[decimal_field]
                record[decimal_field] = amount + Decimal(1).scaleb(amount.as_tuple().exponent)
                out = io.BytesIO()
                fastavro.schemaless_writer(out, schema, record)
                sequences[s][i] = {**r, "value": r["value"][:5] + out.getvalue()}
                return r
        raise AssertionError(f"no value of a free key with a DECIMAL {decimal_field!r}")
    if kind in ("wrong_schema_id", "unknown_schema_id"):
        s, i, r = values[len(values) // 2]
        sid = _sid(r["key"]) if kind == "wrong_schema_id" else UNKNOWN_ID  # a key schema: known, wrong
        sequences[s][i] = {**r, "value": _reframe(r["value"], sid)}
        return r
    if kind in ("op_header", "commit_ts_header"):  # an insert's op header made a delete; its commit ts header + 1
        name = "op" if kind == "op_header" else "commit_ts"
        for s, i, r in values:
            headers = [_header(h) for h in r.get("headers") or []]
            if ("op", b"c") not in headers:
                continue
            new = [(k, (b"d" if name == "op" else str(int(v) + 1).encode()) if k == name else v) for k, v in headers]
            file_sink = any(isinstance(h, dict) for h in r["headers"])
            sequences[s][i] = {**r, "headers": [{"key": k, "value": v.hex()} for k, v in new] if file_sink else new}
            return r
        raise AssertionError("no insert of a free key with an op header")
    raise ValueError(kind)


def _header(h: Any) -> tuple[str, bytes]:
    """A header as ``(key, value)``: a file sink line's ``{"key", "value" in hex}`` or a Kafka ``(key, bytes)``."""
    return (h["key"], bytes.fromhex(h["value"])) if isinstance(h, dict) else (h[0], bytes(h[1]))


def decoded_key(record: dict[str, Any], client: Any) -> Any:
    """A record's key decoded through the registry, as verify's samples show it (JSON values)."""
    schema = fastavro.parse_schema(json.loads(client.get_schema(_sid(record["key"])).schema))
    key = fastavro.schemaless_reader(io.BytesIO(record["key"][5:]), schema, schema)
    return json.loads(json.dumps(key, default=str))


# --------------------------------------------------------------------------------------------------
# File sink


def tamper_file_sink(out: Path, topic: str, kind: str, client: Any) -> dict[str, Any]:
    """Rewrite the files of ``topic`` in a file sink directory with one fault of ``kind``."""
    return _rewrite_file_sink(out, topic, lambda sequences: tamper(sequences, kind, client))


def tamper_file_sink_many(out: Path, topic: str, kinds: Iterable[str], client: Any) -> dict[str, dict[str, Any]]:
    """Rewrite the files of ``topic`` in a file sink directory with one fault of each of ``kinds``, each on a key
    of its own (:func:`tamper_many`)."""
    return _rewrite_file_sink(out, topic, lambda sequences: tamper_many(sequences, kinds, client))


def _rewrite_file_sink(out: Path, topic: str, change: Callable[[list[list[dict[str, Any]]]], T]) -> T:
    files = sorted((out / topic).glob("batch-*.jsonl"))
    sequences = []
    for path in files:
        rows = []
        for line in path.read_text(encoding="utf-8").splitlines():
            raw = json.loads(line)
            rows.append({**raw, "key": bytes.fromhex(raw["key"]),
                         "value": bytes.fromhex(raw["value"]) if raw["value"] is not None else None})
        sequences.append(rows)
    changed = change(sequences)
    for path, rows in zip(files, sequences, strict=False):
        path.write_text("".join(json.dumps({**r, "key": r["key"].hex(),
                                            "value": r["value"].hex() if r["value"] is not None else None}) + "\n"
                                for r in rows), encoding="utf-8")
    return changed


# --------------------------------------------------------------------------------------------------
# Kafka


def read_topic(bootstrap: str, topic: str) -> list[list[dict[str, Any]]]:
    """Every record of ``topic``, one list per partition in offset order (read_committed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tamper", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        out: list[list[dict[str, Any]]] = []
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            consumer.assign([TopicPartition(topic, p, low)])
            rows: list[dict[str, Any]] = []
            while high > low and not (rows and rows[-1]["offset"] >= high - 1):
                msg = consumer.poll(5)
                if msg is None:
                    break
                assert msg.error() is None, msg.error()
                headers = dict(msg.headers() or [])
                rows.append({"partition": p, "offset": msg.offset(), "key": msg.key(), "value": msg.value(),
                             "headers": msg.headers() or [], "commit_ts": int(headers.get("commit_ts", b"-1"))})
            out.append(rows)
        return out
    finally:
        consumer.close()


def copy_topic(bootstrap: str, source: str, target: str, kind: str | None, client: Any) -> dict[str, Any] | None:
    """Copy ``source`` into a new topic ``target`` (same partitions, same order per partition), with one fault
    of ``kind`` (``None``: an exact copy)."""
    sequences = read_topic(bootstrap, source)
    changed = tamper(sequences, kind, client) if kind else None
    _write_topic(bootstrap, target, sequences)
    return changed


def copy_topic_with_faults(bootstrap: str, source: str, target: str, kinds: Iterable[str],
                           client: Any) -> dict[str, dict[str, Any]]:
    """Copy ``source`` into a new topic ``target`` with one fault of each of ``kinds``, each on a key of its own
    (:func:`tamper_many`); returns the record each changed."""
    sequences = read_topic(bootstrap, source)
    changed = tamper_many(sequences, kinds, client)
    _write_topic(bootstrap, target, sequences)
    return changed


def _write_topic(bootstrap: str, target: str, sequences: list[list[dict[str, Any]]]) -> None:
    """A new topic ``target`` with one partition per sequence, holding its records in order."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(target, num_partitions=len(sequences), replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for p, rows in enumerate(sequences):
        for r in rows:
            producer.produce(target, key=r["key"], value=r["value"], partition=p, headers=r["headers"] or None)
    assert producer.flush(30) == 0
