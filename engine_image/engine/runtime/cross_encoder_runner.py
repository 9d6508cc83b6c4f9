"""Owns a cross-encoder (BERT / XLM-R sequence classification): padded pairs in, logits out."""

from __future__ import annotations

import logging

import torch

from engine.engine_config import EngineConfig
from engine.models.bert import BertConfig
from engine.models.sequence_classification import CrossEncoder
from engine.models.weight_loader import iterate_weights
from engine.runtime.encoder_runner import ENCODER_DTYPES, right_padded
from engine.runtime.forward_only_model import ForwardOnlyModel
from engine.runtime.host_malloc import keep_freed_memory
from engine.runtime.meta_model import allocate_on
from engine.runtime.model_runner import resolve_device

logger = logging.getLogger(__name__)


class CrossEncoderRunner(ForwardOnlyModel):
    supports_embedding = False
    supports_score = False
    supports_classify = True

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.model_config = BertConfig.from_dir(config.model_path)
        self.device = resolve_device(config.device)
        keep_freed_memory(self.device)
        self.dtype = ENCODER_DTYPES[config.dtype]
        self.vocab_size = self.model_config.vocab_size
        self.type_vocab_size = self.model_config.type_vocab_size
        self.max_prompt_tokens = self._context_length()
        self.context_length = self.max_prompt_tokens
        with torch.device("meta"):
            model = CrossEncoder(self.model_config)
        model = model.to(self.dtype)
        allocate_on(model, self.device)
        model.load_weights(iterate_weights(config.model_path))
        self.model = model.eval()
        self.num_labels = model.num_labels
        logger.info(
            "loaded cross-encoder %s (%s, %d labels) on %s, up to %d tokens",
            config.model_path, self.model_config.architecture, self.num_labels, self.device, self.max_prompt_tokens,
        )

    def embed(self, prompts: list[list[int]]) -> torch.Tensor:
        raise NotImplementedError("a cross-encoder has no embeddings")

    def classify(self, prompts: list[list[int]], token_type_ids: list[list[int]] | None) -> torch.Tensor:
        ids, mask = right_padded(prompts, self.device)
        types = None if token_type_ids is None else right_padded(token_type_ids, self.device)[0]
        logits: torch.Tensor = self.model(ids, mask, types)
        return logits

    def _context_length(self) -> int:
        mc = self.model_config
        limit = mc.max_position_embeddings - mc.position_offset
        wanted = self.config.context_length
        if wanted is not None and wanted > limit:
            raise ValueError(f"context_length {wanted} exceeds what the model supports ({limit})")
        return wanted or limit
