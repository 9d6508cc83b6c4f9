"""The on-demand loader: what the router asks when a request names a model no backend serves yet.

The router knows no Docker and no model store. An owner of engines (the manager's supervisor,
in the same process under `gomgr serve`) implements `ModelLoader` and hands it to
`create_app`; without one the router serves only the backends registered over its admin API,
as before. The loader starts an engine and registers it with the router's `Registry`; the
router then dispatches to it like to any other backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum


class LoadState(StrEnum):
    UNLOADED = "unloaded"  # in the catalog, no engine runs
    LOADING = "loading"  # an engine is starting for it
    LOADED = "loaded"  # an engine serves it
    UNLOADING = "unloading"  # its engine is being stopped


@dataclass(frozen=True)
class CatalogEntry:
    """One model a request may name, whether an engine serves it now or not."""

    name: str  # the served model name a request's `model` gives
    aliases: tuple[str, ...]
    state: LoadState
    size_bytes: int | None  # the weights on disk; None when unknown
    # NOTE: unix seconds at which an idle loaded model is unloaded; None: pinned or not loaded.
    expires_at: float | None
    created: int  # unix seconds the model entered the store (Ollama's modified_at)

    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


class LoadFailed(Exception):
    """The model's engine did not start; the message names the cause (and its log's last line)."""


class ModelLoader(ABC):
    async def start(self) -> None:
        """Called in the router's event loop before it serves (start timers, watchers)."""

    async def stop(self) -> None:
        """Called on the router's shutdown, before the registry closes."""

    @abstractmethod
    def catalog(self) -> list[CatalogEntry]:
        """Every model the loader can serve, loaded or not."""

    def entry(self, model: str) -> CatalogEntry | None:
        """The catalog entry `model` (a name or an alias) stands for; asked on every request,
        so a loader with many models answers it from an index."""
        return next((e for e in self.catalog() if model in e.names()), None)

    @abstractmethod
    async def ensure_loaded(self, model: str) -> None:
        """Return once a ready backend for ``model`` (a name or alias in the catalog) is
        registered. Concurrent calls for one model start one engine (single flight).

        Raises RouterError (404 for a name not in the catalog, 429 when the model's queue of
        held requests is full) or LoadFailed.
        """

    @abstractmethod
    def request_started(self, model: str, keep_alive_s: float | None) -> None:
        """A request for ``model`` is being served. ``keep_alive_s`` is the request's own
        keep_alive (Ollama's semantics: 0 unloads after it, negative never); None: the default.
        The model is never unloaded while it has requests in flight."""

    @abstractmethod
    def request_finished(self, model: str) -> None:
        """A request started with `request_started` ended; its keep-alive counts from now."""
