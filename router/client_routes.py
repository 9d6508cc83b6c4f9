"""Client-facing routes: model listings, and requests dispatched by the body's `model`."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from router.backend import Backend, BackendKind
from router.errors import RouterError, model_not_found, unauthorized
from router.metrics import RouterMetrics
from router.proxy import ProxyResponse
from router.registry import Registry

# NOTE: every kind speaks these; the Anthropic and Ollama routes exist only on our engine.
_ANY_KIND: frozenset[str] | None = None
_ENGINE_ONLY = frozenset({BackendKind.ENGINE})
DISPATCHED: dict[str, frozenset[str] | None] = {
    "/v1/chat/completions": _ANY_KIND,
    "/v1/completions": _ANY_KIND,
    "/v1/embeddings": _ANY_KIND,
    "/v1/responses": _ANY_KIND,
    "/v1/messages": _ENGINE_ONLY,
    "/v1/messages/count_tokens": _ENGINE_ONLY,
    "/api/chat": _ENGINE_ONLY,
    "/api/generate": _ENGINE_ONLY,
}
OLLAMA_API_VERSION = "0.6.4"  # NOTE: the Ollama release the engine's Ollama routes follow


class ClientRoutes:
    def __init__(
        self,
        registry: Registry,
        client: httpx.AsyncClient,
        metrics: RouterMetrics,
        api_keys: tuple[str, ...],
        max_body_bytes: int,
    ) -> None:
        self._registry = registry
        self._client = client
        self._metrics = metrics
        self._api_keys = api_keys
        self._max_body_bytes = max_body_bytes

    def routes(self) -> list[BaseRoute]:
        """Plain Starlette routes: no dependency solving on the hot path."""
        return [
            *(Route(path, self._dispatch, methods=["POST"]) for path in DISPATCHED),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self._model, methods=["GET"]),
            Route("/api/tags", self._tags, methods=["GET", "HEAD"]),
            Route("/api/version", self._version, methods=["GET", "HEAD"]),
            Route("/health", self._health, methods=["GET"]),
            Route("/metrics", self._metrics_route, methods=["GET"]),
        ]

    # -- dispatch --------------------------------------------------------------------

    async def _dispatch(self, request: Request) -> ProxyResponse:
        route = request.url.path
        self._check_key(request)
        raw = await self._read_body(request)
        payload = _parse(raw)
        model = payload["model"]
        kinds = DISPATCHED[route]
        try:
            backend = self._registry.pick(model, kinds)
        except RouterError as exc:
            self._metrics.requests.labels(route, str(exc.status)).inc()
            raise
        query = request.scope.get("query_string", b"")
        return ProxyResponse(
            route=route,
            backend=backend,
            repick=lambda: self._registry.pick(model, kinds),
            method="POST",
            path=route + ("?" + query.decode("latin-1") if query else ""),
            headers=list(request.headers.items()),
            raw_body=raw,
            payload=payload,
            client=self._client,
            registry=self._registry,
            metrics=self._metrics,
        )

    def _check_key(self, request: Request) -> None:
        if not self._api_keys:
            return
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        given = bearer.strip() if scheme.lower() == "bearer" else request.headers.get("x-api-key", "")
        if not any(secrets.compare_digest(given, key) for key in self._api_keys):
            raise unauthorized("Incorrect API key provided")

    async def _read_body(self, request: Request) -> bytes:
        limit = self._max_body_bytes
        too_large = RouterError(413, f"request body over {limit} bytes", code="request_too_large")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    # -- listings --------------------------------------------------------------------

    async def _models(self, request: Request) -> Response:
        self._check_key(request)
        data = [_model_card(b) for b in self._registry.listed()]
        return _json({"object": "list", "data": data})

    async def _model(self, request: Request) -> Response:
        self._check_key(request)
        model_id = request.path_params["model_id"]
        for backend in self._registry.listed():
            if model_id in backend.names():
                return _json(_model_card(backend))
        raise model_not_found(model_id, [b.model for b in self._registry.listed()])

    async def _tags(self, request: Request) -> Response:
        self._check_key(request)
        return _json({"models": [_ollama_tag(b) for b in self._registry.listed()]})

    async def _version(self, _request: Request) -> Response:
        return _json({"version": OLLAMA_API_VERSION})

    async def _health(self, _request: Request) -> Response:
        return _json({"status": "ok", "backends": len(self._registry.backends())})

    async def _metrics_route(self, _request: Request) -> Response:
        return self._metrics.response()


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RouterError(400, f"malformed JSON body: {exc}", code="invalid_json") from exc
    if not isinstance(payload, dict):
        raise RouterError(400, "the body must be a JSON object", code="invalid_json")
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise RouterError(400, "'model' is required (a string)", code="missing_model", param="model")
    return payload


def _json(data: object) -> Response:
    return Response(orjson.dumps(data), media_type="application/json")


def _model_card(backend: Backend) -> dict[str, Any]:
    card: dict[str, Any] = {
        "id": backend.model,
        "object": "model",
        "created": backend.created,
        "owned_by": backend.owned_by or backend.kind.value,
    }
    if backend.max_model_len is not None:
        card["max_model_len"] = backend.max_model_len
    return card


def _ollama_tag(backend: Backend) -> dict[str, Any]:
    """Ollama's /api/tags entry; the router knows no file sizes or quantization, so those are empty."""
    return {
        "name": backend.model,
        "model": backend.model,
        "modified_at": datetime.fromtimestamp(backend.created, UTC).isoformat().replace("+00:00", "Z"),
        "size": 0,
        "digest": hashlib.sha256(backend.model.encode()).hexdigest(),
        "details": {
            "parent_model": "", "format": "", "family": "", "families": [],
            "parameter_size": "", "quantization_level": "",
        },
    }
