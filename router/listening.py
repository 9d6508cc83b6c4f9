"""The router's listening sockets, made before the app is built.

NOTE (issue 30): light to import (no FastAPI or uvicorn), so the supervisor can own its port
first thing and start the engine `gomgr start` handed it while the web stack still imports;
a connection made meanwhile waits in the listen backlog until uvicorn accepts it.
"""

from __future__ import annotations

import socket

from router.config import RouterConfig

# NOTE: as uvicorn's own default backlog; uvicorn listens again on these sockets with it.
BACKLOG = 2048


def listen(config: RouterConfig) -> list[socket.socket]:
    """One listening socket per port of `config` (its port, and the Ollama port if set).

    SystemExit with one line, before anything listens, if the front door may not listen as
    configured or a port is taken. NOTE: listening, not only bound: Linux lets two
    SO_REUSEADDR sockets bind one port while neither listens, so a second router started
    meanwhile would bind too and fail only once it serves.
    """
    if problem := config.exposure_problem():
        raise SystemExit(f"error: {problem}")
    ports = [config.port, *([config.ollama_port] if config.ollama_port else [])]
    sockets: list[socket.socket] = []
    try:
        for port in ports:
            sockets.append(_listen(config.host, port))
    except SystemExit:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        # NOTE: one line, exit status 1, before anything serves: nothing is left running.
        raise SystemExit(f"error: cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock
