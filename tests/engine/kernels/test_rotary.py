"""The rotary kernel against the model's RotaryEmbedding (rotate-half RoPE)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")

from engine.config.model_config import RopeConfig
from engine.kernels.triton.rotary import apply_rotary
from engine.layers.rotary import RotaryEmbedding
from tests.engine.kernels.conftest import DEVICE

# NOTE: the reference rounds after each of its three ops, the kernel once (float32 math);
# bf16 also meets the CPU interpreter's truncating store: one to two ulps.
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 4e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 3.2e-2, "rtol": 1.6e-2},
}


@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("rope_type", ["default", "llama3"])
def test_rotary_matches_rotary_embedding(dtype: torch.dtype, rope_type: str) -> None:
    num_heads, num_kv_heads, head_dim = 6, 2, 24
    rope = RopeConfig(theta=10000.0, rope_type=rope_type, factor=8.0, original_max_position_embeddings=64)
    rotary = RotaryEmbedding(rope, head_dim, 128, DEVICE)
    gen = torch.Generator().manual_seed(0)
    # NOTE: q and k are strided views of one fused projection, as in the model.
    qkv = torch.randn(5, (num_heads + 2 * num_kv_heads) * head_dim, generator=gen).to(dtype=dtype, device=DEVICE)
    q = qkv[:, : num_heads * head_dim].view(5, num_heads, head_dim)
    k = qkv[:, num_heads * head_dim : (num_heads + num_kv_heads) * head_dim].view(5, num_kv_heads, head_dim)
    positions = torch.tensor([0, 1, 7, 63, 127], device=DEVICE)
    angles = rotary.lookup(positions, dtype)
    expected_q, expected_k = angles.apply(q, k)
    got_q, got_k = apply_rotary(q, k, angles.cos, angles.sin)
    torch.testing.assert_close(got_q, expected_q, **TOLERANCE[dtype])
    torch.testing.assert_close(got_k, expected_k, **TOLERANCE[dtype])
