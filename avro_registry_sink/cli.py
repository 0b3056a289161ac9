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
from avro_registry_sink.errors import AvroSinkError

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


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - interactive
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
