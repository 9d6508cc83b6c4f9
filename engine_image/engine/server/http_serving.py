"""Serve the engine's ASGI app on its already-listening socket: uvicorn, or Granian (HTTP/2).

One function for every process that serves the app (``serve_app``), so the choice of server,
its keep-alive and its graceful shutdown are made in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable
from types import FrameType
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from engine.server.server_args import ServerArgs

logger = logging.getLogger(__name__)

# NOTE (issue 22): uvicorn's default keep-alive timeout, 5 s, is also the idle expiry of
# httpx's pool (so of the openai SDK's): a client that reuses a connection as the server's
# timer closes it gets a reset (httpx.ReadError) for a request the server never read. A
# server that outwaits every common client pool (httpx, Node: 5 s; aiohttp: 15 s) leaves
# the close to the client, which cannot race itself. nginx's default.
KEEP_ALIVE_S = 75
# NOTE: uvicorn's default backlog.
BACKLOG = 2048
# NOTE: how long in-flight requests may run on after SIGTERM before the server closes them.
GRACEFUL_SHUTDOWN_S = 5


def serve_app(app: ASGIApp, listening: socket.socket, args: ServerArgs) -> None:
    """Serve ``app`` on ``listening`` until SIGTERM or SIGINT, then return once shut down."""
    if args.enable_http2:
        _serve_granian(app, listening, args)
    else:
        _serve_uvicorn(app, listening, args)


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _server_log_level(args: ServerArgs) -> str:
    """The HTTP server's own log level: its per-request lines stay out of the engine's log."""
    return "warning" if args.log_level == "info" else args.log_level


def _serve_uvicorn(app: ASGIApp, listening: socket.socket, args: ServerArgs) -> None:
    import uvicorn

    # NOTE: uvicorn shuts down gracefully on SIGTERM, then re-raises it under the handler it
    # found; the default one would kill the process here, before the caller's cleanup runs.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        log_level=_server_log_level(args),
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        timeout_keep_alive=KEEP_ALIVE_S,
    )
    try:
        uvicorn.Server(config).run(sockets=[listening])
    except SystemExit as exit_:
        if exit_.code != 0:
            raise


def _serve_granian(app: ASGIApp, listening: socket.socket, args: ServerArgs) -> None:
    import uvloop

    uvloop.run(_granian_until_signalled(app, listening, args))


async def _granian_until_signalled(
    app: ASGIApp, listening: socket.socket, args: ServerArgs
) -> None:
    from granian.constants import HTTPModes, Interfaces
    from granian.http import HTTP1Settings
    from granian.log import LogLevels
    from granian.net import SocketHolder
    from granian.server.embed import Server

    class _PreboundServer(Server):
        """Granian's embedded server (in this process, on this event loop), on our socket.

        NOTE: Granian binds its own SO_REUSEPORT socket from (address, port) unless handed a
        SocketHolder; this passes one over a duplicate of the caller's listening fd, so the
        port stays bound from before the model loaded and Granian's close leaves the
        caller's socket object its own fd. ``_init_shared_socket`` is the hook Granian's
        own servers fill ``_shd`` in (granian 2.8).
        """

        def _init_shared_socket(self) -> None:
            # NOTE: granian's stub omits SocketHolder's constructor and types _shd as None.
            holder = SocketHolder(os.dup(listening.fileno()), False, BACKLOG)  # type: ignore[call-arg]
            self._ssp = None
            self._shd = holder  # type: ignore[assignment]
            self._sfd = holder.get_fd()

    level = LogLevels(_server_log_level(args))
    in_flight = _InFlight(app)
    server = _PreboundServer(
        in_flight,
        address=args.host,
        port=args.port,
        interface=Interfaces.ASGI,
        http=HTTPModes.auto,
        backlog=BACKLOG,
        # NOTE: hyper's HTTP/1 server closes a kept-alive connection whose next request has
        # not arrived within header_read_timeout: uvicorn's keep-alive timeout (see KEEP_ALIVE_S).
        http1_settings=HTTP1Settings(header_read_timeout=KEEP_ALIVE_S * 1000),
        websockets=False,
        log_level=level,
        # NOTE: Granian's records go through the engine's own handler and format.
        log_dictconfig={
            "loggers": {
                "_granian": {"handlers": [], "level": level.name.upper(), "propagate": True}
            }
        },
    )
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(
            signum, lambda: stopping.append(loop.create_task(in_flight.stop(server.stop)))
        )
    await server.serve()


class _InFlight:
    """The app's in-flight HTTP requests, so that a stop bounds how long they run on.

    NOTE: on its stop signal Granian stops accepting, lets each connection finish its
    in-flight requests (hyper's graceful shutdown) and only then runs the app's lifespan
    shutdown, with no bound; uvicorn cancels what still runs after its graceful timeout.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cancelled = False
        self._idle = asyncio.Event()
        self._idle.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._idle.clear()
        try:
            await self.app(scope, receive, send)
        except asyncio.CancelledError:
            # NOTE: the stop's own cancel, already logged once for all: no traceback per request.
            if not self._cancelled or task.uncancel() > 0:
                raise
        finally:
            self._tasks.discard(task)
            if not self._tasks:
                self._idle.set()

    async def stop(self, stop_server: Callable[[], None]) -> None:
        """``stop_server``, then cancel the requests still running GRACEFUL_SHUTDOWN_S later."""
        stop_server()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), GRACEFUL_SHUTDOWN_S)
        if self._tasks:
            logger.warning(
                "cancelling %d requests still running %d s after the stop signal",
                len(self._tasks),
                GRACEFUL_SHUTDOWN_S,
            )
            self._cancelled = True
            for task in self._tasks:
                task.cancel()
