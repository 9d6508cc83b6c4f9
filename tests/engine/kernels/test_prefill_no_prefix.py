"""Prefill without cached prefixes (engine/attention/prefill_no_prefix.py) against the
torch-native backend (the reference), through the Triton backend and directly.

On CPU the path is SDPA per run of equal-length requests (bf16 included: no Triton kernel
runs, so the interpreter's bf16 limits do not apply); on a CUDA machine (bench/gpu_check.sh)
the bf16 cases run FlashAttention's varlen kernel and the float32 ones keep the extend kernel.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")

from engine.attention import FULL_ATTENTION, LayerAttention, create_attention_backend
from engine.attention.prefill_no_prefix import fresh_prefill, fresh_prefill_attention, serves
from engine.memory.kv_pool import FP8_KV_DTYPE
from tests.engine.kernels.batches import AttentionCase, attention_case
from tests.engine.kernels.conftest import DEVICE, tolerance

DTYPES = [torch.float32, torch.bfloat16]
DTYPE_IDS = ["float32", "bfloat16"]
# (query heads, KV heads): plain multi-head, and GQA with a non-power-of-two group.
HEADS = [(2, 2), (6, 2)]
HEAD_DIM = 32
# NOTE: ragged fresh prompts: a run of two equal lengths (one batched call on CPU), a
# one-token prompt, and lengths across the 32-token blocks.
NEW_LENS = [7, 40, 40, 1, 33]


def _case(dtype: torch.dtype, heads: tuple[int, int], kv_dtype: torch.dtype | None = None) -> AttentionCase:
    return attention_case(
        [0] * len(NEW_LENS), NEW_LENS, heads[0], heads[1], HEAD_DIM, dtype, DEVICE,
        kv_dtype=kv_dtype, kv_scales=(0.5, 0.125),
    )


def _reference_and_triton(
    case: AttentionCase, heads: tuple[int, int], layer: LayerAttention = FULL_ATTENTION
) -> tuple[torch.Tensor, torch.Tensor]:
    outs = []
    for name in ("torch_native", "triton"):
        backend = create_attention_backend(name, heads[0], heads[1], HEAD_DIM)
        backend.init_forward_metadata(case.batch)
        outs.append(backend.forward(case.q, case.k, case.v, 0, case.batch, layer))
    return outs[0], outs[1]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("heads", HEADS, ids=["mha", "gqa3"])
def test_fresh_prefill_matches_torch_native(dtype: torch.dtype, heads: tuple[int, int]) -> None:
    case = _case(dtype, heads)
    expected, got = _reference_and_triton(case, heads)
    assert got.shape == expected.shape == (sum(NEW_LENS), heads[0] * HEAD_DIM)
    torch.testing.assert_close(got.float(), expected.float(), **tolerance(dtype))
    # NOTE: the path itself, called directly, on the same inputs (the backend takes it here).
    plan = fresh_prefill(case.batch.extend_prefix_lens_cpu, NEW_LENS, DEVICE)
    assert plan is not None
    direct = fresh_prefill_attention(case.q, case.k, case.v, plan, HEAD_DIM**-0.5)
    torch.testing.assert_close(direct.flatten(1).float(), expected.float(), **tolerance(dtype))
    # NOTE: the new tokens' K/V still land in the pool, for the decode steps after.
    pool = case.batch.kv_pool
    torch.testing.assert_close(pool.k_buffer(0)[case.batch.out_cache_loc], case.k, atol=0, rtol=0)
    torch.testing.assert_close(pool.v_buffer(0)[case.batch.out_cache_loc], case.v, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("window", [1, 7])
def test_sliding_window_matches_torch_native(dtype: torch.dtype, window: int) -> None:
    heads = (6, 2)
    expected, got = _reference_and_triton(_case(dtype, heads), heads, LayerAttention(sliding_window=window, scale=0.3))
    torch.testing.assert_close(got.float(), expected.float(), **tolerance(dtype))


def test_fp8_pool_attends_over_the_keys_as_stored() -> None:
    heads = (6, 2)
    case = _case(torch.float32, heads, kv_dtype=FP8_KV_DTYPE)
    expected, got = _reference_and_triton(case, heads)
    torch.testing.assert_close(got, expected, **tolerance(torch.float32))


def test_a_cached_prefix_or_a_logit_cap_keeps_the_extend_kernel() -> None:
    assert fresh_prefill([0, 3], [4, 5], DEVICE) is None
    plan = fresh_prefill([0, 0, 0], [4, 5, 1], DEVICE)
    assert plan is not None and plan.cu_seqlens.tolist() == [0, 4, 9, 10] and plan.max_len == 5
    assert plan.cu_seqlens.dtype == torch.int32
    q = torch.zeros(10, 2, HEAD_DIM, device=DEVICE)
    assert not serves(q, logit_cap=2.0)
    # NOTE: on CUDA float32 is not FlashAttention's: the extend kernel keeps it.
    assert serves(q, logit_cap=None) is (DEVICE.type == "cpu")
