"""`gomgr router serve / start / status / stop`: the local OpenAI-compatible router."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from manager.cli.output import errors_as_one_line
from manager.cli.serve import serve
from manager.state.paths import StatePaths

# NOTE: the commands import the router link (the HTTP client, psutil) themselves: `gomgr
# --help` loads this module and should not pay for them.

router_app = typer.Typer(
    help="The local OpenAI-compatible router in front of the engines.", no_args_is_help=True
)


# NOTE: the same command as `gomgr serve`: a foreground router without the supervisor would
# lack the engine API that `gomgr start / stop` use (`python -m router` is that bare router).
router_app.command("serve", help="Run the router (with the supervisor) in the foreground until Ctrl-C; as `gomgr serve`.")(serve)


@router_app.command("start")
def router_start() -> None:
    """Start the router in the background (127.0.0.1:$GOMGR_ROUTER_PORT, default 8000) and
    register every running engine with it again."""
    from manager.lifecycle.reconcile import reconcile
    from manager.lifecycle.router_link import RouterLink

    paths = StatePaths.from_env()
    link = RouterLink.from_paths(paths)
    with errors_as_one_line():
        started = link.ensure()
        found = reconcile(paths, link)
    typer.echo(f"router {'started' if started else 'already running'} at {link.url}"
               f" ({len(found.reregistered)} engine(s) registered again)")


@router_app.command("status")
def router_status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Whether a router answers at 127.0.0.1:$GOMGR_ROUTER_PORT, who runs it, and its engines.
    Exit 0 when it answers, 1 when not."""
    from manager.lifecycle.router_link import RouterLink

    link = RouterLink.from_paths(StatePaths.from_env())
    background = link.daemon.running()
    up = link.is_up()
    with errors_as_one_line():
        backends = sorted(link.backend_ids()) if up else []
    if as_json:
        typer.echo(json.dumps({
            "url": link.url, "up": up, "background_pid": background.pid if background else None,
            "log_path": background.log_path if background else None, "backends": backends,
        }, indent=2))
    elif not up:
        typer.echo(f"no router answers at {link.url} (start one with `gomgr router start`)")
    else:
        owner = f"background pid {background.pid}, log {background.log_path}" if background else (
            "not started by gomgr (e.g. `gomgr router serve`)"
        )
        typer.echo(f"router up at {link.url} ({owner}); {len(backends)} engine(s): {', '.join(backends) or '-'}")
    raise typer.Exit(0 if up else 1)


@router_app.command("stop")
def router_stop() -> None:
    """Stop the background router that `gomgr start` or `gomgr router start` started, and the
    engines it loaded on demand."""
    from manager.lifecycle.router_link import RouterLink
    from manager.lifecycle.stop import stop_record
    from manager.supervisor.engines import loaded_on_demand, running_engines

    paths = StatePaths.from_env()
    link = RouterLink.from_paths(paths)
    stopped = link.daemon.stop()
    # NOTE: the supervisor unloads its engines on its way out; these are the ones it left
    # (killed before it could, or a load that finished during its shutdown).
    with errors_as_one_line():
        for record in filter(loaded_on_demand, running_engines(paths)):
            stop_record(record, paths, link)
    typer.echo(f"router at {link.url} stopped" if stopped else "no background router of gomgr runs")
