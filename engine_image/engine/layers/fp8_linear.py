"""A linear layer over FP8 checkpoint weights (``Fp8Weight`` parts stacked along the output).

Three paths, chosen at load:

- CUDA with FP8 tensor cores (sm89+), a bfloat16 model and per-tensor or per-channel scales:
  ``torch._scaled_mm`` over the FP8 weight, each activation row quantized to e4m3 at run time
  with its own scale (dynamic per-token), the weight's per-row scales applied by the GEMM.
  Block-scaled weights (128 x 128) take the Triton path: rowwise ``_scaled_mm`` cannot apply
  a scale per block of input columns.
- Other CUDA GPUs (or float16/float32 models): the weight stays FP8 and the Triton
  dequantize-GEMM kernel (``kernels/triton/fp8_matmul.py``) decodes it tile by tile
  (weight-only: activations stay in the model dtype).
- CPU (and CUDA without Triton): dequantized once at load to the model dtype and multiplied by
  torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from engine.kernels.fp8_cast import E4M3_MAX, to_e4m3
from engine.kernels.triton import triton_available
from engine.layers.fp8_weight import Fp8Weight, concat_outputs

SCALED_MM_PATH = "torch._scaled_mm fp8 (dynamic per-token activations)"
TRITON_PATH = "triton fp8 weight-only dequantize-GEMM"
TORCH_PATH = "torch (fp8 dequantized at load)"


def fp8_tensor_cores(device: torch.device) -> bool:
    """Whether ``device`` multiplies FP8 natively (CUDA compute capability 8.9 and later)."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


def scaled_mm_per_token(x: torch.Tensor, weight_t: torch.Tensor, row_scales: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``x`` ``[M, K]`` (bfloat16) times the FP8 weight given transposed (``[K, N]``, column
    major) with its float32 ``row_scales`` ``[1, N]``: each row of ``x`` quantized to e4m3 by
    its own absmax first. Output bfloat16 ``[M, N]``."""
    x_scale = (x.abs().amax(dim=1, keepdim=True).float() / E4M3_MAX).clamp(min=1e-12)
    return torch._scaled_mm(
        to_e4m3(x, x_scale), weight_t, scale_a=x_scale, scale_b=row_scales, bias=bias, out_dtype=torch.bfloat16
    )


class Fp8Linear(nn.Module):
    """``y = x @ W^T + bias`` over ``parts`` stacked along the output."""

    weight: torch.Tensor | None
    bias: torch.Tensor | None
    fp8_weight: torch.Tensor | None
    scale: torch.Tensor | None

    def __init__(
        self,
        parts: Sequence[Fp8Weight],
        bias: torch.Tensor | None = None,
        *,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        super().__init__()
        widths = {part.in_features for part in parts}
        if len(widths) != 1:
            raise ValueError(f"fused fp8 parts must share in_features, got {sorted(widths)}")
        fused = concat_outputs(parts)
        self.in_features = fused.in_features
        self.out_features = fused.out_features
        self.scale_k = fused.block_k
        self.register_buffer("weight", None, persistent=False)
        self.register_buffer("fp8_weight", None, persistent=False)
        self.register_buffer("scale", None, persistent=False)
        self.register_buffer("bias", None if bias is None else bias.detach().to(device=device, dtype=dtype), persistent=False)
        per_row = fused.block_k == fused.in_features
        if per_row and dtype == torch.bfloat16 and fp8_tensor_cores(device) and fused.in_features % 16 == 0 and fused.out_features % 16 == 0:
            on_device = fused.to(device)
            self.fp8_weight = on_device.weight
            self.scale = on_device.scale.reshape(1, -1).contiguous()
            self.kernel_path = SCALED_MM_PATH
        elif device.type == "cuda" and triton_available():
            on_device = fused.to(device)
            self.fp8_weight, self.scale = on_device.weight, on_device.scale
            self.kernel_path = TRITON_PATH
        else:
            self.weight = fused.dequantize().to(device=device, dtype=dtype)
            self.kernel_path = TORCH_PATH

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is not None:
            return F.linear(x.to(self.weight.dtype), self.weight, self.bias).to(x.dtype)
        assert self.fp8_weight is not None and self.scale is not None
        rows = x.reshape(-1, self.in_features).contiguous()
        if self.kernel_path == SCALED_MM_PATH:
            out = scaled_mm_per_token(rows, self.fp8_weight.t(), self.scale, self.bias)
            return out.reshape(*x.shape[:-1], self.out_features)
        # NOTE: imported here, on CUDA only: importing it imports triton.
        from engine.kernels.triton.fp8_matmul import fp8_matmul

        out = fp8_matmul(rows, self.fp8_weight, self.scale, self.scale_k)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)
