"""`gomgr apply -f engines.yaml`: make the running engines match a desired-state file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from manager.cli.output import errors_as_one_line, progress, say
from manager.lifecycle.start_timeout import DEFAULT_START_TIMEOUT_S
from manager.state.paths import StatePaths


def apply(
    file: Annotated[
        Path, typer.Option("-f", "--file", help="The desired-state file (engines.yaml).")
    ],
    dry_run: Annotated[bool, typer.Option(help="Print the plan; change nothing.")] = False,
    watch: Annotated[
        bool, typer.Option(help="Keep reconciling: restart crashed engines, unload idle ones.")
    ] = False,
    interval: Annotated[float, typer.Option(help="Seconds between --watch checks.")] = 1.0,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each engine's /health.")] = (
        DEFAULT_START_TIMEOUT_S
    ),
) -> None:
    """Make the running engines match FILE: start missing, stop removed, restart changed ones.

    Stops only engines an apply started, and hand-started ones serving a name in FILE.
    Exit codes: gomgr --help.
    """
    if dry_run and watch:
        typer.echo("error: --dry-run and --watch exclude each other", err=True)
        raise typer.Exit(2)
    # NOTE: imported here: applying starts engines (readiness, the hub client, the docker
    # SDK, the HTTP client), which other commands should not pay for at start-up.
    from manager.lifecycle.apply import Applier
    from manager.lifecycle.desired_state import load_desired_state
    from manager.lifecycle.router_link import RouterLink
    from manager.lifecycle.watch import Watcher, WatchSettings
    from manager.models.progress import SilentProgress
    from manager.supervisor.engine_client import EngineClient

    paths = StatePaths.from_env()
    with errors_as_one_line():
        # NOTE: read here first, so a bad file is one line before any router starts.
        desired = load_desired_state(file)
        # NOTE: a dry run changes nothing, and --watch runs here in the foreground; an apply
        # is the supervisor's, so it writes the records and lists the file's entries.
        if watch or dry_run:
            applier = Applier(paths, RouterLink.from_paths(paths), SilentProgress(), say, timeout)
            if dry_run:
                for line in applier.plan(desired).lines():
                    typer.echo(line)
                return
            Watcher(desired, applier, WatchSettings(interval_s=interval), say).run()
            return
        with progress() as live:
            exit_code = EngineClient.from_paths(paths).apply(
                file, timeout, live, typer.echo, lambda line: typer.echo(line, err=True)
            )
    if exit_code:
        raise typer.Exit(exit_code)
