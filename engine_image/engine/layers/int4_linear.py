"""A linear layer over AWQ/GPTQ int4 weights (``Int4Weight`` parts stacked along the output).

Three paths, chosen at load:

- CPU with the C++ kernels: each group of 32, 64, 128 or a whole row is cut into runs of 32
  with a float32 scale and min (``w = scale * q + min``, ``min = -scale * zero``: lossless) and
  repacked into the GGUF int kernels' NIBBLE32 panels (``pack_groups``). GPTQ act-order: the
  input columns are sorted by group at load and the activations gathered in that order at run
  time (one ``index_select`` of ``x``), which keeps the weight at ~6 bits instead of a float copy.
- CUDA with Triton: the checkpoint's packed tensors stay as they are, multiplied by the
  dequantize-GEMM kernel (``kernels/triton/int4_matmul.py``).
- Elsewhere (no C++ kernels, CUDA without Triton, fused parts whose act-order groups differ):
  dequantized once at load to ``dtype`` and multiplied by torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from engine.kernels.cpu import load_cpu_kernels
from engine.kernels.cpu.quantized import (
    Isa,
    PackedFormat,
    isa_from_env,
    kernel_name,
    pack_groups,
    quantized_linear,
)
from engine.kernels.triton import triton_available
from engine.layers.int4_weight import Int4Weight, concat_outputs

TRITON_PATH = "triton int4 dequantize-GEMM"
TORCH_PATH = "torch (int4 dequantized at load)"


class Int4Linear(nn.Module):
    """``y = x @ W^T + bias`` over ``parts`` stacked along the output."""

    weight: torch.Tensor | None
    bias: torch.Tensor | None
    order: torch.Tensor | None

    def __init__(
        self,
        parts: Sequence[Int4Weight],
        bias: torch.Tensor | None = None,
        *,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        super().__init__()
        widths = {part.in_features for part in parts}
        if len(widths) != 1:
            raise ValueError(f"fused int4 parts must share in_features, got {sorted(widths)}")
        self.in_features = parts[0].in_features
        self.part_out_features = [part.out_features for part in parts]
        self.out_features = sum(self.part_out_features)
        self.method = parts[0].method
        self._isa: Isa = isa_from_env()
        self._kernels: Any | None = None
        self._panels: list[torch.Tensor] = []
        self._fused: Int4Weight | None = None
        self.register_buffer("weight", None, persistent=False)
        self.register_buffer("order", None, persistent=False)
        on_device = None if bias is None else bias.detach().to(device=device, dtype=dtype)
        if device.type == "cpu" and self._pack_for_cpu(parts):
            on_device = None if bias is None else bias.detach().float()
        elif device.type == "cuda" and triton_available():
            fused = concat_outputs(parts)
            if fused is not None:
                self._fused = fused.to(device)
                self.kernel_path = TRITON_PATH
        if not self._panels and self._fused is None:
            weight = torch.cat([part.dequantize() for part in parts]).to(device=device, dtype=dtype)
            self.register_buffer("weight", weight, persistent=False)
            self.kernel_path = TORCH_PATH
        self.register_buffer("bias", on_device, persistent=False)

    def _pack_for_cpu(self, parts: Sequence[Int4Weight]) -> bool:
        """Repacks ``parts`` into the int kernels' panels; False where they cannot take them."""
        kernels = load_cpu_kernels()
        if kernels is None:
            return False
        first = parts[0].input_order()
        if any(not _same_order(part.input_order(), first) for part in parts[1:]):
            return False
        runs = [part.cpu_runs(first) for part in parts]
        if any(r is None for r in runs):
            return False
        self._kernels = kernels
        self._panels = [pack_groups(r, PackedFormat.NIBBLE32) for r in runs if r is not None]
        self.register_buffer("order", first, persistent=False)
        self.kernel_path = f"{kernel_name(kernels, PackedFormat.NIBBLE32, self._isa)} (int4 repacked)"
        return True

    @property
    def weight_bytes(self) -> int:
        """The bytes the weight takes as served."""
        if self.weight is not None:
            return self.weight.numel() * self.weight.element_size()
        if self._fused is not None:
            return sum(t.numel() * t.element_size() for t in (self._fused.qweight, self._fused.qzeros, self._fused.scales))
        return sum(p.numel() for p in self._panels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is not None:
            return F.linear(x.to(self.weight.dtype), self.weight, self.bias).to(x.dtype)
        rows = x.reshape(-1, self.in_features)
        if self._fused is not None:
            # NOTE: imported here, on CUDA only: importing it imports triton.
            from engine.kernels.triton.int4_matmul import int4_matmul

            w = self._fused
            out = int4_matmul(rows.contiguous(), w.qweight, w.qzeros, w.scales, w.g_idx, awq=w.method == "awq")
            if self.bias is not None:
                out = out + self.bias
            return out.reshape(*x.shape[:-1], self.out_features)
        rows = rows.float()
        if self.order is not None:
            rows = rows.index_select(1, self.order)
        elif rows.stride(-1) != 1:
            rows = rows.contiguous()
        formats = [PackedFormat.NIBBLE32] * len(self._panels)
        out = quantized_linear(self._kernels, rows, self._panels, formats, self.part_out_features, self.bias, self._isa)
        return out.reshape(*x.shape[:-1], self.out_features).to(x.dtype)


def _same_order(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Whether two input orders (None: as stored) are one: fused parts gather ``x`` once."""
    if a is None or b is None:
        return a is None and b is None
    return torch.equal(a, b)
