"""Pass one client request to a backend and its answer back, byte for byte, unbuffered."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import orjson
from starlette.types import Receive, Scope, Send

from router.backend import Backend, BackendState
from router.disconnect import until_disconnect
from router.errors import RouterError, bad_gateway, error_body
from router.metrics import RouterMetrics
from router.registry import Registry

logger = logging.getLogger(__name__)

_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length",
})
# NOTE: the client's credentials are for the router, never forwarded; a backend's own key
# comes from its registration. accept-encoding is set explicitly (see `_request_headers`).
_DROP_REQUEST = _HOP_BY_HOP | {"authorization", "x-api-key", "accept-encoding"}
# NOTE: uvicorn writes its own date and server headers; copying the upstream's would double them.
_DROP_RESPONSE = _HOP_BY_HOP | {"date", "server"}
# NOTE: a refused connection means the request never reached the backend, so another one
# for the same model may take it; bounded so a model whose replicas all died fails fast.
MAX_CONNECT_ATTEMPTS = 3


def upstream_client(connect_timeout_s: float) -> httpx.AsyncClient:
    """The one pool every proxied request shares (keep-alive to each backend)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=connect_timeout_s, read=None, write=60.0, pool=None),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=512),
    )


class ProxyResponse:
    """An ASGI response that sends the request upstream and streams the raw answer back.

    The whole exchange runs under a disconnect watch: a client that leaves, even before the
    upstream's headers arrive, closes the upstream connection, which aborts the generation.
    """

    def __init__(
        self,
        *,
        route: str,
        backend: Backend,
        repick: Callable[[], Backend],
        method: str,
        path: str,
        headers: list[tuple[str, str]],
        raw_body: bytes,
        payload: dict[str, Any],
        client: httpx.AsyncClient,
        registry: Registry,
        metrics: RouterMetrics,
    ) -> None:
        self._route = route
        self._backend = backend
        self._repick = repick
        self._method = method
        self._path = path
        self._headers = headers
        self._raw_body = raw_body
        self._payload = payload
        self._client = client
        self._registry = registry
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await until_disconnect(receive, lambda: self._exchange(send))

    def _body_for(self, backend: Backend) -> bytes:
        # NOTE: only a request by alias is re-encoded (the backend knows its served name only);
        # a request by served name goes upstream as the client's exact bytes.
        if self._payload.get("model") == backend.model:
            return self._raw_body
        return orjson.dumps({**self._payload, "model": backend.model})

    def _request(self, backend: Backend) -> httpx.Request:
        headers = [(k, v) for k, v in self._headers if k not in _DROP_REQUEST]
        # NOTE: httpx would otherwise ask for gzip on the client's behalf; the client's own
        # accept-encoding (or identity) keeps the upstream's bytes the ones the client wants.
        accept = next((v for k, v in self._headers if k == "accept-encoding"), "identity")
        headers.append(("accept-encoding", accept))
        if backend.api_key:
            headers.append(("authorization", f"Bearer {backend.api_key}"))
        return self._client.build_request(
            self._method, backend.base_url + self._path, headers=headers, content=self._body_for(backend)
        )

    @contextmanager
    def _track(self, backend: Backend) -> Iterator[None]:
        with self._registry.request(backend.id), self._metrics.inflight.labels(backend.id).track_inprogress():
            yield

    async def _exchange(self, send: Send) -> None:
        backend = self._backend
        for attempt in range(MAX_CONNECT_ATTEMPTS):
            if attempt:
                try:
                    backend = self._repick()  # NOTE: 404/503 once no backend is left
                except RouterError as exc:
                    await self._send_error(send, exc)
                    return
            with self._track(backend):
                try:
                    upstream = await self._client.send(self._request(backend), stream=True)
                except httpx.ConnectError as exc:
                    self._metrics.upstream_errors.labels(backend.id, "connect").inc()
                    self._registry.set_state(backend.id, BackendState.DEAD, f"connection refused: {exc}")
                    continue
                except httpx.TransportError as exc:
                    self._metrics.upstream_errors.labels(backend.id, "transport").inc()
                    message = f"backend '{backend.id}' failed before answering: {_why(exc)}"
                    await self._send_error(send, bad_gateway(message))
                    return
                try:
                    await self._relay(send, backend, upstream)
                finally:
                    with anyio.CancelScope(shield=True):
                        await upstream.aclose()
                return
        message = f"no backend for '{self._backend.model}' accepted the connection"
        await self._send_error(send, bad_gateway(message))

    async def _relay(self, send: Send, backend: Backend, upstream: httpx.Response) -> None:
        headers = [
            (k, v) for k, v in upstream.headers.raw if k.decode("latin-1").lower() not in _DROP_RESPONSE
        ]
        self._metrics.requests.labels(self._route, str(upstream.status_code)).inc()
        await send({"type": "http.response.start", "status": upstream.status_code, "headers": headers})
        try:
            async for chunk in upstream.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.TransportError as exc:
            self._metrics.upstream_errors.labels(backend.id, "mid_stream").inc()
            logger.warning("backend %s failed mid-response: %s", backend.id, _why(exc))
            tail = _stream_error(upstream.headers.get("content-type", ""), backend, exc)
            await send({"type": "http.response.body", "body": tail, "more_body": False})
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_error(self, send: Send, exc: RouterError) -> None:
        self._metrics.requests.labels(self._route, str(exc.status)).inc()
        headers = [(b"content-type", b"application/json")]
        headers += [(k.lower().encode(), v.encode()) for k, v in exc.headers.items()]
        await send({"type": "http.response.start", "status": exc.status, "headers": headers})
        await send({"type": "http.response.body", "body": exc.body(), "more_body": False})


def _why(exc: httpx.TransportError) -> str:
    return str(exc) or type(exc).__name__


def _stream_error(content_type: str, backend: Backend, exc: httpx.TransportError) -> bytes:
    """The last bytes of a response whose backend died after the headers were sent."""
    message = f"backend '{backend.id}' failed mid-response: {_why(exc)}"
    if content_type.startswith("text/event-stream"):
        return b"data: " + error_body(message, "upstream_error", "bad_gateway") + b"\n\n"
    if content_type.startswith("application/x-ndjson"):  # NOTE: Ollama's stream error shape
        return orjson.dumps({"error": message}) + b"\n"
    return b""
