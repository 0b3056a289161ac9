"""What the CLI's commands share: the option types, the option groups, and the one way a command fails.

Every command module (:mod:`avro_registry_sink.cli`, :mod:`avro_registry_sink.history.commands`) imports these
from here, so that no command module imports another (``cli`` puts the history commands on its app).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer

from avro_registry_sink.routing.rules import build_router
from avro_registry_sink.settings.config import SinkConfig, load_config

# Imported inside functions, for start-up: every CLI command imports this module, and the DDL parser and
# the redaction rules load only for the options that use them.

__all__ = [
    "BigintOpt",
    "ConfigOpt",
    "DdlOpt",
    "DecimalOpt",
    "ExtensionOpt",
    "RegistryOpt",
    "SinkUriOpt",
    "StateDirOpt",
    "TiCDCArgs",
    "TopicRuleOpt",
    "build_config",
    "build_router",
    "fail",
    "option_groups",
    "read_tables",
]

ExtensionOpt = Annotated[str | None, typer.Option("--enable-tidb-extension", help="true|false: append _tidb_op, _tidb_commit_ts, _tidb_commit_physical_time.")]
DecimalOpt = Annotated[str | None, typer.Option("--avro-decimal-handling-mode", help="precise|string")]
BigintOpt = Annotated[str | None, typer.Option("--avro-bigint-unsigned-handling-mode", help="long|string")]
TopicRuleOpt = Annotated[str | None, typer.Option("--topic-rule", help="Topic expression, e.g. '{schema}_{table}'.")]
SinkUriOpt = Annotated[str | None, typer.Option("--sink-uri", help="TiCDC-style sink URI: kafka://host:9092/topic?protocol=avro&...")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML settings file (TiCDC's [sink] layout accepted).")]
DdlOpt = Annotated[Path, typer.Option("--ddl", help="File with CREATE TABLE statements.", exists=False)]
RegistryOpt = Annotated[str | None, typer.Option("--registry", "--schema-registry", help="Schema registry URL(s), comma-separated; default: the embedded registry. --schema-registry is TiCDC's name.")]
StateDirOpt = Annotated[Path | None, typer.Option("--state-dir", help="Where the embedded registry, checkpoints and file sink output live (default .avro-registry-sink, or AVRO_SINK_HOME).")]


def fail(message: str, code: int = 2, secrets: Any = ()) -> typer.Exit:
    """Print ``error: <message>`` (one line, secrets masked) on stderr; the exit to raise, with status ``code``."""
    from avro_registry_sink.redact import redact_text

    typer.echo(f"error: {redact_text(' '.join(message.split()), secrets)}", err=True)
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
    from avro_registry_sink.redact import remember

    config = load_config(config_file=config_file, sink_uri=sink_uri, overrides=overrides)
    remember(config)  # its passwords and tokens are masked in every message from here on
    return config


@dataclasses.dataclass(frozen=True, kw_only=True)
class TiCDCArgs:
    """TiCDC's encoding and routing options, taken alike by every command that derives schemas."""

    enable_tidb_extension: ExtensionOpt = None
    avro_decimal_handling_mode: DecimalOpt = None
    avro_bigint_unsigned_handling_mode: BigintOpt = None
    topic_rule: TopicRuleOpt = None
    sink_uri: SinkUriOpt = None
    config: ConfigOpt = None

    def sink_config(self, registry: str | None = None) -> SinkConfig:
        """The configuration these options give (flags > sink URI > environment > TOML file > defaults)."""
        return build_config(config_file=self.config, sink_uri=self.sink_uri,
                            enable_tidb_extension=self.enable_tidb_extension,
                            decimal_mode=self.avro_decimal_handling_mode,
                            bigint_mode=self.avro_bigint_unsigned_handling_mode, registry=registry)


def option_groups(command: Callable[..., Any]) -> Callable[..., Any]:
    """Let a command take a group of options as one dataclass parameter: typer sees each field of the group
    as an option of its own, the command receives the group built from them (one place per shared option)."""
    hints = get_type_hints(command, include_extras=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, list[str]]] = {}
    for param in inspect.signature(command).parameters.values():
        kind = hints[param.name]
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=kind))
            continue
        fields = dataclasses.fields(kind)
        groups[param.name] = (kind, [f.name for f in fields])
        field_hints = get_type_hints(kind, include_extras=True)
        params += [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=field_hints[f.name],
                                     default=inspect.Parameter.empty if f.default is dataclasses.MISSING
                                     else f.default) for f in fields]

    @functools.wraps(command)
    def wrapper(**options: Any) -> Any:
        for name, (kind, names) in groups.items():
            options[name] = kind(**{n: options.pop(n) for n in names})
        return command(**options)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def read_tables(ddl: Path):
    """The tables of a ``--ddl`` file; exit 2 naming the file when it cannot be read."""
    from avro_registry_sink.tabledef.ddl import parse_ddl

    try:
        text = ddl.read_text(encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot read DDL file {str(ddl)!r}: {exc.strerror}") from None
    return parse_ddl(text)
