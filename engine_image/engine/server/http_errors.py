"""OpenAI-shaped errors and strict JSON body parsing for every route."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

Body = TypeVar("Body", bound=BaseModel)


class ApiError(Exception):
    """An error answered as ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def json_response(content: Any, status_code: int = 200) -> Response:
    """A JSON response encoded with orjson (fast, and handles numpy/dataclass values)."""
    return Response(orjson.dumps(content), status_code=status_code, media_type="application/json")


def error_response(err: ApiError) -> Response:
    return json_response(err.body(), status_code=err.status)


def bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


async def parse_json_body(request: Request, model: type[Body]) -> Body:
    """The request's JSON body validated by ``model``; any problem is a 400 ApiError."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise bad_request(f"Content-Type must be application/json, got {content_type or 'none'!r}")
    return validate_json(await request.body(), model)


def validate_json(raw: bytes, model: type[Body]) -> Body:
    """``raw`` parsed as JSON and validated by ``model``; any problem is a 400 ApiError."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise bad_request(f"the body is not valid JSON: {err}") from None
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise bad_request(_describe(err), param=_first_field(err)) from None


def _first_field(err: ValidationError) -> str | None:
    errors = err.errors()
    if not errors or not errors[0]["loc"]:
        return None
    return str(errors[0]["loc"][0])


# NOTE: pydantic puts the tried union branch into an error's location ("text.str",
# "input_ids.list[int]"); those parts name types, not fields, and are left out.
_UNION_BRANCHES = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and (p in _UNION_BRANCHES or "[" in p))]
    return ".".join(parts) or "body"


def _describe(err: ValidationError) -> str:
    first = err.errors()[0]
    where = _field_path(first["loc"])
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"invalid field {where}: {first['msg']}{more}"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, err: ApiError) -> Response:
        return error_response(err)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, err: RequestValidationError) -> Response:
        first = err.errors()[0] if err.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"])
        return error_response(bad_request(f"invalid field {where}: {first['msg']}"))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, err: StarletteHTTPException) -> Response:
        kind = "not_found_error" if err.status_code == 404 else "invalid_request_error"
        return error_response(ApiError(err.status_code, str(err.detail), type_=kind))
