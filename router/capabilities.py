"""Which kinds of request a backend's model serves, from the engine's `GET /get_model_info`.

Shown in `/v1/models` as the `capabilities` extension field. The names are the router's
own, one per family of dispatched routes:

    chat        /v1/chat/completions, /v1/responses, /v1/messages, /api/chat
    completion  /v1/completions, /api/generate
    score       /v1/score (label-token probabilities of a generation model)
    embedding   /v1/embeddings
    rerank      /v1/rerank, /v2/rerank
    classify    /classify, /v1/classify
"""

from __future__ import annotations

from collections.abc import Mapping

GENERATION = ("chat", "completion", "score")
EMBEDDING = ("embedding",)
CROSS_ENCODER = ("rerank", "classify")
REWARD = ("classify",)
# NOTE: the engine's table (docs/engine-api.md): these sequence-classification
# architectures are cross-encoders (rerank and classify); any other one is a reward model
# (classify only). tests/router/test_router_capabilities.py holds it to the engine's registry.
CROSS_ENCODER_ARCHITECTURES = frozenset(
    {"BertForSequenceClassification", "XLMRobertaForSequenceClassification"}
)
CLASSIFICATION_SUFFIX = "ForSequenceClassification"


def capabilities_from_model_info(info: Mapping[str, object]) -> tuple[str, ...]:
    """What a model serves, from `/get_model_info`'s `architectures` and `is_generation`;
    () when the answer does not say."""
    raw = info.get("architectures")
    architectures = [a for a in raw if isinstance(a, str)] if isinstance(raw, list) else []
    if any(a in CROSS_ENCODER_ARCHITECTURES for a in architectures):
        return CROSS_ENCODER
    if any(a.endswith(CLASSIFICATION_SUFFIX) for a in architectures):
        return REWARD
    is_generation = info.get("is_generation")
    if not isinstance(is_generation, bool):
        return ()  # NOTE: not an answer of our engine's (or SGLang's) shape: not reported
    return GENERATION if is_generation else EMBEDDING
