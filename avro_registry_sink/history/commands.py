"""The ``history``, ``diff`` and ``register`` commands (:mod:`avro_registry_sink.cli` puts them on its app).

* ``history --checkpoint CK [--table T | --subject S] [--json]``: the registrations a job (or ``register``) made,
  from the checkpoint's journal; without a checkpoint, ``--subject S`` lists the registry's versions of S.
* ``diff --subject S A B`` (subject versions) or ``diff --table T A B`` (table versions, from the journal), with
  ``--sql postgres|mysql`` the ``ALTER TABLE`` statements for the downstream table; ``--json``.
* ``register --ddl FILE``: registers the key and value schemas the tables of a DDL file need (CI-side
  registration for jobs run with ``auto-register=false``), recorded in ``--checkpoint``'s journal when given.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from avro_registry_sink.cli_options import (
    ConfigOpt,
    DdlOpt,
    RegistryOpt,
    StateDirOpt,
    TiCDCArgs,
    build_config,
    build_router,
    fail,
    option_groups,
    read_tables,
)
from avro_registry_sink.errors import AvroSinkError, RegistryUnavailable
from avro_registry_sink.history.diff import SchemaDiff, diff_keys, diff_schemas
from avro_registry_sink.history.journal import HistoryJournal, HistoryRecord, select

# The `history` commands import what they run inside their functions, for start-up, as cli.py's commands do.

CheckpointHistoryOpt = Annotated[str | None, typer.Option("--checkpoint", help="The job's checkpoint (directory or storage URI): its history/ journal.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON instead of a terminal table.")]


def _console():
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def _registry_config(registry: str | None, config: Path | None, state_dir: Path | None):
    """The registry to ask: the URL, else the embedded registry's file under the state dir (as ``run`` uses it)."""
    from avro_registry_sink.settings.config import default_state_dir

    cfg = build_config(config_file=config, registry=registry)
    if cfg.registry.is_embedded and cfg.registry.embedded_data is None:
        state = state_dir or default_state_dir()
        state.mkdir(parents=True, exist_ok=True)
        cfg = cfg.model_copy(update={"registry": cfg.registry.model_copy(
            update={"embedded_data": str(state / "registry.db")})})
    return cfg


def _journal(checkpoint: str | None) -> list[HistoryRecord]:
    """The journal's records; a checkpoint that is not there is an error naming it (a typo must not read as an
    empty history)."""
    if checkpoint is None:
        return []
    journal = HistoryJournal.at(checkpoint)
    if not journal.store.is_dir(""):
        raise fail(f"Checkpoint {checkpoint} does not exist: give --checkpoint the directory or storage URI the job "
                   "was run with (its history/ holds the journal), or leave it out to read the registry alone.")
    return journal.read()


# --------------------------------------------------------------------------------------------------
# history


def _registry_history(client: Any, subject: str) -> list[HistoryRecord]:
    """A subject's versions as the registry holds them, with what their metadata says (``--on-incompatible
    new-major`` registers each version with its major version and table version, a new major with its migration
    rules, whose doc lists the changes); no DDL: the registry keeps none."""
    from avro_registry_sink.history.journal import fingerprint
    from avro_registry_sink.manager import MAJOR_VERSION, TABLE_VERSION, registered_table

    out = []
    previous: Any = None
    for version in client.get_versions(subject):
        registered = client.get_version(subject, version)
        owner = registered_table(registered.schema)
        properties = registered.properties
        major = _int_or_none(properties.get(MAJOR_VERSION))
        rules = [r for r in (registered.rule_set or {}).get("migrationRules") or [] if isinstance(r, dict)]
        old_major = _int_or_none(previous.properties.get(MAJOR_VERSION)) if previous is not None else None
        if previous is None:
            verdict = "new subject"
        elif major is not None and old_major is not None and major != old_major:
            verdict = "new major"
        else:
            verdict = "registered"
        docs = list(dict.fromkeys(str(r.get("doc") or "") for r in rules if r.get("doc")))
        out.append(HistoryRecord(
            table=".".join(owner) if owner else "?", table_version=_int_or_none(properties.get(TABLE_VERSION)) or 0,
            subject=subject, kind="key" if subject.endswith("-key") else "value", schema=registered.schema,
            schema_id=registered.id, version=version, previous_version=previous.version if previous else None,
            source="registry", source_detail="; ".join(docs) or None, fingerprint=fingerprint(registered.schema),
            major_version=major, rules=[r.get("name") for r in rules] or None, verdict=verdict, time=""))
        previous = registered
    return out


def _int_or_none(text: Any) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def _short(text: str | None, width: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _ddl_summary(ddl: str | None) -> str:
    """The statements of a DDL that changed the table (its ALTERs, not the CREATE TABLE a file starts with)."""
    if not ddl:
        return ""
    statements = [" ".join(s.split()) for s in ddl.split(";") if s.strip()]
    changes = [s for s in statements if not s.upper().startswith("CREATE TABLE")]
    return "; ".join(changes or statements[:1])


def history_table(records: list[HistoryRecord], title: str):
    """The terminal table of ``history``."""
    from rich.table import Table

    grid = Table(title=title)
    for name in ("time", "table", "table version", "source", "subject", "version", "id", "major", "verdict",
                 "fingerprint", "DDL / reasons"):
        grid.add_column(name, overflow="fold", min_width=30 if name == "DDL / reasons" else None)
    for r in records:
        style = {"incompatible": "red", "new subject": "cyan"}.get(r.verdict, "green")
        detail = _ddl_summary(r.ddl) or r.source_detail or ""
        if r.reasons and r.verdict == "incompatible":
            detail = "; ".join(r.reasons)
        if r.rules:
            detail += f" (rules: {len(r.rules)})"
        version = str(r.table_version or "-")
        if r.commit_ts and r.commit_ts != r.table_version:
            version += f" (commit ts {r.commit_ts})"
        grid.add_row(r.time.replace("T", " ")[:19], r.table, version, r.source, r.subject, str(r.version or "-"), str(r.schema_id or "-"),
                     str(r.major_version) if r.major_version is not None else "-",
                     f"[{style}]{r.verdict}[/{style}]", r.fingerprint[:12], _short(detail, 100))
    return grid


def history(
    checkpoint: CheckpointHistoryOpt = None,
    table: Annotated[str | None, typer.Option("--table", help="Only this table (schema.table).")] = None,
    subject: Annotated[str | None, typer.Option("--subject", help="Only this subject.")] = None,
    registry: RegistryOpt = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every schema registration on record: DDL or schema file, table version, commit ts, subject, version, id,
    fingerprint, major version, verdict and reasons (from the checkpoint's journal; without --checkpoint, the
    registry's versions of --subject)."""
    try:
        if checkpoint is not None:
            records = select(_journal(checkpoint), table=table, subject=subject)
            title = f"Schema history of {table or subject or 'every table'} ({checkpoint})"
        elif subject is not None:
            from avro_registry_sink.registry.connect import connect

            with connect(_registry_config(registry, config, state_dir).registry) as client:
                records = _registry_history(client, subject)
            title = f"Versions of subject {subject} in the registry (no journal: give --checkpoint for DDLs)"
        else:
            raise fail("history needs --checkpoint (the job's journal), or --subject to list a subject's versions "
                       "in the registry.")
    except RegistryUnavailable as exc:
        raise fail(str(exc), code=1) from None
    except AvroSinkError as exc:
        raise fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps({"history": [r.to_json() for r in records]}, indent=2, ensure_ascii=False))
        return
    _console().print(history_table(records, title))
    if not records:
        typer.echo("No registrations on record" + (f" for {table or subject}." if table or subject else "."))


# --------------------------------------------------------------------------------------------------
# diff


def _version_arg(text: str, what: str) -> int | str:
    if text == "latest":
        return text
    try:
        return int(text)
    except ValueError:
        raise fail(f"Invalid {what} {text!r}: an integer (or 'latest').") from None


@dataclass
class _Step:
    """One registration between the two versions of a diff: its schema and the one before it, and what its DDL
    (the journal) or its migration rules (the registry) say of renamed and re-added columns; ``known`` is false
    when neither says anything, so that a dropped and an added column there may be one renamed column."""

    label: str
    before: str
    after: str
    renames: dict[str, str]
    readded: set[str]
    known: bool


def _lineage(steps: list[_Step]) -> tuple[dict[str, str], set[str], list[str]]:
    """The renames (name at the first step -> name at the last), the re-added columns (names at the last) and the
    steps where a dropped and an added column are unexplained (``label: dropped a; added b``)."""
    renames: dict[str, str] = {}
    readded: set[str] = set()
    unexplained = []
    for step in steps:
        for old, new in step.renames.items():
            origin = next((o for o, n in renames.items() if n == old), old)
            renames[origin] = new
        # a column dropped and added again owes nothing to the column it was renamed from
        renames = {o: n for o, n in renames.items() if n not in step.readded}
        readded = {step.renames.get(n, n) for n in readded} | step.readded
        if not step.known:
            changes = diff_schemas(step.before, step.after).changes
            dropped = [c.field for c in changes if c.kind == "removed"]
            added = [c.field for c in changes if c.kind == "added"]
            if dropped and added:
                unexplained.append(f"{step.label}: dropped {', '.join(dropped)}; added {', '.join(added)}")
    return {o: n for o, n in renames.items() if o != n}, readded, unexplained


def _journal_step(record: HistoryRecord, before: str) -> _Step:
    from avro_registry_sink.history.diff import readded_in_ddl

    label = f"table version {record.table_version} (subject {record.subject} version {record.version or '-'})"
    return _Step(label, before, record.schema, dict(record.renames), readded_in_ddl(record.ddl),
                 known=record.ddl is not None)


def _registry_steps(client: Any, subject: str, low: Any, high: Any, journal: list[HistoryRecord]) -> list[_Step]:
    """The steps from version ``low`` to ``high`` of a subject: each live version after ``low``, described by its
    journal record when the journal has its DDL, else by its own migration rules (a new major's)."""
    from avro_registry_sink.history.diff import lineage_in_rules
    from avro_registry_sink.manager import MAJOR_VERSION

    steps = []
    previous = low
    numbers = [n for n in client.get_versions(subject) if low.version < n <= high.version]
    for number in numbers:
        current = high if number == high.version else client.get_version(subject, number)
        record = next((r for r in journal if r.version == number and r.ddl is not None
                       and r.verdict != "already registered"), None)  # the DDL that made the version
        if record is not None:
            steps.append(_journal_step(record, previous.schema))
        else:
            majors = (previous.properties.get(MAJOR_VERSION), current.properties.get(MAJOR_VERSION))
            lineage = lineage_in_rules(current.rule_set) if None not in majors and majors[0] != majors[1] else None
            renames, readded = lineage if lineage is not None else ({}, set())
            steps.append(_Step(f"version {number} (id {current.id})", previous.schema, current.schema, renames,
                               readded, known=lineage is not None))
        previous = current
    return steps


def _key_in_force(client: Any, key_subject: str, value: Any) -> str | None:
    """The key schema in force at a value version, from the registry alone: the key version of the greatest table
    version (``avro_registry_sink.table_version`` metadata) not after the value's, or the key subject's one version;
    ``None`` when neither tells. It types the key's columns (MySQL's ``varchar(255)``); the primary key itself
    changes in the key subject's diff."""
    from avro_registry_sink.errors import SubjectNotFound, VersionNotFound
    from avro_registry_sink.manager import TABLE_VERSION

    try:
        numbers = client.get_versions(key_subject)
        if len(numbers) == 1:
            return str(client.get_version(key_subject, numbers[0]).schema)
        made_at = _int_or_none(value.properties.get(TABLE_VERSION))
        if made_at is None:
            return None
        chosen = None
        for number in numbers:
            version = client.get_version(key_subject, number)
            at = _int_or_none(version.properties.get(TABLE_VERSION))
            if at is not None and at <= made_at and (chosen is None or at >= chosen[0]):
                chosen = (at, str(version.schema))
        return chosen[1] if chosen is not None else None
    except (SubjectNotFound, VersionNotFound):
        return None


def _open_pairs(result: SchemaDiff, unexplained: list[str]) -> tuple[list[str], list[str]]:
    """The dropped and the added columns of a diff that may be renames nothing on record tells (``[]`` when none)."""
    dropped = [c.field for c in result.changes if c.kind == "removed" and c.field not in result.readded]
    added = [c.field for c in result.changes if c.kind == "added" and c.field not in result.readded]
    return (dropped, added) if unexplained and dropped and added else ([], [])


def _refuse_unexplained(result: SchemaDiff, unexplained: list[str], what: str) -> None:
    """A drop and an add that nothing explains are not turned into DROP COLUMN + ADD COLUMN (the values of a
    renamed column would be lost) unless ``--allow-drop`` or ``--rename`` says which they are."""
    dropped, added = _open_pairs(result, unexplained)
    if dropped:
        raise fail(
            f"{what}: column{'s' if len(dropped) > 1 else ''} {', '.join(dropped)} dropped and "
            f"{', '.join(added)} added, and nothing on record says whether one was renamed to the other "
            f"({'; '.join(unexplained)}: no DDL in the journal, no migration rule in the registry). DROP COLUMN "
            "would lose the values a rename keeps. Say which: --rename OLD=NEW (e.g. --rename "
            f"{dropped[0]}={added[0]}) for a rename, or --allow-drop to drop and add them (existing rows get the "
            "default); --checkpoint with the job's journal knows the DDL.")


def _at_table_version(records: list[HistoryRecord], kind: str, version: int) -> HistoryRecord | None:
    """The schema of ``kind`` in force at a table version: the newest registration at or before it."""
    chosen = None
    for r in sorted((r for r in records if r.kind == kind and r.verdict != "incompatible"),
                    key=lambda r: r.table_version):
        if r.table_version <= version:
            chosen = r
    return chosen


def diff_table(diff: SchemaDiff, title: str):
    from rich.table import Table

    grid = Table(title=title)
    for name in ("field", "change", "before", "after"):
        grid.add_column(name, overflow="fold")
    for c in diff.changes:
        old_name = {n: o for o, n in diff.renames.items()}.get(c.field, c.field)
        before = diff.field_before(old_name)
        after = diff.field_after(c.field)
        style = {"added": "green", "removed": "red", "renamed": "cyan", "key": "magenta"}.get(c.kind, "yellow")
        grid.add_row(c.field, f"[{style}]{c.kind}[/{style}]",
                     _field_text(before) if c.kind not in ("added", "key") else ("-" if c.kind == "added" else
                                                                                  ", ".join(c.old)),
                     _field_text(after) if c.kind not in ("removed", "key") else ("-" if c.kind == "removed" else
                                                                                   ", ".join(c.new)))
    return grid


def _field_text(f: Any) -> str:
    if f is None:
        return "-"
    text = f"{f.name}: {f.type_text}" + ("" if f.nullable else " NOT NULL")
    if f.has_default:
        text += f" default {f.default_text}"
    if f.parameters:
        text += " " + ",".join(f"{k}={v}" for k, v in f.parameters.items())
    return text


@dataclass
class _Diffed:
    """A diff of two versions and how to name it: ``what`` (an error's subject), ``label`` (the output's),
    ``topic`` (the downstream table's default name) and ``ids`` (the two versions, for ``--json``)."""

    result: SchemaDiff
    unexplained: list[str]
    what: str
    label: str
    topic: str
    ids: dict[str, Any]


def _rename_options(rename: list[str] | None) -> dict[str, str]:
    """``--rename OLD=NEW`` options as a mapping."""
    extra = {}
    for pair in rename or []:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise fail(f"Invalid value {pair!r} for option '--rename': OLD=NEW.")
        extra[old] = new
    return extra


def _table_diff(records: list[HistoryRecord], table: str, versions: list[str], extra: dict[str, str],
                checkpoint: str | None) -> _Diffed:
    """The diff of two table versions of ``table`` from the journal: the schemas in force at each, the renames
    and re-added columns of the DDLs between them."""
    before_v, after_v = (_version_arg(v, "table version") for v in versions)
    if "latest" in (before_v, after_v):
        raise fail("--table takes two table versions (integers, see `history --table`).")
    mine = select(records, table=table)
    if not mine:
        raise fail(f"No registrations of table {table} on record"
                   + (f" in {checkpoint}" if checkpoint else " (give --checkpoint)") + ".")
    value_a, value_b = (_at_table_version(mine, "value", v) for v in (before_v, after_v))  # type: ignore[arg-type]
    if value_a is None or value_b is None:
        known = sorted({r.table_version for r in mine})
        raise fail(f"Table {table} has no schema on record at table version "
                   f"{before_v if value_a is None else after_v}; versions on record: "
                   + ", ".join(map(str, known)) + ".")
    key_a, key_b = (_at_table_version(mine, "key", v) for v in (before_v, after_v))  # type: ignore[arg-type]
    values = sorted((r for r in mine if r.kind == "value" and r.verdict != "incompatible"),
                    key=lambda r: r.table_version)
    low, high = sorted((before_v, after_v))  # type: ignore[type-var]
    steps = []
    previous = _at_table_version(mine, "value", low)  # type: ignore[arg-type]
    for r in values:
        if low < r.table_version <= high and previous is not None and r.schema != previous.schema:  # type: ignore[operator]
            steps.append(_journal_step(r, previous.schema))
            previous = r
    renames, readded, unexplained = _lineage(steps)
    if before_v > after_v:  # type: ignore[operator]
        renames = {new: old for old, new in renames.items()}
    result = diff_schemas(value_a.schema, value_b.schema, renames={**renames, **extra},
                          key_before=key_a.schema if key_a else None, key_after=key_b.schema if key_b else None,
                          readded=readded)
    ids = {"from": {"subject": value_a.subject, "version": value_a.version, "id": value_a.schema_id,
                    "table_version": before_v},
           "to": {"subject": value_b.subject, "version": value_b.version, "id": value_b.schema_id,
                  "table_version": after_v}}
    return _Diffed(result, unexplained, f"Table {table}, table version {before_v} -> {after_v}",
                   f"table {table}: table version {before_v} -> {after_v}", value_b.topic, ids)


def _value_keys(client: Any, subject: str, records: list[HistoryRecord], mine: list[HistoryRecord], a: Any,
                b: Any) -> tuple[str | None, str | None]:
    """The key schemas in force at value versions ``a`` and ``b``: from the journal, else (no journal) the key in
    force at ``b`` for both (it types the key's columns; the key subject's diff changes the primary key)."""
    key_a = key_b = None
    if mine:  # the key in force at each value version, from the journal
        rec_a = next((r for r in mine if r.version == a.version), None)
        rec_b = next((r for r in mine if r.version == b.version), None)
        either = rec_a or rec_b
        keys = select(records, table=either.table if either is not None else "")
        if rec_a is not None and rec_b is not None:
            key_a = _at_table_version(keys, "key", rec_a.table_version)
            key_b = _at_table_version(keys, "key", rec_b.table_version)
    key_before = key_a.schema if key_a else None
    key_after = key_b.schema if key_b else None
    if key_after is None and subject.endswith("-value"):
        key_before = key_after = _key_in_force(client, subject[: -len("-value")] + "-key", b)
    return key_before, key_after


def _subject_diff(records: list[HistoryRecord], subject: str, versions: list[str], extra: dict[str, str],
                  registry: str | None, config: Path | None, state_dir: Path | None) -> _Diffed:
    """The diff of two versions of ``subject`` from the registry: the renames and re-added columns of the
    journal's DDLs (or of the new majors' migration rules) between them; a key subject's diff is its primary key."""
    before_s, after_s = (_version_arg(v, "subject version") for v in versions)
    from avro_registry_sink.registry.connect import connect

    with connect(_registry_config(registry, config, state_dir).registry) as client:
        a = client.get_version(subject, before_s)  # type: ignore[arg-type]  # _version_arg: int or 'latest'
        b = client.get_version(subject, after_s)  # type: ignore[arg-type]
        mine = [r for r in select(records, subject=subject) if r.verdict != "incompatible"]
        first, last = (a, b) if a.version <= b.version else (b, a)
        renames, readded, unexplained = _lineage(_registry_steps(client, subject, first, last, mine))
        if a.version > b.version:
            renames = {new: old for old, new in renames.items()}
        renames = {**renames, **extra}
        what = f"Subject {subject}, version {a.version} -> {b.version}"
        if subject.endswith("-key"):  # the key's columns are the value's: only the primary key changes
            result = diff_keys(a.schema, b.schema, renames)
            unexplained = []
        else:
            key_before, key_after = _value_keys(client, subject, records, mine, a, b)
            result = diff_schemas(a.schema, b.schema, renames=renames, key_before=key_before,
                                  key_after=key_after, readded=readded)
    ids = {"from": {"subject": subject, "version": a.version, "id": a.id},
           "to": {"subject": subject, "version": b.version, "id": b.id}}
    return _Diffed(result, unexplained, what, f"subject {subject}: version {a.version} (id {a.id}) -> {b.version} "
                   f"(id {b.id})", subject.rsplit("-", 1)[0], ids)


def _print_diff(diffed: _Diffed, statements: list[str] | None, dialect: Any, target: str, allow_drop: bool,
                as_json: bool) -> None:
    """Print a diff (and the ALTER TABLE statements): as JSON, or as a table."""
    result, unexplained, label = diffed.result, diffed.unexplained, diffed.label
    if as_json:
        out: dict[str, Any] = {"diff": label, **diffed.ids, **result.to_json()}
        open_dropped, open_added = _open_pairs(result, unexplained)
        if open_dropped and not allow_drop:
            out["unexplained"] = {"dropped": open_dropped, "added": open_added, "versions": unexplained}
        if statements is not None:
            out["sql"] = {"dialect": dialect, "table": target, "statements": statements}
        typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    console = _console()
    if result.unchanged:
        console.print(f"No field changes: {label}.", markup=False)
    else:
        console.print(diff_table(result, f"Diff of {label}"))
        open_dropped, open_added = _open_pairs(result, unexplained)
        if open_dropped and not allow_drop:
            console.print(f"Nothing on record says whether {', '.join(open_dropped)} (dropped) was renamed to "
                          f"{', '.join(open_added)} (added): {'; '.join(unexplained)}. --rename OLD=NEW or "
                          "--allow-drop says which (--sql needs one).", markup=False)
    if statements is not None:
        console.print(f"-- ALTER TABLE statements ({dialect}) for downstream table {target}:", markup=False)
        for statement in statements:
            console.print(statement + ";", markup=False, soft_wrap=True)


def diff(
    versions: Annotated[list[str], typer.Argument(help="A B: two subject versions (--subject; 'latest' allowed) or two table versions (--table).")],
    subject: Annotated[str | None, typer.Option("--subject", help="Diff two versions of this subject.")] = None,
    table: Annotated[str | None, typer.Option("--table", help="Diff two table versions of this table (schema.table; from the journal).")] = None,
    checkpoint: CheckpointHistoryOpt = None,
    sql: Annotated[str | None, typer.Option("--sql", help="postgres|mysql: also print the ALTER TABLE statements that bring a downstream table from A to B.")] = None,
    target_table: Annotated[str | None, typer.Option("--target-table", help="The downstream table's name for --sql (default: the topic, as the JDBC sinks name it).")] = None,
    rename: Annotated[list[str] | None, typer.Option("--rename", help="OLD=NEW: a column rename the journal does not know (repeatable).")] = None,
    allow_drop: Annotated[bool, typer.Option("--allow-drop", help="Columns dropped and added where neither the journal's DDL nor the registry's migration rules say whether one was renamed: drop and add them (without it --sql refuses).")] = False,
    registry: RegistryOpt = None,
    config: ConfigOpt = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Field-level diff of two schema versions (added, removed, renamed, type, nullability, default,
    connect.parameters, key); with --sql the downstream ALTER TABLEs."""
    from avro_registry_sink.history.alter import alter_statements, dialect_of

    if len(versions) != 2:
        raise fail("diff needs two versions: A B.")
    if (subject is None) == (table is None):
        raise fail("diff needs one of --subject S (two subject versions) or --table T (two table versions).")
    try:
        dialect = dialect_of(sql) if sql is not None else None
        extra = _rename_options(rename)
        records = _journal(checkpoint)
        if table is not None:
            diffed = _table_diff(records, table, versions, extra, checkpoint)
        else:
            assert subject is not None
            diffed = _subject_diff(records, subject, versions, extra, registry, config, state_dir)
        if dialect and not allow_drop:
            _refuse_unexplained(diffed.result, diffed.unexplained, diffed.what)
        statements = alter_statements(diffed.result, target_table or diffed.topic, dialect) if dialect else None
    except RegistryUnavailable as exc:
        raise fail(str(exc), code=1) from None
    except AvroSinkError as exc:
        raise fail(str(exc)) from None
    _print_diff(diffed, statements, dialect, target_table or diffed.topic, allow_drop, as_json)


# --------------------------------------------------------------------------------------------------
# register


@option_groups
def register(
    ddl: DdlOpt,
    ticdc: TiCDCArgs,
    registry: RegistryOpt = None,
    checkpoint: CheckpointHistoryOpt = None,
    state_dir: StateDirOpt = None,
    table_version: Annotated[int | None, typer.Option("--table-version", help="The table version (TiDB's schema version ts) recorded in the history; default: a TSO of now, as TiDB would give the DDL.")] = None,
    on_incompatible: Annotated[str | None, typer.Option("--on-incompatible", help="stop|new-major: a schema the subject's level refuses is listed and the command exits 1 after trying every table (stop, the default; 'fail' is an older name for it), or is registered as the subject's next major version with migration rules, as the job does (new-major; needs a registry with data contracts). Default: the on-incompatible of the settings (TOML, AVRO_SINK_ON_INCOMPATIBLE).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Register the key and value schemas the tables of a DDL file need (CI-side registration, for jobs run with
    auto-register=false). Every table is tried; exit 0 when all are registered, 1 when one is refused (each listed)
    or the registry is unreachable, 2 for bad input or a registry without data contracts under new-major."""
    from avro_registry_sink.history.journal import HistoryRecorder
    from avro_registry_sink.manager import SchemaManager, require_data_contracts
    from avro_registry_sink.registry.connect import connect
    from avro_registry_sink.routing.selection import TableSelection
    from avro_registry_sink.settings.config import default_state_dir

    try:
        cfg = ticdc.sink_config(registry)
        if on_incompatible is not None:
            policy = _register_policy(on_incompatible)
            cfg = cfg.model_copy(update={"on_incompatible": policy})
        if cfg.registry.is_embedded and cfg.registry.embedded_data is None:
            state = state_dir or default_state_dir()
            state.mkdir(parents=True, exist_ok=True)
            cfg = cfg.model_copy(update={"registry": cfg.registry.model_copy(
                update={"embedded_data": str(state / "registry.db")})})
        selection = TableSelection.from_config(cfg)
        version = table_version if table_version is not None else int(time.time() * 1000) << 18
        tables = [t.model_copy(update={"version": version}) for t in read_tables(ddl)
                  if selection.admits(t.schema_name, t.table)]
        text = ddl.read_text(encoding="utf-8")
        own_ddl = table_statements(text)
        router = build_router(cfg, ticdc.topic_rule)
        routes = [router.route(t.schema_name, t.table) for t in tables]
    except AvroSinkError as exc:
        raise fail(str(exc)) from None

    def ddl_of(table: Any) -> str:
        return own_ddl.get((table.schema_name.lower(), table.table.lower()), text)

    journal = HistoryJournal.at(checkpoint) if checkpoint is not None else None
    refused: list[tuple[str, AvroSinkError]] = []
    latest_before: dict[str, int] = {}  # subject -> its highest version before this command registered under it
    with connect(cfg.registry) as client:
        recorder = HistoryRecorder(journal, client, lambda table: ("register", str(ddl), ddl_of(table)))
        manager = SchemaManager(client, router, cfg.encoding, unavailable_budget=cfg.registry.unavailable_budget,
                                selection=selection, on_incompatible=cfg.on_incompatible,
                                ddl_history=lambda schema, name: [(version, ddl_of(t)) for t in tables
                                                                  if (t.schema_name, t.table) == (schema, name)])
        manager.on_register, manager.on_refused = recorder.registered, recorder.refused
        manager.on_registering = lambda subject: _note_latest(client, subject, latest_before)
        try:
            if not cfg.registry.is_embedded:  # the embedded registry keeps data contracts
                require_data_contracts(cfg, client)
            manager.check_rule_configs(routes)  # new-major: the config rule sets, before anything registers
        except RegistryUnavailable as exc:
            raise fail(str(exc), code=1) from None
        except AvroSinkError as exc:
            raise fail(str(exc)) from None
        for table in tables:
            try:
                manager.plan(table)
            except RegistryUnavailable as exc:  # the next tables would wait as long: stop here
                refused.append((table.qualified_name, exc))
                break
            except AvroSinkError as exc:
                refused.append((table.qualified_name, exc))
        majors = manager.take_majors()
        warnings = manager.take_warnings()
        recorder.note_majors(majors)
        pending = recorder.pending
        _already_registered(client, pending, latest_before)
        known = [r for r in pending if r.verdict == "already registered"]
        pending[:] = [r for r in pending if r.verdict != "already registered"]  # no registration: not journaled
    records = recorder.flush(name=f"register-{int(time.time() * 1000)}")
    records = sorted(records + known, key=lambda r: (r.table, r.kind))
    if as_json:
        typer.echo(json.dumps({"registered": [r.to_json() for r in records],
                               "new_majors": [m.to_json() for m in majors], "warnings": warnings,
                               "refused": [{"table": name, "error": str(exc)} for name, exc in refused],
                               "error": str(refused[0][1]) if refused else None}, indent=2, ensure_ascii=False))
    else:
        console = _console()
        console.print(history_table(records, f"Registered from {ddl}"))
        for major in majors:
            console.print(f"New major version: {major.describe()}", markup=False, soft_wrap=True)
        for warning in warnings:
            console.print(f"warning: {warning}", markup=False, soft_wrap=True)
    if refused:
        listing = " ".join(f"({i}) {name}: {exc}" for i, (name, exc) in enumerate(refused, 1))
        others = len(tables) - len(refused)
        raise fail(f"{len(refused)} of {len(tables)} tables of {ddl} not registered ({others} registered or already "
                   f"there): {listing}", code=1 if all(_is_refusal(exc) for _, exc in refused) else 2)


def _register_policy(value: str) -> Any:
    """``--on-incompatible`` of ``register``: the job's choices, and ``fail`` (an older name of ``stop``)."""
    from avro_registry_sink.errors import ConfigError
    from avro_registry_sink.settings.config import OnIncompatible

    choices = [p.value for p in OnIncompatible]
    if value == "fail":
        return OnIncompatible.STOP
    if value not in choices:
        raise ConfigError(f"Invalid value {value!r} for option '--on-incompatible': choose one of "
                          f"{', '.join(choices)}.", option="on-incompatible", value=value)
    return OnIncompatible(value)


def _is_refusal(exc: AvroSinkError) -> bool:
    """A registry's refusal (or its absence), exit 1; anything else (a routing collision ...) is exit 2."""
    from avro_registry_sink.errors import IncompatibleSchema
    from avro_registry_sink.manager import RulesNotKept

    return isinstance(exc, IncompatibleSchema | RegistryUnavailable | RulesNotKept)


def _note_latest(client: Any, subject: str, latest: dict[str, int]) -> None:
    """Before the first registration under ``subject``: its highest live version (0: none)."""
    if subject in latest:
        return
    try:
        latest[subject] = max(client.get_versions(subject), default=0)
    except AvroSinkError:  # a new subject (or no answer: the registration that follows says why)
        latest[subject] = 0


def _already_registered(client: Any, records: list[HistoryRecord], latest: dict[str, int]) -> None:
    """Records whose schema was a version of the subject before this command: verdict ``already registered``
    (the registry answered a registration with the version it had; not a new subject, nor a new version)."""
    for record in records:
        if record.verdict in ("incompatible", "new major") or record.schema_id is None:
            continue
        if record.version is None:  # not found by a lookup without metadata (a version registered with some)
            record.version = _version_of(client, record.subject, record.schema_id)
        if record.version is not None and record.version <= latest.get(record.subject, 0):
            record.verdict = "already registered"
            record.reasons = [f"version {record.version} of {record.subject} (schema id {record.schema_id}) "
                              "holds this schema already"]


def _version_of(client: Any, subject: str, schema_id: int) -> int | None:
    try:
        for number in sorted(client.get_versions(subject), reverse=True):
            if client.get_version(subject, number).id == schema_id:
                return int(number)
    except AvroSinkError:  # for the record only
        pass
    return None


def table_statements(text: str) -> dict[tuple[str, str], str]:
    """Each table's own statements of a DDL text (its ``CREATE TABLE`` and the ``ALTER``/``RENAME``/``DROP``/index
    statements about it, as the text spells them), by ``(schema, table)`` lower-cased, the table's final name;
    statements next to each other in the text keep what separates them there, others are joined by ``;``.

    >>> ddl = table_statements("CREATE TABLE s.a (id INT); CREATE TABLE s.b (id INT); ALTER TABLE s.a ADD c INT")
    >>> ddl[("s", "a")].splitlines(), ddl[("s", "b")]
    (['CREATE TABLE s.a (id INT);', 'ALTER TABLE s.a ADD c INT'], 'CREATE TABLE s.b (id INT)')
    """
    from avro_registry_sink.tabledef.ddl import _Catalog
    from avro_registry_sink.tabledef.lexer import split_statements

    catalog = _Catalog("default")
    statements = split_statements(text)
    touched: dict[tuple[str, str], list[int]] = {}
    for index, stmt in enumerate(statements):
        before = dict(catalog.tables)
        catalog.execute(stmt)
        gone = [key for key in before if key not in catalog.tables]
        new = [key for key in catalog.tables if key not in before]
        if stmt.toks and stmt.toks[0].word == "RENAME":  # the history goes with the table to its new name
            for old, renamed in zip(gone, new, strict=False):
                touched[renamed] = touched.pop(old, [])
        for key in gone + [k for k, entry in catalog.tables.items() if before.get(k) is not entry]:
            touched.setdefault(key, []).append(index)
    out = {}
    for key, indexes in touched.items():
        if key not in catalog.tables:
            continue
        runs: list[list[int]] = []
        for index in indexes:
            if runs and runs[-1][-1] == index - 1:
                runs[-1].append(index)
            else:
                runs.append([index])
        out[key] = ";\n".join(text[statements[run[0]].toks[0].start:statements[run[-1]].toks[-1].end + 1]
                              for run in runs)
    return out
