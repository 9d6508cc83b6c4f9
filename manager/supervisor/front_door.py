"""The router and the supervisor in one process: `gomgr serve`, and the background router."""

from __future__ import annotations

from manager.models.store import ModelStore
from manager.supervisor.apply_api import apply_routes
from manager.supervisor.boot import Booted
from manager.supervisor.engine_api import engine_routes
from manager.supervisor.supervisor import Supervisor
from router.app import serve
from router.registry import Registry
from router.routing_policy import make_policy


def serve_supervised(booted: Booted, log_level: str = "info") -> None:
    """Serve until SIGINT/SIGTERM, on the sockets `booted` listens on (manager/supervisor/
    boot.py); on the way out every model loaded on demand is unloaded, and a start handed
    over at boot that still runs is cancelled and undone."""
    config, paths = booted.config, booted.paths
    try:
        registry = Registry(make_policy(config.routing_policy))
        supervisor = Supervisor(paths, ModelStore.from_env(), registry, booted.settings, adopt=booted.adopt)
        owner_routes = engine_routes(supervisor, paths, booted.start)
        owner_routes.include_router(apply_routes(supervisor, paths))
        serve(config, log_level, supervisor, registry=registry, owner_routes=owner_routes, sockets=booted.sockets)
    finally:
        if booted.start is not None:
            booted.start.cancel()
