"""Ollama routes the router answers from its registry: `/` and /api/ps.

/api/tags and /api/version are in `client_routes`; /api/chat, /api/generate and /api/show
are dispatched by their body's `model` to the engine serving it (`dispatch.DISPATCHED`).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from router.api_keys import ApiKeys
from router.backend import Backend, BackendState
from router.registry import Registry

# NOTE: what Ollama's server answers on `/`; clients probe it to find a running Ollama.
ROOT_TEXT = "Ollama is running"
# NOTE: engines never unload their model; Ollama shows such a model with a far-off expiry.
NEVER_EXPIRES = "9999-12-31T23:59:59Z"


class OllamaRoutes:
    def __init__(self, registry: Registry, api_keys: ApiKeys) -> None:
        self._registry = registry
        self._api_keys = api_keys

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/", self._root, methods=["GET", "HEAD"]),
            Route("/api/ps", self._ps, methods=["GET"]),
        ]

    async def _root(self, _request: Request) -> Response:
        return PlainTextResponse(ROOT_TEXT)

    async def _ps(self, request: Request) -> Response:
        headers = request.headers
        self._api_keys.check(headers.get("authorization", ""), headers.get("x-api-key", ""))
        ready = [b for b in self._registry.listed() if b.state is BackendState.READY]
        body = {"models": [_running_model(b) for b in ready]}
        return Response(orjson.dumps(body), media_type="application/json")


def ollama_model_fields(backend: Backend) -> dict[str, Any]:
    """What /api/tags and /api/ps entries share; the router knows no file sizes or
    quantization, so those are empty, and the digest is the name's (stable across both)."""
    return {
        "name": backend.model,
        "model": backend.model,
        "size": 0,
        "digest": hashlib.sha256(backend.model.encode()).hexdigest(),
        "details": {
            "parent_model": "",
            "format": "",
            "family": "",
            "families": [],
            "parameter_size": "",
            "quantization_level": "",
        },
    }


def _running_model(backend: Backend) -> dict[str, Any]:
    """Ollama's /api/ps entry."""
    entry = {**ollama_model_fields(backend), "expires_at": NEVER_EXPIRES, "size_vram": 0}
    if backend.max_model_len is not None:
        entry["context_length"] = backend.max_model_len
    return entry
