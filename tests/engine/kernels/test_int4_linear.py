"""AWQ/GPTQ int4 weights, one layer at a time, against the float64 product with the weight the
project's quantizer meant (tests/support/int4_checkpoints.py):

- ``Int4Weight`` reads the on-disk layouts back exactly (every variant);
- the CPU int kernels over the repacked weight equal the float64 product of the activations
  as the kernels round them (int8 per 32 values; act-order: after gathering them by group)
  within 1e-5 of |x| |W| (float32 accumulation): the repacking loses nothing;
- the Triton dequantize-GEMM kernel (in the interpreter on CPU, compiled on CUDA) equals the
  float64 product within 1e-5 of |x| |W| for float32 activations (exact weights, float32
  accumulation), and within 1e-2 relative for bfloat16 ones on CUDA.
"""

from __future__ import annotations

import pytest
import torch

from engine.kernels.cpu import load_cpu_kernels
from engine.kernels.cpu.quantized import quantize_activations
from engine.layers.int4_linear import TRITON_PATH, Int4Linear
from engine.layers.int4_weight import Int4Weight
from tests.engine.kernels.conftest import DEVICE
from tests.support.int4_checkpoints import Int4Variant, quantize_projection

IN, OUT = 256, 96
VARIANTS = [
    Int4Variant("awq", 128),
    Int4Variant("awq", -1),
    Int4Variant("gptq", 128, desc_act=False, sym=True),
    Int4Variant("gptq", 128, desc_act=True, sym=False),
    Int4Variant("gptq", -1, desc_act=True, sym=True),
    Int4Variant("gptq", -1, desc_act=False, sym=False),
    Int4Variant("gptq", 64, desc_act=True, sym=False),
]


def _weight(variant: Int4Variant, out_features: int = OUT, seed: int = 0) -> tuple[Int4Weight, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    float_weight = torch.randn(out_features, IN, generator=generator) * 0.1
    tensors, dequantized = quantize_projection(float_weight, variant, seed=11)
    return Int4Weight.from_checkpoint(variant.method, tensors, variant.group_size), dequantized


def _within(got: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bound: float) -> None:
    expected = x.double() @ weight.double().t()
    allowed = bound * (x.double().abs() @ weight.double().abs().t()) + 1e-6
    excess = ((got.double() - expected).abs() - allowed).max().item()
    assert excess <= 0, f"off by {excess:.3g} beyond the bound"


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_checkpoint_layouts_read_back_exactly(variant: Int4Variant) -> None:
    weight, dequantized = _weight(variant)
    assert torch.equal(weight.dequantize(), dequantized)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_cpu_kernels_lose_nothing_but_the_activation_rounding(variant: Int4Variant) -> None:
    kernels = load_cpu_kernels()
    if kernels is None:
        pytest.skip("the C++ kernels cannot be built here")
    # NOTE: two parts (fused q/k): act-order's groups are shared, as GPTQ gives them.
    (first, w1), (second, w2) = _weight(variant, 64, seed=1), _weight(variant, 32, seed=2)
    bias = torch.randn(96)
    layer = Int4Linear([first, second], bias, device=torch.device("cpu"), dtype=torch.float32)
    assert "int4 repacked" in layer.kernel_path
    x = torch.randn(5, IN)
    order = layer.order if layer.order is not None else torch.arange(IN)
    q, scale = quantize_activations(kernels, x[:, order].contiguous())
    rounded = torch.empty(5, IN, dtype=torch.float64)
    rounded[:, order] = q.double() * scale.double().repeat_interleave(32, dim=1)
    _within(layer(x) - bias, rounded, torch.cat([w1, w2]), 1e-5)
    # NOTE: act-order over one group per row leaves every column in group 0: nothing to gather.
    assert (layer.order is not None) == (variant.desc_act and variant.group_size != -1)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_triton_kernel_equals_the_float64_product(variant: Int4Variant) -> None:
    from engine.kernels.triton.int4_matmul import int4_matmul

    weight, dequantized = _weight(variant)
    x = torch.randn(5, IN)
    w = [t.to(DEVICE) for t in (weight.qweight, weight.qzeros, weight.scales, weight.g_idx)]
    got = int4_matmul(x.to(DEVICE), *w, awq=variant.method == "awq")
    _within(got.cpu(), x, dequantized, 1e-5)
    if DEVICE.type == "cuda":
        half = int4_matmul(x.to(DEVICE, torch.bfloat16), *w, awq=variant.method == "awq").float().cpu()
        torch.testing.assert_close(half, (x.double() @ dequantized.double().t()).float(), rtol=1e-2, atol=3e-2)
        layer = Int4Linear([weight], device=DEVICE, dtype=torch.bfloat16)
        assert layer.kernel_path == TRITON_PATH
