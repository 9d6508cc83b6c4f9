"""The warm-up generate that runs before /health turns 200."""

from __future__ import annotations

import asyncio
import logging
import uuid

from engine.config.architectures import is_classifier
from engine.core.errors import InvalidRequest
from engine.ipc.messages import ClassifyRequest, EmbedRequest
from engine.sampling.params import SamplingParams
from engine.server.context import ServerContext
from engine.server.generation.service import submit
from engine.server.http_errors import ApiError

logger = logging.getLogger(__name__)

WARMUP_TIMEOUT_S = 600.0


async def warm_up(ctx: ServerContext) -> None:
    """Runs one short generate through the pipeline, then marks the server ready once every
    tokenizer worker has warmed up too.

    NOTE: a failed warm-up leaves /health at 503 (the operator sees why in the log)
    instead of killing the server, so /server_info and the logs stay reachable.
    """
    if ctx.args.skip_server_warmup:
        await _ready(ctx)
        return
    if ctx.is_embedding:
        if await embed_probe(ctx, WARMUP_TIMEOUT_S):
            await _ready(ctx)
        else:
            logger.error("warm-up embedding failed; /health stays 503")
        return
    ids = ctx.tokenizer.encode("The capital city of France is")
    generation = await submit(ctx, [ids], [SamplingParams(max_new_tokens=4, temperature=0)])
    try:
        # NOTE: a timeout cancels the results, which aborts the request.
        await asyncio.wait_for(generation.results(), WARMUP_TIMEOUT_S)
    except TimeoutError:
        logger.error("warm-up generate failed (timeout); /health stays 503")
    except ApiError as err:
        logger.error("warm-up generate failed (%s); /health stays 503", err.message)
    else:
        await _ready(ctx)


async def _ready(ctx: ServerContext) -> None:
    await ctx.tokenizer_manager.workers.wait_all_ready()
    ctx.ready = True
    if ctx.tokenizer_manager.workers.index == 0:
        logger.info("the server is ready")


async def embed_probe(ctx: ServerContext, timeout_s: float) -> bool:
    """Embeds (classifies, on a classification model) one short text through the pipeline;
    True if the answer arrived in time."""
    prompts = [ctx.tokenizer.encode("warm-up")]
    classifier = is_classifier(ctx.hf_config.get("architectures") or [])
    message = ClassifyRequest(uuid.uuid4().hex, prompts) if classifier else EmbedRequest(uuid.uuid4().hex, prompts)
    try:
        await asyncio.wait_for(ctx.tokenizer_manager.forward_only(message), timeout_s)
    except (TimeoutError, InvalidRequest):
        return False
    return True
