"""``/v1/score`` (SGLang's shape): the next-token probabilities of label ids after query + item."""

from __future__ import annotations

import math
import uuid

from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from engine.ipc.messages import ScoreRequest
from engine.server.context import ServerContext
from engine.server.generation.prompt import check_prompt
from engine.server.http_errors import bad_request, json_response


class ScoreBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    query: str | list[int]
    items: str | list[str] | list[list[int]]
    label_token_ids: list[int] = Field(min_length=1)
    apply_softmax: bool = False
    item_first: bool = False


def score_prompts(ctx: ServerContext, body: ScoreBody) -> list[list[int]]:
    """One prompt per item: query then item (item then query with ``item_first``)."""
    items = [body.items] if isinstance(body.items, str) else body.items
    if not items:
        raise bad_request("items must not be empty", param="items")
    if isinstance(body.query, str):
        if not all(isinstance(item, str) for item in items):
            raise bad_request("a text query needs text items", param="items")
        texts = [f"{item}{body.query}" if body.item_first else f"{body.query}{item}" for item in items]
        prompts = [ctx.tokenizer.encode(text) for text in texts]
    else:
        if not all(isinstance(item, list) for item in items):
            raise bad_request("a token-id query needs token-id items", param="items")
        query = list(body.query)
        id_items = [item for item in items if isinstance(item, list)]
        prompts = [item + query if body.item_first else query + item for item in id_items]
    for ids in prompts:
        check_prompt(ctx, ids)
    return prompts


async def score(ctx: ServerContext, body: ScoreBody) -> Response:
    prompts = score_prompts(ctx, body)
    message = ScoreRequest(uuid.uuid4().hex, prompts, list(body.label_token_ids))
    output = await ctx.tokenizer_manager.forward_only(message)
    scores = [_probabilities(row, body.apply_softmax) for row in output.values]
    usage = {"prompt_tokens": output.prompt_tokens, "completion_tokens": 0, "total_tokens": output.prompt_tokens}
    return json_response({"scores": scores, "model": ctx.args.model_name, "usage": usage, "object": "scoring"})


def _probabilities(logprobs: list[float], apply_softmax: bool) -> list[float]:
    """exp of each label's logprob over the whole vocabulary, or a softmax over the labels only."""
    if not apply_softmax:
        return [math.exp(lp) for lp in logprobs]
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    return [w / total for w in weights]
