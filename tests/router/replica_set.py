"""Three (or N) real engines of SmolLM2 behind one real router, as replicas of one model:
for the replica tests and the replica-routing bench."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from manager.lifecycle.replicas import OMP_AFFINITY, OMP_THREADS, cpu_share
from tests.router.conftest import Router, start_router, stop
from tests.support.engine_process import EngineServer, free_port, start_engine_server

MODEL = "smollm2"
_REQUESTS = re.compile(rb"^sglang:num_requests_total\{[^}]*\} (\S+)$", re.MULTILINE)
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ReplicaSet:
    router: Router
    engines: tuple[EngineServer, ...]

    def served(self) -> list[int]:
        """Requests each engine finished, by its own /metrics."""
        counts = []
        for engine in self.engines:
            found = _REQUESTS.search(httpx.get(f"{engine.url}/metrics", timeout=10).content)
            counts.append(int(float(found.group(1))) if found else 0)
        return counts


def _engine(model_dir: Path, log_dir: Path, index: int, replicas: int, args: tuple[str, ...]) -> EngineServer:
    # NOTE: each engine on its CPU share, as `gomgr start --replicas` gives it
    cpus = cpu_share(sorted(os.sched_getaffinity(0)), index, replicas)
    env = {OMP_THREADS: str(len(cpus)), OMP_AFFINITY: " ".join(map(str, cpus))}
    flags = ["--served-model-name", MODEL, "--skip-server-warmup", "--enable-metrics", *args]
    return start_engine_server(model_dir, log_dir / f"replica-{index}-{free_port()}.log", flags, env)


@contextmanager
def replica_set(
    model_dir: Path, log_dir: Path, replicas: int, policy: str, *engine_args: str
) -> Iterator[ReplicaSet]:
    """`replicas` engines started side by side, registered as `MODEL` with a fresh router
    whose `--routing-policy` is `policy`; all stopped (and checked) afterwards."""
    with ExitStack() as stack, ThreadPoolExecutor(replicas) as pool:
        futures = [pool.submit(_engine, model_dir, log_dir, i, replicas, engine_args) for i in range(replicas)]
        engines: list[EngineServer] = []
        try:
            engines = [f.result() for f in futures]
        finally:
            for future in futures:
                if future.exception() is None:
                    stack.callback(future.result().stop_and_check)
        router = start_router(log_dir, "--routing-policy", policy)
        stack.callback(stop, router)
        for i, engine in enumerate(engines):
            router.register(engine.url, MODEL, id=f"replica-{i}")
        _wait_ready(router, replicas)
        yield ReplicaSet(router, tuple(engines))


def _wait_ready(router: Router, replicas: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        states = [b["state"] for b in router.admin("GET", "/backends").json()["backends"]]
        if states.count("ready") == replicas:
            return
        time.sleep(0.1)
    raise RuntimeError(f"replicas not ready within {READY_TIMEOUT_S:.0f} s:\n{router.log_tail()}")
