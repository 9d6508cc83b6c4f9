"""Cloud platforms' serving contracts: SageMaker (``/ping``, ``/invocations``) and Vertex AI.

SageMaker probes ``GET /ping`` (no key) and sends every inference to ``POST /invocations``:
a body with ``messages`` is a chat completion, anything else a native ``/generate`` body.

Vertex AI posts ``{"instances": [...], "parameters": {...}}`` to ``$AIP_PREDICT_ROUTE``
(default ``/vertex_generate``) and probes ``$AIP_HEALTH_ROUTE`` (``/health`` is served
already; another path is added as an alias). Each instance is a ``/generate`` body;
``parameters`` are sampling params, with the instance's own ``sampling_params`` on top.
The reply is ``{"predictions": [<generate result per instance>]}``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from engine.ipc.messages import ServerInfoRequest
from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, bad_request, json_response, parse_json_body
from engine.server.native_generate import GenerateBody, generate
from engine.server.openai.protocol import ChatCompletionRequest
from engine.server.openai.serving_chat import create_chat_completion
from engine.server.routes_native import PIPELINE_PING_TIMEOUT_S

DEFAULT_VERTEX_PREDICT_ROUTE = "/vertex_generate"


def vertex_predict_route() -> str:
    return os.environ.get("AIP_PREDICT_ROUTE") or DEFAULT_VERTEX_PREDICT_ROUTE


def vertex_health_route() -> str | None:
    """Vertex's health path when it is not one the server already answers."""
    route = os.environ.get("AIP_HEALTH_ROUTE")
    return route if route and route not in ("/health", "/health_generate", "/ping") else None


def cloud_open_paths() -> frozenset[str]:
    """Extra paths the API-key check must leave open (cloud health probes carry no key)."""
    route = vertex_health_route()
    return frozenset({route}) if route else frozenset()


def cloud_router(ctx: ServerContext) -> APIRouter:
    router = APIRouter()
    tm = ctx.tokenizer_manager

    async def ready() -> Response:
        if not ctx.ready or ctx.shutting_down:
            return Response(status_code=503)
        reply = await tm.control(ServerInfoRequest, PIPELINE_PING_TIMEOUT_S)
        return Response(status_code=200 if reply is not None else 503)

    # ---------------------------------------------------------------- SageMaker

    @router.get("/ping")
    async def ping() -> Response:
        return await ready()

    @router.post("/invocations")
    async def invocations(request: Request) -> Any:
        data = await _json_object(request)
        if "messages" in data:
            body = await parse_json_body(request, ChatCompletionRequest)
            return await create_chat_completion(ctx, body)
        return await generate(ctx, await parse_json_body(request, GenerateBody))

    # ---------------------------------------------------------------- Vertex AI

    async def vertex_predict(request: Request) -> Response:
        data = await _json_object(request)
        instances = data.get("instances")
        if not isinstance(instances, list):
            raise bad_request(
                "the body needs 'instances': a list of generate requests", param="instances"
            )
        parameters = _vertex_parameters(data.get("parameters"))
        bodies = [_instance_body(i, instance, parameters) for i, instance in enumerate(instances)]
        # NOTE: all submitted together, so the scheduler batches them.
        results = await asyncio.gather(
            *(generate(ctx, body) for body in bodies), return_exceptions=True
        )
        predictions = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            predictions.append(orjson.loads(result.body))
        return json_response({"predictions": predictions})

    router.add_api_route(vertex_predict_route(), vertex_predict, methods=["POST"])
    health_route = vertex_health_route()
    if health_route:
        router.add_api_route(health_route, ready, methods=["GET"])
    return router


async def _json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object (content type checked by ``parse_json_body``'s rule)."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise bad_request(f"Content-Type must be application/json, got {content_type or 'none'!r}")
    try:
        data = orjson.loads(await request.body())
    except orjson.JSONDecodeError as err:
        raise bad_request(f"the body is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise bad_request("the body must be a JSON object")
    return data


def _vertex_parameters(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise bad_request("'parameters' must be an object of sampling params", param="parameters")
    # NOTE: SGLang's Vertex handler takes generate fields here; accept its sampling_params.
    nested = raw.get("sampling_params")
    if isinstance(nested, dict):
        return {**{k: v for k, v in raw.items() if k != "sampling_params"}, **nested}
    return raw


def _instance_body(index: int, instance: Any, parameters: dict[str, Any]) -> GenerateBody:
    if not isinstance(instance, dict):
        raise bad_request(
            f"instances[{index}] must be an object (a generate request)", param="instances"
        )
    if instance.get("stream"):
        raise bad_request("streaming is not supported on the Vertex route", param="instances")
    own = instance.get("sampling_params")
    if own is not None and not isinstance(own, dict):
        raise bad_request(
            f"instances[{index}].sampling_params must be an object", param="instances"
        )
    merged = {**instance, "sampling_params": {**parameters, **(own or {})}}
    try:
        return GenerateBody.model_validate(merged)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError(
            400, f"instances[{index}]: invalid field {where}: {first['msg']}", param="instances"
        ) from None
