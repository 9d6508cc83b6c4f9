"""Serve the engine's ASGI app on its already-listening socket.

One function for every process that serves the app (``serve_app``): the launcher's own
process and each extra tokenizer worker, so the server's keep-alive and graceful shutdown
are chosen in one place.
"""

from __future__ import annotations

import signal
import socket
from types import FrameType

from starlette.types import ASGIApp

from engine.server.server_args import ServerArgs

# NOTE (issue 22): uvicorn's default keep-alive timeout, 5 s, is also the idle expiry of
# httpx's pool (so of the openai SDK's): a client that reuses a connection as the server's
# timer closes it gets a reset (httpx.ReadError) for a request the server never read. A
# server that outwaits every common client pool (httpx, Node: 5 s; aiohttp: 15 s) leaves
# the close to the client, which cannot race itself. nginx's default.
KEEP_ALIVE_S = 75
# NOTE: how long in-flight requests may run on after SIGTERM before the server closes them.
GRACEFUL_SHUTDOWN_S = 5


def serve_app(app: ASGIApp, listening: socket.socket, args: ServerArgs) -> None:
    """Serve ``app`` on ``listening`` until SIGTERM or SIGINT, then return once shut down."""
    import uvicorn

    # NOTE: uvicorn shuts down gracefully on SIGTERM, then re-raises it under the handler it
    # found; the default one would kill the process here, before the caller's cleanup runs.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        log_level="warning" if args.log_level == "info" else args.log_level,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        timeout_keep_alive=KEEP_ALIVE_S,
    )
    try:
        uvicorn.Server(config).run(sockets=[listening])
    except SystemExit as exit_:
        if exit_.code != 0:
            raise


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
