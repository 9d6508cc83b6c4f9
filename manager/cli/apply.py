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

    paths = StatePaths.from_env()
    with errors_as_one_line():
        desired = load_desired_state(file)
        if watch:
            applier = Applier(paths, RouterLink.from_paths(paths), SilentProgress(), say, timeout)
            Watcher(desired, applier, WatchSettings(interval_s=interval), say).run()
            return
        with progress() as live:
            applier = Applier(paths, RouterLink.from_paths(paths), live, typer.echo, timeout)
            plan = applier.plan(desired)
            for line in plan.lines():
                typer.echo(line)
            outcomes = [] if dry_run else applier.execute(plan)
    failures = [o.failure for o in outcomes if o.failure is not None]
    for outcome in outcomes:
        typer.echo(outcome.describe(), err=outcome.failure is not None)
        if outcome.failure is not None and outcome.failure.details:
            typer.echo(outcome.failure.details, err=True)
    if failures:
        raise typer.Exit(failures[0].exit_code)
