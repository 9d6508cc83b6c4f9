"""Fused RMSNorm (and residual-add + RMSNorm) against the torch RMSNorm layer."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (the dev extra installs it)")

from engine.kernels.triton.rmsnorm import fused_add_rmsnorm, rmsnorm
from engine.layers.rmsnorm import RMSNorm
from tests.engine.kernels.conftest import DEVICE

# NOTE: the reference rounds to the dtype twice (normalised row, weight product) and so
# does the kernel; what remains is float32 summation order, plus, for bf16 in the CPU
# interpreter, its truncating fp32 -> bf16 store: one ulp.
TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
    torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2},
}
DTYPE_IDS = ["fp32", "fp16", "bf16"]


def _reference_norm(hidden: int, dtype: torch.dtype) -> RMSNorm:
    norm = RMSNorm(hidden, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(1.0 + 0.3 * torch.randn(hidden, generator=torch.Generator().manual_seed(1)))
    return norm.to(dtype=dtype, device=DEVICE)


# NOTE: hidden 48 is not a power of two, so the kernel's masked tail is exercised.
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=DTYPE_IDS)
def test_rmsnorm_matches_the_torch_layer(dtype: torch.dtype) -> None:
    norm = _reference_norm(48, dtype)
    x = (3 * torch.randn(5, 48, generator=torch.Generator().manual_seed(0))).to(dtype=dtype, device=DEVICE)
    torch.testing.assert_close(rmsnorm(x, norm.weight, norm.eps), norm(x), **TOLERANCE[dtype])


def test_rmsnorm_over_heads_of_a_strided_view() -> None:
    """Qwen3's q/k norm: [tokens, heads, head_dim] views cut out of a fused projection."""
    norm = _reference_norm(16, torch.float32)
    qkv = torch.randn(3, 5 * 16, device=DEVICE)
    q = qkv[:, : 4 * 16].view(3, 4, 16)
    torch.testing.assert_close(rmsnorm(q, norm.weight, norm.eps), norm(q), **TOLERANCE[torch.float32])


@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=DTYPE_IDS)
def test_fused_add_rmsnorm_updates_the_residual_and_normalises_the_sum(dtype: torch.dtype) -> None:
    norm = _reference_norm(48, dtype)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(4, 48, generator=gen).to(dtype=dtype, device=DEVICE)
    residual = torch.randn(4, 48, generator=gen).to(dtype=dtype, device=DEVICE)
    expected_sum = x + residual
    expected = norm(expected_sum)
    out, new_residual = fused_add_rmsnorm(x, residual, norm.weight, norm.eps)
    assert new_residual.data_ptr() == residual.data_ptr()
    torch.testing.assert_close(new_residual, expected_sum, **TOLERANCE[dtype])
    torch.testing.assert_close(out, expected, **TOLERANCE[dtype])
