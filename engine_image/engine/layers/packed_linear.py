"""Linear layers with weights packed once for the CPU, the CPU path's matrix multiplications.

``F.linear`` hands an fp32 weight to the BLAS in its plain layout, which is re-blocked on
every call. Packed once at load instead: into the column panels of our C++ kernel
(``kernels/cpu/linear.cpp``; 1.16x oneDNN at 32 rows, 1.2-1.3x at 1-8 rows, level at 1,024
on this model's shapes) or, where that kernel cannot be built, into oneDNN's blocked layout
(what torch.compile's CPU backend does with frozen weights).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from engine.kernels.cpu import load_cpu_kernels
from engine.kernels.cpu.quantized import (
    PackedFormat,
    isa_from_env,
    kernel_name,
    pack_half,
    quantized_linear,
)

logger = logging.getLogger(__name__)

# NOTE: the batch size oneDNN picks the blocking for; any batch size runs on the result.
_PACKING_BATCH_HINT = 32


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    """Packing pays on CPU in fp32 (oneDNN's bf16 needs AVX-512 or AVX-NE-CONVERT)."""
    return device.type == "cpu" and dtype == torch.float32 and torch.backends.mkldnn.is_available()


class PackedLinear(nn.Module):
    """``F.linear(x, weight, bias)`` for 2-D float32 ``x``, on a weight packed once.

    A bfloat16 weight stays bfloat16 (half the bytes of fp32): packed for the bf16 kernels of
    ``kernels/cpu/quantized.py`` (AVX512-BF16 where the CPU has it, x then rounded to bf16;
    else widened to fp32 in registers), float32 in and out. Without the kernels it is widened
    to fp32 at load.
    """

    packed_weight: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.in_features = weight.shape[1]
        self.out_features = weight.shape[0]
        self._kernels: Any | None = load_cpu_kernels()
        self._bf16 = weight.dtype == torch.bfloat16 and self._kernels is not None
        self._isa = isa_from_env()
        weight = weight.detach()
        if self._bf16:
            packed = pack_half(weight)
            bias = None if bias is None else bias.float()
        elif self._kernels is not None:
            packed = self._kernels.pack_linear_weight(weight.float().contiguous())
        else:
            packed = torch.ops.mkldnn._reorder_linear_weight(weight.float(), _PACKING_BATCH_HINT)
        # NOTE: buffers, not parameters: nothing trains, and state_dict stays the checkpoint's.
        self.register_buffer("packed_weight", packed, persistent=False)
        self.register_buffer("bias", None if bias is None else bias.detach(), persistent=False)

    @property
    def holds_fp32_panels(self) -> bool:
        """Whether the weight is in our kernel's fp32 panels (``[panels, in, width]``, row ``n``
        of the weight at ``[n // width, :, n % width]``), where ``PackedEmbedding`` reads rows."""
        return not self._bf16 and self._kernels is not None

    @property
    def kernel_path(self) -> str:
        """What multiplies: the bf16 kernel's name, or the fp32 packed GEMM's."""
        if self._bf16:
            return kernel_name(self._kernels, PackedFormat.BF16, self._isa)
        return "fp32 packed panels" if self._kernels is not None else "oneDNN fp32"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._bf16:
            if x.stride(-1) != 1:
                x = x.contiguous()
            return quantized_linear(
                self._kernels, x, [self.packed_weight], [PackedFormat.BF16], [self.out_features], self.bias, self._isa
            )
        if self._kernels is not None:
            if x.stride(-1) != 1:
                x = x.contiguous()
            out: torch.Tensor = self._kernels.packed_linear(
                x, self.packed_weight, self.bias, self.out_features
            )
            return out
        out = torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")
        return out


class PackedEmbedding(nn.Module):
    """A tied embedding whose rows are read from the LM head's fp32 panels, so the table is
    held once (issue 30: for SmolLM2-135M the second copy was 0.11 GiB of a 1.5 GiB budget).
    The rows are the weight's own values, copied out, so the model computes the same."""

    def __init__(self, head: PackedLinear) -> None:
        super().__init__()
        if not head.holds_fp32_panels:
            raise ValueError("a PackedEmbedding reads fp32 panels; this head holds another layout")
        self.head = head
        self.num_embeddings = head.out_features
        self.embedding_dim = head.in_features

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        panels = self.head.packed_weight
        width = panels.shape[2]
        flat = ids.reshape(-1)
        rows = panels[flat // width, :, flat % width]
        return rows.reshape(*ids.shape, self.embedding_dim)


def pack_linear_layers(model: nn.Module, weight_dtype: torch.dtype = torch.float32) -> int:
    """Replaces every ``nn.Linear`` in ``model`` by a ``PackedLinear`` on its weight in
    ``weight_dtype``; returns how many."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, PackedLinear(child.weight.to(weight_dtype), child.bias))
                replaced += 1
    return replaced
