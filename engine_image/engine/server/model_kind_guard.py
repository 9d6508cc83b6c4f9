"""On a server of a model that cannot generate (embedding, cross-encoder, reward), generation
routes answer a clear 400 in their surface's error shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import orjson
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.config.architectures import CROSS_ENCODER_ARCHITECTURES, REWARD_ARCHITECTURES

ModelKind = Literal["generation", "embedding", "cross-encoder", "reward"]

_MESSAGE = "this is an embedding model: it cannot generate text; use /v1/embeddings or /encode"
REFUSALS: dict[ModelKind, str] = {
    "embedding": _MESSAGE,
    "cross-encoder": "this is a cross-encoder (rerank) model: it cannot generate text; use /v1/rerank",
    "reward": "this is a reward (sequence-classification) model: it cannot generate text; use /classify",
}
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


# What each kind is and serves, to open a refusal on any route.
KIND_DESCRIPTIONS: dict[ModelKind, str] = {
    "generation": "this is a generation model",
    "embedding": "this is an embedding model (it serves /v1/embeddings and /encode)",
    "cross-encoder": "this is a cross-encoder (it serves /v1/rerank and /classify)",
    "reward": "this is a reward model (it serves /classify)",
}


def model_kind(architectures: Sequence[str], is_embedding: bool) -> ModelKind:
    """What the served model does, from config.json's architectures and --is-embedding."""
    if any(arch in CROSS_ENCODER_ARCHITECTURES for arch in architectures):
        return "cross-encoder"
    if any(arch in REWARD_ARCHITECTURES for arch in architectures):
        return "reward"
    return "embedding" if is_embedding else "generation"


def _body(path: str, message: str) -> bytes:
    if path == "/v1/messages":
        body: Any = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    elif path.startswith("/api/"):
        body = {"error": message}
    else:
        body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    return orjson.dumps(body)


class GenerationGuard:
    def __init__(self, app: ASGIApp, extra_paths: frozenset[str], message: str = _MESSAGE) -> None:
        self.app = app
        self.paths = _GENERATION_PATHS | extra_paths
        self.message = message

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT") or path not in self.paths:
            await self.app(scope, receive, send)
            return
        body = _body(path, self.message)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def install_generation_guard(app: FastAPI, extra_paths: frozenset[str], message: str = _MESSAGE) -> None:
    """``extra_paths``: generation routes configured at run time (the Vertex predict route);
    ``message``: why this model cannot generate (REFUSALS)."""
    app.add_middleware(GenerationGuard, extra_paths=extra_paths, message=message)
