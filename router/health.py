"""The health monitor: one watch loop per backend, polling its /health.

200 → ready; any other answer → starting (e.g. the engine's 503 during warm-up); a refused
connection → dead, removed at once. A timeout changes nothing: a busy engine on a loaded
machine can be slow to answer without being gone.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

from router.backend import Backend, BackendKind, BackendState
from router.capabilities import capabilities_from_model_info
from router.registry import Registry

logger = logging.getLogger(__name__)


class Unreachable(Exception):
    """The backend refused the connection: nothing listens on its port."""


async def probe(client: httpx.AsyncClient, backend: Backend) -> BackendState | None:
    """The state /health implies, or None when it did not answer in time."""
    try:
        response = await client.get(f"{backend.base_url}/health", headers=_auth(backend))
    except httpx.ConnectError as exc:
        raise Unreachable(str(exc) or type(exc).__name__) from exc
    except httpx.TransportError:
        return None
    # NOTE: a generic OpenAI-compatible server may have no /health; one that answers 404
    # there is up, and requests will tell the rest.
    if response.status_code == 200 or (
        response.status_code == 404 and backend.kind is BackendKind.OPENAI
    ):
        return BackendState.READY
    return BackendState.STARTING


async def discover(client: httpx.AsyncClient, backend: Backend) -> dict[str, object]:
    """What the backend says about its model (best effort): owned_by and max_model_len from
    its /v1/models, and, once, its capabilities from /get_model_info."""
    found: dict[str, object] = {}
    if backend.owned_by is None or backend.max_model_len is None:
        found.update(await _from_model_list(client, backend))
    if backend.capabilities is None:
        found["capabilities"] = await _capabilities(client, backend)
    return found


async def _from_model_list(client: httpx.AsyncClient, backend: Backend) -> dict[str, object]:
    try:
        response = await client.get(f"{backend.base_url}/v1/models", headers=_auth(backend))
        cards = response.json().get("data", []) if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError, AttributeError):
        return {}
    for card in cards:
        if isinstance(card, dict) and card.get("id") == backend.model:
            found: dict[str, object] = {}
            if backend.owned_by is None and isinstance(card.get("owned_by"), str):
                found["owned_by"] = card["owned_by"]
            if backend.max_model_len is None and isinstance(card.get("max_model_len"), int):
                found["max_model_len"] = card["max_model_len"]
            return found
    return {}


async def _capabilities(client: httpx.AsyncClient, backend: Backend) -> tuple[str, ...]:
    """From the engine's (and SGLang's) /get_model_info; () when the backend has none (vLLM,
    llama.cpp), so that it is asked only once."""
    try:
        response = await client.get(f"{backend.base_url}/get_model_info", headers=_auth(backend))
        info = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return ()
    return capabilities_from_model_info(info) if isinstance(info, dict) else ()


def _auth(backend: Backend) -> dict[str, str]:
    """The backend's own key (a remote engine's), as the proxy sends it with requests."""
    return {"authorization": f"Bearer {backend.api_key}"} if backend.api_key else {}


class HealthMonitor:
    def __init__(self, registry: Registry, interval_s: float, timeout_s: float) -> None:
        self._registry = registry
        self._interval_s = interval_s
        # NOTE: no keep-alive: each probe opens a new connection, so a killed server shows as
        # "connection refused" on the next probe instead of a stale pooled socket's error.
        self.client = httpx.AsyncClient(
            timeout=timeout_s, limits=httpx.Limits(max_keepalive_connections=0)
        )
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._follower: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._follower = asyncio.create_task(self._follow())
        await asyncio.sleep(0)  # NOTE: subscribed before any registration can happen

    async def stop(self) -> None:
        tasks = [*self._tasks.values(), *([self._follower] if self._follower else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.client.aclose()

    async def check(self, backend_id: str) -> None:
        """One probe of one backend, applied to the registry."""
        backend = self._registry.get(backend_id)
        if backend is None or backend.state is BackendState.DEAD:
            return
        try:
            state = await probe(self.client, backend)
        except Unreachable as exc:
            if backend.pinned:
                self._registry.set_state(backend_id, BackendState.STARTING, f"unreachable: {exc}")
                return
            logger.warning("backend %s at %s is unreachable (%s); removing it", backend.id, backend.base_url, exc)
            self._registry.set_state(backend_id, BackendState.DEAD, f"unreachable: {exc}")
            return
        current = self._registry.get(backend_id)
        if state is None or current is None or current.state is BackendState.DRAINING:
            return
        if (
            state is BackendState.READY
            and (current.owned_by is None or current.capabilities is None)
            and (found := await discover(self.client, current))
        ):
            self._registry.update(backend_id, **found)
        self._registry.set_state(backend_id, state, "health check")

    async def _follow(self) -> None:
        async for event in self._registry.events():
            backend_id = event.backend.id
            if event.type == "registered" and backend_id not in self._tasks:
                self._tasks[backend_id] = asyncio.create_task(self._watch(backend_id))
            elif event.type == "removed" and (task := self._tasks.pop(backend_id, None)):
                task.cancel()

    async def _watch(self, backend_id: str) -> None:
        while self._registry.get(backend_id) is not None:
            try:
                await self.check(backend_id)
            except Exception:  # NOTE: a bug in one probe must not end the watch silently
                logger.exception("health check of %s failed", backend_id)
            await asyncio.sleep(self._interval_s)
