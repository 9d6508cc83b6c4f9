"""A thin real `ModelLoader` for router tests, and the router serving with it in a thread.

Each catalog model's "engine" is a real echo upstream (tests/router/echo_server.py) on a free
127.0.0.1 port, started when the router asks and once the test opens the loader's gate; told
to, a load fails as an engine that exited would. The router is `create_app` on a real uvicorn
server in a thread of the test process, so the test reads the loader directly.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from router.app import create_app
from router.backend import Backend, BackendKind, BackendState
from router.config import RouterConfig
from router.loader import CatalogEntry, LoadFailed, LoadState, ModelLoader
from router.registry import Registry
from tests.router.conftest import Proc, start_echo, stop
from tests.support.engine_process import free_port

SIZE_BYTES = 270_000_000
CREATED = 1_700_000_000
DEFAULT_KEEP_ALIVE_S = 300.0
START_TIMEOUT_S = 30.0


class EchoLoader(ModelLoader):
    def __init__(self, registry: Registry, log_dir: Path, models: tuple[str, ...]) -> None:
        self._registry = registry
        self._log_dir = log_dir
        self._models = models
        self.load_calls: Counter[str] = Counter()  # ensure_loaded calls, per model
        self.unloads: Counter[str] = Counter()
        self.fail_with: str | None = None  # set: loads fail, this being the log's last line
        self.procs: dict[str, Proc] = {}
        self._states = dict.fromkeys(models, LoadState.UNLOADED)
        self._loads: dict[str, asyncio.Task[None]] = {}
        self._unloading: set[asyncio.Task[None]] = set()
        self._in_flight: Counter[str] = Counter()
        self._keep_alive: dict[str, float] = {}
        self._expires: dict[str, float | None] = {}
        self._gate = threading.Event()

    def release(self) -> None:
        """Let loads proceed (from any thread)."""
        self._gate.set()

    async def stop(self) -> None:
        self._gate.set()
        await asyncio.gather(*self._loads.values(), *self._unloading, return_exceptions=True)
        for model in list(self.procs):
            await self._unload(model)

    def catalog(self) -> list[CatalogEntry]:
        return [
            CatalogEntry(
                name=name, aliases=(), state=state, size_bytes=SIZE_BYTES,
                expires_at=self._expires.get(name) if state is LoadState.LOADED else None,
                created=CREATED,
            )
            for name, state in self._states.items()
        ]

    async def ensure_loaded(self, model: str) -> None:
        self.load_calls[model] += 1
        if self._states[model] is LoadState.LOADED:
            return
        task = self._loads.get(model)
        if task is None:
            task = self._loads[model] = asyncio.create_task(self._load(model))
        await asyncio.shield(task)

    def request_started(self, model: str, keep_alive_s: float | None) -> None:
        self._in_flight[model] += 1
        self._keep_alive[model] = DEFAULT_KEEP_ALIVE_S if keep_alive_s is None else keep_alive_s

    def request_finished(self, model: str) -> None:
        self._in_flight[model] -= 1
        if self._in_flight[model]:
            return
        keep = self._keep_alive.get(model, DEFAULT_KEEP_ALIVE_S)
        self._expires[model] = None if keep < 0 else time.time() + keep
        if keep == 0:
            task = asyncio.get_running_loop().create_task(self._unload(model))
            self._unloading.add(task)
            task.add_done_callback(self._unloading.discard)

    async def _load(self, model: str) -> None:
        self._states[model] = LoadState.LOADING
        try:
            await asyncio.to_thread(self._gate.wait)
            if self.fail_with is not None:
                raise LoadFailed(f"the engine exited with status 1; last log line: {self.fail_with}")
            proc = await asyncio.to_thread(start_echo, self._log_dir, model)
        except BaseException:
            self._states[model] = LoadState.UNLOADED
            raise
        finally:
            del self._loads[model]
        self.procs[model] = proc
        backend_id = f"echo-{model}"
        self._registry.register(Backend(
            id=backend_id, model=model, base_url=proc.url, kind=BackendKind.OPENAI,
            created=int(time.time()),
        ))
        # NOTE: start_echo saw /health answer: ready now, as the supervisor does.
        self._registry.set_state(backend_id, BackendState.READY, "loaded on demand")
        self._states[model] = LoadState.LOADED

    async def _unload(self, model: str) -> None:
        proc = self.procs.pop(model, None)
        if proc is None:
            return
        self._states[model] = LoadState.UNLOADING
        self._registry.remove(f"echo-{model}", "unloaded")
        await asyncio.to_thread(stop, proc)
        self.unloads[model] += 1
        self._states[model] = LoadState.UNLOADED


@dataclass
class OnDemandRouter:
    url: str
    loader: EchoLoader


@contextmanager
def serve_on_demand(
    log_dir: Path, models: tuple[str, ...], **config: Any
) -> Iterator[OnDemandRouter]:
    """The router with an `EchoLoader` over `models`, on uvicorn in a thread; `config`: more
    RouterConfig fields."""
    registry = Registry()
    loader = EchoLoader(registry, log_dir, models)
    port = free_port()
    settings = RouterConfig(
        port=port, admin_token_file=log_dir / "router.token", health_interval_s=0.2, **config
    )
    server = uvicorn.Server(uvicorn.Config(
        create_app(settings, loader, registry=registry), host="127.0.0.1", port=port,
        loop="uvloop", http="httptools", log_level="warning", timeout_graceful_shutdown=5,
    ))
    thread = threading.Thread(target=server.run, name="router", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the router did not start"
        time.sleep(0.02)
    try:
        yield OnDemandRouter(f"http://127.0.0.1:{port}", loader)
    finally:
        loader.release()
        server.should_exit = True
        thread.join(START_TIMEOUT_S)
