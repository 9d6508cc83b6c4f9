"""The CPU C++ RMSNorm (alone and fused with the residual add) and SiLU-and-mul kernels
against the torch reference, and the layers that pick them: float32 CPU tensors only."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.config.model_config import ModelConfig
from engine.kernels.cpu import cpu_kernels_for, load_cpu_kernels
from engine.layers.rmsnorm import RMSNorm
from engine.models.llama import MLP

# NOTE: one ulp of the result's scale: the kernel sums squares in another order than torch.
NORM_TOL = {"rtol": 2e-6, "atol": 2e-6}
# NOTE: glibc's vector expf and torch's Sleef expf differ by about an ulp.
SILU_TOL = {"rtol": 1e-5, "atol": 1e-6}


@pytest.fixture(scope="module")
def kernels():
    loaded = load_cpu_kernels()
    assert loaded is not None, "the CPU kernels did not build; see the warning logged"
    return loaded


def _reference_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


# NOTE: widths: SmolLM2's hidden size, a head size, and ones off the 8- and 32-lane blocks.
@pytest.mark.parametrize("rows, width", [(1, 576), (32, 576), (1024, 576), (7, 64), (3, 13), (5, 40)])
def test_rms_norm_matches_reference(kernels, rows: int, width: int) -> None:
    gen = torch.Generator().manual_seed(rows * width)
    x = torch.randn(rows, width, generator=gen) * 3
    weight = torch.randn(width, generator=gen)
    out = torch.empty_like(x)
    kernels.rms_norm(x, out, weight, 1e-5)
    torch.testing.assert_close(out, _reference_norm(x, weight, 1e-5), **NORM_TOL)


@pytest.mark.parametrize("rows, width", [(32, 576), (1024, 576), (3, 13)])
def test_add_rms_norm_returns_the_exact_sum_and_its_norm(kernels, rows: int, width: int) -> None:
    gen = torch.Generator().manual_seed(rows + width)
    x, residual = torch.randn(rows, width, generator=gen), torch.randn(rows, width, generator=gen)
    weight = torch.randn(width, generator=gen)
    normed, total = torch.empty_like(x), torch.empty_like(x)
    kernels.add_rms_norm(x, residual, normed, total, weight, 1e-6)
    assert torch.equal(total, residual + x)
    torch.testing.assert_close(normed, _reference_norm(residual + x, weight, 1e-6), **NORM_TOL)


@pytest.mark.parametrize("rows, width", [(1, 1536), (32, 1536), (512, 1536), (3, 13)])
def test_silu_and_mul_matches_reference(kernels, rows: int, width: int) -> None:
    gate_up = torch.randn(rows, 2 * width, generator=torch.Generator().manual_seed(rows)) * 6
    out = torch.empty(rows, width)
    kernels.silu_and_mul(gate_up, out)
    gate, up = gate_up.split(width, dim=-1)
    torch.testing.assert_close(out, F.silu(gate) * up, **SILU_TOL)


def test_silu_and_mul_saturates_like_torch(kernels) -> None:
    """exp(-gate) overflows below -88: the product must still be ~0, not NaN."""
    gate = torch.tensor([[-1e4, -100.0, -89.0, 0.0, 20.0, 1e4]])
    up = torch.tensor([[3.0, -2.0, 5.0, 7.0, 0.5, -1.0]])
    out = torch.empty_like(gate)
    kernels.silu_and_mul(torch.cat([gate, up], dim=-1), out)
    torch.testing.assert_close(out, F.silu(gate) * up, rtol=1e-6, atol=1e-30)


def test_kernels_refuse_what_they_do_not_cover(kernels) -> None:
    x = torch.randn(4, 16)
    with pytest.raises(RuntimeError, match="float32"):
        kernels.rms_norm(x.double(), torch.empty(4, 16, dtype=torch.float64), torch.ones(16), 1e-5)
    with pytest.raises(RuntimeError, match="last dimension"):
        kernels.rms_norm(x, torch.empty_like(x), torch.ones(8), 1e-5)
    with pytest.raises(RuntimeError, match="twice"):
        kernels.silu_and_mul(x, torch.empty(4, 16))


def test_only_contiguous_float32_cpu_tensors_take_the_kernels(kernels) -> None:
    x = torch.randn(4, 32)
    assert cpu_kernels_for(x) is kernels
    assert cpu_kernels_for(x.to(torch.bfloat16)) is None
    assert cpu_kernels_for(x[:, :16]) is None


def test_rmsnorm_layer_uses_the_kernel_and_falls_back_for_views(kernels) -> None:
    norm = RMSNorm(64, 1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(64))
    x, residual = torch.randn(6, 64), torch.randn(6, 64)
    with torch.no_grad():
        torch.testing.assert_close(norm(x), _reference_norm(x, norm.weight, 1e-5), **NORM_TOL)
        normed, total = norm.add_and_norm(x, residual)
        assert torch.equal(total, residual + x)
        torch.testing.assert_close(normed, _reference_norm(residual + x, norm.weight, 1e-5), **NORM_TOL)
        # a strided view (q's heads inside qkv) takes the torch path
        wide = torch.randn(6, 128)
        assert torch.equal(norm(wide[:, :64]), F.rms_norm(wide[:, :64], (64,), norm.weight, 1e-5))


def test_mlp_uses_the_kernel(kernels) -> None:
    config = ModelConfig.from_dict(
        {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
         "num_attention_heads": 4, "num_hidden_layers": 1, "vocab_size": 128},
        "unused",
    )  # fmt: skip
    torch.manual_seed(0)
    mlp = MLP(config)
    x = torch.randn(5, 64)
    with torch.no_grad():
        gate, up = mlp.gate_up_proj(x).split(96, dim=-1)
        expected = mlp.down_proj(F.silu(gate) * up)
        torch.testing.assert_close(mlp(x), expected, **SILU_TOL)
