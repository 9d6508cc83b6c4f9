"""While the model loads, every request on the engine's port is answered 503 (SGLang's /health).

The port listens from the start (``engine.launch_server``); without this, a request sent
during the load would wait in the listen backlog until the HTTP server starts. Here one
thread accepts and answers each connection with a 503 (the API's error shape) and
``Connection: close``; ``stop`` ends the accepting before the HTTP server takes the socket,
so a connection is either answered here or left in the backlog for the server: none is lost.

NOTE: plain sockets and threads, no asyncio or HTTP library: this runs while the engine
imports and loads, and its only answer needs nothing from a request but its end of headers.
An HTTP/2 client that speaks it without HTTP/1.1's upgrade gets the HTTP/1.1 503 too (a
protocol error to it, so "not ready" as well).
"""

from __future__ import annotations

import json
import logging
import selectors
import socket
import threading
import time
from types import TracebackType
from typing import Self

logger = logging.getLogger(__name__)

# NOTE: a client that sent no complete request head by then is closed unanswered.
READ_HEAD_S = 1.0
# NOTE: after the answer, how long the request's unread body may drain before the close, so
# the kernel does not reset the connection under the client's read of the 503.
LINGER_S = 0.5
MAX_HEAD_BYTES = 64 * 1024
_BODY = json.dumps(
    {
        "error": {
            "message": "the model is loading; retry once /health answers 200",
            "type": "service_unavailable",
            "param": None,
            "code": None,
        }
    }
).encode()
_HEAD = (
    "HTTP/1.1 503 Service Unavailable\r\n"
    "content-type: application/json\r\n"
    f"content-length: {len(_BODY)}\r\n"
    "retry-after: 1\r\n"
    "connection: close\r\n\r\n"
).encode()


class LoadingResponder:
    """``with LoadingResponder(listening):`` answers 503 on ``listening`` until the block ends."""

    def __init__(self, listening: socket.socket) -> None:
        # NOTE: a duplicate: the acceptor switches it to non-blocking, which the listening
        # socket shares (one open file), as uvicorn and Granian both want it anyway.
        self._listening = listening.dup()
        self._wake_read, self._wake_write = socket.socketpair()
        self._answering: list[threading.Thread] = []
        self._acceptor = threading.Thread(
            target=self._accept_until_woken, name="loading-503", daemon=True
        )

    def __enter__(self) -> Self:
        self._acceptor.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop accepting, finish the connections accepted so far, then return."""
        self._wake_write.send(b"x")
        self._acceptor.join()
        for thread in self._answering:
            thread.join()
        for sock in (self._listening, self._wake_read, self._wake_write):
            sock.close()

    def _accept_until_woken(self) -> None:
        self._listening.setblocking(False)
        with selectors.DefaultSelector() as selector:
            selector.register(self._listening, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select()}
                if self._wake_read in ready:
                    return
                try:
                    conn, _ = self._listening.accept()
                except (BlockingIOError, ConnectionAbortedError):
                    continue
                thread = threading.Thread(
                    target=_answer_503, args=(conn,), name="loading-503-conn", daemon=True
                )
                thread.start()
                self._answering = [t for t in self._answering if t.is_alive()] + [thread]


def _answer_503(conn: socket.socket) -> None:
    with conn:
        try:
            head = _read_head(conn)
            if head is None:
                return
            is_head = head.startswith(b"HEAD ")
            conn.sendall(_HEAD if is_head else _HEAD + _BODY)
            conn.shutdown(socket.SHUT_WR)
            _drain(conn)
        except OSError:
            pass  # the client went away: nothing to answer


def _read_head(conn: socket.socket) -> bytes | None:
    """The request's bytes up to its end of headers; None if it never came."""
    conn.setblocking(True)
    deadline = time.monotonic() + READ_HEAD_S
    received = b""
    while b"\r\n\r\n" not in received:
        left = deadline - time.monotonic()
        if left <= 0 or len(received) > MAX_HEAD_BYTES:
            return None
        conn.settimeout(left)
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            return None
        if not chunk:
            return None
        received += chunk
    return received


def _drain(conn: socket.socket) -> None:
    deadline = time.monotonic() + LINGER_S
    while (left := deadline - time.monotonic()) > 0:
        conn.settimeout(left)
        try:
            if not conn.recv(65536):
                return
        except TimeoutError:
            return
