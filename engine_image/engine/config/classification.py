"""What a sequence-classification model's ``config.json`` says about its labels and scores."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any


def _sigmoid(x: float) -> float:
    # NOTE: two branches so that exp never overflows, however large the logit.
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


# NOTE: the activations sentence-transformers writes into a cross-encoder's config.json.
_ACTIVATIONS: dict[str, Callable[[float], float]] = {
    "torch.nn.modules.activation.Sigmoid": _sigmoid,
    "torch.nn.modules.activation.Tanh": math.tanh,
    "torch.nn.modules.linear.Identity": lambda x: x,
}
_SIGMOID = "torch.nn.modules.activation.Sigmoid"
_IDENTITY = "torch.nn.modules.linear.Identity"


def num_labels(raw: Mapping[str, Any]) -> int:
    """Transformers saves ``id2label`` (not ``num_labels``); without either it means 2 labels."""
    if raw.get("id2label"):
        return len(raw["id2label"])
    return int(raw.get("num_labels", 2))


def relevance_activation(raw: Mapping[str, Any]) -> Callable[[float], float]:
    """How a cross-encoder's logit becomes its relevance score.

    NOTE: as sentence-transformers' CrossEncoder.predict and vLLM's score/rerank do: the
    activation the checkpoint names (``sentence_transformers.activation_fn``, or the older
    ``sbert_ce_default_activation_function``), else sigmoid for one label and the raw logit
    otherwise. SGLang returns the raw logit unless the config names an activation; sigmoid
    keeps scores in [0, 1] (Cohere's and Jina's relevance_score) and the order is the same.
    """
    named = (raw.get("sentence_transformers") or {}).get("activation_fn") or raw.get(
        "sbert_ce_default_activation_function"
    )
    if named is None:
        named = _SIGMOID if num_labels(raw) == 1 else _IDENTITY
    if named not in _ACTIVATIONS:
        raise ValueError(f"the activation {named!r} named in config.json is not supported")
    return _ACTIVATIONS[named]
