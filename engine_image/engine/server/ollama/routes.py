"""Ollama routes; every error is answered as ``{"error": "<message>"}``."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from engine.ipc.messages import ServerInfoRequest
from engine.ipc.scheduler_stats import SchedulerStats
from engine.server.context import ServerContext
from engine.server.http_errors import ApiError
from engine.server.ollama.errors import OllamaRoute, parse_body
from engine.server.ollama.model_card import model_card, model_info
from engine.server.ollama.protocol import (
    ChatRequest,
    GenerateRequest,
    ListedModel,
    PsReply,
    RunningModel,
    ShowReply,
    ShowRequest,
    TagsReply,
    encode_json,
    timestamp,
)
from engine.server.ollama.serving import is_served
from engine.server.ollama.serving_chat import chat
from engine.server.ollama.serving_generate import generate

# NOTE: the Ollama release whose API this surface follows. Clients gate features on it
# (VS Code Copilot wants >= 0.6.4, the first with /api/show "capabilities").
OLLAMA_API_VERSION = "0.6.4"
# NOTE: the engine never unloads its model; Ollama shows such a model with a far-off expiry.
NEVER_EXPIRES = timestamp(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC))
SCHEDULER_TIMEOUT_S = 5.0


def _json(reply: TagsReply | PsReply | ShowReply) -> Response:
    return Response(encode_json(reply), media_type="application/json")


def ollama_router(ctx: ServerContext) -> APIRouter:
    router = APIRouter(route_class=OllamaRoute)

    @router.api_route("/", methods=["GET", "HEAD"])
    async def root() -> PlainTextResponse:
        return PlainTextResponse("Ollama is running")

    @router.api_route("/api/version", methods=["GET", "HEAD"])
    async def version() -> dict[str, str]:
        return {"version": OLLAMA_API_VERSION}

    @router.api_route("/api/tags", methods=["GET", "HEAD"])
    async def tags() -> Response:
        card = model_card(ctx)
        name = ctx.args.model_name
        listed = ListedModel(
            name=name,
            model=name,
            modified_at=card.modified_at,
            size=card.size,
            digest=card.digest,
            details=card.details,
        )
        return _json(TagsReply(models=[listed]))

    @router.get("/api/ps")
    async def ps() -> Response:
        reply = await ctx.tokenizer_manager.control(ServerInfoRequest, SCHEDULER_TIMEOUT_S)
        if reply is None:
            raise ApiError(503, "the scheduler did not answer in time")
        assert isinstance(reply.payload, SchedulerStats), "the scheduler answers server info with its stats"
        card = model_card(ctx)
        name = ctx.args.model_name
        running = RunningModel(
            name=name,
            model=name,
            size=card.size,
            digest=card.digest,
            details=card.details,
            expires_at=NEVER_EXPIRES,
            size_vram=0 if reply.payload.device == "cpu" else card.size,
            context_length=ctx.context_length,
        )
        return _json(PsReply(models=[running]))

    @router.post("/api/show")
    async def show(request: Request) -> Response:
        body = await parse_body(request, ShowRequest)
        if not is_served(ctx, body.model):
            raise ApiError(404, f"model '{body.model}' not found")
        card = model_card(ctx)
        reply = ShowReply(
            template=ctx.tokenizer.chat_template or "{{ .Prompt }}",
            details=card.details,
            model_info=model_info(ctx, card),
            capabilities=["completion"],
            modified_at=card.modified_at,
        )
        return _json(reply)

    @router.post("/api/chat")
    async def chat_route(request: Request) -> Response:
        return await chat(ctx, await parse_body(request, ChatRequest))

    @router.post("/api/generate")
    async def generate_route(request: Request) -> Response:
        return await generate(ctx, await parse_body(request, GenerateRequest))

    return router
