"""The split-KV decode kernel against dense softmax attention, across split counts."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")

from engine.kernels.triton.decode_attention import decode_attention
from tests.engine.kernels.batches import attention_case
from tests.engine.kernels.conftest import DEVICE, tolerance


def _dense_reference(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float) -> torch.Tensor:
    """q: [heads, D]; keys/values: [L, kv_heads, D] -> [heads, D], in float64."""
    group = q.shape[0] // keys.shape[1]
    keys = keys.double().repeat_interleave(group, dim=1)
    values = values.double().repeat_interleave(group, dim=1)
    weights = (torch.einsum("hd,lhd->hl", q.double(), keys) * scale).softmax(-1)
    return torch.einsum("hl,lhd->hd", weights, values)


# NOTE: 1 split (no reduce work), 3 (uneven chunks), 8 with 2-key requests (empty splits).
@pytest.mark.parametrize("num_splits", [1, 3, 8])
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
