"""The split-KV decode kernel against dense softmax attention, across split counts."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")

from engine.kernels.triton.decode_attention import decode_attention, decode_num_splits
from tests.engine.kernels.batches import attention_case
from tests.engine.kernels.conftest import DEVICE, tolerance


def _dense_reference(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float) -> torch.Tensor:
    """q: [heads, D]; keys/values: [L, kv_heads, D] -> [heads, D], in float64."""
    group = q.shape[0] // keys.shape[1]
    keys = keys.double().repeat_interleave(group, dim=1)
    values = values.double().repeat_interleave(group, dim=1)
    weights = (torch.einsum("hd,lhd->hl", q.double(), keys) * scale).softmax(-1)
    return torch.einsum("hl,lhd->hd", weights, values)


# NOTE: 1 split (no reduce work), 3 (uneven chunks), 8 and 16 (the most decode_num_splits
# picks) with 2-key requests (empty splits).
@pytest.mark.parametrize("num_splits", [1, 3, 8, 16])
def test_splits_merge_to_the_dense_softmax(num_splits: int) -> None:
    num_heads, num_kv_heads, head_dim = 4, 2, 16
    case = attention_case([1, 20], [1, 1], num_heads, num_kv_heads, head_dim, torch.float32, DEVICE)
    batch = case.batch
    batch.kv_pool.set_kv(0, batch.out_cache_loc, case.k, case.v)
    k_buffer, v_buffer = batch.kv_pool.k_buffer(0), batch.kv_pool.v_buffer(0)
    scale = head_dim**-0.5
    out = decode_attention(
        case.q, k_buffer, v_buffer, batch.req_to_token, batch.req_pool_indices, batch.seq_lens,
        scale, num_splits=num_splits, block_n=16,
    )
    for i, (row, seq_len) in enumerate(zip(batch.req_pool_indices.tolist(), batch.seq_lens_cpu)):
        slots = batch.req_to_token[row, :seq_len]
        expected = _dense_reference(case.q[i], k_buffer[slots], v_buffer[slots], scale)
        torch.testing.assert_close(out[i].double(), expected, **tolerance(torch.float32))
    assert torch.isfinite(out).all()


def test_split_count_follows_batch_context_and_sm_count() -> None:
    # NOTE: an H200 (132 SMs), 2 KV heads (Qwen2.5-0.5B), a 32k-token request table.
    assert decode_num_splits(1, 2, 32769, 132) == 16  # batch 1: as many splits as allowed
    assert decode_num_splits(32, 2, 32769, 132) == 5  # ceil(264 / 64)
    assert decode_num_splits(128, 2, 32769, 132) == 2
    assert decode_num_splits(1, 2, 200, 132) == 2  # a short context: ceil(200 / 128) splits
    assert decode_num_splits(4, 8, 4097, 1) == 1  # the interpreter's one "SM"
