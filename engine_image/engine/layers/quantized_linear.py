"""Linear and embedding layers over GGUF weights kept in (repacked) block form.

On CPU the blocks are repacked once at load into the C++ kernels' panels
(``kernels/cpu/quantized.py``): the weight stays near the file's bits per weight, which is
what decode, bound by memory bandwidth, pays for. F32 weights go to the fp32 ``PackedLinear``.
Where those kernels cannot be built, and on CUDA, the weight is dequantized once at load to
``dtype`` and multiplied by torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType
from torch import nn

from engine.kernels.cpu import load_cpu_kernels
from engine.kernels.cpu.quantized import (
    PACKABLE_TYPES,
    Isa,
    PackedFormat,
    dequantize_rows,
    isa_from_env,
    kernel_name,
    pack_blocks,
    pack_half,
    packed_format,
    quantized_gate_up,
    quantized_linear,
)
from engine.layers.block_tensor import BlockTensor
from engine.layers.packed_linear import PackedLinear

CPU = torch.device("cpu")
TORCH_PATH = "torch (dequantized at load)"
FP32_PATH = "fp32 packed"


def _check_parts(parts: Sequence[BlockTensor]) -> int:
    """The parts' shared width (in_features); raises when there are none or they differ."""
    if not parts:
        raise ValueError("a quantized linear layer needs at least one weight part")
    widths = {part.cols for part in parts}
    if len(widths) != 1:
        raise ValueError(f"fused weight parts must share in_features, got {sorted(widths)}")
    return parts[0].cols


def _pack(part: BlockTensor) -> tuple[torch.Tensor, PackedFormat]:
    if part.qtype in (GGMLQuantizationType.BF16, GGMLQuantizationType.F16):
        return pack_half(part.data), packed_format(part.qtype)
    return pack_blocks(part.data, part.qtype, part.rows, part.cols)


class QuantizedLinear(nn.Module):
    """``y = x @ W^T + bias`` with ``W`` the parts stacked along the output dimension (fused
    q/k/v or gate/up, whose GGUF types may differ); every part has ``in_features`` columns.

    ``isa`` forces a kernel family (tests, benchmarks); by default ``$GOMGR_CPU_QUANT_ISA`` or
    the best this CPU runs.
    """

    weight: torch.Tensor | None
    bias: torch.Tensor | None

    def __init__(
        self,
        parts: Sequence[BlockTensor],
        bias: torch.Tensor | None = None,
        *,
        device: torch.device = CPU,
        dtype: torch.dtype = torch.float32,
        isa: Isa | None = None,
    ) -> None:
        super().__init__()
        self.in_features = _check_parts(parts)
        self.out_features = sum(part.rows for part in parts)
        if bias is not None and bias.shape != (self.out_features,):
            raise ValueError(f"bias has shape {tuple(bias.shape)}, expected ({self.out_features},)")
        self._isa = isa_from_env() if isa is None else isa
        self._kernels: Any | None = load_cpu_kernels() if device.type == "cpu" else None
        self._formats: list[PackedFormat] = []
        self._panels: list[torch.Tensor] = []
        self._out_features = [part.rows for part in parts]
        self._fp32: PackedLinear | None = None
        self.register_buffer("weight", None, persistent=False)
        cpu_bias = None if bias is None else bias.detach().to(device=device, dtype=torch.float32)
        qtypes = {part.qtype for part in parts}
        if self._kernels is not None and qtypes <= PACKABLE_TYPES:
            packed_parts = [_pack(part) for part in parts]
            self._panels = [panels for panels, _ in packed_parts]
            self._formats = [fmt for _, fmt in packed_parts]
            names = dict.fromkeys(kernel_name(self._kernels, f, self._isa) for f in self._formats)
            self.kernel_path = " + ".join(names)
            self.weight_bytes = sum(p.numel() for p in self._panels)
            self.register_buffer("bias", cpu_bias, persistent=False)
        elif device.type == "cpu" and dtype == torch.float32 and qtypes == {GGMLQuantizationType.F32}:
            self._fp32 = PackedLinear(torch.cat([part.data for part in parts]), cpu_bias)
            self.kernel_path = FP32_PATH
            packed = self._fp32.packed_weight
            assert isinstance(packed, torch.Tensor)
            self.weight_bytes = packed.numel() * packed.element_size()
            self.register_buffer("bias", None, persistent=False)
        else:
            # NOTE: buffers, not parameters: nothing trains, and the GGUF file is the checkpoint.
            weight = torch.cat([part.dequantize() for part in parts]).to(device=device, dtype=dtype)
            self.register_buffer("weight", weight, persistent=False)
            self.kernel_path = TORCH_PATH
            self.weight_bytes = weight.numel() * weight.element_size()
            self.register_buffer(
                "bias", None if bias is None else bias.detach().to(device=device, dtype=dtype), persistent=False
            )

    @property
    def isa(self) -> Isa:
        return self._isa

    @property
    def part_out_features(self) -> list[int]:
        """Each part's output width, in the order the parts are stacked."""
        return list(self._out_features)

    @property
    def packed_parts(self) -> list[tuple[torch.Tensor, PackedFormat]]:
        """The kernels' panels and formats, one per part; empty on the other paths."""
        return list(zip(self._panels, self._formats, strict=True)) if self._formats else []

    def gated(self, x: torch.Tensor) -> torch.Tensor | None:
        """``silu(gate) * up`` for a gate/up projection in one kernel call, or None where that
        kernel does not run (another path, parts of unequal width, ``x`` no float32 rows)."""
        widths = self._out_features
        if not self._formats or len(widths) != 2 or widths[0] != widths[1]:
            return None
        if x.dim() != 2 or x.dtype != torch.float32 or x.stride(1) != 1:
            return None
        return quantized_gate_up(self._kernels, x, self._panels, self._formats, widths, self.bias, self._isa)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is not None:
            return F.linear(x.to(self.weight.dtype), self.weight, self.bias).to(x.dtype)
        # NOTE: the decode step's common case (a float32 matrix) goes straight to the kernel:
        # at one row the Python around it costs as much as the multiplication.
        if x.dim() == 2 and x.dtype == torch.float32 and x.stride(1) == 1 and self._fp32 is None:
            return quantized_linear(self._kernels, x, self._panels, self._formats, self._out_features, self.bias, self._isa)
        rows = x.reshape(-1, self.in_features).float()
        if rows.stride(-1) != 1:
            rows = rows.contiguous()
        out: torch.Tensor
        if self._fp32 is not None:
            out = self._fp32(rows)
        else:
            out = quantized_linear(
                self._kernels, rows, self._panels, self._formats, self._out_features, self.bias, self._isa
            )
        return out.reshape(*x.shape[:-1], self.out_features).to(x.dtype)


class QuantizedEmbedding(nn.Module):
    """Token embedding rows from a GGUF weight ``[vocab, hidden]``; on the kernels' path only
    the rows looked up are dequantized, from the same panels the tied LM head multiplies."""

    def __init__(
        self, weight: BlockTensor, *, device: torch.device = CPU, dtype: torch.dtype = torch.float32
    ) -> None:
        super().__init__()
        self.num_embeddings = weight.rows
        self.embedding_dim = weight.cols
        self._dtype = dtype
        # NOTE: an F32 table is used as it is (torch path): a packed fp32 copy for the head
        # would double the largest tensor.
        on_kernels = device.type == "cpu" and weight.qtype in PACKABLE_TYPES and load_cpu_kernels() is not None
        self._linear = QuantizedLinear([weight], device=device, dtype=torch.float32 if on_kernels else dtype)
        # NOTE (gguf helper): on CPU in float32 an F32 head takes the fp32 packed path, which
        # keeps no plain weight; the rows are then looked up in the file's own table.
        self._table = weight.data if self._linear.weight is None and not on_kernels else None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        packed = self._linear.packed_parts
        if not packed:
            table = self._linear.weight if self._table is None else self._table
            assert table is not None
            return F.embedding(ids.to(table.device), table).to(self._dtype)
        (panels, fmt), = packed
        flat = ids.reshape(-1).to(torch.int64).contiguous()
        rows = dequantize_rows(load_cpu_kernels(), panels, fmt, self.embedding_dim, flat)
        return rows.reshape(*ids.shape, self.embedding_dim).to(self._dtype)

    def as_linear(self) -> QuantizedLinear:
        """The tied LM head: the same weight, the same memory."""
        return self._linear
