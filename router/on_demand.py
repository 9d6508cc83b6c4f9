"""Load on request: a request for a catalog model no backend serves is held while it loads.

The loader (router/loader.py) starts the engine and registers it; `OnDemand` holds the
requests meanwhile: at most `max_held` per model (429 beyond), one `ensure_loaded` per model
however many wait (single flight here too, whatever the loader does), and a failed start
answers every held request with the cause.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from router.errors import RouterError
from router.loader import CatalogEntry, LoadFailed, ModelLoader
from router.registry import RETRY_AFTER_S, Registry

logger = logging.getLogger(__name__)


class OnDemand:
    def __init__(
        self,
        loader: ModelLoader,
        registry: Registry,
        max_held: int,
        tick_s: float,
        progress: bool = False,
    ) -> None:
        self.loader = loader
        self.progress = progress  # streamed chats held get reasoning_content progress (early_head)
        self._registry = registry
        self._max_held = max_held
        self._tick_s = tick_s
        self._held: dict[str, int] = {}
        self._loading: dict[str, asyncio.Task[None]] = {}

    def entry(self, model: str) -> CatalogEntry | None:
        """The catalog entry `model` (a name or an alias) stands for, if any."""
        return self.loader.entry(model)

    def available(self) -> list[str]:
        """Every name a request may give: the registry's served models and the catalog's."""
        names = {b.model for b in self._registry.listed()}
        names.update(e.name for e in self.loader.catalog())
        return sorted(names)

    def loaded(self, entry: CatalogEntry) -> bool:
        """Whether a ready backend serves `entry` (under its name or one of its aliases)."""
        return self._registry.serves_ready(entry.names())

    def held(self, name: str) -> int:
        return self._held.get(name, 0)

    async def hold(
        self, entry: CatalogEntry, tick: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Return once `entry` is loaded; `tick` is awaited every `tick_s` meanwhile.

        Raises RouterError: 429 when `max_held` requests for the model wait already, 503
        when its load failed, or what the loader raised.
        """
        name = entry.name
        held = self._held.get(name, 0)
        if held >= self._max_held:
            raise RouterError(
                429,
                f"{held} requests already wait for the model '{name}' to load; retry shortly",
                type_="rate_limit_error",
                code="model_queue_full",
                headers={"Retry-After": RETRY_AFTER_S},
            )
        self._held[name] = held + 1
        try:
            task = self._load(name)
            # NOTE: asyncio.wait, not a bare await: a held request whose client goes away
            # is cancelled here without cancelling the load the others wait for.
            while not (await asyncio.wait({task}, timeout=self._tick_s if tick else None))[0]:
                assert tick is not None
                await tick()
            task.result()
        except LoadFailed as exc:
            raise RouterError(
                503,
                f"The model '{name}' failed to load: {exc}",
                type_="service_unavailable",
                code="model_load_failed",
                param="model",
            ) from exc
        finally:
            left = self._held[name] - 1
            if left:
                self._held[name] = left
            else:
                del self._held[name]

    def _load(self, name: str) -> asyncio.Task[None]:
        task = self._loading.get(name)
        if task is None:
            task = asyncio.create_task(self.loader.ensure_loaded(name), name=f"load {name}")
            self._loading[name] = task
            task.add_done_callback(lambda done: self._loaded(name, done))
        return task

    def _loaded(self, name: str, task: asyncio.Task[None]) -> None:
        if self._loading.get(name) is task:
            del self._loading[name]
        # NOTE: retrieved here, so a load whose waiters all left logs once, not "never retrieved".
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.warning("loading %s failed: %s", name, exc)
