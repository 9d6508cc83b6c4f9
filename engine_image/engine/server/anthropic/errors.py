"""Anthropic-shaped errors: ``{"type": "error", "error": {"type", "message"}}``."""

from __future__ import annotations

from fastapi.responses import Response

from engine.server.anthropic.protocol import ErrorDetail, ErrorResponse, encode_json
from engine.server.http_errors import ApiError

_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
}


def error_body(err: ApiError) -> ErrorResponse:
    """The Anthropic body of an (OpenAI-shaped) ApiError; the type follows the HTTP status."""
    return ErrorResponse(
        ErrorDetail(type=_TYPE_BY_STATUS.get(err.status, "api_error"), message=err.message)
    )


def error_response(err: ApiError) -> Response:
    return Response(
        encode_json(error_body(err)), status_code=err.status, media_type="application/json"
    )
