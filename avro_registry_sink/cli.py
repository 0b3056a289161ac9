"""Command line: thin commands that parse options, build the configuration and call the library.

Exit status: 0 on success, 2 for bad input and for damaged, unreadable or locked state files (a one-line error on
stderr naming the option or the file; see :func:`_fail_for`), 1 for a failed run and anything unexpected.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from avro_registry_sink.cli_options import (
    DdlOpt,
    RegistryOpt,
    StateDirOpt,
    TiCDCArgs,
    build_router,
    fail,
    option_groups,
    read_tables,
)
from avro_registry_sink.errors import AvroSinkError, ConfigError, RegistryFileError, RegistryUnavailable, StateError
from avro_registry_sink.history import commands as history_commands
from avro_registry_sink.settings.config import SinkConfig, SinkKind

# Each command imports the modules it runs inside its function, for start-up: `--help`, a bad option and
# the light commands (schemas, check, status) answer without loading Spark, the Kafka clients or the registry
# server (at the top, every command would pay for all of them).

#: What an option's value looks like in ``--help`` (typer would show its Python type: ``<str>``, ``<bool>`` ...).
_METAVARS = {
    "source": "DIR|URI", "sink_uri": "URI", "config": "FILE", "ddl": "FILE", "events": "FILE", "registry": "URL",
    "tables": "FILE", "csv": "KEY=VALUE", "checkpoint": "DIR|URI", "state_dir": "DIR", "topic_rule": "EXPRESSION",
    "enable_tidb_extension": "true|false", "avro_decimal_handling_mode": "precise|string",
    "avro_bigint_unsigned_handling_mode": "long|string", "progress": "auto|rich|json|none",
    "producer": "auto|spark|confluent", "trigger_interval": "INTERVAL", "max_bytes_per_trigger": "SIZE",
    "max_files_per_trigger": "N", "max_offsets_per_trigger": "N", "max_bad_rows": "N|N%",
    "on_missing_file": "report|fail", "output": "table|json", "directory": "DIR", "rows": "N", "seed": "N",
    "out": "DIR", "stores": "s3,azure,...", "host": "HOST", "port": "PORT", "data": "FILE", "users_file": "FILE",
    "user": "NAME:PASSWORD", "tls_cert": "FILE", "tls_key": "FILE", "tls_client_ca": "FILE",
    "max_request_bytes": "BYTES", "max_schema_depth": "N",
}


def _tidy_params(params: list[Any]) -> list[Any]:
    """Options shown as users write them: a metavar saying what the value looks like (none for a flag)."""
    for param in params:
        if getattr(param, "_tidied", False) or not isinstance(param, typer.core.TyperOption):
            continue
        if param.metavar is None:
            param.metavar = "" if param.is_flag else _METAVARS.get(param.name or "", (param.name or "").upper())
        setattr(param, "_tidied", True)  # noqa: B010 - a marker of ours on click's object (no such attribute declared)
    return params


# ``--help`` is click's plain layout, not typer's rich panels: rich's table of options shrinks the option-name
# column to fit the help text at 80 columns (``--registry,--sc…``), while click's writes an option name whole,
# on a line of its own when it is long, and wraps only the help text. Text is shown as written, too (rich took
# ``[sink]`` and ``[spark-submit options]`` for markup).
class _Command(typer.core.TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rich_markup_mode = None

    def get_params(self, ctx: Any) -> list[Any]:
        return _tidy_params(super().get_params(ctx))


class _Group(typer.core.TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rich_markup_mode = None

    def get_params(self, ctx: Any) -> list[Any]:
        return _tidy_params(super().get_params(ctx))

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command with its whole first sentence, wrapped (click cuts it to one line with "...")."""
        rows = [(name, command.get_short_help_str(limit=1000)) for name in self.list_commands(ctx)
                if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    name="avro-registry-sink",
    help="Turn MySQL/TiDB change events into Confluent-framed flat Avro, exactly as TiCDC's avro protocol.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_Group,
)
registry_app = typer.Typer(help="The embedded Confluent-compatible schema registry.", no_args_is_help=True, cls=_Group)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"avro-registry-sink {version('avro-registry-sink')}")
        except PackageNotFoundError:  # running from a source tree that was never installed
            typer.echo("avro-registry-sink (not installed)")
        raise typer.Exit(0)


@app.callback()
def _main(
    show_version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                               help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show what Spark's JVM prints: Ivy's package "
                                          "resolution, Spark's banner and its log (hidden by default).")] = False,
) -> None:
    """Turn MySQL/TiDB change events into Confluent-framed flat Avro, exactly as TiCDC's avro protocol."""
    if verbose:
        import os

        from avro_registry_sink.spark.runtime.jvm_output import VERBOSE_ENV

        os.environ[VERBOSE_ENV] = "1"

app.add_typer(registry_app, name="registry")


def _fail_for(exc: AvroSinkError, code: int) -> typer.Exit:
    """``fail`` for an error of the library: ``code``, except 2 for damaged, unreadable or locked state (a
    :class:`StateError` names the file and what to do; rerunning alone would not help)."""
    return fail(str(exc), code=2 if isinstance(exc, StateError) else code)


def _check_registry_file(config) -> None:
    """Open the embedded registry's SQLite file once, if the configuration has one: a damaged, unreadable or
    locked file (waited for at most ``AVRO_SINK_REGISTRY_LOCK_TIMEOUT``) raises :class:`RegistryFileError`."""
    if config.registry.is_embedded and config.registry.embedded_data:
        from avro_registry_sink.registry.embedded import RegistryStore

        RegistryStore.open(config.registry.embedded_data).close()


def _check_state(options, *, replay: bool = False) -> None:
    """Damaged state found before Spark starts (exit 2): the checkpoint files a run (or a replay) reads, then the
    embedded registry's SQLite file."""
    from avro_registry_sink.spark.driver.checkpoint_files import check_checkpoint_files

    if replay:  # a replay reads the dead letters and the changelog's tables; Spark's logs are the run's
        check_checkpoint_files(options.checkpoint_uri, spark=False, side_files=("job.json", "tables"))
        if options.checkpoint_uri.is_local:
            from pathlib import Path

            from avro_registry_sink.spark.audit.replay import pending_records

            pending_records(Path(options.checkpoint_uri.path))  # a damaged dead-letter file: CheckpointError
    else:
        check_checkpoint_files(options.checkpoint_uri)
    _check_registry_file(options.sink)


def _registry_setting(flag: str | None, ticdc: TiCDCArgs) -> str:
    """Where the registry URL came from, for a message that names the setting to fix."""
    if flag:
        return "--registry"
    if ticdc.sink_uri and "schema-registry=" in ticdc.sink_uri:
        return "schema-registry= in --sink-uri"
    if ticdc.config is not None:
        return f"the registry of --config {ticdc.config}"
    return "AVRO_SINK_SCHEMA_REGISTRY"


def _probe_registry(cfg: SinkConfig, flag: str | None, ticdc: TiCDCArgs) -> None:
    """The registry answers (GET /subjects, seconds), or exit 1 with one line naming the setting."""
    from avro_registry_sink.preflight import PreflightError, probe_registry

    try:
        probe_registry(cfg.registry, setting=_registry_setting(flag, ticdc))
    except PreflightError as exc:
        raise fail(str(exc), code=1) from None


def _probe_job(options, job: _JobArgs, *, topics: bool = False) -> None:
    """What a run or replay reaches besides its stores (probed with the options): the registry, then the Kafka
    clusters of the sink and the source; exit 1 with one line naming the setting. ``topics``: a Kafka source's
    topics must exist (exit 2 naming the missing ones and the close existing ones)."""
    from avro_registry_sink.preflight import MissingTopics, PreflightError, check_topics, probe_kafka

    _probe_registry(options.sink, job.registry, job)
    try:
        if options.sink.scheme == SinkKind.KAFKA:
            probe_kafka(options.sink.brokers, options.sink.kafka, setting="--sink-uri")
        if options.source.is_kafka:
            metadata = probe_kafka(options.source.brokers, options.source.kafka, setting="--source")
            if topics:
                check_topics(list(metadata.topics), options.source.topics,
                             brokers=",".join(options.source.brokers))
    except MissingTopics as exc:
        raise fail(str(exc)) from None
    except PreflightError as exc:
        raise fail(str(exc), code=1) from None


def derive_tables(ddl: Path, config: SinkConfig, topic_rule: str | None):
    """Every table of a DDL file that ``[filter] rules`` admit, with its route and derived schemas (column
    selectors applied), in file order."""
    from avro_registry_sink.routing.selection import TableSelection
    from avro_registry_sink.schema.builder import derive_schemas

    router = build_router(config, topic_rule)
    selection = TableSelection.from_config(config)
    for table in read_tables(ddl):
        if not selection.admits(table.schema_name, table.table):
            continue
        route = router.route(table.schema_name, table.table)
        selected = selection.apply(table, route.partition_columns)
        yield selected, route, derive_schemas(selected, config.encoding)


@app.command()
@option_groups
def schemas(
    ddl: DdlOpt,
    ticdc: TiCDCArgs,
) -> None:
    """Print the key and value Avro schemas TiCDC would register for each table of a DDL file (JSON)."""
    try:
        cfg = ticdc.sink_config()
        out = []
        for table, route, derived in derive_tables(ddl, cfg, ticdc.topic_rule):
            out.append(
                {
                    "schema": table.schema_name,
                    "table": table.table,
                    "topic": route.topic,
                    "key_subject": route.key_subject,
                    "value_subject": route.value_subject,
                    "key_schema": derived.key_schema,
                    "value_schema": derived.value_schema,
                }
            )
    except AvroSinkError as exc:
        raise fail(str(exc)) from None
    typer.echo(json.dumps({"tables": out}, indent=2, ensure_ascii=False))


def _load_event_values(values: Any, table, line_no: int) -> dict[str, Any]:
    import base64
    import binascii

    if not isinstance(values, dict):
        raise ValueError(f"'values' must be an object of column -> value, not {type(values).__name__}")
    out = dict(values)
    for col in table.columns:
        for name in (n for n in values if n.lower() == col.name.lower()):
            if col.binary and isinstance(values[name], str):
                try:
                    out[name] = base64.b64decode(values[name], validate=True)
                except (binascii.Error, ValueError):
                    raise ValueError(
                        f"column {col.name!r} is binary and needs base64 text (as in TiCDC's CSV output), "
                        f"got {values[name][:40]!r}"
                    ) from None
    return out


@app.command()
@option_groups
def encode(
    ddl: DdlOpt,
    events: Annotated[Path, typer.Option("--events", help="JSON Lines: {schema, table, op, commit_ts, values}.")],
    ticdc: TiCDCArgs,
    registry: RegistryOpt = None,
) -> None:
    """Encode change events to Confluent-framed Avro, registering schemas as needed; one JSON line per event."""
    import pyarrow as pa

    from avro_registry_sink.changes import dump_image
    from avro_registry_sink.manager import SchemaManager
    from avro_registry_sink.model import CHANGE_COLUMNS, CHANGE_SCHEMA, Op
    from avro_registry_sink.registry.connect import connect
    from avro_registry_sink.routing.selection import TableSelection
    from avro_registry_sink.spark.stages.plan import StagePlan
    from avro_registry_sink.spark.stages.stage import encode_change_batch

    try:
        cfg = ticdc.sink_config(registry)
        router = build_router(cfg, ticdc.topic_rule)
        selection = TableSelection.from_config(cfg)
        tables = {(t.schema_name.lower(), t.table.lower()): t for t in read_tables(ddl)}
        _check_registry_file(cfg)
        try:
            lines = events.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise fail(f"cannot read events file {str(events)!r}: {exc.strerror}") from None
    except AvroSinkError as exc:
        raise fail(str(exc)) from None
    _probe_registry(cfg, registry, ticdc)

    # Each line becomes a change row (or an error); all rows are then encoded by the job's encode path.
    errors: dict[int, str] = {}
    rows: list[tuple[Any, ...]] = []
    line_of: list[int] = []
    plans: dict[tuple[str, str, int], Any] = {}
    filtered: dict[str, int] = {}
    unavailable = False
    with connect(cfg.registry) as client:
        manager = SchemaManager(client, router, cfg.encoding, unavailable_budget=cfg.registry.unavailable_budget,
                                selection=selection)
        for line_no, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
                if not isinstance(event, dict):
                    raise ValueError("each line must be a JSON object")
                missing = [k for k in ("schema", "table", "op", "values") if k not in event]
                if missing:
                    raise ValueError("missing " + ", ".join(repr(m) for m in missing))
                if not selection.admits(str(event["schema"]), str(event["table"])):
                    name = f"{event['schema']}.{event['table']}"
                    filtered[name] = filtered.get(name, 0) + 1
                    continue
                table = tables.get((str(event["schema"]).lower(), str(event["table"]).lower()))
                if table is None:
                    known = ", ".join(f"{s}.{t}" for s, t in sorted(tables)) or "none"
                    raise ValueError(f"table {event['schema']}.{event['table']} is not in {ddl}; tables: {known}")
                op = Op.parse(str(event["op"]))
                commit_ts = int(event.get("commit_ts") or 0)
                values = dump_image(_load_event_values(event["values"], table, line_no))
                plan = manager.plan(table)
            except (AvroSinkError, ValueError, TypeError) as exc:
                errors[line_no] = " ".join(str(exc).split())
                if isinstance(exc, RegistryUnavailable):
                    unavailable = True
                    break  # the registry is gone: every remaining event would fail the same way
                continue
            plans[plan.key] = StagePlan(encoding=plan.encoding, topic=plan.route.topic,
                                        partitions=cfg.partition_num, route=plan.route)
            before, after = (values, None) if op is Op.DELETE else (None, values)
            rows.append((table.schema_name, table.table, plan.key[2], op.value, commit_ts, before, after,
                         f"line {line_no}"))
            line_of.append(line_no)
    out: dict[int, str] = {}
    if rows:
        batch = pa.RecordBatch.from_pylist([dict(zip(CHANGE_COLUMNS, r, strict=True)) for r in rows], schema=CHANGE_SCHEMA)
        encoded = encode_change_batch(batch, plans, isolate=True).to_pylist()
        for line_no, row, record in zip(line_of, rows, encoded, strict=True):
            if record["error"]:
                errors[line_no] = " ".join(json.loads(record["error"])["message"].split())
                continue
            encoding = plans[(row[0], row[1], row[2])].encoding
            out[line_no] = json.dumps({
                "topic": record["topic"],
                "partition": record["partition"],
                "key": record["key"].hex() if record["key"] is not None else None,
                "value": record["value"].hex() if record["value"] is not None else None,
                "key_schema_id": encoding.key_schema_id,
                "value_schema_id": encoding.value_schema_id,
            })
    for line_no in sorted(out):
        typer.echo(out[line_no])
    for line_no in sorted(errors):
        typer.echo(f"error: line {line_no}: {errors[line_no]}", err=True)
    if filtered:
        typer.echo("filtered: " + ", ".join(f"{n} events of {t}" for t, n in sorted(filtered.items()))
                   + " left out by [filter] rules", err=True)
    if errors:
        raise typer.Exit(1 if unavailable else 2)


@app.command()
@option_groups
def check(
    ddl: DdlOpt,
    registry: Annotated[str, typer.Option("--registry", "--schema-registry", help="Schema registry URL(s) to ask.")],
    ticdc: TiCDCArgs,
    output: Annotated[str, typer.Option("--output", help="table|json")] = "table",
) -> None:
    """Pre-flight: would the schemas of this DDL be accepted by the registry? Registers nothing.

    Exit status 0 when every subject is compatible (or new), 1 when any is incompatible, 2 for bad input.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from avro_registry_sink.registry.client import RegistryClient

    if output not in ("table", "json"):
        raise fail(f"Invalid value {output!r} for option '--output': valid values are table or json.")
    try:
        cfg = ticdc.sink_config(registry)
        derived_tables = list(derive_tables(ddl, cfg, ticdc.topic_rule))  # every option and table first
    except AvroSinkError as exc:
        raise fail(str(exc)) from None
    _probe_registry(cfg, registry, ticdc)
    try:
        results = []
        statements = _alter_statements(ddl)
        with RegistryClient(cfg.registry) as client:
            for table, route, derived in derived_tables:
                for subject, text in ((route.key_subject, derived.key_json), (route.value_subject, derived.value_json)):
                    if text is None:
                        continue
                    result = _check_subject(client, f"{table.schema_name}.{table.table}", subject, text)
                    if result["status"] == "incompatible":
                        result["policies"] = _policies(client, subject, text, statements, table.table,
                                                       is_key=subject == route.key_subject, reasons=result["messages"])
                    elif result["status"] == "compatible":  # the level accepts it, pinned consumers may not
                        from avro_registry_sink.manager import new_major_reasons

                        why = new_major_reasons(client, subject, text, statements, table=table.table,
                                                is_key=subject == route.key_subject)
                        if why:
                            policies = _policies(client, subject, text, statements, table.table,
                                                 is_key=subject == route.key_subject, reasons=[])
                            policies["stop"] = ["registered as a minor version (the level accepts it), which breaks "
                                                f"consumers pinned to a major: {why}"]
                            policies["new-major"].insert(0, f"a new major although the level accepts it: {why}")
                            result["policies"] = policies
                    results.append(result)
    except RegistryUnavailable as exc:  # the question could not be asked: not a bad option
        raise fail(str(exc), code=1) from None
    except AvroSinkError as exc:
        raise fail(str(exc)) from None
    if output == "json":
        typer.echo(json.dumps({"subjects": results}, indent=2))
    else:
        grid = Table(title="Schema registry pre-flight check")
        for name in ("table", "subject", "status", "details"):
            grid.add_column(name, overflow="fold")
        for r in results:
            style = {"compatible": "green", "new subject": "cyan", "unchanged": "green"}.get(r["status"], "red")
            details = "; ".join(r["messages"])
            for policy, lines in r.get("policies", {}).items():
                details += f"\n--on-incompatible {policy}: " + "\n  ".join(lines)
            grid.add_row(r["table"], r["subject"], f"[{style}]{r['status']}[/{style}]", escape(details))
        Console(width=200).print(grid, highlight=False, markup=True)
    if any(r["status"] == "incompatible" for r in results):
        raise typer.Exit(1)


def _alter_statements(ddl: Path) -> list[str]:
    """The ALTER TABLE statements of a DDL file, in order: where ``check`` reads renames and re-added columns."""
    from avro_registry_sink.tabledef.lexer import split_statements

    try:
        return [stmt.source for stmt in split_statements(ddl.read_text(encoding="utf-8"))
                if stmt.source.lstrip()[:5].upper() == "ALTER"]
    except (OSError, AvroSinkError, ValueError):
        return []


def _policies(client, subject: str, schema_text: str, statements: list[str], table: str, *, is_key: bool,
              reasons: list[str]) -> dict[str, list[str]]:
    """What each ``--on-incompatible`` policy would do with an incompatible schema, and the rules of new-major."""
    from avro_registry_sink.errors import RegistryError
    from avro_registry_sink.manager import MAJOR_VERSION
    from avro_registry_sink.schema.migration import plan_migration, rule_set_for
    from avro_registry_sink.tabledef.ddl import column_lineage

    stop = ["the job stops at the first batch holding this table version (exit 1, nothing of the batch written), "
            "naming these reasons; the subject is left as it is"]
    try:
        latest = client.get_latest(subject)
        contracts = client.data_contracts_unsupported()
    except RegistryError as exc:
        return {"stop": stop, "new-major": [f"cannot tell: {exc.message}"]}
    if contracts:
        return {"stop": stop, "new-major": [f"refused before any batch: the registry keeps no data contracts "
                                            f"({contracts})"]}
    try:
        old_major = max(1, int(latest.properties.get(MAJOR_VERSION, "1")))
    except ValueError:
        old_major = 1
    plan = plan_migration(latest.schema, schema_text, column_lineage(statements, table=table), is_key=is_key)
    rules = rule_set_for(plan, old_major, old_major + 1)["migrationRules"]
    lines = [f"registered in {subject!r} as major version {old_major + 1} (metadata {MAJOR_VERSION}="
             f"{old_major + 1}; compatibilityGroup set to {MAJOR_VERSION} if unset), against version {latest.version} "
             f"(major {old_major}); the job goes on with the new schema id",
             f"migration rules: {', '.join(r['name'] for r in rules) or 'none'}"]
    return {"stop": stop, "new-major": lines + plan.describe(old_major, old_major + 1)}


def _version_by_text(client, subject: str, schema_text: str):
    """The live version of ``subject`` whose schema is ``schema_text`` (canonically), whatever its metadata."""
    from avro_registry_sink.errors import RegistryError
    from avro_registry_sink.registry.embedded.canonical import canonical_schema

    try:
        wanted = canonical_schema(schema_text)
        for number in reversed(client.get_versions(subject)):
            version = client.get_version(subject, number)
            try:
                if canonical_schema(version.schema) == wanted:
                    return version
            except ValueError:
                continue
    except (RegistryError, ValueError):
        return None
    return None


def _check_subject(client, table: str, subject: str, schema_text: str) -> dict[str, Any]:
    from avro_registry_sink.errors import SchemaNotFound, SubjectNotFound

    try:
        current = client.lookup(subject, schema_text)
        return {"table": table, "subject": subject, "status": "unchanged", "messages": [f"already version {current.version}, id {current.id}"]}
    except SubjectNotFound:
        return {"table": table, "subject": subject, "status": "new subject", "messages": ["would be registered as version 1"]}
    except SchemaNotFound:  # a version of another major (other metadata) is not found by its text alone
        found = _version_by_text(client, subject, schema_text)
        if found is not None:
            major = found.properties.get("major_version")
            return {"table": table, "subject": subject, "status": "unchanged",
                    "messages": [f"already version {found.version}, id {found.id}"
                                 + (f" (major version {major})" if major else "")]}
    result = client.test_compatibility_all(subject, schema_text, verbose=True)
    status = "compatible" if result.is_compatible else "incompatible"
    messages = list(result.messages) or (["would be registered as a new version"] if result.is_compatible else [])
    if not result.is_compatible and not messages:
        from avro_registry_sink.registry.explain import explain_incompatibility

        local = explain_incompatibility(client, subject, schema_text)
        messages = ["the registry gave no reasons; Apache Avro's checker says: " + "; ".join(local)] if local else []
    return {"table": table, "subject": subject, "status": status, "messages": messages}


@registry_app.command("serve")
def registry_serve(
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default; see the warning when exposing it).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8081,
    data: Annotated[Path | None, typer.Option(help="SQLite file for durable storage; omit for in-memory.")] = None,
    users_file: Annotated[Path | None, typer.Option("--users-file", help="HTTP basic auth: a file of NAME:PASSWORD lines (also AVRO_SINK_REGISTRY_USERS='name:pw,...').")] = None,
    user: Annotated[list[str] | None, typer.Option("--user", help="HTTP basic auth user NAME:PASSWORD (repeatable; visible in the process list, prefer --users-file).")] = None,
    tls_cert: Annotated[Path | None, typer.Option("--tls-cert", help="Serve HTTPS with this PEM certificate (chain); needs --tls-key.")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="PEM private key of --tls-cert (password in AVRO_SINK_REGISTRY_TLS_KEY_PASSWORD if encrypted).")] = None,
    tls_client_ca: Annotated[Path | None, typer.Option("--tls-client-ca", help="Require client certificates signed by this PEM CA (mutual TLS).")] = None,
    max_request_bytes: Annotated[int | None, typer.Option("--max-request-bytes", help="Largest request body accepted (default 16 MiB); larger ones get 413.")] = None,
    max_schema_depth: Annotated[int | None, typer.Option("--max-schema-depth", help="Deepest JSON nesting of a schema (default 100, at most 300); deeper ones get 422.")] = None,
    lock_timeout: Annotated[float | None, typer.Option("--lock-timeout", help="Seconds to wait when another process holds the --data file's lock (default 10, or AVRO_SINK_REGISTRY_LOCK_TIMEOUT).")] = None,
) -> None:
    """Run the embedded Confluent-compatible schema registry over HTTP(S)."""
    import os

    from avro_registry_sink.registry.embedded import (
        DEFAULT_MAX_REQUEST_BYTES,
        DEFAULT_MAX_SCHEMA_DEPTH,
        BasicAuthUsers,
        TlsFiles,
        exposure_warning,
        serve,
    )
    from avro_registry_sink.registry.embedded.guard import checked_request_limit
    from avro_registry_sink.registry.embedded.store import MAX_SCHEMA_DEPTH_LIMIT

    try:
        passwords: dict[str, str] = {}
        if users_file is not None:
            passwords.update(BasicAuthUsers.read_file(users_file))
        env_users = os.environ.get("AVRO_SINK_REGISTRY_USERS", "").strip()
        if env_users:
            entries = [e for e in env_users.split(",") if e.strip()]
            passwords.update(BasicAuthUsers.parse_entries(entries, source="AVRO_SINK_REGISTRY_USERS"))
        if user:
            passwords.update(BasicAuthUsers.parse_entries(user, source="--user"))
        users = BasicAuthUsers(passwords) if passwords else None
        tls = None
        if tls_cert is not None or tls_key is not None:
            if tls_cert is None or tls_key is None:
                missing = "--tls-key" if tls_key is None else "--tls-cert"
                raise fail(f"Missing option '{missing}': HTTPS needs both --tls-cert and --tls-key.")
            tls = TlsFiles(
                str(tls_cert),
                str(tls_key),
                client_ca=str(tls_client_ca) if tls_client_ca is not None else None,
                key_password=os.environ.get("AVRO_SINK_REGISTRY_TLS_KEY_PASSWORD") or None,
            )
            tls.check()
        elif tls_client_ca is not None:
            raise fail("Option '--tls-client-ca' needs --tls-cert and --tls-key (client certificates need HTTPS).")
        limit = checked_request_limit(DEFAULT_MAX_REQUEST_BYTES if max_request_bytes is None else max_request_bytes)
        depth = DEFAULT_MAX_SCHEMA_DEPTH if max_schema_depth is None else max_schema_depth
        if not 1 <= depth <= MAX_SCHEMA_DEPTH_LIMIT:
            raise fail(f"Invalid value {depth} for option '--max-schema-depth': an integer in 1..{MAX_SCHEMA_DEPTH_LIMIT}.")
    except AvroSinkError as exc:
        raise fail(str(exc)) from None
    warning = exposure_warning(host, users, tls)
    if warning:
        typer.echo(f"warning: {warning}", err=True)
    try:
        serve(
            host=host,
            port=port,
            data=str(data) if data is not None else None,
            users=users,
            tls=tls,
            max_request_bytes=limit,
            max_schema_depth=depth,
            lock_timeout=lock_timeout,
            on_ready=lambda url: typer.echo(f"Schema registry ready at {url} (Ctrl-C to stop)."),
        )
    except RegistryFileError as exc:
        raise fail(f"{exc} (option '--data')") from None
    except AvroSinkError as exc:
        raise fail(str(exc)) from None


# --------------------------------------------------------------------------------------------------
# run / demo: the streaming job (avro_registry_sink.spark.driver.job)

SourceOpt = Annotated[str, typer.Option("--source", help="A TiCDC storage sink: a directory, storage:///dir, or TiCDC's storage URI (s3://bucket/prefix?endpoint=...&access-key=...&secret-access-key=..., gcs://, azure://) or a Hadoop URI (s3a://, gs://, abfss://, hdfs://); canal-json+kafka://host:port/topic, canal-json+file:///dir (or +s3://...), debezium-json+kafka://..., debezium-json+file:///dir.")]
CheckpointOpt = Annotated[str | None, typer.Option("--checkpoint", help="Checkpoint directory or storage URI (s3://bucket/prefix?endpoint=..., hdfs://...); default: under the state dir, one per source and sink.")]
TablesOpt = Annotated[Path | None, typer.Option("--tables", help="CREATE TABLE statements: ENUM/SET members and unique keys that storage schema files lack; definitions of changelog tables.")]
CsvOpt = Annotated[list[str] | None, typer.Option("--csv", help="A TiCDC sink.csv setting of the storage sink, KEY=VALUE (include-commit-ts=true, output-old-value=true, delimiter=|, quote=, ...); repeatable.")]
ProgressOpt = Annotated[str, typer.Option("--progress", help="auto|rich|json|none: live display on a terminal, JSON log lines otherwise.")]
AutoRegisterOpt = Annotated[bool | None, typer.Option("--auto-register/--no-auto-register", help="Register new schemas (default), or only look up the ids of schemas registered already, failing the batch (exit 1, nothing written) on a missing one: Confluent's auto.register.schemas; also auto-register in the TOML file, AVRO_SINK_AUTO_REGISTER.")]
ProducerOpt = Annotated[str, typer.Option("--producer", help="Kafka sink writer: auto|spark|confluent.")]
OnIncompatibleOpt = Annotated[str | None, typer.Option("--on-incompatible", help="stop|new-major: a schema change the registry's compatibility level refuses stops the job (default), or is registered as the subject's next major version with JSONata migration rules for consumers pinned to a major (needs a registry with data contracts). Also the on-incompatible TOML key and AVRO_SINK_ON_INCOMPATIBLE.")]
DeliveryOpt = Annotated[str | None, typer.Option("--delivery", help="at-least-once (default) | exactly-once: Kafka transactions with commit tokens, so a read_committed consumer sees each source row once whatever fails (also the TOML key delivery, AVRO_SINK_DELIVERY).")]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _JobArgs(TiCDCArgs):
    """The options ``run`` and ``replay`` share: the same options find the same checkpoint."""

    source: SourceOpt
    checkpoint: CheckpointOpt = None
    registry: RegistryOpt = None
    tables: TablesOpt = None
    csv: CsvOpt = None
    producer: ProducerOpt = "auto"
    delivery: DeliveryOpt = None
    progress: ProgressOpt = "auto"
    state_dir: StateDirOpt = None
    auto_register: AutoRegisterOpt = None
    on_incompatible: OnIncompatibleOpt = None

    def job_options(self, **job: Any):
        """The job's ``JobOptions`` (``job``: the command's own fields of it); the source is checked (a bad
        URI, missing credentials, an unreachable store) before Spark starts."""
        from avro_registry_sink.redact import remember
        from avro_registry_sink.settings.config import default_state_dir, settings_from_mapping
        from avro_registry_sink.spark.driver.job_options import JobOptions
        from avro_registry_sink.spark.sources.sources import parse_source

        state = self.state_dir or default_state_dir()
        cfg = self.sink_config(self.registry)
        if self.on_incompatible is not None:  # the flag wins over the sink URI, environment and TOML file
            from avro_registry_sink.settings.config import settings_from_mapping

            cfg = settings_from_mapping({"on-incompatible": self.on_incompatible}, cfg)
        if self.delivery is not None:  # the flag wins over the sink URI, AVRO_SINK_DELIVERY and the TOML file
            cfg = settings_from_mapping({"delivery": self.delivery}, cfg)
        if cfg.scheme == SinkKind.FILE and not cfg.path:
            cfg = cfg.model_copy(update={"path": str(state / "output")})
        if self.auto_register is not None:
            cfg = cfg.model_copy(update={"registry": cfg.registry.model_copy(
                update={"auto_register": self.auto_register})})
        if cfg.registry.is_embedded and cfg.registry.embedded_data is None:
            state.mkdir(parents=True, exist_ok=True)
            cfg = cfg.model_copy(update={"registry": cfg.registry.model_copy(
                update={"embedded_data": str(state / "registry.db")})})
        spec = parse_source(self.source, cfg)
        remember(spec.kafka)
        spec.check()
        return JobOptions(
            source=spec,
            checkpoint=self.checkpoint or _checkpoint_for(state, spec.describe(), self.sink_uri or cfg.path or ""),
            sink=cfg,
            topic_rule=self.topic_rule,
            csv_options=_csv_settings(self.csv, self.config),
            tables=tuple(read_tables(self.tables)) if self.tables is not None else (),
            kafka_producer=self.producer,
            **job,
        )


def _bad_row_budget(text: str | None) -> dict[str, Any]:
    """``--max-bad-rows``: ``100`` (rows) or ``5%`` (of the batch's rows) -> JobOptions fields."""
    if text is None:
        return {}
    value = text.strip()
    try:
        if value.endswith("%"):
            ratio = float(value[:-1]) / 100
            if not 0 <= ratio <= 1:
                raise ValueError
            return {"max_bad_ratio": ratio}
        count = int(value)
        if count < 0:
            raise ValueError
        return {"max_bad_rows": count}
    except ValueError:
        raise ConfigError(f"Invalid value {text!r} for option '--max-bad-rows': expected a row count (100) or a "
                          "percentage of the batch (5%).", option="max-bad-rows", value=text) from None


def _csv_settings(pairs: list[str] | None, config_file: Path | None):
    """CsvOptions from the settings file's [sink.csv] (or [csv]) table, overridden by --csv KEY=VALUE."""
    import difflib

    from pydantic import ValidationError

    from avro_registry_sink.formats.csv import CsvOptions
    from avro_registry_sink.settings.config import load_toml, parse_bool

    values: dict[str, Any] = {}
    if config_file is not None:
        data = load_toml(config_file)
        table = data.get("sink")
        sink: dict[str, Any] = table if isinstance(table, dict) else {}
        values.update(sink.get("csv") or data.get("csv") or {})
        if "terminator" in sink:  # TiCDC keeps the record separator in [sink], beside [sink.csv]
            values.setdefault("terminator", sink["terminator"])
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep:
            raise fail(f"Invalid value {pair!r} for option '--csv': expected KEY=VALUE, e.g. include-commit-ts=true.")
        values[name.strip()] = value
    if not values:
        return None
    names = [field.alias or name for name, field in CsvOptions.model_fields.items()]
    for name in values:
        if name not in names and name not in CsvOptions.model_fields:
            near = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise fail(f"Unknown CSV setting {name!r} (--csv or [sink.csv]): {hint}valid settings are "
                       + ", ".join(names) + ".")
    for name in ("include-commit-ts", "output-old-value", "output-handle-key", "output-field-header"):
        if isinstance(values.get(name), str):
            values[name] = parse_bool(name, values[name])
    if isinstance(values.get("terminator"), str):
        values["terminator"] = values["terminator"].encode().decode("unicode_escape")
    try:
        return CsvOptions(**values)
    except (ValidationError, TypeError) as exc:
        detail = exc.errors()[0] if isinstance(exc, ValidationError) else None
        if detail is not None:
            where = ".".join(str(p) for p in detail.get("loc", ()))
            raise fail(f"Invalid CSV setting {where!r} (--csv or [sink.csv]): {detail.get('msg')}; "
                       f"got {detail.get('input')!r}.") from None
        raise fail(f"Invalid CSV settings {values!r}: {exc}") from None


def _check_tables(config: SinkConfig, topic_rule: str | None, tables) -> None:
    """Topic rules, dispatchers and column selectors against the --tables definitions, before Spark starts
    (the job checks tables it meets later the same way, failing that batch)."""
    from avro_registry_sink.routing.selection import TableSelection

    router = build_router(config, topic_rule)
    selection = TableSelection.from_config(config)
    for table in tables:
        if selection.admits(table.schema_name, table.table):
            selection.apply(table, router.route(table.schema_name, table.table).partition_columns)


def _check_locations(spec, checkpoint: str | None, cfg: SinkConfig) -> set[str]:
    """Parse and probe the checkpoint and file-sink locations; the stores the run touches (for Spark's connectors)."""
    from avro_registry_sink.storage_fs import StoreFS, parse_storage_uri

    stores = {spec.location.store} if spec.location is not None else set()
    for option, text in (("checkpoint", checkpoint), ("sink-uri", cfg.path if cfg.scheme == SinkKind.FILE else None)):
        if not text:
            continue
        uri = parse_storage_uri(str(text), option=option)
        if not uri.is_local:
            StoreFS(uri, option=option).probe()
        stores.add(uri.store)
    return stores


def _job_session(options, stores: set[str]):
    """The job's SparkSession (Kafka connector when a side is Kafka, the Hadoop connectors of ``stores``);
    exit 2 when the session lacks a store's connector (spark-submit without --packages)."""
    from avro_registry_sink.spark.driver.job import job_session
    from avro_registry_sink.spark.runtime.session import (
        hadoop_version,
        master_of,
        missing_store_classes,
        store_packages,
    )

    # Spark's Kafka connector: for a Kafka source, and for Spark's Kafka sink or the JVM slice writer of exactly once
    spark_sink = options.sink.scheme == SinkKind.KAFKA and options.kafka_producer != "confluent"
    spark = job_session(kafka=options.source.is_kafka or spark_sink, stores=stores)
    from avro_registry_sink.spark.runtime.submit_env import worker_python_problem

    problem = worker_python_problem(master_of(spark), spark.sparkContext.pythonExec)
    if problem:  # else every batch fails at its first Python stage, blamed on whatever it was writing to
        raise fail(f"Spark cannot start its Python workers: {problem}")
    missing = missing_store_classes(spark, stores)
    if missing:
        packages = ",".join(store_packages(missing, hadoop_version(spark))) or "the store's Hadoop connector"
        raise fail(f"Spark has no Hadoop connector for {', '.join(missing)} storage URIs: submit with "
                   f"--packages {packages} (this Spark's Hadoop version).")
    return spark


def _size(option: str, text: str | None) -> int | None:
    from avro_registry_sink.spark.runtime.session import memory_bytes

    if text is None:
        return None
    try:
        return memory_bytes(text)
    except ValueError as exc:
        raise ValueError(f"{exc} (option '{option}')") from None


def _checkpoint_for(state: Path, source: str, sink: str) -> Path:
    import hashlib
    import re

    slug = re.sub(r"[^A-Za-z0-9]+", "-", source.split("://")[-1]).strip("-")[-40:] or "source"
    digest = hashlib.sha256(f"{source}\n{sink}".encode()).hexdigest()[:10]
    return state / "checkpoints" / f"{slug}-{digest}"


def _check_source_data(spec, *, wait: bool) -> None:
    """Refuse a file source that holds nothing to read (a storage source that is no TiCDC tree, or is one's
    parent or child directory; an empty changelog directory), unless ``wait`` (``--wait-for-data``)."""
    if spec.is_kafka or spec.location is None:
        return
    if spec.is_storage:
        from avro_registry_sink.sources.tree_check import check_storage_tree

        check_storage_tree(spec.location, wait=wait)
    elif not wait and not spec.location.filesystem().list_files():
        raise ConfigError(f"--source {str(spec.location)!r} is empty: a {spec.kind} changelog directory holds files "
                          "of messages, one per line. Give --wait-for-data to start the job before they are written.",
                          option="source")


def _nothing_read(totals, source) -> str | None:
    """The summary's note when a run read no file or message at all (a silent zero otherwise)."""
    if totals.inputs or totals.rows or totals.errors:
        return None
    what = "messages" if source.is_kafka else "data files"
    return (f"nothing was read: {source.describe()} held no {what} this checkpoint had not read already "
            "(0 rows written).")


def _print_totals(result, console, nothing: str | None = None) -> None:
    from rich.table import Table

    totals = result.totals
    if nothing:
        console.print(f"[yellow]Nothing read[/yellow]: {nothing[len('nothing was read: '):]}", markup=True)
    grid = Table(title=f"{totals.rows} records in {totals.batches} batches ({result.sink})")
    for name in ("topic", "records", "tombstones"):
        grid.add_column(name, justify="right" if name != "topic" else "left")
    for topic in sorted(totals.per_topic):
        grid.add_row(topic, str(totals.per_topic[topic]), str(totals.tombstones_per_topic.get(topic, 0)))
    console.print(grid)
    for schema in totals.schemas:
        console.print(f"  registered {schema.subject} version {schema.version} (schema id {schema.schema_id})")
    for major in totals.new_majors:
        console.print(f"  [yellow]new major version[/yellow] {major['new_major']} of {major['subject']} (schema id "
                      f"{major['schema_id']}, table {major['table']} version {major['table_version']}): "
                      f"{'; '.join(major['changes'])}; migration rules: {', '.join(major['rules']) or 'none'}",
                      markup=True, highlight=False)
        for line in major["cannot_follow"]:
            console.print(f"    [red]{line}[/red]", highlight=False)
    if totals.filtered:
        console.print("Left out by [filter] rules: " + ", ".join(
            f"{table} ({n} files/messages)" for table, n in sorted(totals.filtered.items())), markup=False)
    if totals.missing_files:
        console.print(f"[yellow]{len(totals.missing_files)} data file(s) vanished before they were read[/yellow] "
                      "(rows unknown, recorded in the dead-letter files): "
                      + ", ".join(totals.missing_files[:5]) + (" ..." if len(totals.missing_files) > 5 else ""))
    _print_dead_letters(result, console)


def _check_data_contracts(cfg: SinkConfig) -> None:
    """``--on-incompatible new-major`` needs a registry that keeps data contracts: asked before Spark starts
    (the embedded registry does)."""
    from avro_registry_sink.settings.config import OnIncompatible

    if cfg.on_incompatible is not OnIncompatible.NEW_MAJOR or cfg.registry.is_embedded:
        return
    from avro_registry_sink.manager import require_data_contracts
    from avro_registry_sink.registry.client import RegistryClient

    with RegistryClient(cfg.registry) as client:
        require_data_contracts(cfg, client)


def _print_dead_letters(result, console) -> None:
    """How many rows were dead-lettered, where, and how to deliver them after a fix."""
    if not result.totals.errors:
        return
    console.print(f"[yellow]{result.totals.errors} rows dead-lettered[/yellow] (not delivered; each with its "
                  f"location and reason) in {result.checkpoint / 'dead-letter'}: "
                  + ", ".join(p.name for p in result.dead_letters)
                  + ". After fixing the cause, `avro-registry-sink replay` with the same options delivers them.")


@app.command()
@option_groups
def run(
    job: _JobArgs,
    available_now: Annotated[bool, typer.Option("--available-now/--continuous", help="Process what exists and stop, or keep running.")] = False,
    trigger_interval: Annotated[str, typer.Option("--trigger-interval", help="Micro-batch interval when continuous.")] = "10 seconds",
    max_files_per_trigger: Annotated[int | None, typer.Option("--max-files-per-trigger", min=1, help="Data files per micro-batch (default: as many as --max-bytes-per-trigger allows).")] = None,
    max_bytes_per_trigger: Annotated[str | None, typer.Option("--max-bytes-per-trigger", help="Input per micro-batch, e.g. 512m (default: an eighth of the JVM heap).")] = None,
    max_offsets_per_trigger: Annotated[int | None, typer.Option("--max-offsets-per-trigger", min=1, help="Kafka messages per micro-batch of a changelog topic (default: from the JVM heap).")] = None,
    max_bad_rows: Annotated[str | None, typer.Option("--max-bad-rows", help="Fail a batch (nothing committed) that dead-letters more rows than this: a count (100) or a share of the batch (5%).")] = None,
    on_missing_file: Annotated[str, typer.Option("--on-missing-file", help="report|fail: a storage data file that vanished before it was read is reported (progress, summary, a dead-letter record) and the batch goes on, or fails the batch.")] = "report",
    wait_for_data: Annotated[bool, typer.Option("--wait-for-data", help="Start even when --source is empty or holds no TiCDC tree yet (the changefeed has not written to it): the job waits for data to appear. Without it such a source is refused before Spark starts.")] = False,
    log_format: Annotated[str, typer.Option("--log-format", help="text|json: the --progress display or lines (text), or one JSON object a line on stderr: progress events, a line per table of each batch, the product's log records, each with its batch id.")] = "text",
    metrics_port: Annotated[int | None, typer.Option("--metrics-port", min=0, max=65535, help="Serve Prometheus metrics on this port of the driver (/metrics; 0: a free port, named on stderr). Also the metrics-port TOML key and AVRO_SINK_METRICS_PORT; off by default.")] = None,
    stop_timeout: Annotated[float | None, typer.Option("--stop-timeout", min=0, help="Seconds a stop by SIGINT (Ctrl-C) or SIGTERM waits for the running batch to finish (then committed) before abandoning it (not committed; the next run processes it again); a second signal abandons it at once. Also the stop-timeout TOML key and AVRO_SINK_STOP_TIMEOUT; default 30.")] = None,
) -> None:
    """Run the streaming job: change events from --source, Avro records to --sink-uri (files by default).

    Exit status 0 when the run ends normally (bad input lines are reported, not fatal), 1 when a batch
    fails (it is not committed; rerun to resume from the checkpoint), 2 for bad options and for a damaged,
    unreadable or locked checkpoint file or registry file (the error names the file and what to do), 130 (SIGINT)
    or 143 (SIGTERM) when a signal stopped it, after the summary (which says whether the running batch finished and
    was committed or was abandoned).
    """
    from rich.console import Console

    from avro_registry_sink.ops.progress import make_progress
    from avro_registry_sink.spark.driver.job import check_checkpoint, run_job

    try:
        options = job.job_options(
            available_now=available_now, trigger_interval=trigger_interval,
            max_files_per_trigger=max_files_per_trigger,
            max_bytes_per_trigger=_size("--max-bytes-per-trigger", max_bytes_per_trigger),
            max_offsets_per_trigger=max_offsets_per_trigger, **_bad_row_budget(max_bad_rows),
            on_missing_file=on_missing_file,
        )
        from avro_registry_sink.ops.logs import LOG_FORMATS

        if log_format not in LOG_FORMATS:
            raise ValueError(f"Invalid value {log_format!r} for option '--log-format': valid values are "
                             + " or ".join(LOG_FORMATS) + ".")
        if metrics_port is not None:  # the flag wins over AVRO_SINK_METRICS_PORT and the TOML file
            options = dataclasses.replace(options, sink=options.sink.model_copy(update={"metrics_port": metrics_port}))
        if stop_timeout is not None:  # the same for AVRO_SINK_STOP_TIMEOUT and stop-timeout
            options = dataclasses.replace(options, sink=options.sink.model_copy(update={"stop_timeout": stop_timeout}))
        stores = _check_locations(options.source, job.checkpoint, options.sink)
        _check_state(options)
        check_checkpoint(options)
        _check_tables(options.sink, job.topic_rule, options.tables)
        _check_source_data(options.source, wait=wait_for_data)
        reporter = make_progress(job.progress)
    except (AvroSinkError, ValueError) as exc:
        raise fail(str(exc)) from None
    _quiet_spark_warnings()
    _probe_job(options, job, topics=True)  # before Spark's start: a wrong port, password, CA or topic in seconds
    _warn_embedded_registry(options.sink)
    try:
        _check_data_contracts(options.sink)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except AvroSinkError as exc:
        raise fail(str(exc), code=1) from None
    spark = _session_or_stop(options, stores)
    metrics, server = _serve_metrics(options.sink.metrics_port)
    from avro_registry_sink.ops.logs import json_logging

    try:
        with json_logging() if log_format == "json" else contextlib.nullcontext(reporter) as progress:
            result = run_job(spark, options, progress=progress, metrics=metrics)
    except AvroSinkError as exc:
        raise _fail_for(exc, 1) from None
    finally:
        if server is not None:
            server.shutdown()
    nothing = None if result.stop else _nothing_read(result.totals, options.source)
    if sys.stdout.isatty():
        _print_totals(result, Console(), nothing)
        if result.stop:
            Console().print(f"[yellow]{result.stop['message']}[/yellow]", highlight=False)
    else:
        typer.echo(json.dumps({"status": "stopped" if result.stop else "ok", "checkpoint": str(result.checkpoint),
                               **result.totals.to_json(), "dead_letters": [str(p) for p in result.dead_letters],
                               **({"note": nothing} if nothing else {})}, default=str))
    if result.stop:  # 128 + the signal's number, as a shell reports a process the signal ended
        raise typer.Exit(result.stop["exit_status"])


def _session_or_stop(options, stores: set[str]):
    """The job's session; a SIGINT or SIGTERM while it starts (the JVM's start takes seconds) is held until it has
    started, then the session is stopped (no JVM left behind) and the run ends with the signal's status (130,
    143) and a summary saying that nothing was read."""
    from avro_registry_sink.spark.driver.job import STOP_EXIT_STATUS, _Stop, _stop_signals

    stop = _Stop()
    with _stop_signals(stop):
        spark = _job_session(options, stores)
    if not stop.requested:
        return spark
    with contextlib.suppress(Exception):
        spark.stop()
    status = STOP_EXIT_STATUS.get(stop.signal or "", 1)
    message = f"Stopped by {stop.signal} while Spark was starting: nothing was read, nothing committed."
    summary = {"status": "stopped", "stop": {"signal": stop.signal, "exit_status": status, "outcome": "not-started",
                                             "message": message}}
    typer.echo(message if sys.stdout.isatty() else json.dumps(summary))
    raise typer.Exit(status)


def _warn_embedded_registry(cfg: SinkConfig) -> None:
    """Say once, on stderr, that records written to Kafka carry schema ids of the registry inside this process (no
    URL), which stops with the job: how to run a registry other clients can reach. A JSON line when stderr is no
    terminal."""
    if cfg.scheme != SinkKind.KAFKA or not cfg.registry.is_embedded:
        return
    data = cfg.registry.embedded_data
    text = ("the records go to Kafka with schema ids of the embedded registry inside this process (no --registry), "
            "which stops with the job: no other client can fetch their schemas. Run a standalone registry on the "
            f"same file, `avro-registry-sink registry serve --port 8081 --data {data or 'registry.db'}` (ids kept), "
            "and give the job and the consumers --registry http://127.0.0.1:8081 (schema.registry.url).")
    typer.echo(f"warning: {text}" if sys.stderr.isatty() else
               json.dumps({"ts": round(time.time(), 3), "event": "warning", "warning": "embedded-registry",
                           "message": text, **({"registry_file": data} if data else {})}), err=True)


def _serve_metrics(port: int | None) -> tuple[Any, Any]:
    """``(JobMetrics, server)`` serving them on ``port`` (``--metrics-port``), or ``(None, None)``; the address is
    said on stderr (a JSON line when stderr is no terminal)."""
    if port is None:
        return None, None
    from avro_registry_sink.ops.metrics import JobMetrics, serve_metrics

    metrics = JobMetrics()
    try:
        server, bound = serve_metrics(metrics, port)
    except OSError as exc:
        raise fail(f"cannot serve metrics on port {port} (--metrics-port, metrics-port, AVRO_SINK_METRICS_PORT): "
                   f"{exc.strerror or exc}; choose another port (0: a free one).") from None
    url = f"http://0.0.0.0:{bound}/metrics"
    typer.echo(f"metrics: {url}" if sys.stderr.isatty() else
               json.dumps({"ts": round(time.time(), 3), "event": "metrics", "url": url, "port": bound}), err=True)
    return metrics, server


@app.command()
def status(
    checkpoint: Annotated[str, typer.Option("--checkpoint", help="The job's checkpoint directory or storage URI.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON (default: text on a terminal, JSON otherwise).")] = False,
    max_lag: Annotated[float | None, typer.Option("--max-lag", min=0, help="Seconds: a table whose newest delivered commit ts (exactly once: its resolved ts) is older makes the job 'behind' (exit 1).")] = None,
    max_backlog: Annotated[int | None, typer.Option("--max-backlog", min=0, help="A table of a storage tree with more data files, or a Kafka topic with more messages, that no committed batch took makes the job 'behind' (exit 1).")] = None,
    source: Annotated[str | None, typer.Option("--source", help="The run's --source, for the backlog: default the one the checkpoint's job.json records (give it when the source needs credentials, which job.json leaves out).")] = None,
    backlog: Annotated[bool, typer.Option("--backlog/--no-backlog", help="Measure the input backlog against the source (a listing of the storage tree, or the Kafka topics' end offsets); --no-backlog: the checkpoint alone.")] = True,
) -> None:
    """What a running or stopped job has delivered, from its checkpoint (no Spark): the last committed batch and
    its time, per table the rows, newest commit ts and lag (exactly once: the resolved ts), the input backlog (a
    storage tree's data files per table, a Kafka source's messages per topic and partition, that no committed batch
    took), dead letters pending replay, held files, the last error, the exactly-once writer ids.

    Exit status 0 healthy, 1 behind (a table's lag over --max-lag, a backlog over --max-backlog), 2 failed (the
    last run's error is newer than its last commit) or not a checkpoint.
    """
    from avro_registry_sink.ops.status import read_status

    try:
        report = read_status(checkpoint, max_lag=max_lag, max_backlog=max_backlog, source=source, backlog=backlog)
    except (AvroSinkError, ValueError) as exc:
        raise fail(str(exc)) from None
    if as_json or not sys.stdout.isatty():
        typer.echo(json.dumps(report.to_json(), default=str, ensure_ascii=False))
    else:
        _print_status(report)
    if report.exit_status:
        raise typer.Exit(report.exit_status)


def _print_status(report: Any) -> None:
    """``status`` on a terminal: one line a fact, one a table."""
    def when(ts: float | None) -> str:
        return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))

    typer.echo(f"{report.verdict}: {report.checkpoint} ({report.source})")
    for reason in report.reasons:
        typer.echo(f"  {reason}")
    typer.echo(f"last committed batch {report.last_batch} (triggered {when(report.last_batch_time)}, committed "
               f"{when(report.last_commit_time)}), {report.rows} rows delivered")
    for table, entry in report.tables.items():
        resolved = (f", resolved ts {entry['resolved_ts']} ({entry['resolved_lag_seconds']} s behind)"
                    if "resolved_ts" in entry else "")
        typer.echo(f"  {table}: {entry['rows']} rows, newest commit ts {entry['newest_commit_ts']} "
                   f"({entry['lag_seconds']} s behind){resolved}")
    backlog = report.backlog
    if backlog is not None and "unknown" in backlog:
        typer.echo(f"backlog: unknown: {backlog['unknown']}")
    elif backlog is not None and backlog.get("kind") == "storage":
        typer.echo(f"backlog: {backlog['files']} data files ({backlog['bytes']} bytes) no committed batch took")
        for table, entry in backlog["tables"].items():
            typer.echo(f"  {table}: {entry['files']} files ({entry['bytes']} bytes)")
    elif backlog is not None:
        typer.echo(f"backlog: {backlog['messages']} messages past the last committed batch")
        for topic, entry in backlog["topics"].items():
            parts = ", ".join(f"{p}: {n}" for p, n in entry.get("partitions", {}).items())
            typer.echo(f"  {topic}: " + (f"unknown: {entry['unknown']}" if "unknown" in entry else
                                         f"{entry['messages']} messages (partition {parts})"))
    typer.echo(f"dead letters: {report.dead_lettered} rows, {report.dead_letters_pending} pending replay; "
               f"held files: {len(report.held_files)}")
    if report.last_error:
        typer.echo(f"last error ({when(report.last_error.get('time'))}, batch {report.last_error.get('batch')}): "
                   f"{report.last_error.get('error_class')}: {report.last_error.get('message')}")
    if report.exactly_once:
        typer.echo(f"exactly once: query {report.exactly_once.get('query')}")


@app.command()
@option_groups
def replay(
    job: _JobArgs,
) -> None:
    """Deliver the rows a run dead-lettered, after fixing the cause (a setting, --tables, --csv ...).

    Takes the same options as 'run' (the same checkpoint: given, or derived from the same source and
    sink). Each dead-letter record is delivered at most once; rows that fail again stay dead-lettered with
    the new reason. Exit status 0 when every record was delivered, 1 when some failed again or a batch
    failed, 2 for bad options and for a damaged, unreadable or locked checkpoint file or registry file.
    """
    from avro_registry_sink.ops.progress import make_progress
    from avro_registry_sink.spark.audit.replay import replay_dead_letters
    from avro_registry_sink.spark.driver.job import check_checkpoint

    try:
        options = job.job_options()
        stores = _check_locations(options.source, job.checkpoint, options.sink)
        _check_state(options, replay=True)
        if not check_checkpoint(options):
            raise ValueError(f"No job ran with checkpoint {str(options.checkpoint)!r}: give the --checkpoint (or the "
                             "same --source, --sink-uri and --state-dir) of the run whose dead letters to replay.")
        reporter = make_progress("none" if job.progress == "auto" else job.progress)
    except (AvroSinkError, ValueError) as exc:
        raise fail(str(exc)) from None
    _quiet_spark_warnings()
    _probe_job(options, job)
    spark = _job_session(options, stores)
    try:
        result = replay_dead_letters(spark, options, progress=reporter)
    except AvroSinkError as exc:
        raise _fail_for(exc, 1) from None
    summary = {"status": "ok" if not result.failed_again else "failed_again", "replay": result.replay,
               "checkpoint": str(options.checkpoint), "pending": result.pending, "delivered": result.delivered,
               "failed_again": result.failed_again, "not_replayable": result.not_replayable,
               "rows": result.totals.rows, "per_topic": result.totals.per_topic,
               "dead_letter": str(result.dead_letter) if result.dead_letter else None}
    typer.echo(json.dumps(summary, default=str))
    if result.failed_again:
        raise typer.Exit(1)


@app.command()
@option_groups
def verify(
    job: _JobArgs,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (default: a report readable at 80 columns on a terminal, JSON otherwise).")] = False,
    sample: Annotated[int, typer.Option("--sample", min=0, help="Discrepancies shown, at most.")] = 20,
    read_topic: Annotated[list[str] | None, typer.Option("--read-topic", help="TOPIC=OTHER: read the Kafka sink's TOPIC from OTHER (a copy, a mirror); repeatable.")] = None,
    decode_all: Annotated[bool, typer.Option("--decode-all", help="Decode every delivered record with the registry's schemas (default: the records that differ from what their source rows encode to; the others decode by construction).")] = False,
) -> None:
    """Prove what a run delivered: read its sink, decode every record through the registry and reconcile it
    with the run's committed source (the same options as run: the same checkpoint).

    Per table: rows expected, delivered, dead-lettered, missing, duplicated, unexpected, out of order, with
    an unknown or wrong schema id, undecodable, or whose value differs from what the source row encodes to;
    held and not yet read input apart. Exit status 0 when everything reconciles, 1 otherwise, 2 for bad
    options.
    """
    from rich.console import Console

    from avro_registry_sink.spark.audit.verify import VerifyError, parse_read_topics, print_report, verify_run
    from avro_registry_sink.spark.driver.job import check_checkpoint

    try:
        options = job.job_options()
        stores = _check_locations(options.source, job.checkpoint, options.sink)
        if not check_checkpoint(options):
            raise ValueError(f"No job ran with checkpoint {str(options.checkpoint)!r}: give the --checkpoint (or the "
                             "same --source, --sink-uri and --state-dir) of the run to verify.")
        topics = parse_read_topics(read_topic or [])
    except (AvroSinkError, ValueError) as exc:
        raise fail(str(exc)) from None
    _quiet_spark_warnings()
    spark = _job_session(options, stores)
    try:
        report = verify_run(spark, options, read_topics=topics, sample=sample, decode_all=decode_all)
    except (VerifyError, ConfigError) as exc:
        raise fail(str(exc)) from None
    except AvroSinkError as exc:
        raise fail(str(exc), code=1) from None
    if as_json or not sys.stdout.isatty():
        typer.echo(json.dumps(report.to_json(), default=str, ensure_ascii=False))
    else:
        print_report(report, Console())
    if not report.ok:
        raise typer.Exit(1)


def _decode_sample(client, value: bytes) -> Any:
    """Decode one Confluent-framed value with the registry's schema (fastavro), as a JSON-friendly dict."""
    import base64
    import io
    from decimal import Decimal

    import fastavro

    from avro_registry_sink.encoding.plan import unframe

    schema_id, body = unframe(value)
    parsed = fastavro.parse_schema(json.loads(client.get_schema(schema_id).schema))
    record = fastavro.schemaless_reader(io.BytesIO(body), parsed, parsed)

    def plain(v: Any) -> Any:
        if isinstance(v, bytes):
            return "base64:" + base64.b64encode(v).decode()
        if isinstance(v, Decimal):
            return str(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v if isinstance(v, (int, float, str, type(None))) else str(v)

    return schema_id, plain(record)


@dataclasses.dataclass
class _TopicOutput:
    """What ``demo`` shows of a topic's records: counts and the newest record with a value."""

    records: int = 0
    tombstones: int = 0
    partitions: set[int] = dataclasses.field(default_factory=set)
    newest: Any = None

    def add(self, record: Any) -> None:
        self.records += 1
        self.partitions.add(record.partition)
        if record.is_tombstone:
            self.tombstones += 1
        elif self.newest is None or (record.commit_ts or 0) >= (self.newest.commit_ts or 0):
            self.newest = record


def _changes(counts: Any) -> int:
    return counts.inserts + counts.updates + counts.deletes


@contextlib.contextmanager
def _generation_progress(mode: str, console: Any) -> Iterator[Callable[[int, int], None] | None]:
    """``demo``'s progress while it writes the input: a bar on a terminal, a line per tenth otherwise (JSON
    lines with ``--progress json``), nothing with ``--progress none``."""
    if mode == "none":
        yield None
        return
    if mode == "rich" or (mode == "auto" and sys.stdout.isatty()):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("generating the demo input"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("changes"), TimeElapsedColumn(), console=console, transient=True) as bar:
            task = bar.add_task("generate", total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
        return
    shown = [0]

    def report(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if tenth <= shown[0] and done < total:
            return
        shown[0] = tenth
        if mode == "json":
            typer.echo(json.dumps({"ts": round(time.time(), 3), "event": "generate", "changes": done,
                                   "total": total}), err=True)
        else:
            typer.echo(f"generating the demo input: {done:,} of {total:,} changes", err=True)

    yield report


@app.command()
def demo(
    directory: Annotated[Path | None, typer.Option("--dir", help="Where to put the demo input, output and checkpoint (default: a new temporary directory).")] = None,
    rows: Annotated[int, typer.Option("--rows", min=4, help="Rows inserted per table.")] = 12,
    seed: Annotated[int, typer.Option("--seed", help="Random seed of the generated data.")] = 7,
    progress: ProgressOpt = "auto",
    no_run: Annotated[bool, typer.Option("--no-run", help="Only write the input (and tables.sql, ticdc.toml beside it) and print the command that runs the job on it.")] = False,
    to_kafka: Annotated[str | None, typer.Option("--to-kafka", metavar="BOOTSTRAP", help="Write the same changes to a Kafka topic instead, as TiCDC's Kafka sink would (DDL messages and row changes; --format, --topic), and print the command that runs the job on it; nothing is run.")] = None,
    changelog_format: Annotated[str, typer.Option("--format", metavar="canal-json|debezium-json", help="With --to-kafka: canal-json (enable-tidb-extension) or debezium-json (debezium-disable-schema).")] = "canal-json",
    topic: Annotated[str | None, typer.Option("--topic", help="With --to-kafka: the topic (created when missing; default avro-sink-demo-<format>).")] = None,
    partitions: Annotated[int, typer.Option("--partitions", min=1, help="With --to-kafka: partitions of a topic created (DDLs go to each, a row's changes to one).")] = 3,
) -> None:
    """Generate a TiCDC storage-sink directory, run the job on it with the embedded defaults, show what came out.

    Three tables (CSV and canal-json data files), inserts, updates and deletes, and an ALTER TABLE ... ADD
    COLUMN in the middle; the job writes Kafka-shaped records to local files and registers the schemas in
    an embedded registry, then every topic and subject is summarised with a decoded sample record. With
    --to-kafka, the same changes fill a canal-json or debezium-json topic instead, for a trial of a Kafka source.
    """
    import shutil
    import tempfile

    from rich.console import Console

    from avro_registry_sink.ops.progress import make_progress
    from avro_registry_sink.registry.connect import connect
    from avro_registry_sink.settings.config import RegistryConfig, SinkConfig
    from avro_registry_sink.sources.demo import generate_demo, write_rerun_files
    from avro_registry_sink.spark.driver.job import job_session, run_job
    from avro_registry_sink.spark.driver.job_options import JobOptions
    from avro_registry_sink.spark.sinks.sinks import read_file_sink
    from avro_registry_sink.spark.sources.sources import parse_source

    console = Console() if sys.stdout.isatty() else Console(width=160)  # a pipe or log file: do not wrap at 80
    if to_kafka is not None:
        _demo_to_kafka(console, directory, to_kafka, changelog_format, topic, partitions, rows, seed)
        return
    if changelog_format != "canal-json" or topic is not None:
        raise fail("--format and --topic go with --to-kafka BOOTSTRAP (the demo writes a storage tree otherwise).")
    base = directory or Path(tempfile.mkdtemp(prefix="avro-registry-sink-demo-"))
    for part in ("input", "output", "checkpoint"):
        shutil.rmtree(base / part, ignore_errors=True)
    started = time.monotonic()
    with _generation_progress(progress, console) as report:
        manifest = generate_demo(base / "input", seed=seed, rows_per_table=rows, keep_events=False, progress=report)
    ddl, settings = write_rerun_files(manifest, base)  # what a rerun of `run` on the input needs
    console.print(f"Generated a TiCDC storage-sink directory in [bold]{base / 'input'}[/bold] in "
                  f"{time.monotonic() - started:.1f} s: "
                  + ", ".join(f"{name} ({manifest.formats[name]}, {_changes(manifest.counts[name])} changes)"
                              for name in sorted(manifest.tables))
                  + f"; {len(manifest.data_files)} data files, one ALTER TABLE mid-stream.")
    if no_run:
        console.print(f"Run the job on it: avro-registry-sink run --source {base / 'input'} --tables {ddl} "
                      f"--config {settings} --available-now", soft_wrap=True)
        return
    _quiet_spark_warnings()
    spark_was_running = _active_spark() is not None
    spark = job_session(kafka=False)
    options = JobOptions(
        source=parse_source(str(base / "input")),
        checkpoint=base / "checkpoint",
        sink=SinkConfig(scheme=SinkKind.FILE, path=str(base / "output")),
        available_now=True,
        csv_options=manifest.csv_options,
        tables=tuple(manifest.tables.values()),
    )
    try:
        with connect(RegistryConfig()) as client:
            try:
                quiet = progress == "auto" and not sys.stdout.isatty()  # the summary below says it all
                result = run_job(spark, options, registry=client, progress=make_progress("none" if quiet else progress))
            except AvroSinkError as exc:
                raise fail(str(exc), code=1) from None
            if result.stop:  # Ctrl-C: what was committed, not a comparison with what was not read
                console.print(result.stop["message"], highlight=False)
                raise typer.Exit(result.stop["exit_status"])
            by_topic: dict[str, _TopicOutput] = {}
            for record in read_file_sink(base / "output"):  # one pass, nothing kept but counts and the newest
                by_topic.setdefault(record.topic, _TopicOutput()).add(record)
            grid, samples = _demo_output_table(client, result, manifest, by_topic)
            console.print(grid)
            for topic, record, (schema_id, decoded) in samples:
                console.print(f"[bold]{topic}[/bold] partition {record.partition}, value schema id {schema_id}, "
                              f"commit ts {record.commit_ts}:")
                console.print_json(json.dumps(decoded, ensure_ascii=False, default=str))
    finally:
        if not spark_was_running:
            spark.stop()
    _print_dead_letters(result, console)
    console.print(f"Records: {base / 'output'}/<topic>/batch-*.jsonl (hex key/value: 00 + schema id + Avro body). "
                  f"Checkpoint: {base / 'checkpoint'}.")
    console.print(f"Run the job on this input yourself: avro-registry-sink run --source {base / 'input'} "
                  f"--tables {ddl} --config {settings} --available-now", soft_wrap=True)


def _demo_output_table(client: Any, result: Any, manifest: Any,
                       by_topic: dict[str, _TopicOutput]) -> tuple[Any, list[tuple[str, Any, Any]]]:
    """The demo's table of what the job produced, per topic: its table, records, tombstones and partitions
    against the changes the demo made, and its subjects' versions; and per topic its newest record with a value,
    decoded."""
    from rich.table import Table

    table_of = {plan.route.topic: plan for plan in result.plans.values()}
    grid = Table(title="What the job produced (file sink, embedded registry)")
    for name in ("topic", "table", "records", "tombstones", "partitions", "expected", "subjects: version (id)"):
        grid.add_column(name, overflow="fold")
    samples = []
    for topic in sorted(by_topic):
        output = by_topic[topic]
        plan = table_of[topic]
        name = plan.encoding.table.qualified_name
        counts = manifest.counts[name]
        expected = _changes(counts)
        tombstones = output.tombstones
        ok = output.records == expected and tombstones == counts.deletes
        subjects = []
        for subject in (plan.route.key_subject, plan.route.value_subject):
            versions = client.get_versions(subject)
            subjects.append(subject + ": " + ", ".join(
                f"v{v} ({client.get_version(subject, v).id})" for v in versions))
        grid.add_row(topic, name, str(output.records), str(tombstones),
                     ",".join(str(p) for p in sorted(output.partitions)),
                     ("[green]ok[/green] " if ok else "[red]MISMATCH[/red] ")
                     + f"{counts.inserts}i/{counts.updates}u/{counts.deletes}d",
                     "\n".join(subjects))
        sample = output.newest  # the newest change with a value
        if sample is not None:
            samples.append((topic, sample, _decode_sample(client, sample.value)))
    return grid, samples


def _demo_to_kafka(console: Any, directory: Path | None, bootstrap: str, fmt: str, topic: str | None,
                   partitions: int, rows: int, seed: int) -> None:
    """``demo --to-kafka``: the demo's changes as TiCDC's canal-json or debezium-json messages on a topic."""
    import tempfile

    from avro_registry_sink.sources.demo import generate_demo, write_rerun_files
    from avro_registry_sink.sources.demo_topic import CHANGELOG_FORMATS, changelog_messages, fill_topic

    if fmt not in CHANGELOG_FORMATS:
        raise fail(f"--format {fmt!r} is not a changelog format; choose one of: {', '.join(CHANGELOG_FORMATS)}.")
    topic = topic or f"avro-sink-demo-{fmt.split('-')[0]}"
    base = directory or Path(tempfile.mkdtemp(prefix="avro-registry-sink-demo-"))
    started = time.monotonic()
    # the storage tree is written too (the generator's way of making the changes); the topic gets the same ones
    manifest = generate_demo(base / "input", seed=seed, rows_per_table=rows)
    ddl, _settings = write_rerun_files(manifest, base)
    messages = changelog_messages(manifest, fmt, partitions)
    try:
        sent = fill_topic(bootstrap, topic, messages, partitions=partitions)
    except ConfigError as exc:
        raise fail(str(exc), code=1) from None
    changes = sum(not m.is_ddl for m in messages)
    console.print(f"Wrote {sent} {fmt} messages to topic [bold]{topic}[/bold] on {bootstrap} in "
                  f"{time.monotonic() - started:.1f} s: {changes} row changes of "
                  + ", ".join(f"{name} ({_changes(manifest.counts[name])})" for name in sorted(manifest.tables))
                  + f", and {sent - changes} DDL messages (each CREATE TABLE and the ALTER TABLE mid-stream, on "
                  f"each of its partitions). Table definitions: {ddl}.", soft_wrap=True)
    console.print(f"Run the job on it: avro-registry-sink run --source {fmt}+kafka://{bootstrap}/{topic} "
                  f"--tables {ddl} --checkpoint {base / 'checkpoint'} --state-dir {base / 'state'} "
                  "--available-now", soft_wrap=True)


@app.command("spark-submit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def spark_submit(ctx: typer.Context) -> None:
    """spark-submit of this environment's PySpark, with SPARK_HOME set: avro-registry-sink spark-submit [spark-submit options] dist/submit.py run ...

    The virtual environment's own bin/spark-submit looks for SPARK_HOME with the system's python3 and fails
    ("Could not find valid SPARK_HOME") unless the environment is activated; this runs PySpark's with
    SPARK_HOME set to PySpark's directory and the driver's Python set to this environment's (neither is
    changed when already set; spark.pyspark.driver.python too, in client mode, when spark.pyspark.python
    names the workers'). Its arguments and exit status are spark-submit's.
    """
    import os
    import subprocess

    from avro_registry_sink.spark.runtime.submit_env import spark_submit_args, spark_submit_env

    command, env = spark_submit_env(os.environ)
    try:
        code = subprocess.call([command, *spark_submit_args(ctx.args)], env=env)
    except OSError as exc:
        raise fail(f"Cannot run {command}: {exc.strerror or exc}.", code=1) from None
    raise typer.Exit(code)


@app.command()
def package(
    out: Annotated[Path, typer.Option("--out", help="Directory for executor-env.tar.gz and submit.py.")] = Path("dist"),
    stores: Annotated[str | None, typer.Option("--stores", help="Comma-separated stores the job will use (s3, azure), for the --packages line printed.")] = None,
    kafka: Annotated[bool, typer.Option("--kafka/--no-kafka", help="Include Spark's Kafka connector in the --packages line printed.")] = False,
) -> None:
    """Build what a Spark cluster needs to run the job: a packed environment for --archives and the spark-submit file.

    Prints the spark-submit command line (packages pinned to this Spark's and Hadoop's versions).
    """
    from avro_registry_sink.spark.runtime.package import build_executor_env
    from avro_registry_sink.spark.runtime.packages import kafka_package
    from avro_registry_sink.spark.runtime.session import store_packages

    try:
        archive = build_executor_env(out)
    except (RuntimeError, OSError) as exc:
        raise fail(f"Building the executor environment failed: {exc}", code=1) from None
    packages = ([kafka_package()] if kafka else []) + store_packages(
        [s.strip() for s in (stores or "").split(",") if s.strip()])
    line = ["spark-submit", "--master", "spark://HOST:7077"]
    if packages:
        line += ["--packages", ",".join(packages)]
    line += ["--archives", f"{archive}#env", "--conf", "spark.pyspark.python=./env/bin/python",
             "--conf", f"spark.pyspark.driver.python={sys.executable}", str(archive.parent / "submit.py"),
             "run", "--source", "...", "--checkpoint", "..."]
    typer.echo(f"Built {archive} ({archive.stat().st_size // (1 << 20)} MiB) and {archive.parent / 'submit.py'}.")
    typer.echo(" ".join(line))
    typer.echo("(spark-submit of a Spark installation; with this environment's PySpark instead, which needs no "
               "SPARK_HOME: avro-registry-sink spark-submit " + " ".join(line[1:]) + ")")


def _quiet_spark_warnings() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    # When the Spark JVM dies (out of memory), py4j's client and PySpark's accumulator server print Python
    # tracebacks of their own from background threads; the job reports the cause in one line instead.
    logging.getLogger().setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    from pyspark import accumulators

    for name in ("AccumulatorTCPServer", "AccumulatorUnixServer"):
        server = getattr(accumulators, name, None)
        if server is not None:
            server.handle_error = lambda self, request, client_address: None


def _active_spark():
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def _tidy_help(*typers: typer.Typer) -> None:
    for group in typers:
        for info in group.registered_commands:
            if info.cls in (None, typer.core.TyperCommand):
                info.cls = _Command


_tidy_help(app, registry_app)


def main() -> None:
    """Console-script entry point: usage errors (unknown options, TiCDC flags this product refuses, bad
    values) are one line on stderr with exit status 2, never a usage dump or a traceback."""
    from avro_registry_sink.settings.ticdc_keys import refused_flag

    try:
        code = app(standalone_mode=False)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)
    except typer.Abort:  # pragma: no cover - interactive
        sys.exit(1)
    except StateError as exc:  # damaged or locked state a command let through: still one line, never a traceback
        from avro_registry_sink.redact import redact_text

        typer.echo(f"error: {redact_text(' '.join(str(exc).split()))}", err=True)
        sys.exit(2)
    except typer.TyperException as exc:  # click's usage errors (typer ships its own click)
        context = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and context is not None:
            typer.echo(context.get_help())
            sys.exit(2)
        refused = refused_flag(getattr(exc, "option_name", None) or "") if type(exc).__name__ == "NoSuchOption" else None
        if refused is not None:
            message = f"TiCDC's option {refused.name!r} is not supported: {refused.note}."
        else:
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        from avro_registry_sink.redact import redact_text

        typer.echo(f"error: {redact_text(' '.join(message.split()))}", err=True)  # one prefix, as fail's
        sys.exit(getattr(exc, "exit_code", 2) or 2)
    sys.exit(code if isinstance(code, int) else 0)


for _command in (history_commands.history, history_commands.diff, history_commands.register):
    app.command()(_command)
_tidy_help(app)

if __name__ == "__main__":  # pragma: no cover
    from avro_registry_sink.cli import main as _module_main  # the module's own app, with the commands added to it

    _module_main()
