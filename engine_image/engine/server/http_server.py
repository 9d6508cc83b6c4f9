"""The FastAPI application of one engine server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from engine.server.anthropic.routes import anthropic_router
from engine.server.context import ServerContext
from engine.server.http_errors import install_error_handlers
from engine.server.metrics import enable_metrics
from engine.server.middleware import install_middleware
from engine.server.model_kind_guard import REFUSALS, install_generation_guard, model_kind
from engine.server.ollama.routes import ollama_router
from engine.server.openai.routes import openai_router
from engine.server.routes_classification import classification_router
from engine.server.routes_cloud import cloud_open_paths, cloud_router, vertex_predict_route
from engine.server.routes_embedding import embedding_router
from engine.server.routes_expert_distribution import expert_distribution_router
from engine.server.routes_native import native_router
from engine.server.warmup import warm_up

logger = logging.getLogger(__name__)


def create_app(ctx: ServerContext) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        ctx.tokenizer_manager.on_weights_updated = ctx.weights_updated
        ctx.tokenizer_manager.start()
        # NOTE: in the background, so /health answers 503 (not "connection refused") meanwhile.
        warming = asyncio.create_task(warm_up(ctx))
        try:
            yield
        finally:
            ctx.shutting_down = True
            warming.cancel()
            await ctx.tokenizer_manager.close()

    app = FastAPI(title="gomgr engine", lifespan=lifespan, docs_url=None, redoc_url=None)
    install_error_handlers(app)
    if ctx.is_embedding:
        # NOTE: added first, so it runs inside the API-key check and CORS.
        kind = model_kind(ctx.hf_config.get("architectures") or [], is_embedding=True)
        install_generation_guard(app, frozenset({vertex_predict_route()}), REFUSALS[kind])
    install_middleware(app, ctx.args.api_key, enable_metrics(app, ctx), cloud_open_paths())
    app.include_router(cloud_router(ctx))
    app.include_router(native_router(ctx))
    app.include_router(embedding_router(ctx))
    app.include_router(classification_router(ctx))
    app.include_router(expert_distribution_router(ctx))
    app.include_router(openai_router(ctx))
    app.include_router(anthropic_router(ctx))
    app.include_router(ollama_router(ctx))
    return app
