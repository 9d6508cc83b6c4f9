"""A request's sampling params, typed and validated once, the server's preferred params underneath."""

from __future__ import annotations

from typing import Any

from engine.constrained import check_grammar
from engine.sampling.errors import InvalidSamplingParams
from engine.sampling.params import SamplingParams
from engine.server.context import ServerContext
from engine.server.http_errors import bad_request

# NOTE: OpenAI's json_object mode (and Ollama's "json"): any JSON object, as SGLang does it.
JSON_OBJECT_SCHEMA = '{"type": "object"}'


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
