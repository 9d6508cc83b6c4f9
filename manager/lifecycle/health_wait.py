"""Wait for a launched engine's /health to answer 200, failing at once if the engine exits."""

from __future__ import annotations

import time

import httpx

from manager.lifecycle.errors import EngineFailed
from manager.runtimes.base import EngineHandle, Runtime

POLL_S = 0.5
LOG_TAIL_LINES = 30


def wait_until_healthy(runtime: Runtime, handle: EngineHandle, timeout_s: float) -> None:
    url = f"{handle.spec.base_url}/health"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not runtime.is_alive(handle):
            raise EngineFailed(
                f"engine {handle.id} exited before it became healthy (log: {handle.log_path})",
                _tail(runtime, handle),
            )
        try:
            if httpx.get(url, timeout=5).status_code == 200:
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
