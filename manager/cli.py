"""The `gomgr` command line: a thin face over manager/. Typed errors become one line."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from manager.images.cli import image_app
from manager.lifecycle.apply import Applier
from manager.lifecycle.desired_state import load_desired_state
from manager.lifecycle.errors import EngineNotFound, LifecycleError
from manager.lifecycle.health_wait import DEFAULT_START_TIMEOUT_S
from manager.lifecycle.reconcile import reconcile
from manager.lifecycle.router_link import RouterLink
from manager.lifecycle.start import StartRequest, start_engine
from manager.lifecycle.stop import find_engines, stop_engines
from manager.lifecycle.watch import Watcher, WatchSettings
from manager.lifecycle.watch_status import waiting_rows
from manager.manifests.cli import manifests_app
from manager.models.errors import ModelError
from manager.models.progress import Progress, RichProgress, SilentProgress
from manager.models.pull import Source, pull_model
from manager.models.store import ModelStore, RepoId
from manager.readiness.doctor import doctor_command
from manager.runtimes.registry import get_runtime
from manager.state.paths import StatePaths
from manager.state.records import RecordStore

app = typer.Typer(
    help="Run local LLM engines behind an OpenAI-compatible router. Exit codes: 0 ok, 1 model "
    "error, 2 usage, 3 readiness blocked the start, 4 the engine failed to start, 5 router "
    "unavailable, 6 no such engine.",
    no_args_is_help=True,
    add_completion=True,
)
models_app = typer.Typer(
    help="Pull, list and remove models in the local store.", no_args_is_help=True
)
app.add_typer(models_app, name="models")
router_app = typer.Typer(
    help="The local OpenAI-compatible router in front of the engines.", no_args_is_help=True
)
app.add_typer(router_app, name="router")
app.command("doctor")(doctor_command)
app.add_typer(manifests_app, name="manifests")
app.add_typer(image_app, name="image")

_stderr = Console(stderr=True)

@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log steps to stderr.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _complete_engines(incomplete: str) -> list[str]:
    """Engine ids and served names from the records (shell completion: no network)."""
    records = RecordStore(StatePaths.from_env()).all()
    names = dict.fromkeys([*(r.id for r in records), *(r.handle.spec.served_name for r in records)])
    return [name for name in names if name.startswith(incomplete)]


def _complete_repos(incomplete: str) -> list[str]:
    """Repo ids in the local model store (shell completion)."""
    return [m.repo for m in ModelStore.from_env().models() if m.repo.startswith(incomplete)]


@contextmanager
def _errors_as_one_line() -> Iterator[None]:
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
def _progress() -> Iterator[Progress]:
    """Live progress on a terminal; nothing when stderr is a pipe or a file."""
    if not _stderr.is_terminal:
        yield SilentProgress()
        return
    with RichProgress(_stderr) as progress:
        yield progress


class RuntimeChoice(StrEnum):
    AUTO = "auto"
    DOCKER = "docker"
    PROCESS = "process"


class GpusChoice(StrEnum):
    AUTO = "auto"
    ALL = "all"
    NONE = "none"


@app.command()
def start(
    repo: Annotated[
        str, typer.Argument(help="Hugging Face repo id or model directory.", autocompletion=_complete_repos)
    ],
    runtime: Annotated[
        RuntimeChoice,
        typer.Option(help="auto: docker where a container can reach a GPU, else process."),
    ] = RuntimeChoice.AUTO,
    gpus: Annotated[
        GpusChoice,
        typer.Option(help="docker runtime: `--gpus all` for the container; auto: when NVML sees GPUs."),
    ] = GpusChoice.AUTO,
    port: Annotated[int | None, typer.Option(help="The engine's port (default: a free one).")] = None,
    served_model_name: Annotated[
        str | None, typer.Option(help="Name clients use as `model` (default: the manifest's, else REPO).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the engine's /health.")] = (
        DEFAULT_START_TIMEOUT_S
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the engine record as JSON.")] = False,
) -> None:
    """Start an engine for REPO behind the router (pulls the model first). Exit codes: gomgr --help."""
    request = StartRequest(repo, runtime.value, port, served_model_name, timeout, gpus.value)
    # NOTE: with --json stdout holds only the JSON; the runtime line goes to stderr.
    announce = (lambda line: typer.echo(line, err=True)) if as_json else typer.echo
    with _errors_as_one_line(), _progress() as progress:
        started = start_engine(request, StatePaths.from_env(), progress, announce)
    record = started.record
    if as_json:
        typer.echo(json.dumps({**record.to_json(), "router_url": started.router_url}, indent=2))
        return
    spec = record.handle.spec
    typer.echo(f"ready: {spec.served_name} (engine {record.id}, port {spec.port})")
    typer.echo(f"point clients at {started.router_url}/v1 with model \"{spec.served_name}\" (any API key)")
    typer.echo(f"stop it with: gomgr stop {record.id}")


@app.command()
def stop(
    target: Annotated[
        str | None, typer.Argument(help="Engine id or served name.", autocompletion=_complete_engines)
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Stop every engine.")] = False,
) -> None:
    """Deregister and stop engines (SIGTERM, then SIGKILL after 15 s)."""
    if (target is None) == (not all_):
        typer.echo("error: give an engine id or served name, or --all", err=True)
        raise typer.Exit(2)
    with _errors_as_one_line():
        stopped = stop_engines(StatePaths.from_env(), None if all_ else target)
    for record in stopped:
        typer.echo(f"stopped {record.id} ({record.handle.spec.served_name})")
    if not stopped:
        typer.echo("no engines running")


@app.command()
def ps(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List engines with their state; cleans up crashed ones and re-registers with a restarted router."""
    paths = StatePaths.from_env()
    with _errors_as_one_line():
        found = reconcile(paths, RouterLink.from_paths(paths))
    for record in found.removed:
        typer.echo(f"engine {record.id} had exited; removed it (log: {record.handle.log_path})", err=True)
    now = time.time()
    rows = [
        {**r.to_json(), "uptime_s": round(now - r.handle.started_at, 1),
         "routed": None if found.routed is None else r.id in found.routed}
        for r in found.live
    ] + waiting_rows(paths, now)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo("no engines running")
        return
    table = Table("ID", "NAME", "STATE", "RUNTIME", "PORT", "PID", "UPTIME", "ROUTED", box=None)
    for row in rows:
        routed = "?" if row["routed"] is None else ("yes" if row["routed"] else "no")
        state = str(row["state"])
        if row.get("retry_in_s") is not None:
            state = f"{state} {math.ceil(float(row['retry_in_s']))}s"  # e.g. "backoff 4s"
        uptime = "-" if row["uptime_s"] is None else f"{int(row['uptime_s'])}s"
        table.add_row(
            str(row["id"] or "-"), str(row["served_name"]), state, str(row["runtime"] or "-"),
            str(row["port"] or "-"), str(row["pid"] or "-"), uptime, routed,
        )
    console = Console()
    if not console.is_terminal:
        console = Console(width=1000)
    console.print(table)


@app.command()
def logs(
    target: Annotated[
        str, typer.Argument(help="Engine id or served name.", autocompletion=_complete_engines)
    ],
    lines: Annotated[int, typer.Option("-n", "--lines", help="How many last lines.")] = 100,
    follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing new lines.")] = False,
) -> None:
    """Print an engine's log (its stdout and stderr)."""
    paths = StatePaths.from_env()
    with _errors_as_one_line():
        live = list(reconcile(paths, RouterLink.from_paths(paths)).live)
        matches = find_engines(live, target)
        if len(matches) != 1:
            raise EngineNotFound(
                f"no running engine has the id or served name '{target}'" if not matches
                else f"'{target}' names {len(matches)} engines; give an id (see gomgr ps)"
            )
    handle = matches[0].handle
    runtime = get_runtime(handle.runtime, paths)
    for line in runtime.logs(handle, lines):
        typer.echo(line)
    if follow:
        try:
            for line in runtime.follow(handle):
                typer.echo(line)
        except KeyboardInterrupt:
            return


@app.command()
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
    paths = StatePaths.from_env()
    with _errors_as_one_line():
        desired = load_desired_state(file)
        if watch:
            applier = Applier(paths, RouterLink.from_paths(paths), SilentProgress(), _say, timeout)
            Watcher(desired, applier, WatchSettings(interval_s=interval), _say).run()
            return
        with _progress() as progress:
            applier = Applier(paths, RouterLink.from_paths(paths), progress, typer.echo, timeout)
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


def _say(line: str) -> None:
    typer.echo(f"{time.strftime('%H:%M:%S')} {line}")


@models_app.command("pull")
def models_pull(
    repo: Annotated[str, typer.Argument(help="Hugging Face repo id, e.g. org/name.")],
    source: Annotated[
        Source, typer.Option(help="auto: bundled source if one exists, else hub.")
    ] = Source.AUTO,
) -> None:
    """Download (or build from a bundled source) REPO into the model store."""
    with _errors_as_one_line(), _progress() as progress:
        result = pull_model(repo, source=source, progress=progress)
    model = result.model
    if result.already_present:
        typer.echo(f"{model.repo} already present at {model.path}")
    else:
        typer.echo(f"pulled {model.repo} to {model.path} ({_size(model.size_bytes)})")


@models_app.command("list")
def models_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """List the models in the store with their sizes."""
    store = ModelStore.from_env()
    models = store.models()
    if as_json:
        rows = [
            {
                "repo": m.repo,
                "path": str(m.path),
                "size_bytes": m.size_bytes,
                "source": m.metadata.source if m.metadata else None,
                "sha256": m.metadata.sha256 if m.metadata else None,
                "created": m.metadata.created.isoformat() if m.metadata else None,
            }
            for m in models
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    if not models:
        typer.echo(f"no models in {store.root}")
        return
    table = Table("REPO", "SIZE", "SOURCE", "PATH", box=None)
    for m in models:
        table.add_row(
            m.repo, _size(m.size_bytes), m.metadata.source if m.metadata else "?", str(m.path)
        )
    # NOTE: piped output gets full rows (no 80-column wrapping) so it stays greppable.
    console = Console()
    if not console.is_terminal:
        console = Console(width=1000)
    console.print(table)


@models_app.command("rm")
def models_rm(
    repo: Annotated[
        str, typer.Argument(help="Hugging Face repo id, e.g. org/name.", autocompletion=_complete_repos)
    ],
) -> None:
    """Remove REPO from the model store."""
    with _errors_as_one_line():
        path = ModelStore.from_env().remove(RepoId.parse(repo))
    typer.echo(f"removed {repo} ({path})")


def _size(size_bytes: int) -> str:
    value = float(size_bytes)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


@router_app.command("serve")
def router_serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port for the OpenAI, Anthropic and Ollama routes.")] = 8000,
    ollama_port: Annotated[
        int | None, typer.Option(help="Also listen here, e.g. 11434 for Ollama clients.")
    ] = None,
    admin_token_file: Annotated[
        Path | None,
        typer.Option(help="Admin token file (0600; created if absent). Default: "
                     "$GOMGR_ROUTER_TOKEN_FILE, else ${XDG_STATE_HOME:-~/.local/state}/gomgr/router.token."),
    ] = None,
    api_key: Annotated[
        list[str] | None, typer.Option(help="A client API key (repeatable); none: no key needed.")
    ] = None,
    cors_origin: Annotated[
        list[str] | None, typer.Option(help="An allowed CORS origin, or * (repeatable).")
    ] = None,
) -> None:
    """Run the router in the foreground until Ctrl-C."""
    # NOTE: imported here so other commands do not pay for FastAPI and uvicorn at start-up.
    from router.app import serve
    from router.config import RouterConfig

    serve(RouterConfig(
        host=host, port=port, ollama_port=ollama_port, admin_token_file=admin_token_file,
        api_keys=tuple(api_key or ()), cors_origins=tuple(cors_origin or ()),
    ))


@router_app.command("start")
def router_start() -> None:
    """Start the router in the background (127.0.0.1:$GOMGR_ROUTER_PORT, default 8000) and
    register every running engine with it again."""
    paths = StatePaths.from_env()
    link = RouterLink.from_paths(paths)
    with _errors_as_one_line():
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
    link = RouterLink.from_paths(StatePaths.from_env())
    background = link.daemon.running()
    up = link.is_up()
    with _errors_as_one_line():
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
    """Stop the background router that `gomgr start` or `gomgr router start` started."""
    link = RouterLink.from_paths(StatePaths.from_env())
    stopped = link.daemon.stop()
    typer.echo(f"router at {link.url} stopped" if stopped else "no background router of gomgr runs")
