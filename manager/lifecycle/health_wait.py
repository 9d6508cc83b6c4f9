"""Wait for a launched engine's /health to answer 200, failing at once if the engine exits."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from manager.lifecycle.errors import EngineFailed, StartCancelled
from manager.runtimes.base import HEALTH_PATH, EngineHandle, Runtime

# NOTE: a cold start on demand waits on this loop, so every poll interval is latency a chat
# user sees (issue #23's overhead target is 0.5 s in all, issue #30's 0.5 s over the engine's
# own start); one client, no TLS context (plain HTTP on loopback), and a refused connection
# while the engine loads costs it next to nothing.
POLL_S = 0.02
# NOTE: whether the engine still runs is asked less often: for a container it is a call to
# the Docker daemon.
ALIVE_EVERY_S = 0.1
LOG_TAIL_LINES = 30


def never() -> bool:
    return False


def wait_until_healthy(
    runtime: Runtime, handle: EngineHandle, timeout_s: float, cancelled: Callable[[], bool] = never
) -> None:
    """Return once /health answers 200; EngineFailed if the engine exits or times out,
    StartCancelled as soon as `cancelled()` is true."""
    url = f"{handle.spec.base_url}{HEALTH_PATH}"
    deadline = time.monotonic() + timeout_s
    alive_checked = 0.0
    with httpx.Client(timeout=5, verify=False) as client:
        while (now := time.monotonic()) < deadline:
            if cancelled():
                raise StartCancelled(f"the start of engine {handle.id} was cancelled")
            if now - alive_checked >= ALIVE_EVERY_S:
                alive_checked = now
                if not runtime.is_alive(handle):
                    raise EngineFailed(
                        f"engine {handle.id} exited before it became healthy (log: {handle.log_path})",
                        _tail(runtime, handle),
                    )
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(POLL_S)
    raise EngineFailed(
        f"engine {handle.id} was not healthy after {timeout_s:.0f} s (log: {handle.log_path})",
        _tail(runtime, handle),
    )


def _tail(runtime: Runtime, handle: EngineHandle) -> str:
    return "\n".join(runtime.logs(handle, LOG_TAIL_LINES))
