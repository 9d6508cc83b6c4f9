"""The client-disconnect watch, CORS, the ``--api-key`` check and the request counter.

Order, outermost first: the disconnect watch (a client that leaves cancels whatever runs
for it), CORS (so preflights are answered and 401s carry CORS headers), the metrics request
counter (so 401s are counted), the API-key check, then the routes.
All are pure ASGI: Starlette's ``BaseHTTPMiddleware`` would buffer streamed responses.
"""

from __future__ import annotations

import hmac
from typing import Any

import orjson
from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.server.disconnect import ClientDisconnectMiddleware
from engine.server.metrics import EngineMetrics, HttpMetricsMiddleware

# NOTE: probes (load balancers, SageMaker, Kubernetes) carry no key.
OPEN_PATHS = frozenset({"/health", "/health_generate", "/ping"})


def _unauthorized_body(path: str, message: str) -> bytes:
    """The 401 body in the shape of the surface the path belongs to."""
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        body: Any = {"type": "error", "error": {"type": "authentication_error", "message": message}}
    elif path.startswith("/api/"):
        body = {"error": message}
    else:
        body = {
            "error": {
                "message": message,
                "type": "authentication_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }
    return orjson.dumps(body)


class ApiKeyMiddleware:
    """Requires ``Authorization: Bearer K`` or ``x-api-key: K`` on all but the open paths."""

    def __init__(self, app: ASGIApp, api_key: str, open_paths: frozenset[str] = OPEN_PATHS) -> None:
        self.app = app
        self.key = api_key.encode()
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path in self.open_paths or scope.get("method") == "OPTIONS" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        given = any(name in (b"authorization", b"x-api-key") for name, _ in scope["headers"])
        message = (
            "Invalid API key." if given else "Missing API key: send 'Authorization: Bearer <key>'."
        )
        body = _unauthorized_body(path, message)
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope: Scope) -> bool:
        ok = False
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    ok |= hmac.compare_digest(token.strip(), self.key)
            elif name == b"x-api-key":
                ok |= hmac.compare_digest(value.strip(), self.key)
        return ok


def install_middleware(
    app: FastAPI,
    api_key: str | None,
    metrics: EngineMetrics | None,
    extra_open_paths: frozenset[str] = frozenset(),
) -> None:
    """Adds the middleware; ``add_middleware`` puts the last one added outermost."""
    if api_key:
        app.add_middleware(
            ApiKeyMiddleware, api_key=api_key, open_paths=OPEN_PATHS | extra_open_paths
        )
    if metrics is not None:
        app.add_middleware(HttpMetricsMiddleware, metrics=metrics, router=app.router)
    # NOTE: a local server: any origin, method and header (browser UIs on other ports).
    app.add_middleware(
        CORSMiddleware,
        allow_origins=["*"],
        allow_methods=["*"],
        allow_headers=["*"],
        allow_credentials=True,
    )
    app.add_middleware(ClientDisconnectMiddleware)
