"""The one owner of backend state: every mutation goes through `Registry`, which announces it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from router.backend import Backend, BackendState
from router.errors import RouterError, model_not_found
from router.routing_policy import LeastInFlight, RoutingPolicy

EventType = Literal["registered", "updated", "state", "removed"]
# NOTE: a subscriber that falls this far behind is dropped (its stream ends) rather than
# letting the registry buffer without bound or block a mutation.
SUBSCRIBER_QUEUE = 1024
RETRY_AFTER_S = "2"


@dataclasses.dataclass(frozen=True)
class Event:
    type: EventType
    backend: Backend
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "reason": self.reason, "backend": self.backend.public()}


class _Closed:
    """Put in a subscriber's queue to end its stream."""


class Registry:
    def __init__(self, policy: RoutingPolicy | None = None) -> None:
        self._policy: RoutingPolicy = policy or LeastInFlight()
        self._backends: dict[str, Backend] = {}
        self._inflight: dict[str, int] = {}
        self._subscribers: set[asyncio.Queue[Event | _Closed]] = set()

    # -- reads -------------------------------------------------------------------------

    def get(self, backend_id: str) -> Backend | None:
        return self._backends.get(backend_id)

    def backends(self) -> list[Backend]:
        return list(self._backends.values())

    def inflight(self, backend_id: str) -> int:
        return self._inflight.get(backend_id, 0)

    def listed(self) -> list[Backend]:
        """One backend per served model name that can serve (or soon will), registration order."""
        seen: dict[str, Backend] = {}
        for b in self._backends.values():
            if b.state in (BackendState.READY, BackendState.STARTING) and b.model not in seen:
                seen[b.model] = b
        return list(seen.values())

    def serves_ready(self, names: tuple[str, ...]) -> bool:
        """Whether a ready backend serves any of ``names`` (served names or aliases)."""
        wanted = set(names)
        return any(
            b.state is BackendState.READY and not wanted.isdisjoint(b.names())
            for b in self._backends.values()
        )

    def served_name(self, name: str) -> str | None:
        """The served model name that `name` (a served name or an alias) stands for, if any."""
        return next((b.model for b in self._backends.values() if name in b.names()), None)

    def pick(
        self,
        model: str,
        kinds: frozenset[str] | None = None,
        payload: dict[str, Any] | None = None,
        avoid: frozenset[str] = frozenset(),
    ) -> Backend:
        """The ready backend for `model` (served name or alias) that the routing policy
        chooses for the request `payload`; not one in `avoid` while another is ready."""
        named = [b for b in self._backends.values() if model in b.names()]
        if not named:
            raise model_not_found(model, sorted({b.model for b in self.listed()}))
        usable = [b for b in named if kinds is None or b.kind in kinds]
        if not usable:
            raise RouterError(
                400,
                f"The model '{model}' is served only by backends without this API "
                f"(kinds: {', '.join(sorted({b.kind for b in named}))})",
                code="unsupported_api",
                param="model",
            )
        ready = [b for b in usable if b.state is BackendState.READY]
        if ready:
            fresh = [b for b in ready if b.id not in avoid] or ready
            return self._policy.choose(fresh, self.inflight, payload)
        state = "starting" if any(b.state is BackendState.STARTING for b in usable) else "draining"
        raise RouterError(
            503,
            f"The model '{model}' is {state}; retry shortly",
            type_="service_unavailable",
            code=f"model_{state}",
            headers={"Retry-After": RETRY_AFTER_S},
        )

    # -- mutations ---------------------------------------------------------------------

    def register(self, backend: Backend) -> Backend:
        """Add `backend`, or replace the one with its id (an owner re-registering after a restart)."""
        if backend.id in self._backends:
            self._policy.forget(backend.id)  # NOTE: a restarted engine's cache is empty
        self._backends[backend.id] = backend
        self._inflight.setdefault(backend.id, 0)
        self._publish(Event("registered", backend))
        return backend

    def update(self, backend_id: str, **changes: Any) -> Backend | None:
        """Change fields other than state; None if the backend is gone meanwhile."""
        old = self._backends.get(backend_id)
        if old is None:
            return None
        new = dataclasses.replace(old, **changes)
        if new != old:
            self._backends[backend_id] = new
            self._publish(Event("updated", new))
        return new

    def set_state(self, backend_id: str, state: BackendState, reason: str = "") -> Backend | None:
        """Move a backend to `state`; DEAD announces the death and removes it at once."""
        old = self._backends.get(backend_id)
        if old is None or old.state is state:
            return old
        new = dataclasses.replace(old, state=state)
        self._backends[backend_id] = new
        self._publish(Event("state", new, reason))
        if state is BackendState.DEAD:
            self.remove(backend_id, reason)
        return new

    def remove(self, backend_id: str, reason: str) -> Backend | None:
        backend = self._backends.pop(backend_id, None)
        if backend is not None:
            self._policy.forget(backend_id)
            self._publish(Event("removed", backend, reason))
        return backend

    @contextmanager
    def request(self, backend_id: str) -> Iterator[None]:
        """Count one request in flight on a backend (least-outstanding-requests balancing)."""
        self._inflight[backend_id] = self._inflight.get(backend_id, 0) + 1
        try:
            yield
        finally:
            left = self._inflight.get(backend_id, 1) - 1
            if left or backend_id in self._backends:
                self._inflight[backend_id] = left
            else:
                self._inflight.pop(backend_id, None)

    # -- event bus ---------------------------------------------------------------------

    async def events(self) -> AsyncIterator[Event]:
        """Every change from now on, until the subscriber falls too far behind or the registry closes."""
        queue: asyncio.Queue[Event | _Closed] = asyncio.Queue(SUBSCRIBER_QUEUE)
        self._subscribers.add(queue)
        try:
            while not isinstance(item := await queue.get(), _Closed):
                yield item
        finally:
            self._subscribers.discard(queue)

    def close(self) -> None:
        for queue in list(self._subscribers):
            self._end(queue)

    def _publish(self, event: Event) -> None:
        for queue in list(self._subscribers):
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                self._end(queue)

    def _end(self, queue: asyncio.Queue[Event | _Closed]) -> None:
        self._subscribers.discard(queue)
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(_Closed())
