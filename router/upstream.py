"""A lean pooled HTTP/1.1 client for the proxy: asyncio protocols, httptools parsing.

NOTE: httpx/httpcore were the top of the router's profile (h11 in Python, anyio streams,
cookie and URL models on every request); this does the one thing the proxy needs — a POST
of bytes already in memory, and the response body as it arrives — with the C parser
uvicorn uses.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import cast
from urllib.parse import urlsplit

import httptools

# NOTE: a client slower than its stream stops the upstream reads past this much buffered.
MAX_BUFFERED = 256 * 1024
MAX_IDLE_PER_ORIGIN = 512


class UpstreamError(Exception):
    """The upstream failed: the connection broke, timed out or carried a malformed response."""


class ConnectFailed(UpstreamError):
    """Nothing accepted the connection, so the request never reached the upstream."""


class ClosedBeforeResponse(UpstreamError):
    """The upstream closed the connection before a byte of its answer: it went away."""


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int
    prefix: bytes  # the base URL's path, prepended to every request target
    host_header: bytes


@lru_cache(maxsize=1024)
def origin_of(base_url: str) -> Origin:
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    netloc = f"[{host}]" if ":" in host else host
    return Origin(parts.scheme, host, port, parts.path.encode(), f"{netloc}:{port}".encode())


class _Connection(asyncio.Protocol):
    """One kept-alive connection; one request at a time. Parser callbacks fill the response."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.closed = False
        self.busy = False
        self.on_idle_lost: Callable[[], None] | None = None  # set while it waits in the pool
        self._start()

    def _start(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.buffered = 0
        self.headers_done = False
        self.complete = False
        self.reusable = False
        self._until_close = False
        self.received_any = False
        self.error: UpstreamError | None = None

    def send(self, data: bytes) -> None:
        assert self._transport is not None
        self._start()
        self.busy = True
        self._transport.write(data)

    async def wait(self) -> None:
        """Until the parser has more to say: headers, body, the end or an error."""
        self._waiter = self._loop.create_future()
        await self._waiter

    def take_body(self) -> bytes:
        data = self.body[0] if len(self.body) == 1 else b"".join(self.body)
        self.body.clear()
        self.buffered = 0
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return data

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # NOTE: uvloop's TCP transports do not subclass asyncio.Transport, but are one.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.busy:  # NOTE: bytes on an idle connection: it is out of step, drop it
            self.close()
            return
        self.received_any = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self.error = UpstreamError(f"malformed response: {exc}")
            self.close()
        self._wake()

    def eof_received(self) -> None:
        self.closed = True  # NOTE: at once: the transport closes (and says so) a loop turn later

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.on_idle_lost is not None:
            self.on_idle_lost()
        if self.busy and not self.complete and self.error is None:
            # NOTE: a body with neither a length nor chunks ends with the connection.
            if self._until_close:
                self.complete = True
            else:
                why = f": {exc}" if exc else ""
                if self.headers_done:
                    self.error = UpstreamError(f"the connection closed mid-body{why}")
                else:
                    self.error = ClosedBeforeResponse(f"the connection closed before the response{why}")
        self._wake()

    # -- httptools callbacks -----------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # NOTE: an interim response (e.g. 103 Early Hints); the real one follows
            self.headers = []
            return
        self.status = status
        self.headers_done = True
        self.reusable = self._parser.should_keep_alive()
        framing = {b"content-length", b"transfer-encoding"}
        self._until_close = status not in (204, 304) and not any(
            k.lower() in framing for k, _ in self.headers
        )

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > MAX_BUFFERED and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def on_message_complete(self) -> None:
        if self.headers_done:
            self.complete = True


class UpstreamResponse:
    """A response whose head has arrived; `read` its body as it comes, then `close` it."""

    def __init__(self, pool: UpstreamPool, origin: Origin, conn: _Connection) -> None:
        self._pool = pool
        self._origin = origin
        self._conn = conn
        self.status = conn.status
        self.headers = conn.headers

    async def read(self) -> tuple[bytes, bool]:
        """The body bytes received since the last read, and whether more will follow."""
        conn = self._conn
        while not conn.body and not conn.complete:
            if conn.error is not None:
                raise conn.error
            await conn.wait()
        return conn.take_body(), not conn.complete

    def close(self) -> None:
        """Back to the pool when the response was read whole; closed otherwise (aborts the upstream)."""
        conn = self._conn
        conn.busy = False
        if conn.complete and conn.reusable and not conn.closed:
            self._pool.release(self._origin, conn)
        else:
            conn.close()


class UpstreamPool:
    """Kept-alive connections per origin, shared by every proxied request."""

    def __init__(self, connect_timeout_s: float) -> None:
        self._connect_timeout_s = connect_timeout_s
        self._idle: dict[Origin, list[_Connection]] = {}
        self._ssl: ssl.SSLContext | None = None

    async def post(
        self, base_url: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        """Send a POST and wait for the response's head. Raises ConnectFailed or UpstreamError."""
        origin = origin_of(base_url)
        head = [
            b"POST ",
            origin.prefix,
            target,
            b" HTTP/1.1\r\nhost: ",
            origin.host_header,
            b"\r\n",
        ]
        for name, value in headers:
            head += (name, b": ", value, b"\r\n")
        head += (b"content-length: ", str(len(body)).encode(), b"\r\n\r\n", body)
        request = b"".join(head)
        idle = self._idle_connection(origin)
        if idle is not None:
            try:
                return await self._exchange(origin, idle, request)
            except UpstreamError:
                # NOTE (issue 22): a kept-alive connection the upstream closed (its keep-alive
                # timeout) just as this request went out: not a byte came back, the upstream
                # never read it, so it goes again on a fresh connection; once.
                if idle.received_any:
                    raise
        return await self._exchange(origin, await self._connect(origin), request)

    async def _exchange(
        self, origin: Origin, conn: _Connection, request: bytes
    ) -> UpstreamResponse:
        conn.send(request)
        try:
            while not conn.headers_done:
                if conn.error is not None:
                    raise conn.error
                await conn.wait()
        except BaseException:
            conn.busy = False
            conn.close()
            raise
        return UpstreamResponse(self, origin, conn)

    def release(self, origin: Origin, conn: _Connection) -> None:
        idle = self._idle.setdefault(origin, [])
        if len(idle) < MAX_IDLE_PER_ORIGIN:
            idle.append(conn)
            conn.on_idle_lost = lambda: self._forget(origin, conn)
        else:
            conn.close()

    def _forget(self, origin: Origin, conn: _Connection) -> None:
        """An idle connection the upstream closed (its keep-alive timeout, or it died)."""
        idle = self._idle.get(origin, [])
        idle.remove(conn)
        if not idle:
            del self._idle[origin]

    def close(self) -> None:
        for idle in list(self._idle.values()):
            for conn in list(idle):
                conn.close()

    def _idle_connection(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            conn.on_idle_lost = None
            if not conn.closed:
                return conn
        return None

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        context = self._ssl_context() if origin.scheme == "https" else None
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, conn = await loop.create_connection(
                    _Connection, origin.host, origin.port, ssl=context
                )
        except TimeoutError as exc:
            raise UpstreamError(f"connecting to {origin.host}:{origin.port} timed out") from exc
        except OSError as exc:
            raise ConnectFailed(f"connecting to {origin.host}:{origin.port}: {exc}") from exc
        return conn

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl
