"""One forward of a decoder over whole prompts, beside the generation batches.

The prompts borrow KV slots and request rows for the forward from the scheduler's KV owner
(``RequestKV``, which the generation requests share) and give them back right after:
nothing enters the radix cache or the decode loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from engine.core.errors import UnsupportedModelError
from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.models.pooling import PoolingConfig, normalize
from engine.runtime.forward_only_model import ForwardOnlyModel
from engine.runtime.model_runner import ModelRunner


class KVLender(Protocol):
    """What a forward-only batch needs of the KV owner (the scheduler's ``RequestKV``)."""

    def free_rows(self) -> int: ...

    def lend(self, lens: Sequence[int]) -> tuple[torch.Tensor, list[int]] | None: ...

    def take_back(self, slots: torch.Tensor, rows: Sequence[int]) -> None: ...


class DecoderForwardOnly(ForwardOnlyModel):
    supports_score = True

    def __init__(self, runner: ModelRunner, kv: KVLender, is_embedding: bool) -> None:
        self.runner = runner
        self.kv = kv
        self.supports_embedding = is_embedding
        self.vocab_size = runner.model_config.vocab_size
        self.max_prompt_tokens = min(runner.context_length - 1, runner.max_total_tokens)
        self.pooling: PoolingConfig | None = None
        if is_embedding:
            self.pooling = PoolingConfig.from_dir(runner.model_config.model_path, default_mode="lasttoken")
            if self.pooling.mode != "lasttoken":
                raise UnsupportedModelError(
                    f"{self.pooling.mode} pooling is not supported for decoder embeddings (only lasttoken)"
                )

    def free_rows(self) -> int:
        return self.kv.free_rows()

    def embed(self, prompts: list[list[int]]) -> torch.Tensor | None:
        assert self.pooling is not None, "embed is only called on --is-embedding servers"
        batch = self._borrow(prompts)
        if batch is None:
            return None
        try:
            return normalize(self.pooling, self.runner.model.last_hidden(batch, self.runner.attention).float())
        finally:
            self._give_back(batch)

    def score(self, prompts: list[list[int]], label_token_ids: list[int]) -> torch.Tensor | None:
        batch = self._borrow(prompts)
        if batch is None:
            return None
        try:
            logprobs = torch.log_softmax(self.runner.forward(batch), dim=-1)
        finally:
            self._give_back(batch)
        return logprobs[:, torch.tensor(label_token_ids, device=logprobs.device)]

    def _borrow(self, prompts: list[list[int]]) -> ForwardBatch | None:
        runner = self.runner
        lens = [len(p) for p in prompts]
        lent = self.kv.lend(lens)
        if lent is None:
            return None
        slots, rows = lent
        device = runner.device
        return ForwardBatch(
            mode=ForwardMode.EXTEND,
            input_ids=torch.tensor([t for p in prompts for t in p], dtype=torch.int64, device=device),
            positions=torch.cat([torch.arange(n, dtype=torch.int64) for n in lens]).to(device),
            out_cache_loc=slots,
            req_pool_indices=torch.tensor(rows, dtype=torch.int64, device=device),
            seq_lens=torch.tensor(lens, dtype=torch.int64, device=device),
            seq_lens_cpu=lens,
            extend_prefix_lens_cpu=[0] * len(lens),
            extend_seq_lens_cpu=lens,
            req_to_token=runner.req_to_token_pool.req_to_token,
            kv_pool=runner.kv_pool,
        )

    def _give_back(self, batch: ForwardBatch) -> None:
        self.kv.take_back(batch.out_cache_loc, batch.req_pool_indices.tolist())
