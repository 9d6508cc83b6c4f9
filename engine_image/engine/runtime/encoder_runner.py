"""Owns an encoder (BERT-style) embedding model: a padded batch in, pooled vectors out."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch

from engine.engine_config import EngineConfig
from engine.models.bert import BertConfig, BertModel
from engine.models.pooling import PoolingConfig, pool
from engine.models.weight_loader import iterate_weights
from engine.runtime.forward_only_model import ForwardOnlyModel
from engine.runtime.host_malloc import keep_freed_memory
from engine.runtime.meta_model import allocate_on
from engine.runtime.model_runner import resolve_device

logger = logging.getLogger(__name__)

# NOTE: "auto" is fp32 everywhere: encoders are small and the reference is fp32.
ENCODER_DTYPES = {"auto": torch.float32, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def right_padded(rows: list[list[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` as one [B, L] int64 tensor padded with 0 on the right, and its mask (1 on real tokens)."""
    width = max(len(row) for row in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.int64)
    mask = torch.zeros(len(rows), width, dtype=torch.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    return ids.to(device), mask.to(device)


class EncoderRunner(ForwardOnlyModel):
    supports_embedding = True
    supports_score = False

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.model_config = BertConfig.from_dir(config.model_path)
        self.device = resolve_device(config.device)
        keep_freed_memory(self.device)
        self.dtype = ENCODER_DTYPES[config.dtype]
        self.pooling = PoolingConfig.from_dir(config.model_path, default_mode="cls")
        self.vocab_size = self.model_config.vocab_size
        self.max_prompt_tokens = self._context_length()
        self.context_length = self.max_prompt_tokens
        self.hidden_size = self.model_config.hidden_size
        with torch.device("meta"):
            model = BertModel(self.model_config)
        model = model.to(self.dtype)
        allocate_on(model, self.device)
        model.load_weights(iterate_weights(config.model_path))
        self.model = model.eval()
        logger.info(
            "loaded encoder %s on %s; %s pooling%s, up to %d tokens",
            config.model_path, self.device, self.pooling.mode,
            " + normalise" if self.pooling.normalize else "", self.max_prompt_tokens,
        )

    def embed(self, prompts: list[list[int]]) -> torch.Tensor:
        ids, mask = right_padded(prompts, self.device)
        return pool(self.pooling, self.model(ids, mask), mask)

    def _context_length(self) -> int:
        limit = self.model_config.max_position_embeddings
        # NOTE: sentence-transformers models state the length they were trained for here.
        st_config = Path(self.config.model_path) / "sentence_bert_config.json"
        if st_config.is_file():
            limit = min(limit, int(json.loads(st_config.read_text()).get("max_seq_length") or limit))
        wanted = self.config.context_length
        if wanted is not None and wanted > limit:
            raise ValueError(f"context_length {wanted} exceeds what the model supports ({limit})")
        return wanted or limit
