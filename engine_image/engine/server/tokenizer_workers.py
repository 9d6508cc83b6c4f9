"""The tokenizer workers of one server (``--tokenizer-worker-num``): which one this process
is, and what they share through shared memory so any of them can answer for all."""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import multiprocessing
from dataclasses import dataclass

_READY_POLL_S = 0.05


@dataclass(frozen=True)
class TokenizerWorkers:
    """Worker ``index`` of ``count``; picklable to a spawned worker (shared memory travels
    only as a Process argument, so every worker's copy is made before it starts).

    ``metrics_dir`` is prometheus_client's multiprocess directory when several workers
    keep metrics, else None (one process: its own registry).
    """

    index: int
    count: int
    in_flight_counts: ctypes.Array[ctypes.c_int64]
    ready_flags: ctypes.Array[ctypes.c_bool]
    metrics_dir: str | None = None

    @classmethod
    def create(cls, count: int, metrics_dir: str | None = None) -> TokenizerWorkers:
        """Worker 0's view (the launcher's own process serves as worker 0)."""
        spawn = multiprocessing.get_context("spawn")
        return cls(0, count, spawn.RawArray(ctypes.c_int64, count), spawn.RawArray(ctypes.c_bool, count), metrics_dir)

    def worker(self, index: int) -> TokenizerWorkers:
        return dataclasses.replace(self, index=index)

    def set_in_flight(self, requests: int) -> None:
        self.in_flight_counts[self.index] = requests

    def in_flight(self) -> int:
        """Requests in flight in all workers."""
        return sum(self.in_flight_counts)

    async def wait_all_ready(self) -> None:
        """Marks this worker warmed up, then waits until every worker is, so /health turns
        200 on all of them together (a client's next request may reach any of them)."""
        self.ready_flags[self.index] = True
        while not all(self.ready_flags):
            await asyncio.sleep(_READY_POLL_S)
