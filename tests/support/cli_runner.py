"""typer's ``CliRunner`` that turns the Typer app into its click command once, not on every ``invoke``.

``typer.testing.CliRunner.invoke(app, ...)`` calls ``typer.main.get_command(app)`` each time: for this CLI that
reads every command's signature again, ~30 ms of CPU an invocation (a test file that invokes the CLI a hundred
times spends seconds on it). :class:`CachedCliRunner` builds the command on its first ``invoke`` of an app and
hands the same command to typer's ``invoke`` afterwards; everything else (the isolation of the streams and the
environment, the exit code, the exception) is typer's. An app that gets commands added after its first
``invoke`` needs a new runner.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import typer
import typer.main
import typer.testing


class CachedCliRunner(typer.testing.CliRunner):
    """A ``CliRunner`` whose ``invoke`` reuses the app's click command (built on its first use)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._commands: dict[int, tuple[typer.Typer, Any]] = {}

    def invoke(self, app: typer.Typer, *args: Any, **kwargs: Any) -> typer.testing.Result:  # type: ignore[override]
        """``CliRunner.invoke`` with the command built once per app."""
        app_, command = self._commands.get(id(app), (None, None))
        if app_ is not app:
            command = typer.main.get_command(app)
            self._commands[id(app)] = (app, command)
        with mock.patch.object(typer.testing, "_get_command", lambda _app: command):
            return super().invoke(app, *args, **kwargs)
