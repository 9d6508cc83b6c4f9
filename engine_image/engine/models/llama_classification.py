"""``LlamaForSequenceClassification`` (reward models): the Llama-family decoder with a ``score`` head.

The head (Linear hidden -> num_labels, no bias) replaces the LM head; ``forward`` returns its
logits at each prompt's last token instead of next-token logits.
"""

from __future__ import annotations

import torch
from torch import nn

from engine.attention.base import AttentionBackend
from engine.config.classification import num_labels
from engine.config.model_config import ModelConfig
from engine.core.forward_batch import ForwardBatch
from engine.layers.rotary import RotaryEmbedding
from engine.models.llama import LlamaFamilyForCausalLM


class LlamaFamilyForSequenceClassification(LlamaFamilyForCausalLM):
    has_lm_head = False

    def __init__(self, config: ModelConfig, rotary: RotaryEmbedding) -> None:
        super().__init__(config, rotary)
        self.lm_head = None  # NOTE: a classifier's checkpoint has no LM head: load_weights expects none
        self.num_labels = num_labels(config.raw)
        self.score = nn.Linear(config.hidden_size, self.num_labels, bias=False)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, backend: AttentionBackend) -> torch.Tensor:
        """Float32 logits of the head at each request's last new token: [B, num_labels]."""
        logits: torch.Tensor = self.score(self.last_hidden(batch, backend))
        return logits.float()

    def last_scored_token(self, prompt: list[int]) -> int:
        """How many leading tokens of ``prompt`` the score reads: up to its last non-pad token.

        NOTE: transformers scores the rightmost token that is not ``pad_token_id`` (the last
        token when the config names no pad token); the decoder is causal, so cutting the
        prompt there gives that token's hidden state exactly.
        """
        pad = self.config.raw.get("pad_token_id")
        if pad is None:
            return len(prompt)
        kept = [i for i, token in enumerate(prompt) if token != pad]
        return kept[-1] + 1 if kept else 1
