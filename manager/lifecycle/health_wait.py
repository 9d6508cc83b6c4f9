"""Wait for a launched engine's /health to answer 200, failing at once if the engine exits."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from manager.lifecycle.errors import EngineFailed, StartCancelled
from manager.runtimes.base import HEALTH_PATH, EngineHandle, Runtime

# NOTE: a cold start on demand waits on this loop, so every poll interval is latency a chat
# user sees (issue #23's overhead target is 0.5 s in all, issue #30's 0.5 s over the engine's
# own start), and the loop runs beside the engine's start for all of it: while the engine
# loads, its port answers 503 (engine/server/loading_responder.py), a whole HTTP exchange a
# poll. So a poll is one request on a bare socket (~0.06 ms of CPU here, where httpx's client
# took ~0.4 ms, and ~1.4 ms a poll on the loaded 2-core machine: a tenth of a core through an
# engine's start).
POLL_S = 0.02
PROBE_TIMEOUT_S = 5.0
MAX_REPLY_BYTES = 64 * 1024
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
    spec = handle.spec
    request = f"GET {HEALTH_PATH} HTTP/1.1\r\nhost: {spec.host}:{spec.port}\r\nconnection: close\r\n\r\n".encode()
    deadline = time.monotonic() + timeout_s
    alive_checked = 0.0
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
        if _status(spec.host, spec.port, request) == 200:
            return
        time.sleep(POLL_S)
    raise EngineFailed(
        f"engine {handle.id} was not healthy after {timeout_s:.0f} s (log: {handle.log_path})",
        _tail(runtime, handle),
    )


def _status(host: str, port: int, request: bytes) -> int | None:
    """The status of the reply to `request`; None when nothing answers it in HTTP.

    NOTE: the reply is read to its end (the server closes: `connection: close`), so this side
    never closes on unread data, which would reset the connection under the server's write.
    """
    reply = b""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as sock:
            sock.sendall(request)
            while len(reply) < MAX_REPLY_BYTES and (chunk := sock.recv(4096)):
                reply += chunk
    except OSError:
        return None
    status = reply.split(b" ", 2)
    return int(status[1]) if reply.startswith(b"HTTP/") and len(status) > 1 and status[1].isdigit() else None


def _tail(runtime: Runtime, handle: EngineHandle) -> str:
    return "\n".join(runtime.logs(handle, LOG_TAIL_LINES))
