"""The router's ASGI app, and `serve` to run it on uvicorn/uvloop in the foreground."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware

from router.admin import admin_router
from router.client_routes import ClientRoutes
from router.config import RouterConfig, load_or_create_token
from router.errors import (
    RouterError,
    http_error_handler,
    router_error_handler,
    validation_error_handler,
)
from router.health import HealthMonitor
from router.metrics import RouterMetrics
from router.proxy import upstream_client
from router.registry import Registry

logger = logging.getLogger(__name__)


def create_app(config: RouterConfig) -> FastAPI:
    token = load_or_create_token(config.token_path())
    registry = Registry()
    metrics = RouterMetrics()
    client = upstream_client(config.connect_timeout_s)
    monitor = HealthMonitor(registry, config.health_interval_s, config.health_timeout_s)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await monitor.start()
        try:
            yield
        finally:
            registry.close()
            await monitor.stop()
            await client.aclose()

    app = FastAPI(title="gomgr router", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.registry = registry
    app.include_router(admin_router(token, registry, monitor))
    app.router.routes.extend(ClientRoutes(registry, client, metrics, config.api_keys, config.max_body_bytes).routes())
    app.add_exception_handler(RouterError, router_error_handler)
    app.add_exception_handler(HTTPException, http_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=list(config.cors_origins), allow_methods=["*"],
            allow_headers=["*"], allow_credentials="*" not in config.cors_origins,
        )
    return app


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def serve(config: RouterConfig, log_level: str = "info") -> None:
    """Run the router until SIGINT/SIGTERM, on its port and, if set, the Ollama port too."""
    app = create_app(config)
    logger.info("admin token file: %s", config.token_path())
    # NOTE: one server on both sockets, so both ports share one registry and one lifespan.
    ports = [config.port, *([config.ollama_port] if config.ollama_port else [])]
    sockets = [_listen(config.host, port) for port in ports]
    server = uvicorn.Server(uvicorn.Config(
        app, host=config.host, port=config.port, loop="uvloop", log_level=log_level,
        access_log=False, timeout_graceful_shutdown=5,
    ))
    server.run(sockets=sockets)
