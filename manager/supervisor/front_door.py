"""The router and the supervisor in one process: `gomgr serve`, and the background router."""

from __future__ import annotations

import dataclasses
import os

from manager.models.store import ModelStore
from manager.state.paths import ROUTER_PORT_ENV, ROUTER_TOKEN_ENV, StatePaths
from manager.supervisor.apply_api import apply_routes
from manager.supervisor.engine_api import engine_routes
from manager.supervisor.settings import SupervisorSettings
from manager.supervisor.supervisor import Supervisor
from router.app import serve
from router.config import RouterConfig
from router.registry import Registry
from router.routing_policy import make_policy

# NOTE: "1" turns on RouterConfig.loading_progress (streamed chats held while their model loads
# get reasoning_content progress), as the flag --loading-progress does; `gomgr serve` and the
# background router that `gomgr router start` runs both read it.
LOADING_PROGRESS_ENV = "GOMGR_LOADING_PROGRESS"


def serve_supervised(config: RouterConfig, log_level: str = "info") -> None:
    """Serve until SIGINT/SIGTERM; on the way out every model loaded on demand is unloaded."""
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
    registry = Registry(make_policy(config.routing_policy))
    paths = StatePaths.from_env()
    supervisor = Supervisor(paths, ModelStore.from_env(), registry, settings)
    owner_routes = engine_routes(supervisor, paths)
    owner_routes.include_router(apply_routes(supervisor, paths))
    serve(config, log_level, supervisor, registry=registry, owner_routes=owner_routes)
