"""Ragged forward batches over a real KV pool and request table, for the attention tests."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.memory import KVPool, ReqToTokenPool


@dataclass(frozen=True)
class AttentionCase:
    batch: ForwardBatch
    q: torch.Tensor  # [T, heads, head_dim] queries of the new tokens
    k: torch.Tensor  # [T, kv_heads, head_dim] their keys
    v: torch.Tensor


def attention_case(
    prefix_lens: list[int],
    new_lens: list[int],
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    device: torch.device,
    seed: int = 0,
    kv_dtype: torch.dtype | None = None,
    kv_scales: tuple[float, float] = (1.0, 1.0),
) -> AttentionCase:
    """B requests with ``prefix_lens[i]`` tokens already cached and ``new_lens[i]`` new ones.

    The prefix K/V are written into a one-layer pool at shuffled slots, the requests sit
    in shuffled rows of the request table, so a kernel that confuses rows, slots or
    requests fails. All new lens 1 with any prefix makes a DECODE batch. ``kv_dtype``: the
    pool's (default ``dtype``), with ``kv_scales`` (k, v) where it is FP8.
    """
    gen = torch.Generator().manual_seed(seed)
    seq_lens = [p + n for p, n in zip(prefix_lens, new_lens)]
    total = sum(seq_lens)
    pool = KVPool(1, num_kv_heads, head_dim, total + 8, kv_dtype or dtype, device, [kv_scales])
    table = ReqToTokenPool(len(seq_lens) + 2, max(seq_lens) + 4, device)
    # NOTE: slot 0 is the pool's dummy slot; real slots are 1..size in shuffled order.
    slots = (torch.randperm(pool.size, generator=gen)[:total] + 1).to(device)
    rows = (torch.randperm(table.max_reqs, generator=gen)[: len(seq_lens)]).tolist()

    new_slots: list[torch.Tensor] = []
    offset = 0
    for row, prefix, seq_len in zip(rows, prefix_lens, seq_lens):
        own = slots[offset : offset + seq_len]
        offset += seq_len
        table.write(row, 0, own)
        if prefix:
            shape = (prefix, num_kv_heads, head_dim)
            pool.set_kv(0, own[:prefix], _randn(shape, gen, dtype, device), _randn(shape, gen, dtype, device))
        new_slots.append(own[prefix:])

    num_new = sum(new_lens)
    positions = torch.cat([torch.arange(p, s) for p, s in zip(prefix_lens, seq_lens)]).to(device)
    mode = ForwardMode.DECODE if all(n == 1 for n in new_lens) else ForwardMode.EXTEND
    batch = ForwardBatch(
        mode=mode,
        input_ids=torch.zeros(num_new, dtype=torch.int64, device=device),
        positions=positions,
        out_cache_loc=torch.cat(new_slots),
        req_pool_indices=torch.tensor(rows, dtype=torch.int64, device=device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int64, device=device),
        seq_lens_cpu=seq_lens,
        extend_prefix_lens_cpu=list(prefix_lens),
        extend_seq_lens_cpu=list(new_lens),
        req_to_token=table.req_to_token,
        kv_pool=pool,
    )
    return AttentionCase(
        batch=batch,
        q=_randn((num_new, num_heads, head_dim), gen, dtype, device),
        k=_randn((num_new, num_kv_heads, head_dim), gen, dtype, device),
        v=_randn((num_new, num_kv_heads, head_dim), gen, dtype, device),
    )


def _randn(
    shape: tuple[int, ...], gen: torch.Generator, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    return torch.randn(shape, generator=gen).to(dtype=dtype, device=device)
