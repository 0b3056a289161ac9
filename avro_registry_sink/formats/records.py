"""One entry point for every input format: raw records in, change rows and dead letters out.

:func:`parse_records` is what a replay of dead-lettered rows calls (their ``format`` and ``raw_base64``
fields hold its input), and what tests call to check a format on its own. It is the record-by-record
path of each format (:func:`~avro_registry_sink.formats.csv.parse_csv`,
:func:`~avro_registry_sink.formats.canal_json.events_from_canal`,
:func:`~avro_registry_sink.formats.debezium_json.events_from_debezium`): every raw record gives change
rows or one dead-letter record, never both, never neither (a DDL or watermark message gives no row and
no dead letter; the job's changelog path applies DDLs on the driver).

``changes`` uses the stage's input layout (:data:`~avro_registry_sink.spark.stage.CHANGE_SCHEMA`: row
images as JSON text), ready for :func:`~avro_registry_sink.spark.stage.encode_change_batch`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from avro_registry_sink.changes import ChangeEvent, split_key_change
from avro_registry_sink.errors import SourceError
from avro_registry_sink.formats.dead_letter import dead_letter_record
from avro_registry_sink.table import TableDef

__all__ = ["FORMATS", "Parsed", "parse_records", "raw_of"]

#: The formats :func:`parse_records` reads (the dead-letter record's ``format`` values).
FORMATS = ("csv", "canal-json", "debezium-json")

TableHistory = Sequence[tuple[int, TableDef]]


@dataclass
class Parsed:
    """What :func:`parse_records` gives: change rows (an Arrow table) and dead-letter records."""

    changes: Any  # pyarrow.Table with CHANGE_SCHEMA's columns
    bad: list[dict[str, Any]] = field(default_factory=list)
    rows_in: int = 0


def _pick(tables: TableDef | TableHistory | Mapping[tuple[str, str], TableHistory], schema: str | None,
          table: str | None, commit_ts: int | None) -> TableDef | None:
    from avro_registry_sink.tabledef.catalog import pick_version

    if isinstance(tables, TableDef):
        return tables
    if isinstance(tables, Mapping):
        history = tables.get((schema or "", table or ""))
        return pick_version(list(history), commit_ts or 0) if history else None
    return pick_version(list(tables), commit_ts or 0) if tables else None


def parse_records(
    fmt: str,
    raws: Sequence[bytes] | bytes,
    *,
    table_or_history: TableDef | TableHistory | Mapping[tuple[str, str], TableHistory],
    options: Any = None,
    origin: str | Sequence[str] = "<input>",
) -> Parsed:
    """Parse raw records of one format into change rows plus one dead-letter record per bad record.

    ``raws`` is a list of records (CSV records without their terminator, JSON messages) or one
    ``bytes`` holding a whole file. ``table_or_history`` is the table definition (CSV, canal-json storage
    files), a table's versions ``[(version, TableDef)]``, or ``{(schema, table): versions}`` for
    changelogs (each message is read with the version at or before its commit ts). ``options`` are the
    :class:`~avro_registry_sink.formats.csv.CsvOptions` (``None``: detected from the data). ``origin``
    names where the records come from: one source per record (the dead-letter ``source`` field), or a
    prefix to which ``:<line>`` is appended.

    >>> from avro_registry_sink.tabledef.ddl import parse_ddl
    >>> t = parse_ddl("CREATE TABLE s.t (id INT PRIMARY KEY, v VARCHAR(8))")[0]
    >>> got = parse_records("csv", [b'"I","t","s",1,"a"', b'"I","t","s",x,"b"'], table_or_history=t, origin="f.csv")
    >>> got.changes.column("after").to_pylist(), [b["source"] for b in got.bad]
    (['{"id":1,"v":"a"}'], ['f.csv:2'])
    """
    import pyarrow as pa

    from avro_registry_sink.spark.stage import CHANGE_SCHEMA

    if fmt not in FORMATS:
        raise ValueError(f"Unknown input format {fmt!r}; valid formats are: {', '.join(FORMATS)}.")
    whole = isinstance(raws, (bytes, bytearray))  # one file: record lines come from the parser
    records = [raws] if whole else list(raws)
    if isinstance(origin, str):
        sources = [f"{origin}:{i}" for i in range(1, len(records) + 1)]
    else:
        sources = list(origin)
        if len(sources) != len(records):
            raise ValueError(f"origin names {len(sources)} sources for {len(records)} records")
    rows: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []

    def reject(source: str, raw: bytes, exc: SourceError | Exception, table: TableDef | None = None) -> None:
        ctx = exc.context if isinstance(exc, SourceError) else {}
        reason = str(ctx.get("reason") or (exc.message if isinstance(exc, SourceError) else f"{type(exc).__name__}: {exc}"))
        message = exc.message if isinstance(exc, SourceError) else f"{source}: {reason}"
        head, _, tail = source.rpartition(":")
        where = {"file": head, "line": int(tail)} if tail.isdigit() else {"file": source}
        bad.append(dead_letter_record(fmt=fmt, source=source, reason=reason, message=message,
                                      raw=ctx.get("raw", raw), schema=table.schema_name if table else None,
                                      table=table.table if table else None,
                                      table_version=table.version if table else None, **where))

    def add(events: list[Any], table: TableDef | None, source: str) -> None:
        for event in events:
            if isinstance(event, ChangeEvent):
                for part in split_key_change(event, table):
                    row = dict(zip(CHANGE_SCHEMA.names, part.to_row()))
                    row["source"] = source
                    rows.append(row)

    for raw, source in zip(records, sources):
        raw = bytes(raw)
        if fmt == "csv":
            from avro_registry_sink.formats.csv import DEFAULT_CSV_OPTIONS, decode_text, parse_csv, resolve_layout

            table = _pick(table_or_history, None, None, None)
            assert table is not None, "CSV needs the table definition"
            text = decode_text(raw)
            csv_options = options
            if csv_options is None:
                csv_options, _ = resolve_layout(text, table, DEFAULT_CSV_OPTIONS)
            events, errors = parse_csv(text, table, csv_options,
                                       source=(origin if whole and isinstance(origin, str) else source))
            if whole:
                prefix = origin if isinstance(origin, str) else source
                for error in errors:
                    reject(f"{prefix}:{error.context.get('line')}", raw, error, table)
                for event in events:
                    add([event], table, event.source)
                continue
            if errors:
                for error in errors[:1]:  # one record, one dead letter
                    reject(source, raw, error, table)
                continue
            add(events, table, source)
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            reject(source, raw, SourceError(f"{source}: invalid UTF-8 bytes in the message.", reason="invalid UTF-8"))
            continue
        if fmt == "canal-json":
            from avro_registry_sink.formats.canal_json import events_from_canal, load_message, peek
        else:
            from avro_registry_sink.formats.debezium_json import events_from_debezium, peek
        table = None
        try:
            if fmt == "canal-json":
                message = load_message(text, source)
                _, schema, name, commit_ts = peek(message)
                table = _pick(table_or_history, schema, name, commit_ts)
                if table is None:
                    raise SourceError(f"{source}: no definition of {schema}.{name}.", reason="unknown table")
                events = events_from_canal(message, table=table, table_version=table.version, source=source)
            else:
                import json

                message = json.loads(text)
                if message is None:
                    continue  # Debezium's tombstone
                _, schema, name, commit_ts = peek(message)
                table = _pick(table_or_history, schema, name, commit_ts)
                if table is None:
                    raise SourceError(f"{source}: no definition of {schema}.{name}.", reason="unknown table")
                events = events_from_debezium(message, tables={(schema, name): table}, table_version=table.version,
                                              source=source)
        except (SourceError, ValueError, TypeError, KeyError, AttributeError) as exc:
            reject(source, raw, exc, table)
            continue
        add(events, table, source)
    changes = pa.Table.from_pylist(rows, schema=CHANGE_SCHEMA)
    return Parsed(changes=changes, bad=bad, rows_in=len(records))


def raw_of(record: Mapping[str, Any]) -> bytes:
    """The raw bytes a dead-letter record holds (its ``raw_base64``)."""
    return base64.b64decode(record.get("raw_base64") or "")
