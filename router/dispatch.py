"""Requests dispatched by their body's `model` to a backend: a pure ASGI app on the hot path."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from router.api_keys import ApiKeys
from router.backend import BackendKind
from router.disconnect import until_disconnect
from router.early_head import EarlyHead, streams_sse
from router.errors import RouterError, model_not_found
from router.keep_alive import KEEP_ALIVE_FIELD, parse_keep_alive
from router.loader import CatalogEntry
from router.ollama_load import is_load_only, load_reply
from router.on_demand import OnDemand
from router.proxy import DROP_REQUEST, Proxy
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
    "/api/show": _ENGINE_ONLY,
    "/v1/rerank": _ANY_KIND,
    "/v2/rerank": _ANY_KIND,
    "/v1/score": _ANY_KIND,
    "/classify": _ANY_KIND,
    "/v1/classify": _ANY_KIND,
}
# NOTE: native routes whose upstream body has no `model` (SGLang's /classify takes an
# EmbeddingReqInput; our engine refuses unknown fields there): the router reads `model` to
# dispatch and forwards the body without it.
MODEL_NOT_FORWARDED = frozenset({"/classify"})


Exchange = Callable[[Send], Awaitable[None]]


class Dispatch:
    """POST on a `DISPATCHED` route: check the key, read and parse the body, proxy it; with
    `on_demand`, a request for a catalog model no backend serves waits for it to load."""

    def __init__(
        self,
        registry: Registry,
        proxy: Proxy,
        api_keys: ApiKeys,
        max_body_bytes: int,
        on_demand: OnDemand | None = None,
    ) -> None:
        self._registry = registry
        self._proxy = proxy
        self._api_keys = api_keys
        self._max_body_bytes = max_body_bytes
        self._on_demand = on_demand

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route: str = scope["path"]
        forwarded: list[tuple[bytes, bytes]] = []
        dropped: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name not in DROP_REQUEST:
                forwarded.append((name, value))
            else:
                dropped[name] = value
        try:
            self._api_keys.check(
                dropped.get(b"authorization", b"").decode("latin-1"),
                dropped.get(b"x-api-key", b"").decode("latin-1"),
            )
            raw = await self._read_body(receive, dropped.get(b"content-length", b""))
            payload = _parse(raw)
            keep_alive = None
            if KEEP_ALIVE_FIELD in payload:
                # NOTE: the router's business, not the backend's (the engine's embedding and
                # rerank routes refuse unknown fields): parsed here and not forwarded.
                keep_alive = parse_keep_alive(payload.pop(KEEP_ALIVE_FIELD))
                raw = orjson.dumps(payload)
            entry = self._catalog_entry(payload["model"])
        except RouterError as exc:
            await self._proxy.send_error(send, route, exc)
            return
        except ClientDisconnect:
            return
        model: str = entry.name if entry is not None else payload["model"]
        if route in MODEL_NOT_FORWARDED:
            payload, raw = self._without_model(payload, model)
        kinds = DISPATCHED[route]
        query: bytes = scope["query_string"]
        target = route.encode() + (b"?" + query if query else b"")

        async def exchange(out: Send) -> None:
            await self._proxy.exchange(
                out,
                route=route,
                target=target,
                headers=forwarded,
                payload=payload,
                raw_body=raw,
                pick=lambda avoid: self._registry.pick(model, kinds, payload, avoid),
            )

        if entry is None:
            await until_disconnect(receive, lambda: exchange(send))
            return

        async def on_demand() -> None:
            await self._on_demand_exchange(send, route, payload, entry, keep_alive, exchange)

        await until_disconnect(receive, on_demand)

    def _catalog_entry(self, model: str) -> CatalogEntry | None:
        """The loader's entry for `model`; None without a loader or for a model only the
        registry knows; a 404 for a name in neither."""
        if self._on_demand is None:
            return None
        entry = self._on_demand.entry(model)
        if entry is None and self._registry.served_name(model) is None:
            raise model_not_found(model, self._on_demand.available())
        return entry

    async def _on_demand_exchange(
        self,
        send: Send,
        route: str,
        payload: dict[str, Any],
        entry: CatalogEntry,
        keep_alive: float | None,
        exchange: Exchange,
    ) -> None:
        """Hold the request until `entry` is loaded, then proxy it, counted by the loader."""
        assert self._on_demand is not None
        on_demand = self._on_demand
        load_only = is_load_only(route, payload)
        out: Send = send
        if not on_demand.loaded(entry) and not (load_only and keep_alive == 0):
            early = (
                EarlyHead(send, route, entry.name, progress=on_demand.progress)
                if streams_sse(route, payload)
                else None
            )
            out = early or send
            try:
                await on_demand.hold(entry, early.comment if early else None)
            except RouterError as exc:
                await self._proxy.send_error(out, route, exc)
                return
        # NOTE: no await between the hold and request_started: the loader cannot unload the
        # model in between, and never does while a request is in flight.
        on_demand.loader.request_started(entry.name, keep_alive)
        try:
            if load_only:
                reply = load_reply(route, payload["model"], unloaded=keep_alive == 0)
                await self._proxy.send_own(out, route, reply)
            else:
                await exchange(out)
        finally:
            on_demand.loader.request_finished(entry.name)

    def _without_model(self, payload: dict[str, Any], model: str) -> tuple[dict[str, Any], bytes]:
        """The body to forward without `model`, and the payload the proxy reads.

        NOTE: the proxy forwards the raw body when `payload["model"]` is the picked backend's
        served name and re-encodes the payload (with `model`) otherwise, so an alias is
        resolved to its served name here.
        """
        raw = orjson.dumps({k: v for k, v in payload.items() if k != "model"})
        return {**payload, "model": self._registry.served_name(model) or model}, raw

    async def _read_body(self, receive: Receive, declared: bytes) -> bytes:
        limit = self._max_body_bytes
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
            more = message.get("more_body", False)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _too_large(limit: int) -> RouterError:
    return RouterError(413, f"request body over {limit} bytes", code="request_too_large")


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RouterError(400, f"malformed JSON body: {exc}", code="invalid_json") from exc
    if not isinstance(payload, dict):
        raise RouterError(400, "the body must be a JSON object", code="invalid_json")
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise RouterError(
            400, "'model' is required (a string)", code="missing_model", param="model"
        )
    return payload
