"""Typed access to the quantized linear kernels (``quantized_linear.cpp``): repacking GGUF
weights into their panels once at load, and the matrix multiplication and row lookups over them.

The repacking is lossless: int formats keep each weight as an unsigned quant with a scale and
min per group (``block_unpack``), in fp16 where that is exact (the types whose d and m the file
stores in fp16), else float32 (K-quants, whose sub-block scales times d need more than fp16's 11
bits), and without the min where it is -zero point * scale (the symmetric types: Q4_0 then takes
4.5 bits a weight, Q8_0 8.5, as in the file); half formats keep their 16-bit values.
"""

from __future__ import annotations

import enum
import os
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType

from engine.kernels.cpu.block_unpack import UnpackedBlocks, unpack_blocks

# NOTE: output columns per panel, as panel_kernels.h's kCols.
PANEL_COLUMNS = 16
# NOTE: rows unpacked at a time when packing (whole panels).
_PACK_ROWS = 256 * PANEL_COLUMNS
# NOTE: "avx2", "avx512", "amx" or "avx_vnni" forces that kernel family for every GGUF layer (testing, comparing).
ISA_ENV = "GOMGR_CPU_QUANT_ISA"


class PackedFormat(enum.IntEnum):
    """panel_kernels.h's ``Format``."""

    NIBBLE32 = 0
    FIVE32 = 1
    BYTE16 = 2
    FULL32 = 3
    BF16 = 4
    F16 = 5
    NIBBLE32_HALF = 6
    FIVE32_HALF = 7
    FULL32_HALF = 8
    NIBBLE32_HALF_ZERO8 = 9
    FIVE32_HALF_ZERO16 = 10
    FULL32_HALF_ZERO128 = 11
    BYTE16_ZERO32 = 12


class Isa(enum.IntEnum):
    """Which kernel family runs: the best the CPU has, or one forced."""

    BEST = -1
    AVX2 = 0
    AVX512 = 1
    AMX = 2  # AMX tiles for 16 rows at a time, AVX-512 for the rows left over
    AVX_VNNI = 3  # 256-bit vpdpbusd for the int formats (the AVX2 kernels for the half ones)


# NOTE: the format each GGUF type packs into: fp16 scales where the file's are fp16 (Q4_0 ..
# Q8_0; the K-quants' sub-block scales times d need float32), and no min for the symmetric
# types (every group's min is -zero point * scale, block_unpack.py), whose kernels know it.
_GGUF_FORMATS = {
    GGMLQuantizationType.Q4_0: PackedFormat.NIBBLE32_HALF_ZERO8,
    GGMLQuantizationType.Q4_1: PackedFormat.NIBBLE32_HALF,
    GGMLQuantizationType.Q5_0: PackedFormat.FIVE32_HALF_ZERO16,
    GGMLQuantizationType.Q5_1: PackedFormat.FIVE32_HALF,
    GGMLQuantizationType.Q8_0: PackedFormat.FULL32_HALF_ZERO128,
    GGMLQuantizationType.Q4_K: PackedFormat.NIBBLE32,
    GGMLQuantizationType.Q5_K: PackedFormat.FIVE32,
    GGMLQuantizationType.Q6_K: PackedFormat.BYTE16_ZERO32,
    GGMLQuantizationType.BF16: PackedFormat.BF16,
    GGMLQuantizationType.F16: PackedFormat.F16,
}
PACKABLE_TYPES = frozenset(_GGUF_FORMATS)
_NO_MIN = frozenset({
    PackedFormat.NIBBLE32_HALF_ZERO8, PackedFormat.FIVE32_HALF_ZERO16, PackedFormat.FULL32_HALF_ZERO128,
    PackedFormat.BYTE16_ZERO32,
})  # fmt: skip
_FP16_SCALES = frozenset({
    PackedFormat.NIBBLE32_HALF, PackedFormat.FIVE32_HALF, PackedFormat.FULL32_HALF, PackedFormat.NIBBLE32_HALF_ZERO8,
    PackedFormat.FIVE32_HALF_ZERO16, PackedFormat.FULL32_HALF_ZERO128,
})  # fmt: skip
# NOTE: each int format's quants laid out as those of the float32-scaled format with a min.
_LAYOUT = {
    PackedFormat.NIBBLE32_HALF: PackedFormat.NIBBLE32, PackedFormat.FIVE32_HALF: PackedFormat.FIVE32,
    PackedFormat.FULL32_HALF: PackedFormat.FULL32, PackedFormat.NIBBLE32_HALF_ZERO8: PackedFormat.NIBBLE32,
    PackedFormat.FIVE32_HALF_ZERO16: PackedFormat.FIVE32, PackedFormat.FULL32_HALF_ZERO128: PackedFormat.FULL32,
    PackedFormat.BYTE16_ZERO32: PackedFormat.BYTE16,
}  # fmt: skip


def isa_from_env() -> Isa:
    value = os.environ.get(ISA_ENV, "").strip().lower()
    if not value:
        return Isa.BEST
    try:
        return Isa[value.upper()]
    except KeyError:
        raise ValueError(f"{ISA_ENV} must be avx2, avx512, amx or avx_vnni, got {value!r}") from None


def packed_format(qtype: GGMLQuantizationType) -> PackedFormat:
    """The format ``qtype``'s weights pack into."""
    return _GGUF_FORMATS[qtype]


def _padded_rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` [rows, ...] with zero rows up to a whole number of panels."""
    missing = -t.shape[0] % PANEL_COLUMNS
    return torch.cat([t, t.new_zeros((missing, *t.shape[1:]))]) if missing else t


def pack_blocks(
    data: torch.Tensor, qtype: GGMLQuantizationType, rows: int, cols: int
) -> tuple[torch.Tensor, PackedFormat]:
    """GGUF blocks uint8 ``[rows, row_bytes]`` as the int kernels' panels (uint8, 1-D), and
    their format.

    NOTE: a slice of rows at a time: the unpacked intermediates (a byte per weight and more)
    of a whole embedding table would add tens of MB to the load's peak memory.
    """
    fmt = packed_format(qtype)
    chunks = []
    for start in range(0, rows, _PACK_ROWS):
        count = min(_PACK_ROWS, rows - start)
        chunks.append(_panels(unpack_blocks(data[start : start + count].numpy(), qtype, count, cols), fmt))
    return (chunks[0] if len(chunks) == 1 else torch.cat(chunks)), fmt


def pack_groups(unpacked: UnpackedBlocks, fmt: PackedFormat) -> torch.Tensor:
    """Integer quants with a float32 scale and min per group, from any source (GGUF blocks, an
    AWQ/GPTQ checkpoint's groups cut into runs of 32), as ``fmt``'s panels (uint8, 1-D)."""
    return _panels(unpacked, fmt)


def _panels(unpacked: UnpackedBlocks, fmt: PackedFormat) -> torch.Tensor:
    layout = _LAYOUT.get(fmt, fmt)
    cols = unpacked.quants.shape[1]
    groups = unpacked.scale.shape[1]
    group = cols // groups
    steps = group // 4
    quants = _padded_rows(torch.from_numpy(unpacked.quants))
    panels = quants.shape[0] // PANEL_COLUMNS
    # [panel, column, group, step, 4 k] -> [panel, group, step, column, 4 k]
    steps_major = quants.view(panels, PANEL_COLUMNS, groups, steps, 4).permute(0, 2, 3, 1, 4)
    if layout == PackedFormat.FIVE32:
        # NOTE: bit t of the fifth-bit bytes is step t's; the low 4 bits go on as nibbles.
        shifts = torch.arange(steps, dtype=torch.uint8).view(1, 1, steps, 1, 1)
        fifth = ((steps_major >> 4) << shifts).sum(dim=2, dtype=torch.uint8).unsqueeze(2)
        steps_major = torch.cat([steps_major & 0x0F, fifth], dim=2)
    if layout in (PackedFormat.NIBBLE32, PackedFormat.FIVE32):
        low = steps_major[:, :, :8]
        steps_major = torch.cat([low[:, :, :4] | (low[:, :, 4:] << 4), steps_major[:, :, 8:]], dim=2)
    scale_type = np.float16 if fmt in _FP16_SCALES else np.float32
    fields = (unpacked.scale,) if fmt in _NO_MIN else (unpacked.scale, unpacked.min)
    per_group = [
        _padded_rows(torch.from_numpy(values.astype(scale_type))).view(panels, PANEL_COLUMNS, groups).transpose(1, 2)
        for values in fields
    ]
    parts = [t.contiguous().view(torch.uint8) for t in per_group] + [steps_major.reshape(panels, groups, -1)]
    return torch.cat(parts, dim=2).reshape(-1)


def pack_half(weight: torch.Tensor) -> torch.Tensor:
    """A bf16 or fp16 weight ``[rows, cols]`` as the half kernels' panels (uint8, 1-D)."""
    padded = _padded_rows(weight.detach())
    panels = padded.shape[0] // PANEL_COLUMNS
    if weight.dtype == torch.bfloat16:
        pairs = F.pad(padded, (0, padded.shape[1] % 2)).view(panels, PANEL_COLUMNS, -1, 2)
        return pairs.permute(0, 2, 1, 3).contiguous().view(torch.uint8).reshape(-1)
    if weight.dtype == torch.float16:
        return padded.view(panels, PANEL_COLUMNS, -1).transpose(1, 2).contiguous().view(torch.uint8).reshape(-1)
    raise ValueError(f"half panels hold bfloat16 or float16 weights, not {weight.dtype}")


def quantized_linear(
    kernels: Any,
    x: torch.Tensor,
    panels: list[torch.Tensor],
    formats: list[PackedFormat],
    out_features: list[int],
    bias: torch.Tensor | None,
    isa: Isa,
) -> torch.Tensor:
    """``x`` float32 [M, K] (rows contiguous) times the parts stacked along the output."""
    out: torch.Tensor = kernels.quantized_linear(x, panels, formats, out_features, bias, isa)
    return out


def quantized_gate_up(
    kernels: Any,
    x: torch.Tensor,
    panels: list[torch.Tensor],
    formats: list[PackedFormat],
    out_features: list[int],
    bias: torch.Tensor | None,
    isa: Isa,
) -> torch.Tensor:
    """``silu(gate) * up`` of ``x`` times the two parts (gate, up) of equal width, fused: the
    ``[M, 2 x width]`` product is never written."""
    out: torch.Tensor = kernels.quantized_gate_up(x, panels, formats, out_features, bias, isa)
    return out


def kernel_name(kernels: Any, fmt: PackedFormat, isa: Isa) -> str:
    """The kernel ``isa`` picks for ``fmt`` on this CPU; raises when the CPU cannot run it."""
    name: str = kernels.quantized_kernel(int(fmt), int(isa))
    return name


def dequantize_rows(kernels: Any, panels: torch.Tensor, fmt: PackedFormat, cols: int, ids: torch.Tensor) -> torch.Tensor:
    """Rows ``ids`` of a packed weight as float32 ``[len(ids), cols]``, exactly as the file's."""
    out: torch.Tensor = kernels.dequantize_packed_rows(panels, int(fmt), cols, ids)
    return out


def quantize_activations(kernels: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The int8 values and per-32 scales the int kernels multiply for ``x`` (for tests)."""
    q, scale = kernels.quantize_activations(x)
    return q, scale


