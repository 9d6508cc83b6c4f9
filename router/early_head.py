"""A streamed response whose head goes out before its upstream answers: for held requests.

While a request waits for its model to load, clients and proxies would time out on a silent
connection, so the first `comment` sends `200 text/event-stream` and each one an SSE comment
line. After that the upstream's own head is dropped, its body passes through, and an answer
that is an error (the upstream's or the router's) becomes one SSE error event: the status
can no longer change. Before the first comment nothing has been sent and everything passes.

With `progress` (RouterConfig.loading_progress), a chat completion gets, instead of the
comments, `chat.completion.chunk` deltas whose `reasoning_content` says that the model loads
and for how long, and once it answers how long the load took: chat UIs that show reasoning
show the progress (llama-swap's sendLoadingState). The real answer follows as usual.
"""

from __future__ import annotations

import time

import orjson
from starlette.types import Message, Send

from router.errors import error_body

# NOTE: the routes whose streamed answer is SSE; Ollama's NDJSON streams get no early head.
SSE_ROUTES = frozenset(
    {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"}
)
ANTHROPIC_ROUTE = "/v1/messages"
CHAT_ROUTE = "/v1/chat/completions"
_HEAD = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]


def streams_sse(route: str, payload: dict[str, object]) -> bool:
    return route in SSE_ROUTES and payload.get("stream") is True


class EarlyHead:
    def __init__(self, send: Send, route: str, model: str, *, progress: bool = False) -> None:
        self._send = send
        self._route = route
        self._model = model
        self._comment = f": loading {model}\n\n".encode()
        self._progress = progress and route == CHAT_ROUTE
        self._since = time.monotonic()
        self.sent = False  # whether our own head went out
        self._failed: int | None = None  # the status of an error answer, once its head came
        self._error = bytearray()

    async def comment(self) -> None:
        """One keep-alive line, after our head the first time: a comment, or with progress a
        reasoning chunk."""
        first = not self.sent
        if first:
            self.sent = True
            await self._send({"type": "http.response.start", "status": 200, "headers": _HEAD})
        body = self._comment
        if self._progress:
            waited = f"{time.monotonic() - self._since:.0f} s\n"
            body = self._reasoning(f"Loading model {self._model}…\n" if first else waited)
        await self._send({"type": "http.response.body", "body": body, "more_body": True})

    async def __call__(self, message: Message) -> None:
        if not self.sent:
            await self._send(message)
        elif message["type"] == "http.response.start":
            status = int(message["status"])
            self._failed = status if status >= 400 else None
            if self._progress and self._failed is None:
                took = self._reasoning(f"Loaded in {time.monotonic() - self._since:.1f} s.\n")
                await self._send({"type": "http.response.body", "body": took, "more_body": True})
        elif self._failed is None:
            await self._send(message)
        else:
            self._error += message.get("body", b"")
            if not message.get("more_body", False):
                event = self._error_event(bytes(self._error), self._failed)
                await self._send({"type": "http.response.body", "body": event, "more_body": False})

    def _reasoning(self, text: str) -> bytes:
        """A progress chunk: `text` as the delta's reasoning_content.

        NOTE: no `role`: the upstream's first chunk gives it, and the openai SDK's stream
        helper concatenates string fields, so a second one would read "assistantassistant".
        """
        chunk = {
            "id": "chatcmpl-loading",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self._model,
            "choices": [
                {"index": 0, "delta": {"reasoning_content": text}, "finish_reason": None}
            ],
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def _error_event(self, body: bytes, status: int) -> bytes:
        error = _error_of(body)
        message = error.get("message") if error else None
        if not isinstance(message, str):
            message = f"status {status}: {body.decode(errors='replace')}"
        if self._route == ANTHROPIC_ROUTE:  # NOTE: the Anthropic SDK raises on `event: error`
            data = {"type": "error", "error": {"type": "api_error", "message": message}}
            return b"event: error\ndata: " + orjson.dumps(data) + b"\n\n"
        if error is not None:  # NOTE: OpenAI's shape already (the router's own errors are)
            return b"data: " + orjson.dumps({"error": error}) + b"\n\n"
        return b"data: " + error_body(message, "upstream_error", "bad_gateway") + b"\n\n"


def _error_of(body: bytes) -> dict[str, object] | None:
    """The `error` object of an error body in the OpenAI or Anthropic shape; Ollama's
    `{"error": "text"}` as one with its message."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, str):
        return {"message": error, "type": "upstream_error"}
    return error if isinstance(error, dict) else None
