"""On an embedding server, generation routes answer a clear 400 in their surface's error shape."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

_MESSAGE = "this is an embedding model: it cannot generate text; use /v1/embeddings or /encode"
_GENERATION_PATHS = frozenset(
    {
        "/generate",
        "/v1/completions",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/api/chat",
        "/api/generate",
        "/invocations",
    }
)


def _body(path: str) -> bytes:
    if path == "/v1/messages":
        body: Any = {"type": "error", "error": {"type": "invalid_request_error", "message": _MESSAGE}}
    elif path.startswith("/api/"):
        body = {"error": _MESSAGE}
    else:
        body = {"error": {"message": _MESSAGE, "type": "invalid_request_error", "param": None, "code": None}}
    return orjson.dumps(body)


class GenerationGuard:
    def __init__(self, app: ASGIApp, extra_paths: frozenset[str]) -> None:
        self.app = app
        self.paths = _GENERATION_PATHS | extra_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT") or path not in self.paths:
            await self.app(scope, receive, send)
            return
        body = _body(path)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def install_generation_guard(app: FastAPI, extra_paths: frozenset[str]) -> None:
    """``extra_paths``: generation routes configured at run time (the Vertex predict route)."""
    app.add_middleware(GenerationGuard, extra_paths=extra_paths)
