"""/v1/completions: raw prompts (text or token ids), OpenAI's text_completion objects."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

from fastapi.responses import Response

from engine.server.context import ServerContext
from engine.server.generation.params import sampling_params_for
from engine.server.generation.prompt import PromptInput, check_prompt, prompts_of
from engine.server.generation.service import Generation, submit
from engine.server.generation.streaming import GenerationStream
from engine.server.http_errors import bad_request
from engine.server.openai.logprobs import completion_logprobs
from engine.server.openai.protocol import (
    SSE_DONE,
    Completion,
    CompletionChoice,
    CompletionRequest,
    Usage,
    encode_json,
    sse_event,
    stream_error,
)
from engine.server.openai.sampling import finish_reason, sampling_params
from engine.server.openai.serving_chat import usage_out


def _prompts(ctx: ServerContext, prompt: PromptInput, max_tokens: int | None) -> list[list[int]]:
    if prompt == []:
        raise bad_request("prompt must not be empty", param="prompt")
    prompts, _ = prompts_of(ctx, prompt)
    # NOTE: every prompt is checked before the first is submitted, so a bad one queues none.
    for ids in prompts:
        check_prompt(ctx, ids, max_tokens)
    return prompts


async def create_completion(ctx: ServerContext, body: CompletionRequest) -> Response:
    if body.suffix:
        raise bad_request("suffix is not supported", param="suffix")
    prompts = _prompts(ctx, body.prompt, body.max_tokens)
    top = body.logprobs or 0
    want_logprobs = body.logprobs is not None
    params = [
        sampling_params_for(
            ctx, {**sampling_params(body, check_prompt(ctx, ids, body.max_tokens)), "n": body.n}
        )
        for ids in prompts
    ]
    generation = await submit(ctx, prompts, params, want_logprobs, top)
    response_id = f"cmpl-{uuid.uuid4().hex}"
    model = body.model or ctx.args.model_name
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        stream = _stream(ctx, body, generation, response_id, model, include_usage)
        return GenerationStream(generation, stream, "text/event-stream")
    choices = []
    for i, sample in enumerate(await generation.results()):
        echo = ctx.tokenizer.decode(sample.prompt_ids) if body.echo else ""
        choices.append(
            CompletionChoice(
                index=i,
                text=echo + sample.text,
                finish_reason=finish_reason(sample.finish_reason),
                logprobs=completion_logprobs(
                    ctx.tokenizer, sample.token_ids, sample.logprobs, sample.top_logprobs, len(echo)
                )
                if want_logprobs
                else None,
            )
        )
    completion = Completion(
        object="text_completion",
        id=response_id,
        created=int(time.time()),
        model=model,
        choices=choices,
        usage=usage_out(generation.usage()),
    )
    return Response(encode_json(completion), media_type="application/json")


async def _stream(
    ctx: ServerContext,
    body: CompletionRequest,
    generation: Generation,
    response_id: str,
    model: str,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    created = int(time.time())

    def chunk(choices: list[CompletionChoice], usage: Usage | None = None) -> bytes:
        return sse_event(
            Completion(object="text_completion", id=response_id, created=created, model=model, choices=choices, usage=usage)
        )

    if body.echo:
        for i, sample in enumerate(generation.samples):
            yield chunk([CompletionChoice(index=i, text=ctx.tokenizer.decode(sample.prompt_ids))])
    async with aclosing(generation.deltas()) as deltas:
        async for delta in deltas:
            if delta.error:
                yield stream_error(delta.error)
                break
            reason = finish_reason(delta.finish_reason)
            if not delta.text and reason is None:
                continue
            logprobs = None
            if body.logprobs is not None:
                logprobs = completion_logprobs(
                    ctx.tokenizer, delta.token_ids, delta.logprobs, delta.top_logprobs, delta.text_offset
                )
            yield chunk([CompletionChoice(index=delta.index, text=delta.text, finish_reason=reason, logprobs=logprobs)])
    if include_usage:
        yield chunk([], usage_out(generation.usage()))
    yield SSE_DONE
