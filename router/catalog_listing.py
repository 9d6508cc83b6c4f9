"""What the model listings show: the registry's served models and, with a loader, the rest
of its catalog, each with its load state."""

from __future__ import annotations

from dataclasses import dataclass

from router.backend import Backend, BackendState
from router.loader import CatalogEntry, LoadState, ModelLoader
from router.registry import Registry


@dataclass(frozen=True)
class Listed:
    name: str
    backend: Backend | None  # the backend serving it; None: not loaded
    entry: CatalogEntry | None  # None: a backend registered by hand, not in the catalog

    def names(self) -> tuple[str, ...]:
        if self.backend is not None:
            return self.backend.names()
        assert self.entry is not None
        return self.entry.names()

    def state(self) -> LoadState:
        if self.backend is not None:
            ready = self.backend.state is BackendState.READY
            return LoadState.LOADED if ready else LoadState.LOADING
        assert self.entry is not None
        return self.entry.state

    def created(self) -> int:
        """When the model entered the store, else when its backend was registered."""
        return self.entry.created if self.entry else self.backend.created if self.backend else 0

    def size(self) -> int:
        return (self.entry.size_bytes or 0) if self.entry else 0


def listing(registry: Registry, loader: ModelLoader | None) -> list[Listed]:
    """The registry's listed backends in registration order, then the catalog entries that
    no backend serves, in the catalog's order."""
    entries = loader.catalog() if loader is not None else []
    by_name = {name: e for e in entries for name in e.names()}
    backends = registry.listed()
    shown = [Listed(b.model, b, by_name.get(b.model)) for b in backends]
    served = {name for b in backends for name in b.names()}
    shown += [Listed(e.name, None, e) for e in entries if served.isdisjoint(e.names())]
    return shown

