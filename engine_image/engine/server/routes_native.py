"""SGLang's native routes: generate, health, model and server info, cache, weights, tokens."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict

from engine.ipc.messages import (
    FlushCacheRequest,
    ServerInfoRequest,
    UpdateWeightsRequest,
)
from engine.ipc.scheduler_stats import SchedulerStats
from engine.sampling.params import SamplingParams
from engine.server.context import ServerContext
from engine.server.generation.service import submit
from engine.server.http_errors import ApiError, bad_request, json_response, parse_json_body
from engine.server.native_generate import GenerateBody, generate
from engine.server.warmup import embed_probe

# NOTE: the same knob SGLang reads; 20 s by default.
HEALTH_CHECK_TIMEOUT_S = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
PIPELINE_PING_TIMEOUT_S = 5.0
RECENT_OUTPUT_S = 1.0
OUTPUT_POLL_S = 0.1


class TokenizeBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    model: str | None = None
    prompt: str | list[str]
    add_special_tokens: bool = True


class DetokenizeBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    model: str | None = None
    tokens: list[int]
    skip_special_tokens: bool = True


class AbortBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    rid: str | None = None
    abort_all: bool = False


class UpdateWeightsBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    model_path: str
    load_format: str | None = None


def native_router(ctx: ServerContext) -> APIRouter:
    router = APIRouter()
    tm = ctx.tokenizer_manager

    @router.api_route("/generate", methods=["POST", "PUT"])
    async def generate_route(request: Request) -> Any:
        return await generate(ctx, await parse_json_body(request, GenerateBody))

    @router.get("/health")
    async def health() -> Response:
        if not ctx.ready or ctx.shutting_down:
            return Response(status_code=503)
        # NOTE: the scheduler answers the ping only between model steps; output arriving
        # meanwhile proves the pipeline alive too, so a long step under load is no hang.
        started = time.monotonic()
        ping = asyncio.ensure_future(tm.control(ServerInfoRequest, HEALTH_CHECK_TIMEOUT_S))
        try:
            while not ping.done() and tm.last_output_time <= started:
                await asyncio.wait({ping}, timeout=OUTPUT_POLL_S)
            alive = tm.last_output_time > started or ping.result() is not None
        finally:
            ping.cancel()
        return Response(status_code=200 if alive else 503)

    @router.get("/health_generate")
    async def health_generate() -> Response:
        if ctx.shutting_down:
            return Response(status_code=503)
        if ctx.is_embedding:
            return Response(status_code=200 if await embed_probe(ctx, HEALTH_CHECK_TIMEOUT_S) else 503)
        if time.monotonic() - tm.last_output_time < RECENT_OUTPUT_S:
            return Response(status_code=200)  # the pipeline is producing output right now
        # NOTE: as SGLang does, any output the pipeline produces after the check began proves
        # it alive; the check's own one-token request only matters when nothing else runs.
        started = time.monotonic()
        deadline = started + HEALTH_CHECK_TIMEOUT_S
        ids = [ctx.tokenizer.bos_token_id or 0]
        generation = await submit(ctx, [ids], [SamplingParams(max_new_tokens=1, temperature=0)])
        probe = asyncio.ensure_future(generation.results())
        try:
            while not probe.done() and tm.last_output_time < started and time.monotonic() < deadline:
                await asyncio.wait({probe}, timeout=min(0.2, max(0.0, deadline - time.monotonic())))
        finally:
            probe.cancel()
            await generation.abort()
        succeeded = probe.done() and not probe.cancelled() and probe.exception() is None
        alive = succeeded or tm.last_output_time >= started
        return Response(status_code=200 if alive else 503)

    @router.get("/get_model_info")
    @router.get("/model_info")
    async def model_info() -> Response:
        return json_response(
            {
                "model_path": ctx.model_path,
                "is_generation": not ctx.is_embedding,
                "tokenizer_path": ctx.args.tokenizer_path or ctx.args.model_path,
                "preferred_sampling_params": ctx.args.preferred_sampling_params,
                "weight_version": ctx.weight_version,
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": ctx.hf_config.get("model_type"),
                "architectures": ctx.hf_config.get("architectures"),
                "embedding": None,
            }
        )

    @router.get("/server_info")
    @router.get("/get_server_info")
    async def server_info() -> Response:
        reply = await tm.control(ServerInfoRequest, PIPELINE_PING_TIMEOUT_S)
        if reply is None:
            raise ApiError(503, "the scheduler did not answer in time", type_="service_unavailable")
        assert isinstance(reply.payload, SchedulerStats), "the scheduler answers server info with its stats"
        return json_response(
            {
                **ctx.args.public_dict(),
                **_stats_fields(reply.payload),
                "version": _version(),
                "in_flight_requests": tm.workers.in_flight(),
            }
        )

    @router.post("/flush_cache")
    async def flush_cache(timeout: float = 0.0) -> Response:
        if timeout < 0:
            raise bad_request("timeout must be >= 0", param="timeout")
        reply = await tm.control(lambda rid: FlushCacheRequest(rid, timeout), timeout + PIPELINE_PING_TIMEOUT_S)
        if reply is None:
            raise ApiError(503, "the scheduler did not answer in time", type_="service_unavailable")
        if not reply.success:
            raise bad_request(reply.message)
        return json_response({"success": True, "message": reply.message})

    @router.post("/update_weights_from_disk")
    async def update_weights(request: Request) -> Response:
        body = await parse_json_body(request, UpdateWeightsBody)
        # NOTE: a success reaches every worker's context (ServerContext.weights_updated).
        reply = await tm.control(lambda rid: UpdateWeightsRequest(rid, body.model_path), 600.0)
        if reply is None:
            raise ApiError(503, "the scheduler did not answer in time", type_="service_unavailable")
        return json_response({"success": reply.success, "message": reply.message}, status_code=200 if reply.success else 400)

    @router.post("/tokenize")
    @router.post("/v1/tokenize")
    async def tokenize(request: Request) -> Response:
        body = await parse_json_body(request, TokenizeBody)

        def encode(text: str) -> list[int]:
            ids: list[int] = ctx.tokenizer.encode(text, add_special_tokens=body.add_special_tokens)
            return ids

        if isinstance(body.prompt, str):
            tokens: Any = encode(body.prompt)
            count: Any = len(tokens)
        else:
            tokens = [encode(p) for p in body.prompt]
            count = [len(t) for t in tokens]
        return json_response({"tokens": tokens, "count": count, "max_model_len": ctx.context_length})

    @router.post("/detokenize")
    @router.post("/v1/detokenize")
    async def detokenize(request: Request) -> Response:
        body = await parse_json_body(request, DetokenizeBody)
        vocab = len(ctx.tokenizer)
        if any(not 0 <= t < vocab for t in body.tokens):
            raise bad_request(f"tokens must be ids in [0, {vocab})", param="tokens")
        text = ctx.tokenizer.decode(body.tokens, body.skip_special_tokens)
        return json_response({"text": text})

    @router.post("/abort_request")
    async def abort_request(request: Request) -> Response:
        body = await parse_json_body(request, AbortBody)
        if not body.abort_all and not body.rid:
            raise bad_request("give rid or abort_all: true")
        if body.abort_all:
            await tm.abort(abort_all=True)
        elif body.rid:
            # NOTE: the scheduler finds the request and its samples, whichever worker owns them.
            await tm.abort(body.rid, samples=True)
        return json_response({"success": True})

    return router


def _stats_fields(stats: SchedulerStats) -> dict[str, Any]:
    """The scheduler's part of /server_info (SGLang's key names); it overrides the flags' values
    (the context length and pool size the engine chose, the weights serving now)."""
    fields: dict[str, Any] = {
        "model_path": stats.model_path,
        "max_total_tokens": stats.max_total_tokens,
        "kv_pool_bytes": stats.kv_pool_bytes,
        "kv_pool_dtype": stats.kv_pool_dtype,
        "context_length": stats.context_length,
    }
    if stats.kv is not None:
        fields |= {
            "kv_pool_free_tokens": stats.kv.pool_free_tokens,
            "kv_pool_used_tokens": stats.kv.pool_used_tokens,
            "radix_cache_tokens": stats.kv.radix_cache_tokens,
            "radix_cache_evictable_tokens": stats.kv.radix_cache_evictable_tokens,
        }
    return fields | {
        "num_running_reqs": stats.num_running_reqs,
        "num_waiting_reqs": stats.num_waiting_reqs,
        "weight_version": stats.weight_version,
        "device": stats.device,
        "dtype": stats.dtype,
        "weights_format": stats.weights_format,
        "weights_quant_types": list(stats.weights_quant_types),
        "weights_kernel": stats.weights_kernel,
    }


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gomgr")
    except PackageNotFoundError:
        return "0+unknown"
