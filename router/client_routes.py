"""Client-facing routes the router answers itself: model listings, version, health, metrics."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from router.api_keys import ApiKeys
from router.catalog_listing import Listed, listing
from router.errors import model_not_found
from router.loader import ModelLoader
from router.metrics import RouterMetrics
from router.ollama_routes import ollama_model_fields
from router.registry import Registry

OLLAMA_API_VERSION = "0.6.4"  # NOTE: the Ollama release the engine's Ollama routes follow
CATALOG_OWNER = "gomgr"  # NOTE: owned_by of a catalog model no backend serves yet


class ClientRoutes:
    def __init__(
        self,
        registry: Registry,
        metrics: RouterMetrics,
        api_keys: ApiKeys,
        loader: ModelLoader | None = None,
    ) -> None:
        self._registry = registry
        self._metrics = metrics
        self._api_keys = api_keys
        self._loader = loader

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self._model, methods=["GET"]),
            Route("/api/tags", self._tags, methods=["GET", "HEAD"]),
            Route("/api/version", self._version, methods=["GET", "HEAD"]),
            Route("/health", self._health, methods=["GET"]),
            Route("/metrics", self._metrics_route, methods=["GET"]),
        ]

    def _check_key(self, request: Request) -> None:
        headers = request.headers
        self._api_keys.check(headers.get("authorization", ""), headers.get("x-api-key", ""))

    # -- listings --------------------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        self._check_key(request)
        data = [self._model_card(item) for item in listing(self._registry, self._loader)]
        return _json({"object": "list", "data": data})

    async def _model(self, request: Request) -> Response:
        self._check_key(request)
        model_id = request.path_params["model_id"]
        shown = listing(self._registry, self._loader)
        for item in shown:
            if model_id in item.names():
                return _json(self._model_card(item))
        raise model_not_found(model_id, [item.name for item in shown])

    async def _tags(self, request: Request) -> Response:
        self._check_key(request)
        return _json({"models": [_ollama_tag(item) for item in listing(self._registry, self._loader)]})

    def _model_card(self, item: Listed) -> dict[str, Any]:
        backend = item.backend
        card: dict[str, Any] = {
            "id": item.name,
            "object": "model",
            "created": item.created() if backend is None else backend.created,
            "owned_by": (backend.owned_by or backend.kind.value) if backend else CATALOG_OWNER,
        }
        if backend is not None and backend.max_model_len is not None:
            card["max_model_len"] = backend.max_model_len
        if backend is not None and backend.capabilities:
            card["capabilities"] = list(backend.capabilities)  # NOTE: an extension, as max_model_len
        if self._loader is not None:
            # NOTE: llama.cpp's router-mode shape, which Open WebUI reads to show loaded models.
            card["status"] = {"value": item.state().value}
        return card

    async def _version(self, _request: Request) -> Response:
        return _json({"version": OLLAMA_API_VERSION})

    async def _health(self, _request: Request) -> Response:
        return _json({"status": "ok", "backends": len(self._registry.backends())})

    async def _metrics_route(self, _request: Request) -> Response:
        return self._metrics.response()


def _json(data: object) -> Response:
    return Response(orjson.dumps(data), media_type="application/json")


def _ollama_tag(item: Listed) -> dict[str, Any]:
    """Ollama's /api/tags entry."""
    modified = datetime.fromtimestamp(item.created(), UTC).isoformat().replace("+00:00", "Z")
    return {**ollama_model_fields(item.name, item.size()), "modified_at": modified}
