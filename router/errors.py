"""Errors in the OpenAI shape: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

# NOTE (issue 30): starlette (~0.04 CPU-s) is imported where a response is made: the
# supervisor reads these errors while it plans the start a cold `gomgr start` handed it,
# before its web stack (manager/supervisor/boot.py).
if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response


class RouterError(Exception):
    """A request the router answers itself, with an HTTP status and an OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.code, self.param)

    def response(self) -> Response:
        from starlette.responses import Response

        return Response(
            self.body(), status_code=self.status, headers=self.headers, media_type="application/json"
        )


def error_body(message: str, type_: str, code: str | None = None, param: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "param": param, "code": code}})


def model_not_found(model: str, available: list[str]) -> RouterError:
    names = ", ".join(available) if available else "none (no backend is registered)"
    return RouterError(
        404,
        f"The model '{model}' does not exist. Available models: {names}",
        code="model_not_found",
        param="model",
    )


def unauthorized(message: str) -> RouterError:
    return RouterError(401, message, type_="authentication_error", code="invalid_api_key")


def bad_gateway(message: str) -> RouterError:
    return RouterError(502, message, type_="upstream_error", code="bad_gateway")


async def router_error_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RouterError)
    return exc.response()


async def http_error_handler(_request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 (an unknown path or method), in the same shape."""
    status = int(getattr(exc, "status_code", 500))
    detail = str(getattr(exc, "detail", "error"))
    return RouterError(status, detail, code="not_found" if status == 404 else None).response()


async def validation_error_handler(_request: Request, exc: Exception) -> Response:
    return RouterError(400, f"invalid request: {exc}").response()
