"""Sequence classification (reward models, cross-encoders on single texts): SGLang's two shapes.

Native ``/classify`` takes ``/encode``'s body and answers like it, with the head's raw logits
(a reward model's reward) as ``"embedding"``. ``/v1/classify`` takes ``{"input"}`` and answers
``{"data": [{"index", "label", "probs", "num_classes"}]}``: softmax over the logits and the
``id2label`` name of the most likely class.
"""

from __future__ import annotations

import math
import time
import uuid
from typing import Any

from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict

from engine.config.classification import num_labels
from engine.ipc.messages import ClassifyRequest, ForwardOnlyOutput
from engine.server.context import ServerContext
from engine.server.http_errors import json_response
from engine.server.openai.serving_embedding import embedding_inputs
from engine.server.routes_embedding import EncodeBody, answer_encode_body


class OpenAIClassifyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    input: str | list[str] | list[int] | list[list[int]]
    user: str | None = None


async def _logits(ctx: ServerContext, prompts: list[list[int]], rid: str) -> ForwardOnlyOutput:
    return await ctx.tokenizer_manager.forward_only(ClassifyRequest(rid, prompts))


async def classify_native(ctx: ServerContext, body: EncodeBody) -> Response:
    return await answer_encode_body(ctx, body, ClassifyRequest)


async def classify_openai(ctx: ServerContext, body: OpenAIClassifyBody) -> Response:
    prompts = embedding_inputs(ctx, body.input)
    rid = uuid.uuid4().hex
    output = await _logits(ctx, prompts, rid)
    labels = _labels(ctx.hf_config)
    data: list[dict[str, Any]] = []
    for i, logits in enumerate(output.values):
        probs = _softmax(logits)
        best = max(range(len(probs)), key=probs.__getitem__)
        data.append({"index": i, "label": labels[best], "probs": probs, "num_classes": len(probs)})
    usage = {"prompt_tokens": output.prompt_tokens, "total_tokens": output.prompt_tokens, "completion_tokens": 0}
    return json_response(
        {
            "id": f"classify-{rid}",
            "object": "list",
            "created": int(time.time()),
            "model": ctx.args.model_name,
            "data": data,
            "usage": usage,
        }
    )


def _labels(hf_config: dict[str, Any]) -> list[str]:
    """Class names by index: config.json's id2label (string keys), else LABEL_<i>."""
    names = hf_config.get("id2label") or {}
    return [str(names.get(str(i), f"LABEL_{i}")) for i in range(num_labels(hf_config))]


def _softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    total = sum(weights)
    return [w / total for w in weights]
