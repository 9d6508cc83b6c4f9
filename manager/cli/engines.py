"""`gomgr start / stop / restart / ps / logs / tui`: one engine's life, by hand."""

from __future__ import annotations

import json
import math
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from manager.cli.completion import complete_engines, complete_repos
from manager.cli.output import errors_as_one_line, print_table, progress
from manager.lifecycle.start_timeout import DEFAULT_START_TIMEOUT_S
from manager.state.paths import StatePaths

# NOTE: each command imports the lifecycle modules it runs: they load the HTTP client, psutil
# and (for start) readiness, the hub client and the docker SDK, and `gomgr --help`, which
# loads this module, should pay for none of them.
if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Future

    from manager.cli.early_start import EarlyStart
    from manager.lifecycle.start_request import Started, StartRequest
    from manager.models.progress import Progress
    from manager.supervisor.engine_client import EngineClient


class RuntimeChoice(StrEnum):
    AUTO = "auto"
    DOCKER = "docker"
    PROCESS = "process"


EngineTarget = Annotated[
    str, typer.Argument(help="Engine id or served name.", autocompletion=complete_engines)
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
Timeout = Annotated[float, typer.Option(help="Seconds to wait for the engine's /health.")]


def _gpus_option(value: str) -> str:
    from manager.lifecycle.gpus import check_gpus

    try:
        return check_gpus(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _keep_alive_option(value: str | None) -> str | None:
    if value is None:
        # NOTE: typer calls this without the flag too; the checks below import starlette.
        return None
    from router.errors import RouterError
    from router.keep_alive import parse_keep_alive

    try:
        parse_keep_alive(value)
    except RouterError as exc:
        raise typer.BadParameter("give seconds or a duration such as 10m, 1h30m; -1: never") from exc
    return value


def start(
    ctx: typer.Context,
    repo: Annotated[
        str,
        typer.Argument(
            help="Hugging Face repo id (org/name; org/name:Q4_K_M for one GGUF of it), model "
            "directory, or .gguf file (a path starts with /, ./, ../ or ~).",
            autocompletion=complete_repos,
        ),
    ],
    runtime: Annotated[
        RuntimeChoice,
        typer.Option(help="auto: docker where a container can reach a GPU, else process."),
    ] = RuntimeChoice.AUTO,
    gpus: Annotated[
        str,
        typer.Option(
            help="auto: a container gets the GPUs when NVML sees some; all; none; or GPU indices "
            "(e.g. 0,1) the engine is pinned to, with any runtime.",
            callback=_gpus_option,
        ),
    ] = "auto",
    port: Annotated[int | None, typer.Option(help="The engine's port (default: a free one).")] = None,
    served_model_name: Annotated[
        str | None, typer.Option(help="Name clients use as `model` (default: the manifest's, else REPO).")
    ] = None,
    timeout: Timeout = DEFAULT_START_TIMEOUT_S,
    keep_alive: Annotated[
        str | None,
        typer.Option(
            help="Unload the engine after it has been idle this long (e.g. 10m, 1h, 300; a store "
            "model then loads again on its next request). Default: it runs until stopped.",
            callback=_keep_alive_option,
        ),
    ] = None,
    replicas: Annotated[
        int,
        typer.Option(
            min=1,
            help="Run N engines of the model, each on its own port (PORT, PORT+1, ...) and its "
            "own GPU(s) or CPU share, one served name: the router routes over them.",
        ),
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print the engine record as JSON.")] = False,
) -> None:
    """Start an engine for REPO behind the router (pulls the model first). Exit codes: gomgr --help."""
    from manager.lifecycle.replicas import replica_port
    from manager.lifecycle.router_link import RouterLink
    from manager.lifecycle.start_request import StartRequest
    from manager.models.model_path import PATH_PREFIXES
    from manager.supervisor.engine_messages import StartBody

    paths = StatePaths.from_env()
    # NOTE: the supervisor runs the start in its own working directory, so a relative path
    # is made absolute here, where the user typed it.
    if repo.startswith(PATH_PREFIXES):
        repo = str(Path(repo).expanduser().absolute())
    requests = [
        StartRequest(
            repo, runtime.value, replica_port(port, i), served_model_name, timeout, gpus,
            replica=i, replicas=replicas,
        )
        for i in range(replicas)
    ]
    # NOTE (issue 30): a plain start was begun from argv before this command imported
    # (manager/cli/early_start.py): sent to the supervisor, or handed to the one it launched.
    early: EarlyStart | None = ctx.obj
    # NOTE: else a supervisor that has to be started gets the start with it and begins it as
    # it boots, before its own web stack (manager/supervisor/boot_start.py); it boots while
    # this process imports the rest of the command.
    hand_over = StartBody.of(requests[0], keep_alive).model_dump_json() if replicas == 1 else None
    link = RouterLink.from_paths(paths)
    sent = None if early is None else early.sent
    booting = None if early is None else early.booting
    supervisor_up = (
        None if sent is not None
        else link.ensure_in_background(hand_over) if booting is None
        else link.started_in_background(booting)
    )
    from manager.supervisor.engine_client import EngineClient

    # NOTE: with --json stdout holds only the JSON; the runtime line goes to stderr.
    announce = (lambda line: typer.echo(line, err=True)) if as_json else typer.echo
    with errors_as_one_line(), progress() as live:
        client = EngineClient.from_paths(paths)
        if supervisor_up is None:
            assert sent is not None
            done = [client.follow_start(sent, live, announce)]
        elif supervisor_up.result() and hand_over is not None:
            done = [client.follow_boot_start(live, announce)]
        elif replicas == 1:
            done = [client.start(requests[0], live, announce, keep_alive)]
        else:
            done = _start_replicas(client, requests, live, announce, keep_alive)
    if as_json and replicas > 1:
        typer.echo(json.dumps([_as_json(s) for s in done], indent=2))
        return
    for started in done:
        _print_started(started, as_json)


def restart(
    target: EngineTarget, timeout: Timeout = DEFAULT_START_TIMEOUT_S, as_json: JsonFlag = False,
) -> None:
    """Stop one engine and start it again: same model, runtime, port, names and GPUs."""
    from manager.supervisor.engine_client import EngineClient

    announce = (lambda line: typer.echo(line, err=True)) if as_json else typer.echo
    with errors_as_one_line(), progress() as live:
        started = EngineClient.from_paths(StatePaths.from_env()).restart(target, live, announce, timeout)
    _print_started(started, as_json)


def _start_replicas(
    client: EngineClient, requests: list[StartRequest], live: Progress,
    announce: Callable[[str], None], keep_alive: str | None,
) -> list[Started]:
    """The replicas started side by side (each loads while the others do), all or none: when
    one fails, those that started are stopped before the error shows.

    NOTE: Ctrl-C cannot cut a start short in a worker thread; it waits for the starts to end,
    then stops every replica that came up, so nothing is left running.
    """
    from concurrent.futures import ThreadPoolExecutor, wait

    with ThreadPoolExecutor(len(requests)) as pool:
        futures = [pool.submit(client.start, r, live, announce, keep_alive) for r in requests]
        try:
            wait(futures)
        except BaseException:
            wait(futures)
            _stop_started(client, futures)
            raise
    failed = [exc for f in futures if (exc := f.exception()) is not None]
    if failed:
        _stop_started(client, futures)
        raise failed[0]
    return [f.result() for f in futures]


def _stop_started(client: EngineClient, futures: list[Future[Started]]) -> None:
    for future in futures:
        if future.exception() is None:
            client.stop(future.result().record.id)


def _as_json(started: Started) -> dict[str, object]:
    return {**started.record.shown(), "router_url": started.router_url}


def _print_started(started: Started, as_json: bool) -> None:
    record = started.record
    if as_json:
        typer.echo(json.dumps(_as_json(started), indent=2))
        return
    spec = record.handle.spec
    typer.echo(f"ready: {spec.served_name} (engine {record.id}, port {spec.port})")
    typer.echo(f"point clients at {started.router_url}/v1 with model \"{spec.served_name}\" (any API key)")
    typer.echo(f"stop it with: gomgr stop {record.id}")


def stop(
    target: Annotated[
        str | None, typer.Argument(help="Engine id or served name.", autocompletion=complete_engines)
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Stop every engine.")] = False,
) -> None:
    """Deregister and stop engines (SIGTERM, then SIGKILL after 15 s)."""
    from manager.supervisor.engine_client import EngineClient

    if (target is None) == (not all_):
        typer.echo("error: give an engine id or served name, or --all", err=True)
        raise typer.Exit(2)
    with errors_as_one_line():
        stopped = EngineClient.from_paths(StatePaths.from_env()).stop(None if all_ else target)
    for engine in stopped:
        typer.echo(f"stopped {engine.id} ({engine.served_name})")
    if not stopped:
        typer.echo("no engines running")


def ps(as_json: JsonFlag = False) -> None:
    """List engines with their state; cleans up crashed ones and re-registers with a restarted router."""
    from manager.lifecycle.reconcile import reconcile
    from manager.lifecycle.router_link import RouterLink
    from manager.lifecycle.watch_status import waiting_rows

    paths = StatePaths.from_env()
    with errors_as_one_line():
        found = reconcile(paths, RouterLink.from_paths(paths))
    for record in found.removed:
        typer.echo(f"engine {record.id} had exited; removed it (log: {record.handle.log_path})", err=True)
    now = time.time()
    rows = [
        {**r.shown(), "uptime_s": round(now - r.handle.started_at, 1),
         "routed": None if found.routed is None else r.id in found.routed,
         "expires_at": _expires_at(r.labels)}
        for r in found.live
    ] + waiting_rows(paths, now)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo("no engines running")
        return
    table = Table(
        "ID", "NAME", "STATE", "RUNTIME", "PORT", "PID", "UPTIME", "ROUTED", "EXPIRES", box=None
    )
    for row in rows:
        routed = "?" if row["routed"] is None else ("yes" if row["routed"] else "no")
        state = str(row["state"])
        if row.get("retry_in_s") is not None:
            state = f"{state} {math.ceil(float(row['retry_in_s']))}s"  # e.g. "backoff 4s"
        uptime = "-" if row["uptime_s"] is None else f"{int(row['uptime_s'])}s"
        table.add_row(
            str(row["id"] or "-"), str(row["served_name"]), state, str(row["runtime"] or "-"),
            str(row["port"] or "-"), str(row["pid"] or "-"), uptime, routed,
            "-" if row["id"] is None else _expires_cell(row.get("expires_at"), now),
        )
    print_table(table)


def _expires_at(labels: dict[str, str]) -> float | str | None:
    """When the supervisor unloads an engine it loaded on demand: unix seconds, or "never";
    None for an engine started by hand (pinned)."""
    # NOTE: the label names are manager/supervisor/engines.py's, spelled here so `gomgr ps`
    # does not import the supervisor (and through it the router's settings).
    if labels.get("gomgr.on_demand") != "1":
        return None
    value = labels.get("gomgr.expires_at")
    if value is None or value == "never":
        return value
    return float(value)


def _expires_cell(expires_at: object, now: float) -> str:
    if expires_at is None:
        return "pinned"
    if not isinstance(expires_at, float):
        return str(expires_at)
    left = expires_at - now
    return f"in {math.ceil(left)}s" if left > 0 else "due"


def logs(
    target: EngineTarget,
    lines: Annotated[int, typer.Option("-n", "--lines", help="How many last lines.")] = 100,
    follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing new lines.")] = False,
) -> None:
    """Print an engine's log (its stdout and stderr)."""
    from manager.lifecycle.errors import EngineNotFound
    from manager.lifecycle.reconcile import reconcile
    from manager.lifecycle.router_link import RouterLink
    from manager.lifecycle.stop import find_engines
    from manager.runtimes.registry import get_runtime

    paths = StatePaths.from_env()
    with errors_as_one_line():
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


def tui() -> None:
    """Open the dashboard: engines, hardware, readiness and logs; start and stop by key."""
    from manager.tui.app import run_dashboard

    run_dashboard()
