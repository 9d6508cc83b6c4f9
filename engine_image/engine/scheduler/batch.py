"""The ForwardBatch of one scheduler step, from its requests and their new tokens."""

from __future__ import annotations

import torch

from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.runtime.model_runner import ModelRunner
from engine.scheduler.request import Req


def forward_batch(
    runner: ModelRunner,
    mode: ForwardMode,
    reqs: list[Req],
    tokens: list[int],
    positions: list[int],
    out_cache_loc: torch.Tensor,
    prefix_lens: list[int],
    extend_lens: list[int],
) -> ForwardBatch:
    """``reqs`` must already hold the new tokens' slots (``RequestKV.extend``)."""
    seq_lens = [r.kv_len for r in reqs]
    rows = [r.req_pool_idx for r in reqs if r.req_pool_idx is not None]
    assert len(rows) == len(reqs), "every request in a batch holds a request row"
    inputs = runner.input_buffers.fill(tokens, positions, rows, seq_lens)
    return ForwardBatch(
        mode=mode,
        input_ids=inputs.input_ids,
        positions=inputs.positions,
        out_cache_loc=out_cache_loc,
        req_pool_indices=inputs.req_pool_indices,
        seq_lens=inputs.seq_lens,
        seq_lens_cpu=seq_lens,
        extend_prefix_lens_cpu=prefix_lens,
        extend_seq_lens_cpu=extend_lens,
        req_to_token=runner.req_to_token_pool.req_to_token,
        kv_pool=runner.kv_pool,
    )
