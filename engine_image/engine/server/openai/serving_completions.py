"""/v1/completions: raw prompts (text or token ids), OpenAI's text_completion objects."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

from fastapi.responses import Response, StreamingResponse

from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, bad_request
from engine.server.native_generate import check_prompt, sampling_params_for
from engine.server.openai.logprobs import completion_logprobs
from engine.server.openai.protocol import (
    SSE_DONE,
    Completion,
    CompletionChoice,
    CompletionLogprobs,
    CompletionRequest,
    PromptTokensDetails,
    Usage,
    encode_json,
    sse_event,
    stream_error,
)
from engine.server.openai.sampling import finish_reason, sampling_params
from engine.server.tokenizer_manager import RequestState
from engine.text.decode_text import decode_text


def _prompts(
    ctx: ServerContext,
    prompt: str | list[str] | list[int] | list[list[int]],
    max_tokens: int | None,
) -> list[list[int]]:
    if isinstance(prompt, str):
        prompts = [ctx.tokenizer.encode(prompt)]
    elif not prompt:
        raise bad_request("prompt must not be empty", param="prompt")
    elif isinstance(prompt[0], str):
        prompts = [ctx.tokenizer.encode(p) for p in prompt]  # type: ignore[arg-type]
    elif isinstance(prompt[0], int):
        prompts = [list(prompt)]  # type: ignore[arg-type]
    else:
        prompts = [list(p) for p in prompt]  # type: ignore[union-attr]
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
    tm = ctx.tokenizer_manager
    states: list[RequestState] = []
    prompt_of: list[list[int]] = []
    for ids in prompts:
        max_new = check_prompt(ctx, ids, body.max_tokens)
        params = sampling_params_for(ctx, {**sampling_params(body, max_new), "n": body.n})
        new = await tm.submit(ids, params, want_logprobs, top)
        states += new
        prompt_of += [ids] * len(new)
    response_id = f"cmpl-{uuid.uuid4().hex}"
    model = body.model or ctx.args.model_name
    prompt_tokens = sum(len(p) for p in prompts)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            _stream(ctx, body, states, prompt_of, response_id, model, prompt_tokens, include_usage),
            media_type="text/event-stream",
        )
    for state in states:
        await tm.wait(state)
    errors = [s.error for s in states if s.error]
    if errors:
        raise ApiError(400, errors[0])
    choices = []
    for i, (state, ids) in enumerate(zip(states, prompt_of)):
        echo = decode_text(ctx.tokenizer, ids) if body.echo else ""
        choices.append(
            CompletionChoice(
                index=i,
                text=echo + state.text,
                finish_reason=finish_reason(state.finish_reason),
                logprobs=_logprobs(ctx, state, 0, len(echo)) if want_logprobs else None,
            )
        )
    completion = Completion(
        object="text_completion",
        id=response_id,
        created=int(time.time()),
        model=model,
        choices=choices,
        usage=_usage(states, prompt_tokens),
    )
    return Response(encode_json(completion), media_type="application/json")


def _usage(states: list[RequestState], prompt_tokens: int) -> Usage:
    completion = sum(s.completion_tokens for s in states)
    cached = max((s.cached_tokens for s in states), default=0)
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion,
        total_tokens=prompt_tokens + completion,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=cached),
    )


def _logprobs(ctx: ServerContext, state: RequestState, start: int, text_offset: int) -> CompletionLogprobs:
    return completion_logprobs(
        ctx.tokenizer, state.output_ids[start:], state.logprobs[start:], state.top_logprobs[start:], text_offset
    )


async def _stream(
    ctx: ServerContext,
    body: CompletionRequest,
    states: list[RequestState],
    prompt_of: list[list[int]],
    response_id: str,
    model: str,
    prompt_tokens: int,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    created = int(time.time())

    def chunk(choices: list[CompletionChoice], usage: Usage | None = None) -> bytes:
        return sse_event(
            Completion(object="text_completion", id=response_id, created=created, model=model, choices=choices, usage=usage)
        )

    if body.echo:
        for i, ids in enumerate(prompt_of):
            yield chunk([CompletionChoice(index=i, text=decode_text(ctx.tokenizer, ids))])
    async with aclosing(ctx.tokenizer_manager.deltas(states)) as deltas:
        async for delta in deltas:
            state = delta.state
            if state.error:
                yield stream_error(state.error)
                break
            reason = finish_reason(state.finish_reason)
            if not delta.text and reason is None:
                continue
            offset = len(state.text) - len(delta.text)
            logprobs = _logprobs(ctx, state, delta.first_token, offset) if body.logprobs is not None else None
            yield chunk([CompletionChoice(index=delta.index, text=delta.text, finish_reason=reason, logprobs=logprobs)])
    if include_usage:
        yield chunk([], _usage(states, prompt_tokens))
    yield SSE_DONE
