"""What /api/chat and /api/generate share: model check, options, one generation, NDJSON or one reply."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

import msgspec
import orjson
from fastapi.responses import Response, StreamingResponse

from engine.sampling.params import SamplingParams
from engine.server.context import ServerContext
from engine.server.generation.params import JSON_OBJECT_SCHEMA, sampling_params_for
from engine.server.generation.prompt import check_prompt
from engine.server.generation.service import Generation, Sample, submit
from engine.server.http_errors import ApiError, bad_request
from engine.server.ollama.protocol import Done, Options, encode_json, ndjson_line

# NOTE: Ollama option name → the engine's sampling parameter name, copied when set.
_OPTION_NAMES = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "repeat_penalty": "repetition_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}

# NOTE: builds one reply from a text (a delta, or the whole text) and, on the last one, Done.
Render = Callable[[str, Done | None], msgspec.Struct]


def is_served(ctx: ServerContext, model: str) -> bool:
    """The engine serves one model, known by its served name (with or without ":latest") or path."""
    name = ctx.args.model_name
    return model in (name, f"{name}:latest", ctx.model_path)


def check_model(ctx: ServerContext, model: str) -> None:
    if not is_served(ctx, model):
        raise ApiError(404, f"model '{model}' not found, try pulling it first")


def refuse_unavailable(ctx: ServerContext, think: bool | str | None) -> None:
    if think not in (None, False):
        raise bad_request(f"'{ctx.args.model_name}' does not support thinking")


def format_schema(fmt: str | dict[str, Any] | None) -> str | None:
    """Ollama's ``format`` ("json", or a JSON schema) as the json_schema sampling parameter."""
    if fmt in (None, ""):
        return None
    if fmt == "json":
        return JSON_OBJECT_SCHEMA
    if isinstance(fmt, dict):
        return orjson.dumps(fmt).decode()
    raise bad_request(f'format must be "json" or a JSON schema, got {fmt!r}')


def sampling_params(
    ctx: ServerContext, options: Options | None, ids: list[int], fmt: str | dict[str, Any] | None
) -> SamplingParams:
    """Validated engine sampling params for a prompt of ``ids`` (also checked against the context)."""
    # NOTE: as Ollama, a num_predict beyond what the context leaves is no error: the answer
    # stops when the context is full (the scheduler clamps it), so no budget is checked here.
    check_prompt(ctx, ids)
    options = options or Options()
    if options.num_predict is not None and options.num_predict < -1:
        raise bad_request(
            f"num_predict must be -1 (up to the context length) or >= 0, got {options.num_predict}"
        )
    up_to_context = options.num_predict in (None, -1)
    raw: dict[str, Any] = {
        "max_new_tokens": ctx.context_length - len(ids) if up_to_context else options.num_predict
    }
    for option, param in _OPTION_NAMES.items():
        value = getattr(options, option)
        if value is not None:
            raw[param] = value
    if options.stop:
        raw["stop"] = [options.stop] if isinstance(options.stop, str) else options.stop
    schema = format_schema(fmt)
    if schema is not None:
        raw["json_schema"] = schema
    return sampling_params_for(ctx, raw)


class TimedGeneration:
    """One prompt through the generation service, as text deltas, with Ollama's timings.

    The request is submitted when the deltas are first iterated, so a streamed reply whose
    client left before the first byte never reaches the scheduler.
    """

    def __init__(
        self, ctx: ServerContext, ids: list[int], params: SamplingParams, started_ns: int
    ) -> None:
        self.ctx = ctx
        self.ids = ids
        self.params = params
        self.started_ns = started_ns
        self.first_output_ns: int | None = None
        self.submitted: Generation | None = None

    @property
    def sample(self) -> Sample | None:
        """The output so far; None before the request was submitted."""
        return None if self.submitted is None else self.submitted.samples[0]

    async def deltas(self) -> AsyncGenerator[str, None]:
        self.submitted = await submit(self.ctx, [self.ids], [self.params])
        async with aclosing(self.submitted.deltas()) as deltas:
            async for delta in deltas:
                if delta.error:
                    raise ApiError(400, delta.error)
                if self.first_output_ns is None:
                    self.first_output_ns = time.perf_counter_ns()
                if delta.text:
                    yield delta.text

    def done(self) -> Done:
        submitted = self.submitted
        assert submitted is not None, "done() before the generation ran"
        finish = submitted.samples[0].finish_reason
        usage = submitted.usage()
        end = time.perf_counter_ns()
        first = self.first_output_ns or end
        return Done(
            done_reason=finish.kind if finish else "stop",
            total_duration=end - self.started_ns,
            load_duration=0,  # the model is always loaded
            prompt_eval_count=usage.prompt_tokens,
            prompt_eval_duration=first - self.started_ns,
            eval_count=usage.completion_tokens,
            eval_duration=end - first,
        )


async def respond(generation: TimedGeneration, stream: bool, render: Render) -> Response:
    if stream:
        return StreamingResponse(_ndjson(generation, render), media_type="application/x-ndjson")
    # NOTE: a client that leaves cancels this handler; closing the deltas aborts the request.
    text = await _whole_text(generation)
    return Response(encode_json(render(text, generation.done())), media_type="application/json")


async def _whole_text(generation: TimedGeneration) -> str:
    async with aclosing(generation.deltas()) as deltas:
        return "".join([text async for text in deltas])


async def _ndjson(generation: TimedGeneration, render: Render) -> AsyncIterator[bytes]:
    try:
        async with aclosing(generation.deltas()) as deltas:
            async for text in deltas:
                yield ndjson_line(render(text, None))
    except ApiError as err:
        yield ndjson_line({"error": err.message})
        return
    yield ndjson_line(render("", generation.done()))
