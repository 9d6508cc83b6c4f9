"""Kernel rows for prefill without a cached prefix, for bench/gpu_bench.py's kernel table.

One layer's attention at Llama-3-8B's shape (32 query heads, 8 KV heads, head dim 128, bf16),
median ms (triton.testing.do_bench), for one 4k prompt and a batch of eight 512-token ones:
- ``triton_ms``: the Triton backend's path for such a batch (engine/attention/
  prefill_no_prefix.py: FlashAttention's varlen kernel on the ``[T, heads, head_dim]`` q/k/v);
- ``sdpa_dense_ms``: SDPA held to its flash kernel, causal, on ``[B, heads, L, head_dim]``
  views of the same tensors (what the issue's "prefill on a 4k prompt >= SDPA's speed" means);
- ``gather_sdpa_ms``: the same SDPA over K/V gathered back from a paged pool (shuffled slots);
- ``extend_kernel_ms``: the Triton extend kernel over that pool, which served these batches
  before (it reads every key back through ``req_to_token``);
- ``max_abs_diff_vs_sdpa``: how far the first path's output lies from SDPA's.
Needs a CUDA device FlashAttention runs on (sm80 and newer).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

_HEADS, _KV_HEADS, _HEAD_DIM = 32, 8, 128  # Llama-3-8B's attention shape
_SHAPES = ((1, 4096), (8, 512))  # (prompts, tokens each)


def prefill_rows(device: torch.device) -> list[dict[str, Any]]:
    """One kernel-table row per shape in ``_SHAPES``."""
    return [_row(batch, length, device) for batch, length in _SHAPES]


def _row(batch: int, length: int, device: torch.device) -> dict[str, Any]:
    from triton.testing import do_bench

    from engine.attention.prefill_no_prefix import fresh_prefill, fresh_prefill_attention
    from engine.kernels.triton.extend_attention import extend_attention

    tokens = batch * length
    q, k, v = (
        torch.randn(tokens, heads, _HEAD_DIM, dtype=torch.bfloat16, device=device)
        for heads in (_HEADS, _KV_HEADS, _KV_HEADS)
    )
    scale = _HEAD_DIM**-0.5
    plan = fresh_prefill([0] * batch, [length] * batch, device)
    if plan is None:
        raise AssertionError("a batch without prefixes has a fresh-prefill plan")
    # NOTE: the pool holds each token's K/V at a shuffled slot (slot 0 is the dummy).
    slots = torch.randperm(tokens, device=device) + 1
    req_to_token = slots.view(batch, length)
    k_buffer = torch.zeros(tokens + 1, _KV_HEADS, _HEAD_DIM, dtype=torch.bfloat16, device=device)
    v_buffer = torch.zeros_like(k_buffer)
    k_buffer[slots], v_buffer[slots] = k, v
    pool_rows = torch.arange(batch, device=device)
    q_starts = pool_rows * length
    lens = torch.full((batch,), length, device=device)
    prefix_lens = torch.zeros_like(lens)

    def dense(x: torch.Tensor) -> torch.Tensor:
        return x.view(batch, length, x.shape[-2], _HEAD_DIM).transpose(1, 2)

    def sdpa(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(
                dense(q), keys, values, is_causal=True, scale=scale, enable_gqa=True
            )

    def extend() -> torch.Tensor:
        return extend_attention(
            q, k_buffer, v_buffer, req_to_token, pool_rows, q_starts, lens, prefix_lens, length, scale
        )

    # NOTE: the check that the timed path computes SDPA's answer (bf16: ~1e-2 at most).
    expected = sdpa(dense(k), dense(v)).transpose(1, 2).reshape(q.shape)
    diff = fresh_prefill_attention(q, k, v, plan, scale) - expected
    return {
        "kernel": "prefill, no prefix",
        "shape": f"B={batch} L={length} heads {_HEADS}/{_KV_HEADS} D={_HEAD_DIM}",
        "triton_ms": do_bench(lambda: fresh_prefill_attention(q, k, v, plan, scale)),
        "sdpa_dense_ms": do_bench(lambda: sdpa(dense(k), dense(v))),
        "gather_sdpa_ms": do_bench(lambda: sdpa(dense(k_buffer[slots]), dense(v_buffer[slots]))),
        "extend_kernel_ms": do_bench(extend),
        "max_abs_diff_vs_sdpa": diff.abs().max().item(),
    }
