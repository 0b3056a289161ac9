"""Command line: thin commands that parse options, build the configuration and call the library.

Exit status: 0 on success, 2 for bad input (a one-line error on stderr), 1 for anything unexpected.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from avro_registry_sink.config import SinkConfig, load_config
from avro_registry_sink.errors import AvroSinkError, RegistryUnavailable

app = typer.Typer(
    name="avro-registry-sink",
    help="Turn MySQL/TiDB change events into Confluent-framed flat Avro, exactly as TiCDC's avro protocol.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
registry_app = typer.Typer(help="The embedded Confluent-compatible schema registry.", no_args_is_help=True)
app.add_typer(registry_app, name="registry")

#: Used when neither a topic rule nor a sink URI topic is given: one topic per table.
DEFAULT_TOPIC_RULE = "{schema}_{table}"

ExtensionOpt = Annotated[Optional[str], typer.Option("--enable-tidb-extension", help="true|false: append _tidb_op, _tidb_commit_ts, _tidb_commit_physical_time.")]
DecimalOpt = Annotated[Optional[str], typer.Option("--avro-decimal-handling-mode", help="precise|string")]
BigintOpt = Annotated[Optional[str], typer.Option("--avro-bigint-unsigned-handling-mode", help="long|string")]
TopicRuleOpt = Annotated[Optional[str], typer.Option("--topic-rule", help="Topic expression, e.g. '{schema}_{table}'.")]
SinkUriOpt = Annotated[Optional[str], typer.Option("--sink-uri", help="TiCDC-style sink URI: kafka://host:9092/topic?protocol=avro&...")]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="TOML settings file (TiCDC's [sink] layout accepted).")]
DdlOpt = Annotated[Path, typer.Option("--ddl", help="File with CREATE TABLE statements.", exists=False)]
RegistryOpt = Annotated[Optional[str], typer.Option("--registry", help="Schema registry URL(s), comma-separated; default: the embedded registry.")]


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


def build_config(
    *,
    config_file: Path | None = None,
    sink_uri: str | None = None,
    enable_tidb_extension: str | None = None,
    decimal_mode: str | None = None,
    bigint_mode: str | None = None,
    registry: str | None = None,
) -> SinkConfig:
    """Flags > sink URI > environment > TOML file > defaults."""
    overrides: dict[str, Any] = {
        "enable-tidb-extension": enable_tidb_extension,
        "avro-decimal-handling-mode": decimal_mode,
        "avro-bigint-unsigned-handling-mode": bigint_mode,
        "schema-registry": registry,
    }
    return load_config(config_file=config_file, sink_uri=sink_uri, overrides=overrides)


def build_router(config: SinkConfig, topic_rule: str | None):
    from avro_registry_sink.routing import TopicRouter

    rule = topic_rule
    if rule is None and not config.dispatchers and not config.default_topic:
        rule = DEFAULT_TOPIC_RULE
    return TopicRouter(
        config.dispatchers,
        default_topic=config.default_topic,
        topic_rule=rule,
        subject_naming=config.subject_naming,
    )


def read_tables(ddl: Path):
    from avro_registry_sink.tabledef.ddl import parse_ddl

    try:
        text = ddl.read_text(encoding="utf-8")
    except OSError as exc:
        raise _fail(f"cannot read DDL file {str(ddl)!r}: {exc.strerror}") from None
    return parse_ddl(text)


@app.command()
def schemas(
    ddl: DdlOpt,
    enable_tidb_extension: ExtensionOpt = None,
    avro_decimal_handling_mode: DecimalOpt = None,
    avro_bigint_unsigned_handling_mode: BigintOpt = None,
    topic_rule: TopicRuleOpt = None,
    sink_uri: SinkUriOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Print the key and value Avro schemas TiCDC would register for each table of a DDL file (JSON)."""
    from avro_registry_sink.schema.builder import derive_schemas

    try:
        cfg = build_config(
            config_file=config,
            sink_uri=sink_uri,
            enable_tidb_extension=enable_tidb_extension,
            decimal_mode=avro_decimal_handling_mode,
            bigint_mode=avro_bigint_unsigned_handling_mode,
        )
        router = build_router(cfg, topic_rule)
        out = []
        for table in read_tables(ddl):
            derived = derive_schemas(table, cfg.encoding)
            route = router.route(table.schema_name, table.table)
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
        raise _fail(str(exc)) from None
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
def encode(
    ddl: DdlOpt,
    events: Annotated[Path, typer.Option("--events", help="JSON Lines: {schema, table, op, commit_ts, values}.")],
    registry: RegistryOpt = None,
    enable_tidb_extension: ExtensionOpt = None,
    avro_decimal_handling_mode: DecimalOpt = None,
    avro_bigint_unsigned_handling_mode: BigintOpt = None,
    topic_rule: TopicRuleOpt = None,
    sink_uri: SinkUriOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Encode change events to Confluent-framed Avro, registering schemas as needed; one JSON line per event."""
    from avro_registry_sink.encoder import Op, RowEncoder
    from avro_registry_sink.manager import SchemaManager
    from avro_registry_sink.registry.connect import connect
    from avro_registry_sink.routing import partition_for

    try:
        cfg = build_config(
            config_file=config, sink_uri=sink_uri, enable_tidb_extension=enable_tidb_extension,
            decimal_mode=avro_decimal_handling_mode, bigint_mode=avro_bigint_unsigned_handling_mode,
            registry=registry,
        )
        router = build_router(cfg, topic_rule)
        tables = {(t.schema_name.lower(), t.table.lower()): t for t in read_tables(ddl)}
        try:
            lines = events.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise _fail(f"cannot read events file {str(events)!r}: {exc.strerror}") from None
    except AvroSinkError as exc:
        raise _fail(str(exc)) from None

    failed = 0
    encoders: dict[tuple[str, str, int], RowEncoder] = {}
    with connect(cfg.registry) as client:
        manager = SchemaManager(client, router, cfg.encoding, unavailable_budget=cfg.registry.unavailable_budget)
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
                table = tables.get((str(event["schema"]).lower(), str(event["table"]).lower()))
                if table is None:
                    known = ", ".join(f"{s}.{t}" for s, t in sorted(tables)) or "none"
                    raise ValueError(f"table {event['schema']}.{event['table']} is not in {ddl}; tables: {known}")
                op = Op.parse(str(event["op"]))
                commit_ts = int(event.get("commit_ts") or 0)
                values = _load_event_values(event["values"], table, line_no)
                plan = manager.plan(table)
                enc = encoders.get(plan.key)
                if enc is None:
                    enc = encoders[plan.key] = RowEncoder(plan.encoding)
                key, value = enc.encode(op, values, commit_ts)
                key_values = enc.key_values(values)
                partition = partition_for(plan.route, cfg.partition_num, key_values=key_values, commit_ts=commit_ts)
                typer.echo(json.dumps({
                    "topic": plan.route.topic,
                    "partition": partition,
                    "key": key.hex() if key is not None else None,
                    "value": value.hex() if value is not None else None,
                    "key_schema_id": plan.encoding.key_schema_id,
                    "value_schema_id": plan.encoding.value_schema_id,
                }))
            except (AvroSinkError, ValueError, TypeError) as exc:
                failed += 1
                typer.echo(f"error: line {line_no}: {' '.join(str(exc).split())}", err=True)
                if isinstance(exc, RegistryUnavailable):
                    break  # the registry is gone: every remaining event would fail the same way
    if failed:
        raise typer.Exit(2)


@app.command()
def check(
    ddl: DdlOpt,
    registry: Annotated[str, typer.Option("--registry", help="Schema registry URL(s) to ask.")],
    enable_tidb_extension: ExtensionOpt = None,
    avro_decimal_handling_mode: DecimalOpt = None,
    avro_bigint_unsigned_handling_mode: BigintOpt = None,
    topic_rule: TopicRuleOpt = None,
    sink_uri: SinkUriOpt = None,
    config: ConfigOpt = None,
    output: Annotated[str, typer.Option("--output", help="table|json")] = "table",
) -> None:
    """Pre-flight: would the schemas of this DDL be accepted by the registry? Registers nothing.

    Exit status 0 when every subject is compatible (or new), 1 when any is incompatible, 2 for bad input.
    """
    from rich.console import Console
    from rich.table import Table

    from avro_registry_sink.registry.client import RegistryClient
    from avro_registry_sink.schema.builder import derive_schemas

    if output not in ("table", "json"):
        raise _fail(f"Invalid value {output!r} for option '--output': valid values are table or json.")
    try:
        cfg = build_config(
            config_file=config, sink_uri=sink_uri, enable_tidb_extension=enable_tidb_extension,
            decimal_mode=avro_decimal_handling_mode, bigint_mode=avro_bigint_unsigned_handling_mode,
            registry=registry,
        )
        router = build_router(cfg, topic_rule)
        results = []
        with RegistryClient(cfg.registry) as client:
            for table in read_tables(ddl):
                derived = derive_schemas(table, cfg.encoding)
                route = router.route(table.schema_name, table.table)
                for subject, text in ((route.key_subject, derived.key_json), (route.value_subject, derived.value_json)):
                    if text is None:
                        continue
                    results.append(_check_subject(client, f"{table.schema_name}.{table.table}", subject, text))
    except AvroSinkError as exc:
        raise _fail(str(exc)) from None
    if output == "json":
        typer.echo(json.dumps({"subjects": results}, indent=2))
    else:
        grid = Table(title="Schema registry pre-flight check")
        for name in ("table", "subject", "status", "details"):
            grid.add_column(name, overflow="fold")
        for r in results:
            style = {"compatible": "green", "new subject": "cyan", "unchanged": "green"}.get(r["status"], "red")
            grid.add_row(r["table"], r["subject"], f"[{style}]{r['status']}[/{style}]", "; ".join(r["messages"]))
        Console(width=200).print(grid)
    if any(r["status"] == "incompatible" for r in results):
        raise typer.Exit(1)


def _check_subject(client, table: str, subject: str, schema_text: str) -> dict[str, Any]:
    from avro_registry_sink.errors import SchemaNotFound, SubjectNotFound

    try:
        current = client.lookup(subject, schema_text)
        return {"table": table, "subject": subject, "status": "unchanged", "messages": [f"already version {current.version}, id {current.id}"]}
    except SubjectNotFound:
        return {"table": table, "subject": subject, "status": "new subject", "messages": ["would be registered as version 1"]}
    except SchemaNotFound:
        pass
    result = client.test_compatibility_all(subject, schema_text, verbose=True)
    status = "compatible" if result.is_compatible else "incompatible"
    messages = list(result.messages) or (["would be registered as a new version"] if result.is_compatible else [])
    return {"table": table, "subject": subject, "status": status, "messages": messages}


@registry_app.command("serve")
def registry_serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8081,
    data: Annotated[Optional[Path], typer.Option(help="SQLite file for durable storage; omit for in-memory.")] = None,
) -> None:
    """Run the embedded Confluent-compatible schema registry over HTTP."""
    from avro_registry_sink.registry.embedded import serve

    serve(host=host, port=port, data=str(data) if data is not None else None)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
