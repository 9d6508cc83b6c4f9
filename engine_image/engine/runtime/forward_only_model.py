"""A model run once over a batch of whole prompts, without the decode loop: embeddings and scores."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from engine.core.errors import InvalidRequest


class ForwardOnlyModel(ABC):
    """Runs one forward over whole prompts; ``None`` from a run means "no memory now, retry"."""

    vocab_size: int
    max_prompt_tokens: int  # the longest prompt one forward accepts
    supports_embedding: bool
    supports_score: bool
    supports_classify: bool = False  # a sequence-classification head (rerankers, reward models)
    type_vocab_size: int = 1  # how many token types (segments) a classify request may use

    def check_prompt(self, ids: list[int]) -> None:
        """Raises InvalidRequest (a client error) for a prompt this model cannot take."""
        if not ids:
            raise InvalidRequest("an input is empty")
        if any(not 0 <= t < self.vocab_size for t in ids):
            raise InvalidRequest(f"input token ids must be in [0, {self.vocab_size})")
        if len(ids) > self.max_prompt_tokens:
            raise InvalidRequest(
                f"an input has {len(ids)} tokens; this model takes at most {self.max_prompt_tokens}"
            )

    def free_rows(self) -> int:
        """How many prompts one forward may hold right now."""
        return 1 << 30

    @abstractmethod
    def embed(self, prompts: list[list[int]]) -> torch.Tensor | None:
        """Pooled (and, as configured, normalised) float32 vectors: [B, hidden]."""

    def score(self, prompts: list[list[int]], label_token_ids: list[int]) -> torch.Tensor | None:
        """Float32 log-probabilities of ``label_token_ids`` at the position after each prompt."""
        raise NotImplementedError(f"{type(self).__name__} cannot score")

    def classify(self, prompts: list[list[int]], token_type_ids: list[list[int]] | None) -> torch.Tensor | None:
        """Float32 logits of the classification head per prompt: [B, num_labels]."""
        raise NotImplementedError(f"{type(self).__name__} has no classification head")
