"""Pass one client request to a backend and its answer back, byte for byte, unbuffered."""

from __future__ import annotations

import logging
from collections.abc import Callable

import orjson
from starlette.types import Send

from router.backend import Backend, BackendState
from router.errors import RouterError, bad_gateway, error_body
from router.metrics import RouterMetrics
from router.registry import Registry
from router.upstream import (
    ClosedBeforeResponse,
    ConnectFailed,
    UpstreamError,
    UpstreamPool,
    UpstreamResponse,
)

logger = logging.getLogger(__name__)

_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
    }
)
# NOTE: the client's credentials are for the router, never forwarded; a backend's own key
# comes from its registration. `expect` was answered by uvicorn: the body is here already.
DROP_REQUEST = _HOP_BY_HOP | {b"authorization", b"x-api-key", b"expect"}
# NOTE: uvicorn writes its own date and server headers; copying the upstream's would double them.
# Without content-length uvicorn sends chunks, so a backend that dies mid-body still ends
# the response cleanly (see `_stream_error`).
_DROP_RESPONSE = _HOP_BY_HOP | {b"date", b"server"}
# NOTE: a refused connection means the request never reached the backend, and a connection
# closed before any answer means the backend went away before it answered (a replica killed
# mid-run): either way nothing reached the client and generating has no side effects, so
# another replica of the model takes the request; bounded so a model whose replicas all
# died fails fast.
MAX_CONNECT_ATTEMPTS = 3


class Proxy:
    """Sends requests upstream over the shared pool and relays the answers to the client."""

    def __init__(self, pool: UpstreamPool, registry: Registry, metrics: RouterMetrics) -> None:
        self._pool = pool
        self._registry = registry
        self._metrics = metrics

    async def exchange(
        self,
        send: Send,
        *,
        route: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        payload: dict[str, object],
        raw_body: bytes,
        pick: Callable[[frozenset[str]], Backend],
    ) -> None:
        """Proxy one request: `pick` chooses the backend, again avoiding those that failed it.

        `headers` are the client's, already without `DROP_REQUEST`.
        """
        failed: frozenset[str] = frozenset()
        for _ in range(MAX_CONNECT_ATTEMPTS):
            try:
                backend = pick(failed)  # NOTE: 404/503 once no backend is left
            except RouterError as exc:
                await self.send_error(send, route, exc)
                return
            # NOTE: only a request by alias is re-encoded (the backend knows its served name
            # only); a request by served name goes upstream as the client's exact bytes.
            body = (
                raw_body
                if payload["model"] == backend.model
                else orjson.dumps({**payload, "model": backend.model})
            )
            sent = headers
            if backend.api_key:
                sent = [*headers, (b"authorization", b"Bearer " + backend.api_key.encode())]
            with self._registry.request(backend.id), self._metrics.track(backend.id):
                try:
                    upstream = await self._pool.post(backend.base_url, target, sent, body)
                except ConnectFailed as exc:
                    self._metrics.upstream_error(backend.id, "connect")
                    # NOTE: a pinned backend (--backends FILE) waits for its upstream, as the
                    # health monitor has it; any other is gone until its owner registers it.
                    gone = BackendState.STARTING if backend.pinned else BackendState.DEAD
                    self._registry.set_state(backend.id, gone, f"connection refused: {exc}")
                    continue
                except ClosedBeforeResponse as exc:
                    self._metrics.upstream_error(backend.id, "closed")
                    logger.warning("backend %s closed before answering (%s); trying another", backend.id, exc)
                    failed |= {backend.id}
                    continue
                except UpstreamError as exc:
                    self._metrics.upstream_error(backend.id, "transport")
                    message = f"backend '{backend.id}' failed before answering: {exc}"
                    await self.send_error(send, route, bad_gateway(message))
                    return
                try:
                    await self._relay(send, route, backend, upstream)
                finally:
                    upstream.close()
                return
        message = f"no backend for '{payload['model']}' accepted the connection"
        await self.send_error(send, route, bad_gateway(message))

    async def _relay(
        self, send: Send, route: str, backend: Backend, upstream: UpstreamResponse
    ) -> None:
        headers = [(k, v) for k, v in upstream.headers if k.lower() not in _DROP_RESPONSE]
        self._metrics.request(route, upstream.status)
        await send({"type": "http.response.start", "status": upstream.status, "headers": headers})
        try:
            more = True
            while more:
                chunk, more = await upstream.read()
                await send({"type": "http.response.body", "body": chunk, "more_body": more})
        except UpstreamError as exc:
            self._metrics.upstream_error(backend.id, "mid_stream")
            logger.warning("backend %s failed mid-response: %s", backend.id, exc)
            tail = _stream_error(upstream.headers, backend, exc)
            await send({"type": "http.response.body", "body": tail, "more_body": False})

    async def send_own(self, send: Send, route: str, body: bytes) -> None:
        """A 200 JSON answer the router gives itself."""
        self._metrics.request(route, 200)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def send_error(self, send: Send, route: str, exc: RouterError) -> None:
        self._metrics.request(route, exc.status)
        headers = [(b"content-type", b"application/json")]
        headers += [(k.lower().encode(), v.encode()) for k, v in exc.headers.items()]
        await send({"type": "http.response.start", "status": exc.status, "headers": headers})
        await send({"type": "http.response.body", "body": exc.body(), "more_body": False})


def _stream_error(
    headers: list[tuple[bytes, bytes]], backend: Backend, exc: UpstreamError
) -> bytes:
    """The last bytes of a response whose backend died after the headers were sent."""
    content_type = next((v for k, v in headers if k.lower() == b"content-type"), b"")
    message = f"backend '{backend.id}' failed mid-response: {exc}"
    if content_type.startswith(b"text/event-stream"):
        return b"data: " + error_body(message, "upstream_error", "bad_gateway") + b"\n\n"
    if content_type.startswith(b"application/x-ndjson"):  # NOTE: Ollama's stream error shape
        return orjson.dumps({"error": message}) + b"\n"
    return b""
