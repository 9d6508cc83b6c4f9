"""Ollama routes the router answers from its registry: `/` and /api/ps.

/api/tags and /api/version are in `client_routes`; /api/chat, /api/generate and /api/show
are dispatched by their body's `model` to the engine serving it (`dispatch.DISPATCHED`).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from router.api_keys import ApiKeys
from router.catalog_listing import Listed, listing
from router.loader import LoadState, ModelLoader
from router.registry import Registry

# NOTE: what Ollama's server answers on `/`; clients probe it to find a running Ollama.
ROOT_TEXT = "Ollama is running"
# NOTE: a pinned engine (started by hand) never unloads; Ollama shows such a model with a
# far-off expiry.
NEVER_EXPIRES = "9999-12-31T23:59:59Z"


class OllamaRoutes:
    def __init__(self, registry: Registry, api_keys: ApiKeys, loader: ModelLoader | None) -> None:
        self._registry = registry
        self._api_keys = api_keys
        self._loader = loader

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
        loaded = [
            item for item in listing(self._registry, self._loader)
            if item.backend is not None and item.state() is LoadState.LOADED
        ]
        body = {"models": [_running_model(item) for item in loaded]}
        return Response(orjson.dumps(body), media_type="application/json")


def ollama_model_fields(name: str, size: int) -> dict[str, Any]:
    """What /api/tags and /api/ps entries share; the router knows no quantization, so that is
    empty, and the digest is the name's (stable across both)."""
    return {
        "name": name,
        "model": name,
        "size": size,
        "digest": hashlib.sha256(name.encode()).hexdigest(),
        "details": {
            "parent_model": "",
            "format": "",
            "family": "",
            "families": [],
            "parameter_size": "",
            "quantization_level": "",
        },
    }


def _running_model(item: Listed) -> dict[str, Any]:
    """Ollama's /api/ps entry: a loaded model, with the expiry its keep-alive gives."""
    expires = item.entry.expires_at if item.entry is not None else None
    expires_at = (
        NEVER_EXPIRES if expires is None
        else datetime.fromtimestamp(expires, UTC).isoformat().replace("+00:00", "Z")
    )
    entry = {**ollama_model_fields(item.name, item.size()), "expires_at": expires_at, "size_vram": 0}
    assert item.backend is not None
    if item.backend.max_model_len is not None:
        entry["context_length"] = item.backend.max_model_len
    return entry
