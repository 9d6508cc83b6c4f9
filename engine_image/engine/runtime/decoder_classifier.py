"""A decoder with a classification head (reward models) run once over whole prompts."""

from __future__ import annotations

import torch

from engine.models.llama_classification import LlamaFamilyForSequenceClassification
from engine.runtime.decoder_forward_only import DecoderForwardOnly, KVLender
from engine.runtime.model_runner import ModelRunner


class DecoderClassifier(DecoderForwardOnly):
    supports_score = False
    supports_classify = True

    def __init__(self, runner: ModelRunner, kv: KVLender) -> None:
        super().__init__(runner, kv, is_embedding=False)
        self._model()

    def classify(self, prompts: list[list[int]], token_type_ids: list[list[int]] | None) -> torch.Tensor | None:
        """``token_type_ids`` is unused: decoders have no segments."""
        model = self._model()
        scored = [prompt[: model.last_scored_token(prompt)] for prompt in prompts]
        batch = self._borrow(scored)
        if batch is None:
            return None
        try:
            logits: torch.Tensor = model(batch, self.runner.attention)
            return logits
        finally:
            self._give_back(batch)

    def _model(self) -> LlamaFamilyForSequenceClassification:
        # NOTE: read from the runner each time: a weight update replaces its model.
        model = self.runner.model
        if not isinstance(model, LlamaFamilyForSequenceClassification):
            raise TypeError(f"{type(model).__name__} has no sequence-classification head")
        return model
