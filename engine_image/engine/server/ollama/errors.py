"""Ollama's error shape, ``{"error": "<message>"}``, for every route of the Ollama router."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel

from engine.server.http_errors import ApiError, bad_request, validate_json

Body = TypeVar("Body", bound=BaseModel)


def ollama_error(status: int, message: str) -> Response:
    return Response(
        orjson.dumps({"error": message}), status_code=status, media_type="application/json"
    )


class OllamaRoute(APIRoute):
    """Answers any ``ApiError`` a handler raises (shared validation included) in Ollama's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except ApiError as err:
                return ollama_error(err.status, err.message)

        return handle


async def parse_body(request: Request, model: type[Body]) -> Body:
    """The JSON body validated by ``model``.

    NOTE: the Content-Type is not checked: Ollama accepts any, and its documented examples
    (``curl -d '{...}'``) send ``application/x-www-form-urlencoded``.
    """
    raw = await request.body()
    if not raw:
        raise bad_request("missing request body")
    return validate_json(raw, model)
