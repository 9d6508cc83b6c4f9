"""`gomgr start`'s first act, before typer, pydantic or httpx are imported (issue 30).

A plain `gomgr start REPO [--runtime R] [--port N] [--served-model-name S] [--timeout T]
[--gpus G] [--json]` is read here from argv and its start begun at once: posted to the
supervisor that answers (its engine is planned and spawned while this process imports the
rest of the command), or, where none answers, handed to the supervisor this launches
($GOMGR_BOOT_START; manager/supervisor/boot_start.py). The typer command then parses the
same argv as always and follows that start (manager/cli/engines.py).

Anything else (another command or option, a value typer would refuse or normalise, a second
REPO, `--`) begins nothing: the typer command then does the whole start itself, and what it
refuses it refuses with its own message. So this reads a strict subset of what typer accepts,
into the very StartBody the command would send (tests/manager/test_cli_early_start.py).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from manager.lifecycle.gpus import check_gpus
from manager.lifecycle.router_link import BOOT_START_ENV, RouterLink
from manager.lifecycle.start_timeout import DEFAULT_START_TIMEOUT_S
from manager.models.model_path import PATH_PREFIXES
from manager.state.paths import StatePaths

if TYPE_CHECKING:
    import http.client
    import subprocess

RUNTIMES = ("auto", "docker", "process")
VALUED = ("--runtime", "--port", "--served-model-name", "--timeout", "--gpus")
# NOTE: typer's shell completion runs the script with this variable set; it must begin nothing.
COMPLETE_ENV = "_GOMGR_COMPLETE"


@dataclass(frozen=True)
class EarlyStart:
    """A start begun from argv: `sent` on the supervisor that answered (its reply unread), or
    handed over to the supervisor `booting` (launched, not yet answering)."""

    sent: http.client.HTTPConnection | None = None
    booting: subprocess.Popen[bytes] | None = None


def begin_early_start(argv: list[str]) -> EarlyStart | None:
    """The start `argv` asks for, begun; None where it is not a plain start (see above) or
    nothing could be begun (no token file, a router recorded but not answering): typer's turn."""
    body = start_body(argv)
    if body is None or os.environ.get(COMPLETE_ENV):
        return None
    try:
        link = RouterLink.from_paths(StatePaths.from_env())
    except ValueError:  # NOTE: a bad $GOMGR_ROUTER_PORT: the command says so
        return None
    try:
        return EarlyStart(sent=link.send_admin("/engines", body))
    except ConnectionRefusedError:
        pass
    except Exception:  # noqa: BLE001 - the command meets it again and reports it
        return None
    if link.daemon.record_path.exists():
        # NOTE: a router of this state directory is recorded (running elsewhere, or a stale
        # record): the command sorts that out (RouterDaemon.running).
        return None
    try:
        return EarlyStart(booting=link.daemon.launch({BOOT_START_ENV: body}))
    except OSError:  # NOTE: e.g. a state directory it may not write: the command says so
        return None


def start_body(argv: list[str]) -> str | None:
    """The StartBody JSON of a plain `start` argv, else None."""
    if not argv or argv[0] != "start":
        return None
    repo: str | None = None
    values: dict[str, str] = {}
    rest = iter(argv[1:])
    for token in rest:
        name, eq, inline = token.partition("=")
        if name in VALUED and name not in values:
            value = inline if eq else next(rest, None)
            if value is None or value.startswith("-"):
                return None
            values[name] = value
        elif token == "--json" and "--json" not in values:
            values[token] = ""
        elif token.startswith("-") or repo is not None:
            return None
        else:
            repo = token
    if repo is None:
        return None
    return _body(repo, values)


def _body(repo: str, values: dict[str, str]) -> str | None:
    runtime = values.get("--runtime", "auto")
    port = values.get("--port")
    timeout = values.get("--timeout")
    try:
        gpus = check_gpus(values.get("--gpus", "auto"))
        timeout_s = DEFAULT_START_TIMEOUT_S if timeout is None else float(timeout)
    except ValueError:
        return None
    if runtime not in RUNTIMES or not (math.isfinite(timeout_s) and timeout_s > 0):
        return None
    if port is not None and not (port.isdigit() and 0 < int(port) < 65536):
        return None
    if repo.startswith(PATH_PREFIXES):
        # NOTE: as the command does: the supervisor runs the start in its own directory.
        repo = str(Path(repo).expanduser().absolute())
    return json.dumps({
        "repo": repo, "runtime": runtime, "port": None if port is None else int(port),
        "served_name": values.get("--served-model-name"), "timeout_s": timeout_s, "gpus": gpus,
        "aliases": [], "variant": None, "labels": {}, "replica": 0, "replicas": 1,
        "keep_alive": None,
    })  # fmt: skip
