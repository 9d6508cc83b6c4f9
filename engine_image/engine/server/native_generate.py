"""The native ``/generate`` endpoint: SGLang's request and response shapes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import orjson
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from engine.constrained import check_grammar
from engine.sampling.errors import InvalidSamplingParams
from engine.sampling.params import SamplingParams
from engine.server.context import ServerContext
from engine.server.http_errors import ApiError, bad_request, json_response
from engine.server.tokenizer_manager import RequestState


class GenerateBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str | list[str] | None = None
    input_ids: list[int] | list[list[int]] | None = None
    sampling_params: dict[str, Any] | list[dict[str, Any]] | None = None
    stream: bool = False
    return_logprob: bool = False
    top_logprobs_num: int = Field(default=0, ge=0)
    rid: str | list[str] | None = None


def prompt_ids(ctx: ServerContext, body: GenerateBody) -> tuple[list[list[int]], bool]:
    """Token ids per prompt, and whether the request was a batch."""
    if (body.text is None) == (body.input_ids is None):
        raise bad_request("give exactly one of text or input_ids")
    if isinstance(body.text, str):
        prompts, batched = [ctx.tokenizer.encode(body.text)], False
    elif body.text is not None:
        prompts, batched = [ctx.tokenizer.encode(t) for t in body.text], True
    elif body.input_ids and isinstance(body.input_ids[0], list):
        prompts, batched = [list(p) for p in body.input_ids], True  # type: ignore[arg-type]
    else:
        prompts, batched = [list(body.input_ids or [])], False  # type: ignore[arg-type]
    if batched and not prompts:
        raise bad_request("the batch is empty")
    for ids in prompts:
        check_prompt(ctx, ids)
    return prompts, batched


def check_prompt(
    ctx: ServerContext, ids: list[int], max_tokens: int | None = None, param: str = "max_tokens"
) -> int:
    """A 400 for an empty prompt, one that fills the context, or a ``max_tokens`` (named
    ``param`` in the request) that the context cannot hold after the prompt.

    Returns the completion budget: ``max_tokens``, or all the context leaves when it is None.
    NOTE: as vLLM, an explicit budget is refused rather than shortened; native /generate
    passes none, so its max_new_tokens is clamped to the context by the scheduler, as SGLang.
    """
    if not ids:
        raise bad_request("the prompt is empty")
    if len(ids) >= ctx.context_length:
        raise bad_request(
            f"the prompt has {len(ids)} tokens; this model's context length is {ctx.context_length}"
        )
    if max_tokens is None:
        return ctx.context_length - len(ids)
    if len(ids) + max_tokens > ctx.context_length:
        raise bad_request(
            f"This model's maximum context length is {ctx.context_length} tokens. However, you "
            f"requested {len(ids) + max_tokens} tokens ({len(ids)} in the messages, {max_tokens} "
            f"in the completion). Please reduce the length of the messages or completion.",
            param=param,
        )
    return max_tokens


def sampling_params_for(ctx: ServerContext, raw: dict[str, Any] | None) -> SamplingParams:
    """Validated sampling params (preferred params underneath): the one place a request's
    params are checked; the scheduler takes them as they are.

    A grammar (json_schema, regex, ebnf) is checked here too, so a bad one is a 400 before
    the request is queued.
    """
    merged = {**(ctx.args.preferred_sampling_params or {}), **(raw or {})}
    try:
        params = SamplingParams.from_dict(merged)
        params.validate(len(ctx.tokenizer))
        if params.grammar is not None:
            check_grammar(params.grammar)
    except InvalidSamplingParams as err:
        raise bad_request(str(err), param=err.field) from None
    return params


async def generate(ctx: ServerContext, body: GenerateBody) -> Any:
    prompts, batched = prompt_ids(ctx, body)
    raw_params = body.sampling_params
    if isinstance(raw_params, list):
        if len(raw_params) != len(prompts):
            raise bad_request(f"got {len(raw_params)} sampling_params for {len(prompts)} prompts")
        per_prompt = [sampling_params_for(ctx, p) for p in raw_params]
    else:
        per_prompt = [sampling_params_for(ctx, raw_params)] * len(prompts)
    rids = body.rid if isinstance(body.rid, list) else [body.rid] * len(prompts)
    if len(rids) != len(prompts):
        raise bad_request(f"got {len(rids)} rids for {len(prompts)} prompts")

    tm = ctx.tokenizer_manager
    states: list[RequestState] = []
    try:
        for ids, params, rid in zip(prompts, per_prompt, rids):
            states += await tm.submit(ids, params, body.return_logprob, body.top_logprobs_num, rid)
    except ValueError as err:
        await tm.release(states)
        raise bad_request(str(err)) from None
    batched = batched or len(states) > 1
    if body.stream:
        return StreamingResponse(_sse(ctx, states, batched, body.return_logprob), media_type="text/event-stream")
    for state in states:
        await tm.wait(state)
    errors = [s.error for s in states if s.error]
    if errors:
        await tm.release(states)
        raise ApiError(400, errors[0])
    results = [result_dict(s, body.return_logprob) for s in states]
    return json_response(results if batched else results[0])


def result_dict(state: RequestState, return_logprob: bool) -> dict[str, Any]:
    meta = state.meta_info()
    if return_logprob:
        meta["output_token_logprobs"] = [[lp, tok, None] for lp, tok in zip(state.logprobs, state.output_ids)]
        if state.top_logprobs:
            meta["output_top_logprobs"] = [[[lp, tok, None] for lp, tok in step] for step in state.top_logprobs]
    return {"text": state.text, "output_ids": list(state.output_ids), "meta_info": meta}


async def _sse(
    ctx: ServerContext, states: list[RequestState], batched: bool, return_logprob: bool
) -> AsyncIterator[bytes]:
    index = {id(s): i for i, s in enumerate(states)}
    async with aclosing(ctx.tokenizer_manager.updates(states)) as updates:
        async for state in updates:
            if state.error:
                yield b"data: " + orjson.dumps({"error": {"message": state.error}}) + b"\n\n"
                break
            chunk = result_dict(state, return_logprob)
            if batched:
                chunk["index"] = index[id(state)]
            yield b"data: " + orjson.dumps(chunk) + b"\n\n"
    yield b"data: [DONE]\n\n"
