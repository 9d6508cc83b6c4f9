"""The supervisor's boot, up to its web stack: checks, its port, and the start handed to it.

NOTE (issue 30): light to import (no FastAPI, uvicorn or the router's app): a cold `gomgr
start` waits on this process for its engine, so the supervisor owns its port and begins the
handed-over start (manager/supervisor/boot_start.py) first; the router's web stack, ~0.5
CPU-s of imports, comes after (manager/supervisor/front_door.py), while the engine starts.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from manager.lifecycle.router_link import BOOT_START_ENV
from manager.state.paths import ROUTER_PORT_ENV, ROUTER_TOKEN_ENV, StatePaths
from manager.state.records import EngineRecord
from manager.supervisor.settings import SupervisorSettings
from router.config import RouterConfig
from router.listening import listen

# NOTE: "1" turns on RouterConfig.loading_progress (streamed chats held while their model loads
# get reasoning_content progress), as the flag --loading-progress does; `gomgr serve` and the
# background router that `gomgr router start` runs both read it.
LOADING_PROGRESS_ENV = "GOMGR_LOADING_PROGRESS"

# NOTE: BootStart imports the start's planning: only where a start was handed over.
if TYPE_CHECKING:
    from manager.supervisor.boot_start import BootStart


@dataclass(frozen=True)
class Booted:
    config: RouterConfig
    settings: SupervisorSettings
    paths: StatePaths
    sockets: list[socket.socket]
    # NOTE: with a start handed over, the live engines found before it began: the supervisor
    # routes these once it serves, and not the one its boot start runs. None: those it finds.
    adopt: tuple[EngineRecord, ...] | None = None
    start: BootStart | None = None


def boot(config: RouterConfig) -> Booted:
    """Check the settings, set the environment the engine starts read, listen, and begin the
    start in $GOMGR_BOOT_START if there is one. SystemExit with one line on a bad setting,
    before anything listens or starts."""
    try:
        settings = SupervisorSettings.from_env()
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc
    if config.tls_certfile is not None:
        # NOTE: the supervisor registers its engines through its own front door over plain
        # HTTP on loopback (manager/lifecycle/router_link.py).
        raise SystemExit(
            "error: TLS is for the standalone router (python -m router); the supervisor's "
            "router listens on loopback over plain HTTP"
        )
    if os.environ.get(LOADING_PROGRESS_ENV, "").strip() == "1":
        config = dataclasses.replace(config, loading_progress=True)
    # NOTE: the supervisor starts engines with `start_engine`, which registers them through
    # the router link that $GOMGR_ROUTER_PORT and $GOMGR_ROUTER_TOKEN_FILE name: they must
    # name this very process.
    os.environ[ROUTER_PORT_ENV] = str(config.port)
    os.environ[ROUTER_TOKEN_ENV] = str(config.token_path())
    paths = StatePaths.from_env()
    # NOTE: popped, so no engine or later process inherits it.
    hand_over = os.environ.pop(BOOT_START_ENV, None)
    sockets = listen(config)
    if hand_over is None:
        return Booted(config, settings, paths, sockets)
    # NOTE: only once the port is ours: a second supervisor started meanwhile fails to listen
    # above and exits, having started nothing.
    from manager.lifecycle.reconcile import reconcile
    from manager.supervisor.boot_start import BootStart

    live = reconcile(paths, None).live
    return Booted(config, settings, paths, sockets, live, BootStart.begin(hand_over, paths))
