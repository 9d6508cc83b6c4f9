"""A tiny real OpenAI-compatible upstream for router tests: deterministic echo.

    python tests/router/echo_server.py --port P [--model NAME] [--health-status 200]

/v1/chat/completions answers with the last user message; streamed, one chunk per word
(`max_tokens` chunks if set, cycling the words), with fixed id and created, so two runs
give identical bytes. Header `x-echo-delay-ms` sleeps between chunks. /stats counts
streams that finished and streams whose client went away, and shows the credentials
(`authorization`, `x-api-key`) of the last chat request. The rerank, score and classify
routes answer `{"route", "served_by", "body"}`: the path, this server's model, and the JSON
body exactly as it arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

CREATED = 1700000000


def build_app(model: str, health_status: int) -> Starlette:
    stats: dict[str, Any] = {"completed": 0, "cancelled": 0, "open": 0, "credentials": {}}

    def chunk(content: str | None, finish: str | None) -> bytes:
        delta = {} if content is None else {"content": content}
        body = {
            "id": "chatcmpl-echo",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

    async def stream(pieces: list[str], delay_s: float) -> AsyncIterator[bytes]:
        stats["open"] += 1
        try:
            for piece in pieces:
                yield chunk(piece, None)
                await asyncio.sleep(delay_s)
            yield chunk(None, "stop")
            yield b"data: [DONE]\n\n"
            stats["completed"] += 1
        except asyncio.CancelledError:
            stats["cancelled"] += 1
            raise
        finally:
            stats["open"] -= 1

    async def chat(request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        stats["credentials"] = {
            k: request.headers.getlist(k) for k in ("authorization", "x-api-key")
        }
        if body.get("model") != model:
            return JSONResponse(
                {
                    "error": {
                        "message": f"unknown model {body.get('model')}",
                        "type": "invalid_request_error",
                        "param": "model",
                        "code": "model_not_found",
                    }
                },
                status_code=404,
            )
        text = str(
            next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
        )
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-echo",
                    "object": "chat.completion",
                    "created": CREATED,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            )
        words = text.split(" ") or [""]
        count = int(body.get("max_tokens") or len(words))
        pieces = [words[i % len(words)] + " " for i in range(count)]
        delay_s = float(request.headers.get("x-echo-delay-ms", "0")) / 1000
        return StreamingResponse(stream(pieces, delay_s), media_type="text/event-stream")

    async def models(_request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": model, "object": "model", "created": CREATED, "owned_by": "echo-org"}
                ],
            }
        )

    async def echo_body(request: Request) -> Response:
        return JSONResponse(
            {"route": request.url.path, "served_by": model, "body": await request.json()}
        )

    async def health(_request: Request) -> Response:
        return Response(status_code=health_status)

    async def get_stats(_request: Request) -> Response:
        return JSONResponse(stats)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models),
            *(
                Route(path, echo_body, methods=["POST"])
                for path in ("/v1/rerank", "/v2/rerank", "/v1/score", "/classify", "/v1/classify")
            ),
            Route("/health", health),
            Route("/stats", get_stats),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="echo-model")
    parser.add_argument("--health-status", type=int, default=200)
    args = parser.parse_args()
    app = build_app(args.model, args.health_status)
    uvicorn.run(
        app, host="127.0.0.1", port=args.port, loop="uvloop", log_level="warning", access_log=False
    )


if __name__ == "__main__":
    main()
