"""Prefill attention for a batch in which no request has a cached prefix (fresh prompts).

Each request then attends causally over its own new tokens only, so its keys and values are
just the forward's new rows, handed over contiguous (the Triton backend writes them to the
pool, RoPE fused into that write, and reads those rows back with one gather of their slots)
instead of read through ``req_to_token`` per query block by the extend kernel. The Triton backend sends such batches here and keeps its
extend kernel for the rest: a batch in which any request has a cached prefix (radix hits,
chunked prefill's later chunks), a logit cap, and CUDA devices or dtypes FlashAttention does
not run on.

NOTE: on CUDA this is PyTorch's FlashAttention-2 kernel in its varlen form
(``aten::_flash_attention_forward`` with cumulative sequence offsets, the kernel SDPA's flash
backend and nested-tensor SDPA call): one launch for the whole ragged batch, no padding, no
per-request loop, GQA and the sliding window native, on the ``[T, heads, head_dim]`` layout
the backend already has (no transposes, no copies). It is SDPA's own flash kernel, so it
matches SDPA's speed by construction; an own Triton FA kernel would have to be tuned per GPU
to get there. Elsewhere (CPU: the Triton backend in the interpreter) SDPA runs per run of
equal-length requests.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class FreshPrefill:
    """Where each request's new tokens lie in the flattened token axis."""

    cu_seqlens: torch.Tensor  # [B + 1] int32: request b's tokens are cu_seqlens[b] .. cu_seqlens[b + 1]
    lens: tuple[int, ...]  # new tokens per request (host copy)
    max_len: int


def fresh_prefill(prefix_lens: list[int], new_lens: list[int], device: torch.device) -> FreshPrefill | None:
    """The plan of a prefill batch without cached prefixes; None when any request has one."""
    if any(prefix_lens):
        return None
    offsets = [0, *itertools.accumulate(new_lens)]
    return FreshPrefill(
        cu_seqlens=torch.tensor(offsets, dtype=torch.int32, device=device),
        lens=tuple(new_lens),
        max_len=max(new_lens),
    )


def serves(q: torch.Tensor, logit_cap: float | None) -> bool:
    """Whether ``fresh_prefill_attention`` takes this layer: never under a logit cap (neither
    kernel here applies one), and on CUDA only where FlashAttention runs; elsewhere on CUDA
    (float32, pre-Ampere) the extend kernel stays: SDPA's memory-efficient kernel has no GQA
    and its math kernel would hold every L x L score."""
    return logit_cap is None and (q.device.type != "cuda" or _flash_runs(q))


def fresh_prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    plan: FreshPrefill,
    scale: float,
    window: int = 0,
) -> torch.Tensor:
    """Causal attention of each request over its own tokens, flattened along the token axis.

    q: ``[T, heads, head_dim]``; k, v: ``[T, kv_heads, head_dim]`` in q's dtype, request b's
    tokens at ``plan.cu_seqlens[b] .. plan.cu_seqlens[b + 1]``. ``window > 0``: query
    position p sees keys p - window + 1 .. p. Returns ``[T, heads, head_dim]``.
    FlashAttention's varlen kernel where it runs, else SDPA per run of equal-length requests.
    """
    if q.device.type == "cuda" and _flash_runs(q):
        return _flash_varlen(q, k, v, plan, scale, window)
    return _sdpa_runs(q, k, v, plan.lens, scale, window)


def _flash_runs(q: torch.Tensor) -> bool:
    """Whether FlashAttention-2 runs on CUDA queries like ``q``."""
    return _flash_runs_on(q.device.index or 0, q.dtype, q.shape[-1])


@lru_cache(maxsize=16)
def _flash_runs_on(device_index: int, dtype: torch.dtype, head_dim: int) -> bool:
    """FlashAttention-2's limits as PyTorch builds it: sm80 and newer, fp16/bf16, a head
    dim that is a multiple of 8 up to 256."""
    return (
        torch.backends.cuda.is_flash_attention_available()
        and torch.cuda.get_device_capability(device_index) >= (8, 0)
        and dtype in (torch.float16, torch.bfloat16)
        and head_dim % 8 == 0
        and head_dim <= 256
    )


def _flash_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: FreshPrefill, scale: float, window: int
) -> torch.Tensor:
    # NOTE: FlashAttention's window (left, right) lets query i see keys i - left .. i + right.
    sides = {"window_size_left": window - 1, "window_size_right": 0} if window > 0 else {}
    # NOTE: returns (out, logsumexp, rng state, unused, debug mask).
    outputs: tuple[torch.Tensor, ...] = torch.ops.aten._flash_attention_forward(
        q, k, v, plan.cu_seqlens, plan.cu_seqlens, plan.max_len, plan.max_len,
        0.0,  # dropout
        True,  # causal
        False,  # no debug mask
        scale=scale,
        **sides,
    )
    return outputs[0]


def _sdpa_runs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lens: tuple[int, ...], scale: float, window: int
) -> torch.Tensor:
    """SDPA per run of consecutive equal-length requests (one batched call each)."""
    _, num_heads, head_dim = q.shape
    out = torch.empty_like(q)
    start = 0
    for length, run in itertools.groupby(lens):
        count = len(list(run))
        end = start + count * length
        # [count, heads, length, head_dim] views of the run's tokens
        queries, keys, values = (
            x[start:end].reshape(count, length, x.shape[1], head_dim).transpose(1, 2) for x in (q, k, v)
        )
        mask = None
        if window > 0:
            pos = torch.arange(length, device=q.device)
            offset = pos[:, None] - pos[None, :]  # query position minus key position
            mask = (offset >= 0) & (offset < window)
        attn = F.scaled_dot_product_attention(
            queries, keys, values, attn_mask=mask, is_causal=mask is None, scale=scale,
            enable_gqa=num_heads != k.shape[1],
        )
        out[start:end] = attn.transpose(1, 2).reshape(end - start, num_heads, head_dim)
        start = end
    return out
