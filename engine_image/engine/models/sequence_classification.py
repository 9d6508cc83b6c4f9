"""Cross-encoders: a BERT or XLM-R encoder with a sequence-classification head over its first token.

``BertForSequenceClassification`` (BERT's tanh pooler, then a linear classifier) and
``XLMRobertaForSequenceClassification`` (dense, tanh, out_proj) share ``BertModel``; XLM-R only
differs in where position ids start (``BertConfig.position_offset``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar

import torch
from torch import nn

from engine.config.architectures import CROSS_ENCODER_ARCHITECTURES
from engine.config.classification import num_labels
from engine.models.bert import BertConfig, BertModel


class _BertHead(nn.Module):
    # (checkpoint name prefix, our name prefix) of the head's tensors
    checkpoint_prefixes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("bert.pooler.dense.", "pooler."),
        ("classifier.", "classifier."),
    )

    def __init__(self, hidden_size: int, labels: int) -> None:
        super().__init__()
        self.pooler = nn.Linear(hidden_size, hidden_size)
        self.classifier = nn.Linear(hidden_size, labels)

    def forward(self, first: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.classifier(torch.tanh(self.pooler(first)))
        return logits


class _RobertaHead(nn.Module):
    checkpoint_prefixes: ClassVar[tuple[tuple[str, str], ...]] = (("classifier.", ""),)

    def __init__(self, hidden_size: int, labels: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.out_proj = nn.Linear(hidden_size, labels)

    def forward(self, first: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.out_proj(torch.tanh(self.dense(first)))
        return logits


class CrossEncoder(nn.Module):
    """One of CROSS_ENCODER_ARCHITECTURES; weights load by their Hugging Face names."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        if config.architecture not in CROSS_ENCODER_ARCHITECTURES:
            raise ValueError(f"{config.architecture} is not a cross-encoder architecture")
        self.config = config
        self.num_labels = num_labels(config.raw)
        roberta = config.architecture == "XLMRobertaForSequenceClassification"
        self.encoder_prefix = "roberta." if roberta else "bert."
        self.encoder = BertModel(config)
        head_class = _RobertaHead if roberta else _BertHead
        self.head = head_class(config.hidden_size, self.num_labels)

    @torch.inference_mode()
    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None
    ) -> torch.Tensor:
        """[B, L] right-padded inputs -> float32 logits [B, num_labels] (no activation)."""
        hidden: torch.Tensor = self.encoder(input_ids, attention_mask, token_type_ids)
        logits: torch.Tensor = self.head(hidden[:, 0])
        return logits.float()

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        head: dict[str, torch.Tensor] = {}

        def encoder_weights() -> Iterator[tuple[str, torch.Tensor]]:
            for name, tensor in weights:
                ours = self._head_name(name)
                if ours is not None:
                    head[ours] = tensor  # NOTE: a few small tensors, kept until the encoder is done
                else:
                    yield name.removeprefix(self.encoder_prefix), tensor

        self.encoder.load_weights(encoder_weights())
        with torch.no_grad():
            self.head.load_state_dict(head, strict=True)

    def _head_name(self, checkpoint_name: str) -> str | None:
        for prefix, ours in self.head.checkpoint_prefixes:
            if checkpoint_name.startswith(prefix):
                return ours + checkpoint_name.removeprefix(prefix)
        return None
