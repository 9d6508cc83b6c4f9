"""How every command speaks: typed errors as one `error:` line and an exit code, progress on
a terminal only, and tables that stay greppable when piped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.table import Table

from manager.lifecycle.errors import LifecycleError
from manager.models.errors import ModelError
from manager.models.progress import Progress, RichProgress, SilentProgress

stderr = Console(stderr=True)


@contextmanager
def errors_as_one_line() -> Iterator[None]:
    try:
        yield
    except ModelError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from exc
    except LifecycleError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        if exc.details:
            typer.echo(exc.details, err=True)
        raise typer.Exit(exc.exit_code) from exc


@contextmanager
def progress() -> Iterator[Progress]:
    """Live progress on a terminal; nothing when stderr is a pipe or a file."""
    if not stderr.is_terminal:
        yield SilentProgress()
        return
    with RichProgress(stderr) as live:
        yield live


def print_table(table: Table) -> None:
    # NOTE: piped output gets full rows (no 80-column wrapping) so it stays greppable.
    console = Console()
    if not console.is_terminal:
        console = Console(width=1000)
    console.print(table)


def say(line: str) -> None:
    """A line of a long-running command, with the time of day."""
    typer.echo(f"{time.strftime('%H:%M:%S')} {line}")
