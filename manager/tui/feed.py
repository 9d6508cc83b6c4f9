"""Where the dashboard's data comes from: records on disk, the store, the router, the engines."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx

from manager.lifecycle.router_link import RouterLink
from manager.models.store import ModelStore
from manager.runtimes.base import Runtime
from manager.runtimes.registry import get_runtime
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore
from manager.supervisor.catalog import store_models
from manager.supervisor.client import catalog_states
from manager.tui.metrics import MetricsSample, NoMetrics, sample_metrics, sample_server_info
from manager.tui.router_view import RouterView, follow_router

SAMPLE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class LiveRecord:
    record: EngineRecord
    alive: bool  # its process (or container) still runs


@dataclass(frozen=True)
class CatalogModel:
    """A store model as the router's catalog offers it, loaded or not."""

    repo: str
    served_name: str
    state: str | None  # the router's: unloaded, loading, loaded, unloading; None: no supervisor


class EngineFeed(ABC):
    @abstractmethod
    def records(self) -> tuple[LiveRecord, ...]:
        """The engines the manager knows of (oldest first); called every second, in a thread
        (a container runtime asks its daemon whether each one runs)."""

    @abstractmethod
    def catalog(self) -> tuple[CatalogModel, ...]:
        """Every model in the store with its load state (in a thread, with `records`)."""

    @abstractmethod
    def runtime(self, name: str) -> Runtime:
        """The runtime an engine runs in, e.g. to read its log."""

    @abstractmethod
    def router_views(self) -> AsyncIterator[RouterView]:
        """The router's view, anew on each change."""

    @abstractmethod
    async def sample(self, record: EngineRecord) -> MetricsSample:
        """One engine's load now (one request to it)."""

    async def close(self) -> None:
        """Release connections."""


class LiveFeed(EngineFeed):
    def __init__(self, paths: StatePaths, store: ModelStore) -> None:
        self._paths = paths
        self._store = store
        self._router = RouterLink.from_paths(paths)
        self._client = httpx.AsyncClient(timeout=SAMPLE_TIMEOUT_S)
        self._without_metrics: set[str] = set()  # engine ids whose /metrics is a 404
        self._runtimes: dict[str, Runtime] = {}

    def records(self) -> tuple[LiveRecord, ...]:
        return tuple(
            LiveRecord(r, self.runtime(r.handle.runtime).is_alive(r.handle))
            for r in RecordStore(self._paths).all()
        )

    def catalog(self) -> tuple[CatalogModel, ...]:
        states = catalog_states(self._router.url) or {}
        return tuple(
            CatalogModel(m.repo, m.served_name, states.get(m.served_name))
            for m in store_models(self._store)
        )

    def runtime(self, name: str) -> Runtime:
        # NOTE: kept, so a container runtime's daemon client is made once, not every second.
        if name not in self._runtimes:
            self._runtimes[name] = get_runtime(name, self._paths)
        return self._runtimes[name]

    def router_views(self) -> AsyncIterator[RouterView]:
        return follow_router(self._router.url, self._router.daemon.token_file)

    async def sample(self, record: EngineRecord) -> MetricsSample:
        spec = record.handle.spec
        if record.id not in self._without_metrics:
            try:
                return await sample_metrics(self._client, spec.base_url, spec.auth_headers)
            except NoMetrics:
                self._without_metrics.add(record.id)
        return await sample_server_info(self._client, spec.base_url, spec.auth_headers)

    async def close(self) -> None:
        await self._client.aclose()
