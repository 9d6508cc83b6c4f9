"""The router's backends as the dashboard sees them, followed over its `/admin/events` stream.

The stream starts with a snapshot and then sends one event per change (registered,
updated, state, removed), so the dashboard learns of every change without polling.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import httpx

RETRY_S = 2.0
CONNECT_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class RoutedBackend:
    id: str
    model: str  # served name
    state: str  # the router's: starting, ready, draining (dead ones are removed)

    @classmethod
    def from_public(cls, data: Mapping[str, Any]) -> RoutedBackend:
        return cls(str(data["id"]), str(data["model"]), str(data["state"]))


@dataclass(frozen=True)
class RouterView:
    url: str
    up: bool
    backends: Mapping[str, RoutedBackend] = field(default_factory=lambda: MappingProxyType({}))
    problem: str | None = None  # why the router is not followed (down, token refused, ...)

    def applied(self, event: Mapping[str, Any]) -> RouterView:
        """This view with one event of the stream applied."""
        if event["type"] == "snapshot":
            backends = {b["id"]: RoutedBackend.from_public(b) for b in event["backends"]}
        else:
            backends = dict(self.backends)
            backend = RoutedBackend.from_public(event["backend"])
            if event["type"] == "removed":
                backends.pop(backend.id, None)
            else:
                backends[backend.id] = backend
        return RouterView(self.url, True, MappingProxyType(backends))


async def follow_router(url: str, token_file: Path) -> AsyncIterator[RouterView]:
    """A new view on every change; a view with `up=False` while the router cannot be followed
    (then a new attempt every RETRY_S: the router may start later, with the first engine)."""
    timeout = httpx.Timeout(CONNECT_TIMEOUT_S, read=None)
    async with httpx.AsyncClient(timeout=timeout) as client:
        while True:
            problem = f"no router answers at {url}"
            try:
                token = token_file.read_text().strip()
                headers = {"authorization": f"Bearer {token}"}
                async with client.stream("GET", f"{url}/admin/events", headers=headers) as reply:
                    if reply.status_code != 200:
                        raise _Refused(
                            f"the router at {url} refused its event stream "
                            f"(HTTP {reply.status_code}); is {token_file} its token?"
                        )
                    view = RouterView(url, True)
                    async for line in reply.aiter_lines():
                        if line.startswith("data: "):
                            view = view.applied(json.loads(line[len("data: ") :]))
                            yield view
            except FileNotFoundError:
                problem = f"no router yet (no admin token at {token_file})"
            except _Refused as exc:
                problem = str(exc)
            except httpx.TransportError:
                pass
            yield RouterView(url, False, problem=problem)
            await asyncio.sleep(RETRY_S)


class _Refused(Exception):
    pass
