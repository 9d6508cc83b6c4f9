"""Check 6: the host port an engine would publish on 127.0.0.1 is free."""

from __future__ import annotations

import errno
import socket

from manager.readiness.blocker import EVERY_RUNTIME, Blocker

HOST = "127.0.0.1"


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # NOTE: SO_REUSEADDR as servers (uvicorn, docker-proxy) set it: a port held only by
        # connections in TIME_WAIT is free for them, and so it is reported free here.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def check_port(port: int) -> tuple[Blocker, ...]:
    if port_is_free(port):
        return ()
    return (
        Blocker(
            id="port-in-use",
            title=f"Port {port} on {HOST} is already taken",
            explanation=(
                f"Another program listens on {HOST}:{port} (or this user may not bind it), "
                "so the engine cannot publish its API there."
            ),
            fix_steps=(
                f"See who holds it: `ss -ltnp 'sport = :{port}'`.",
                "Stop that program, or start the engine on another port (`--port`).",
                "Run `gomgr doctor --port PORT` again.",
            ),
            severity="blocks",
            blocks=EVERY_RUNTIME,
        ),
    )
