"""The native ``/generate`` endpoint: SGLang's request and response shapes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from engine.server.context import ServerContext
from engine.server.generation.params import sampling_params_for
from engine.server.generation.prompt import check_prompt, prompts_of
from engine.server.generation.service import Generation, Sample, submit
from engine.server.generation.streaming import GenerationStream
from engine.server.http_errors import bad_request, json_response
from engine.server.native_output import native_result


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
    if body.text == []:
        raise bad_request("the batch is empty")
    prompt = body.text if body.text is not None else body.input_ids
    assert prompt is not None
    prompts, batched = prompts_of(ctx, prompt)
    for ids in prompts:
        check_prompt(ctx, ids)
    return prompts, batched


async def generate(ctx: ServerContext, body: GenerateBody) -> Any:
    prompts, batched = prompt_ids(ctx, body)
    raw_params = body.sampling_params
    if isinstance(raw_params, list):
        if len(raw_params) != len(prompts):
            raise bad_request(f"got {len(raw_params)} sampling_params for {len(prompts)} prompts")
        per_prompt = [sampling_params_for(ctx, p) for p in raw_params]
    else:
        per_prompt = [sampling_params_for(ctx, raw_params)] * len(prompts)
    rids: list[str | None] = [*body.rid] if isinstance(body.rid, list) else [body.rid] * len(prompts)
    if len(rids) != len(prompts):
        raise bad_request(f"got {len(rids)} rids for {len(prompts)} prompts")
    generation = await submit(ctx, prompts, per_prompt, body.return_logprob, body.top_logprobs_num, rids)
    batched = batched or len(generation.samples) > 1
    if body.stream:
        return GenerationStream(generation, _sse(generation, batched, body.return_logprob), "text/event-stream")
    results = [result_dict(s, body.return_logprob) for s in await generation.results()]
    return json_response(results if batched else results[0])


def result_dict(sample: Sample, return_logprob: bool) -> dict[str, Any]:
    return native_result(
        sample.rid,
        sample.text,
        sample.token_ids,
        (len(sample.prompt_ids), sample.completion_tokens, sample.cached_tokens),
        sample.finish_reason,
        sample.seconds_since_submit,
        sample.logprobs if return_logprob else None,
        sample.top_logprobs if return_logprob else (),
    )


async def _sse(generation: Generation, batched: bool, return_logprob: bool) -> AsyncIterator[bytes]:
    async with aclosing(generation.deltas()) as deltas:
        async for delta in deltas:
            if delta.error:
                yield b"data: " + orjson.dumps({"error": {"message": delta.error}}) + b"\n\n"
                break
            chunk = result_dict(generation.samples[delta.index], return_logprob)
            if batched:
                chunk["index"] = delta.index
            yield b"data: " + orjson.dumps(chunk) + b"\n\n"
    yield b"data: [DONE]\n\n"
