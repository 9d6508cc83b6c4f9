"""The router's ASGI app, and `serve` to run it on uvicorn/uvloop in the foreground."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import APIRouter, FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from router.admin import admin_router
from router.api_keys import ApiKeys
from router.client_routes import ClientRoutes
from router.config import RouterConfig, load_or_create_token
from router.dispatch import DISPATCHED, Dispatch
from router.errors import (
    RouterError,
    http_error_handler,
    router_error_handler,
    validation_error_handler,
)
from router.health import HealthMonitor
from router.listening import listen
from router.loader import ModelLoader
from router.metrics import RouterMetrics
from router.ollama_routes import OllamaRoutes
from router.on_demand import OnDemand
from router.proxy import Proxy
from router.registry import Registry
from router.routing_policy import make_policy
from router.static_backends import load_static_backends
from router.upstream import UpstreamPool

logger = logging.getLogger(__name__)

# NOTE (issue 22): longer than the idle expiry of the clients' pools (httpx and the openai
# SDK: 5 s, uvicorn's default too), so an idle connection is always closed by the client;
# when the server closes it, a request sent on it that moment is reset (httpx.ReadError).
KEEP_ALIVE_S = 75


class FrontDoor:
    """The ASGI app uvicorn runs: dispatched POSTs straight to `Dispatch`, the rest to FastAPI.

    NOTE: FastAPI's stack (error, telemetry, body-limit, exception and exit-stack middleware,
    then routing) cost more per request than the proxying itself; the dispatched routes stay
    registered in FastAPI too, so their other methods still get its 405.
    """

    def __init__(self, dispatch: Dispatch, api: FastAPI) -> None:
        self._dispatch = dispatch
        self._api = api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in DISPATCHED:
            await self._dispatch(scope, receive, send)
        else:
            await self._api(scope, receive, send)


def create_app(
    config: RouterConfig,
    loader: ModelLoader | None = None,
    *,
    registry: Registry | None = None,
    owner_routes: APIRouter | None = None,
) -> ASGIApp:
    """The router's ASGI app.

    With a `loader`, requests for models in its catalog that no backend serves are held while
    it loads them (router/on_demand.py). NOTE: the owner of engines makes the `Registry`,
    builds its loader on it (the loader registers the engines it starts there) and passes both;
    the app's lifespan runs `loader.start()` after the health monitor and `loader.stop()` first
    on shutdown. `owner_routes` join the admin API (router/admin.py).
    """
    if loader is not None and registry is None:
        raise ValueError("a loader needs the Registry it registers its engines in")
    token = load_or_create_token(config.token_path())
    registry = registry if registry is not None else Registry(make_policy(config.routing_policy))
    # NOTE: read before serving, so a bad file is one line and nothing listens.
    pinned = load_static_backends(config.backends_file) if config.backends_file else []
    metrics = RouterMetrics()
    pool = UpstreamPool(config.connect_timeout_s)
    monitor = HealthMonitor(registry, config.health_interval_s, config.health_timeout_s)
    api_keys = ApiKeys(config.api_keys)
    on_demand = (
        OnDemand(
            loader,
            registry,
            config.max_held_per_model,
            config.loading_comment_s,
            config.loading_progress,
        )
        if loader is not None
        else None
    )
    proxy = Proxy(pool, registry, metrics)
    dispatch = Dispatch(registry, proxy, api_keys, config.max_body_bytes, on_demand)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await monitor.start()
        for backend in pinned:
            registry.register(backend)
        if loader is not None:
            await loader.start()
        try:
            yield
        finally:
            if loader is not None:
                await loader.stop()
            registry.close()
            await monitor.stop()
            pool.close()

    api = FastAPI(
        title="gomgr router", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    api.include_router(admin_router(token, registry, monitor, owner_routes))
    api.router.routes.extend(Route(path, dispatch, methods=["POST"]) for path in DISPATCHED)
    api.router.routes.extend(ClientRoutes(registry, metrics, api_keys, loader).routes())
    api.router.routes.extend(OllamaRoutes(registry, api_keys, loader).routes())
    api.add_exception_handler(RouterError, router_error_handler)
    api.add_exception_handler(HTTPException, http_error_handler)
    api.add_exception_handler(RequestValidationError, validation_error_handler)
    app: ASGIApp = FrontDoor(dispatch, api)
    if config.cors_origins:
        app = CORSMiddleware(
            app,
            allow_origins=list(config.cors_origins),
            allow_methods=["*"],
            allow_headers=["*"],
            allow_credentials="*" not in config.cors_origins,
        )
    return app


def serve(
    config: RouterConfig,
    log_level: str = "info",
    loader: ModelLoader | None = None,
    *,
    registry: Registry | None = None,
    owner_routes: APIRouter | None = None,
    sockets: list[socket.socket] | None = None,
) -> None:
    """Run the router until SIGINT/SIGTERM, on its port and, if set, the Ollama port too
    (`sockets`: those ports' listening sockets, made by `router.listening.listen`; None: made
    here); the rest as in `create_app`."""
    # NOTE: one server on both sockets, so both ports share one registry and one lifespan.
    if sockets is None:
        sockets = listen(config)
    app = create_app(config, loader, registry=registry, owner_routes=owner_routes)
    logger.info("admin token file: %s", config.token_path())
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            loop="uvloop",
            log_level=log_level,
            access_log=False,
            timeout_graceful_shutdown=5,
            timeout_keep_alive=KEEP_ALIVE_S,
            http="httptools",
            # NOTE: the router reads no client addresses; X-Forwarded-* parsing per request is waste.
            proxy_headers=False,
            ssl_certfile=config.tls_certfile,
            ssl_keyfile=config.tls_keyfile,
        )
    )
    server.run(sockets=sockets)
