"""Every command's ``--help`` on an 80-column terminal: each option name whole, no line wider than the terminal."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from avro_registry_sink.cli import app

runner = CliRunner()


def _commands(command, path=()):
    """(argv path, command) of the app and each of its commands, recursively (typer's own copy of click)."""
    found = [(path, command)]
    if hasattr(command, "commands"):
        for name, sub in sorted(command.commands.items()):
            if not sub.hidden and sub.add_help_option:  # spark-submit passes --help on to Spark's
                found += _commands(sub, (*path, name))
    return found


COMMANDS = _commands(typer.main.get_command(app))


def test_every_command_is_rendered():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"", "run", "verify", "registry serve"} <= names, names


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) or "main" for p, _ in COMMANDS])
def test_help_at_80_columns_shows_every_option_name_whole(path, command):
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERM": "xterm-256color"})

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "…" not in result.stdout
    # the option column: lines that start (after the indent) with an option name
    option_lines = [line.strip() for line in lines if line.lstrip().startswith("-")]
    context = typer.main._click.Context(command)
    params = [p for p in command.get_params(context) if p.param_type_name == "option" and not p.hidden]
    assert params, path
    for param in params:
        for name in (*param.opts, *param.secondary_opts):
            assert any(name in line.replace(",", " ").replace("/", " ").split() for line in option_lines), (
                f"{' '.join(path) or 'main'}: {name} not whole in\n{result.stdout}")
