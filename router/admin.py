"""The admin API owners use to register, deregister and report backends, guarded by a token."""

from __future__ import annotations

import secrets
import time
import uuid
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from router.backend import Backend, BackendKind, BackendState
from router.disconnect import until_disconnect
from router.errors import RouterError, unauthorized
from router.health import HealthMonitor, Unreachable, probe
from router.registry import Registry

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}$"


class BackendIn(BaseModel):
    """A registration. `id` defaults to a new one; the same id again replaces the backend."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9._:-]{1,128}$")] | None = None
    model: Annotated[str, Field(pattern=_NAME)]
    base_url: str
    kind: BackendKind = BackendKind.ENGINE
    aliases: list[Annotated[str, Field(pattern=_NAME)]] = []
    owned_by: str | None = None  # None: taken from the backend's /v1/models once it is ready
    max_model_len: Annotated[int, Field(gt=0)] | None = None
    capabilities: list[str] | None = None  # None: taken from the backend's /get_model_info
    # NOTE: sent upstream in a header as given, so only visible ASCII (no CR/LF to inject headers).
    api_key: Annotated[str, Field(pattern=r"^[\x21-\x7e]{1,4096}$")] | None = None

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")) or "?" in value or "#" in value:
            raise ValueError("base_url must be http(s)://host:port[/prefix] without query")
        return value.rstrip("/")

    def backend(self) -> Backend:
        return Backend(
            id=self.id or uuid.uuid4().hex[:12],
            model=self.model,
            base_url=self.base_url,
            kind=self.kind,
            aliases=tuple(a for a in dict.fromkeys(self.aliases) if a != self.model),
            owned_by=self.owned_by,
            max_model_len=self.max_model_len,
            capabilities=None if self.capabilities is None else tuple(self.capabilities),
            created=int(time.time()),
            api_key=self.api_key,
        )


class StateIn(BaseModel):
    """An owner's report: `dead` removes the backend at once, `draining` stops new requests."""

    model_config = ConfigDict(extra="forbid")

    state: BackendState
    reason: str = "reported by owner"


class EventStream(Response):
    """Registry changes as server-sent events, starting with a snapshot, until the client leaves."""

    def __init__(self, registry: Registry) -> None:  # NOTE: a Response only so FastAPI passes it on
        self._registry = registry
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def stream() -> None:
            events = self._registry.events()
            snapshot = {
                "type": "snapshot",
                "backends": [b.public() for b in self._registry.backends()],
            }
            await send(_sse(snapshot))
            async for event in events:
                await send(_sse(event.as_dict()))

        await until_disconnect(receive, stream)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _sse(data: object) -> dict[str, object]:
    body = b"data: " + orjson.dumps(data) + b"\n\n"
    return {"type": "http.response.body", "body": body, "more_body": True}


def admin_router(
    token: str, registry: Registry, monitor: HealthMonitor, owner_routes: APIRouter | None = None
) -> APIRouter:
    """The admin API; `owner_routes` (the engine owner's, e.g. the supervisor's engine API)
    are served under /admin beside the router's own, behind the same token."""
    def require_token(request: Request) -> None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip(), token):
            raise unauthorized(
                "the admin API needs 'Authorization: Bearer <token from the router token file>'"
            )

    router = APIRouter(prefix="/admin", dependencies=[Depends(require_token)])

    def shown(backend: Backend) -> dict[str, object]:
        return {**backend.public(), "inflight": registry.inflight(backend.id)}

    @router.get("/backends")
    async def list_backends() -> dict[str, object]:
        return {"backends": [shown(b) for b in registry.backends()]}

    @router.post("/backends", status_code=201)
    async def register(spec: BackendIn) -> dict[str, object]:
        backend = spec.backend()
        # NOTE: refused before registering, so a typo'd port fails loudly here instead of
        # appearing for half a second and vanishing.
        try:
            await probe(monitor.client, backend)
        except Unreachable as exc:
            raise RouterError(
                422, f"nothing listens at {backend.base_url}: {exc}", param="base_url"
            ) from exc
        registry.register(backend)
        await monitor.check(backend.id)
        current = registry.get(backend.id)
        return shown(current or backend)

    @router.delete("/backends/{backend_id}")
    async def deregister(backend_id: str) -> dict[str, object]:
        removed = registry.remove(backend_id, "deregistered")
        if removed is None:
            raise RouterError(404, f"no backend '{backend_id}'", code="backend_not_found")
        return {"removed": removed.public()}

    @router.post("/backends/{backend_id}/state")
    async def report_state(backend_id: str, report: StateIn) -> dict[str, object]:
        backend = registry.set_state(backend_id, report.state, report.reason)
        if backend is None:
            raise RouterError(404, f"no backend '{backend_id}'", code="backend_not_found")
        return {"backend": backend.public()}

    @router.get("/events")
    async def events() -> EventStream:
        return EventStream(registry)

    if owner_routes is not None:
        router.include_router(owner_routes)
    return router
