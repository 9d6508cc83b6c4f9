"""FP8 weights, one layer at a time, against the float64 product with the weight the project's
quantizer meant (tests/support/fp8_checkpoints.py):

- ``Fp8Weight`` reads every on-disk layout back exactly (128 x 128 blocks, per tensor, per
  channel; a part whose height cuts a block row);
- the Triton weight-only dequantize-GEMM kernel (in the interpreter on CPU, compiled on CUDA)
  equals the float64 product within 1e-5 of |x| |W| for float32 activations (the decoded
  weights are exact, float32 accumulation), and within 1e-2 relative for bfloat16 ones on CUDA,
  fused parts with different per-tensor scales included.
"""

from __future__ import annotations

import pytest
import torch

from engine.config.fp8_quantization import Fp8Config
from engine.layers.fp8_linear import TORCH_PATH, TRITON_PATH, Fp8Linear
from engine.layers.fp8_weight import Fp8Weight, concat_outputs
from tests.engine.kernels.conftest import DEVICE
from tests.support.fp8_checkpoints import Fp8Variant, quantize_projection

IN = 320  # NOTE: not a multiple of 128: the last block column is partial
VARIANTS = {
    "fp8-block": (Fp8Variant("fp8", "block"), Fp8Config("fp8", "block", (128, 128))),
    "fp8-tensor": (Fp8Variant("fp8", "tensor"), Fp8Config("fp8", "tensor", None)),
    "ct-tensor": (Fp8Variant("compressed-tensors", "tensor"), Fp8Config("compressed-tensors", "tensor", None)),
    "ct-channel": (Fp8Variant("compressed-tensors", "channel"), Fp8Config("compressed-tensors", "channel", None)),
}


def _weight(name: str, out_features: int, seed: int) -> tuple[Fp8Weight, torch.Tensor]:
    variant, config = VARIANTS[name]
    generator = torch.Generator().manual_seed(seed)
    float_weight = torch.randn(out_features, IN, generator=generator) * (0.05 * (seed + 1))
    tensors, dequantized = quantize_projection(float_weight, variant)
    return Fp8Weight.from_checkpoint(config, tensors), dequantized


def _within(got: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, bound: float) -> None:
    expected = x.double() @ weight.double().t()
    allowed = bound * (x.double().abs() @ weight.double().abs().t()) + 1e-6
    excess = ((got.double() - expected).abs() - allowed).max().item()
    assert excess <= 0, f"off by {excess:.3g} beyond the bound"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_checkpoint_layouts_read_back_exactly(name: str) -> None:
    # NOTE: 192 rows: the second block row is cut at 64.
    weight, dequantized = _weight(name, 192, seed=0)
    assert torch.equal(weight.dequantize(), dequantized)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_triton_kernel_equals_the_float64_product(name: str) -> None:
    from engine.kernels.triton.fp8_matmul import fp8_matmul

    # NOTE: two parts (fused q/k) with their own scales, one cutting a 128-block row.
    (first, w1), (second, w2) = _weight(name, 192, seed=1), _weight(name, 64, seed=2)
    fused, dequantized = concat_outputs([first, second]), torch.cat([w1, w2])
    x = torch.randn(5, IN)
    got = fp8_matmul(x.to(DEVICE), fused.weight.to(DEVICE), fused.scale.to(DEVICE), fused.block_k)
    _within(got.cpu(), x, dequantized, 1e-5)
    if DEVICE.type == "cuda":
        half = fp8_matmul(x.to(DEVICE, torch.bfloat16), fused.weight.to(DEVICE), fused.scale.to(DEVICE), fused.block_k)
        expected = (x.double() @ dequantized.double().t()).float()
        torch.testing.assert_close(half.float().cpu(), expected, rtol=1e-2, atol=3e-2)
        layer = Fp8Linear([first, second], device=DEVICE, dtype=torch.float32)
        assert layer.kernel_path == TRITON_PATH


def test_the_cpu_layer_dequantizes_at_load() -> None:
    (first, w1), (second, w2) = _weight("fp8-block", 192, seed=1), _weight("fp8-block", 64, seed=2)
    bias = torch.randn(256)
    layer = Fp8Linear([first, second], bias, device=torch.device("cpu"), dtype=torch.float32)
    assert layer.kernel_path == TORCH_PATH
    x = torch.randn(3, IN)
    _within(layer(x) - bias, x, torch.cat([w1, w2]), 1e-5)
