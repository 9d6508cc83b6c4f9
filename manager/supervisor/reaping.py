"""The exit reaper: finds every engine of the state root that died while ready, and cleans up.

Any engine counts, loaded on demand or started by hand: its route leaves the registry at once,
its exited container (or dead process's record) is removed, and one operator line says which
engine died, how, the last line of its log and what happens next (the supervisor's answer).
Deaths are seen two ways: each runtime's exit stream (Docker's `die` events, in a thread that
reopens the stream after dockerd restarts) wakes a sweep at once, and a sweep every second
polls `is_alive` for what no stream reports (process engines, events missed meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from manager.runtimes.base import ExitStream, Runtime, RuntimeStartError
from manager.runtimes.process import collect_exited_children
from manager.runtimes.registry import get_runtime, runtime_names
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore, StateConflict
from router.registry import Registry

logger = logging.getLogger(__name__)

SWEEP_S = 1.0
REOPEN_S = 2.0  # between tries to open a runtime's exit stream (dockerd restarting, or none)
LOG_TAIL = 20


@dataclass(frozen=True)
class Death:
    record: EngineRecord
    exit_code: int | None
    last_line: str  # the engine log's last non-empty line, "" if none

    def describe(self, next_step: str) -> str:
        handle = self.record.handle
        how = "an unknown exit code" if self.exit_code is None else f"exit code {self.exit_code}"
        last = f'; last log line: "{self.last_line}"' if self.last_line else ""
        what = "container" if handle.runtime == "docker" else "record"
        return (
            f"engine {handle.id} ({handle.spec.served_name}, {handle.runtime}) died with {how}"
            f"{last}; its route and {what} are removed (log kept: {handle.log_path}); {next_step}"
        )


class ExitReaper:
    def __init__(
        self, paths: StatePaths, registry: Registry, on_death: Callable[[Death], str]
    ) -> None:
        """`on_death` runs in the event loop for each death and says what happens next."""
        self._paths = paths
        self._records = RecordStore(paths)
        self._registry = registry
        self._on_death = on_death
        self._runtimes: dict[str, Runtime] = {}  # NOTE: used under `_sweeping` only
        self._exit_codes: dict[str, int | None] = {}  # by engine id, from the exit streams
        self._codes_lock = threading.Lock()
        self._sweeping = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stopping = threading.Event()
        self._streams: dict[str, ExitStream] = {}
        self._threads: list[threading.Thread] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for name in runtime_names():
            thread = threading.Thread(
                target=self._watch, args=(name, loop), name=f"{name} exits", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        self._task = asyncio.create_task(self._run(), name="exit reaper")

    async def stop(self) -> None:
        self._stopping.set()
        for stream in list(self._streams.values()):
            stream.close()
        if self._task is not None:
            async with self._sweeping:  # NOTE: a sweep under way finishes first
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for thread in self._threads:
            await asyncio.to_thread(thread.join, REOPEN_S)

    async def reap(self, engine_id: str | None = None) -> None:
        """One sweep, of every record or of one engine's."""
        async with self._sweeping:
            dead = await asyncio.to_thread(self._find_dead, engine_id)
            for record, _ in dead:
                # NOTE: off the route first, before the slower cleanup below.
                self._registry.remove(record.id, "the engine died")
            deaths = await asyncio.to_thread(lambda: [self._clean(r, code) for r, code in dead])
        for death in deaths:
            logger.warning(death.describe(self._on_death(death)))

    async def _run(self) -> None:
        while True:
            # NOTE: every sweep also collects the exit status of engines this process started
            # and another one stopped (`gomgr stop` with no supervisor, `apply --watch`), which
            # would otherwise stay zombies that psutil calls running.
            collect_exited_children()
            try:
                await self.reap()
            except Exception:  # NOTE: one failed sweep (a file being written, a daemon gone)
                logger.exception("the exit reaper's sweep failed; it runs again in %.0f s", SWEEP_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), SWEEP_S)
            self._wake.clear()

    def _find_dead(self, engine_id: str | None) -> list[tuple[EngineRecord, int | None]]:
        records = self._records.all()
        dead = []
        for record in records:
            if record.state is not EngineState.READY or engine_id not in (None, record.id):
                continue
            runtime = self._runtime(record.handle.runtime)
            if not runtime.ended(record.handle):
                continue
            try:
                fresh = self._records.set_state(record, EngineState.FAILED)
            except StateConflict:
                continue  # NOTE: its owner is stopping it (an unload, `gomgr stop`)
            with self._codes_lock:
                code = self._exit_codes.pop(record.id, None)
            dead.append((fresh, runtime.exit_code(fresh.handle) if code is None else code))
        with self._codes_lock:
            # NOTE: what is left are the deaths of engines stopped on purpose.
            self._exit_codes = {i: c for i, c in self._exit_codes.items() if i in {r.id for r in records}}
        return dead

    def _clean(self, record: EngineRecord, exit_code: int | None) -> Death:
        runtime = self._runtime(record.handle.runtime)
        runtime.stop(record.handle)  # NOTE: docker: saves the log, removes the exited container
        lines = [line.strip() for line in runtime.logs(record.handle, LOG_TAIL) if line.strip()]
        self._records.remove(record.id, keep_log=True)
        return Death(record, exit_code, lines[-1] if lines else "")

    def _runtime(self, name: str) -> Runtime:
        if name not in self._runtimes:
            self._runtimes[name] = get_runtime(name, self._paths)
        return self._runtimes[name]

    def _watch(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
        """A thread: follow one runtime's exit stream, reopened whenever it ends, until stop."""
        runtime = get_runtime(name, self._paths)  # NOTE: its own client: the stream blocks it
        while not self._stopping.is_set():
            try:
                stream = runtime.exits()
            except RuntimeStartError:
                self._stopping.wait(REOPEN_S)  # NOTE: no daemon (yet): the sweeps poll
                continue
            if stream is None:
                return
            self._streams[name] = stream
            try:
                if not self._stopping.is_set():
                    for ended in stream:
                        with self._codes_lock:
                            self._exit_codes[ended.engine_id] = ended.exit_code
                        loop.call_soon_threadsafe(self._wake.set)
            finally:
                stream.close()
            if not self._stopping.is_set():
                logger.warning(
                    "%s stopped reporting engine exits (its daemon restarted?); watching again "
                    "when it answers, polling meanwhile", name,
                )
            self._stopping.wait(REOPEN_S)
