"""The project's own small int4 quantizer: a float checkpoint transformers wrote, rewritten as an
AWQ (GEMM layout) or GPTQ (v1) checkpoint in their exact on-disk formats, plus the same model
dequantized (a plain float32 checkpoint transformers loads without any quantization library).

Round-to-nearest per group, no calibration (the formats, not the accuracy, are under test):
- asymmetric: ``scale = (max - min) / 15`` (fp16), ``zero = round(-min / scale)`` in 0..15;
- symmetric (GPTQ ``sym``): ``scale = max |w| / 7``, zero 8;
- act-order (GPTQ ``desc_act``): input columns grouped in a seeded random order, ``g_idx``
  naming each column's group (GPTQ's order is by Hessian diagonal; any order tests the format).
  Projections of one input (q/k/v, gate/up) share it, as GPTQ's one Hessian gives them.

On-disk layouts (AutoAWQ's GEMM, AutoGPTQ/GPTQModel's v1; transformers' and vLLM's readers):
AWQ ``qweight`` int32 [in, out/8] with nibble i holding column AWQ_ORDER[i] of each 8,
``qzeros`` int32 [in/group, out/8] the same, ``scales`` fp16 [in/group, out]; GPTQ ``qweight``
int32 [in/8, out] (nibble j = input row 8i+j), ``qzeros`` int32 [groups, out/8] (nibble j =
column 8c+j) each stored minus one, ``scales`` fp16 [groups, out], ``g_idx`` int32 [in].
NOTE: v1 cannot store a zero of 0 (its minus one wraps to 15; readers add one back: 16), so
the asymmetric GPTQ zeros are kept in 1..15, as a v1 reader would read them back.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tests.support.quantized_checkpoints import rewrite_checkpoint

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


@dataclass(frozen=True)
class Int4Variant:
    method: str  # awq | gptq
    group_size: int = 128  # -1: one group per row
    desc_act: bool = False
    sym: bool = False
    # NOTE: AutoGPTQ's checkpoints carry a zero bias on every projection, biased or not.
    zero_biases: bool = False

    @property
    def name(self) -> str:
        group = "row" if self.group_size == -1 else f"g{self.group_size}"
        act = "-act" if self.desc_act else ""
        return f"{self.method}-{group}{act}-{'sym' if self.sym else 'asym'}"

    def quantization_config(self) -> dict[str, Any]:
        if self.method == "awq":
            return {"quant_method": "awq", "bits": 4, "group_size": self.group_size, "version": "gemm", "zero_point": True}
        return {
            "quant_method": "gptq", "bits": 4, "group_size": self.group_size, "desc_act": self.desc_act,
            "sym": self.sym, "checkpoint_format": "gptq",
        }


@dataclass(frozen=True)
class _Quantized:
    q: torch.Tensor  # int64 [in, out], 0..15
    zeros: torch.Tensor  # int64 [groups, out]
    scales: torch.Tensor  # fp16 [groups, out]
    g_idx: torch.Tensor  # int64 [in]

    def dequantized(self) -> torch.Tensor:
        """float32 [out, in]: exact, an fp16 scale times an integer under 32."""
        w = (self.q - self.zeros[self.g_idx]).double() * self.scales.double()[self.g_idx]
        return w.t().float().contiguous()


def quantize(weight: torch.Tensor, variant: Int4Variant, seed: int) -> _Quantized:
    """``weight`` float [out, in] quantized round-to-nearest per group of input columns."""
    out_features, in_features = weight.shape
    size = in_features if variant.group_size == -1 else variant.group_size
    order = torch.randperm(in_features, generator=torch.Generator().manual_seed(seed)) if variant.desc_act else torch.arange(in_features)
    g_idx = torch.empty(in_features, dtype=torch.int64)
    g_idx[order] = torch.arange(in_features) // size
    groups = in_features // size
    w = weight.double().t()  # [in, out]
    by_group = [w[g_idx == g] for g in range(groups)]
    if variant.sym:
        scales = torch.stack([(g.abs().amax(0) / 7).clamp(min=1e-5) for g in by_group]).half()
        zeros = torch.full((groups, out_features), 8, dtype=torch.int64)
    else:
        low = torch.stack([g.amin(0).clamp(max=0) for g in by_group])
        high = torch.stack([g.amax(0).clamp(min=0) for g in by_group])
        scales = ((high - low) / 15).clamp(min=1e-5).half()
        lowest = 1 if variant.method == "gptq" else 0
        zeros = torch.round(-low / scales.double()).long().clamp(lowest, 15)
    q = torch.round(w / scales.double()[g_idx]).long() + zeros[g_idx]
    return _Quantized(q.clamp(0, 15), zeros, scales, g_idx)


def _pack(values: torch.Tensor, dim: int, order: tuple[int, ...] = tuple(range(8))) -> torch.Tensor:
    """Eight 4-bit ``values`` along ``dim`` a word (nibble i = value order[i]), as int32."""
    moved = values.movedim(dim, -1)
    words = moved.reshape(*moved.shape[:-1], -1, 8)[..., list(order)]
    packed = (words << (4 * torch.arange(8))).sum(-1)
    as_int32 = torch.from_numpy(packed.numpy().astype(np.uint32).view(np.int32))
    return as_int32.movedim(-1, dim).contiguous()


def quantize_projection(
    weight: torch.Tensor, variant: Int4Variant, seed: int
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """``weight`` [out, in] as the checkpoint's tensors by leaf name (qweight, ...), and the
    float32 weight they mean."""
    quantized = quantize(weight, variant, seed)
    if variant.method == "awq":
        tensors = {
            "qweight": _pack(quantized.q, 1, AWQ_ORDER),
            "qzeros": _pack(quantized.zeros, 1, AWQ_ORDER),
            "scales": quantized.scales,
        }
    else:
        tensors = {
            "qweight": _pack(quantized.q, 0),
            "qzeros": _pack((quantized.zeros - 1) & 0xF, 1),
            "scales": quantized.scales,
            "g_idx": quantized.g_idx.to(torch.int32),
        }
    return tensors, quantized.dequantized()


def write_int4_checkpoint(source: Path, out: Path, dequantized: Path, variant: Int4Variant, seed: int = 0) -> None:
    """``source``'s projections quantized into ``out`` (the checkpoint, with source's other
    files), and the same model dequantized to float32 into ``dequantized``."""

    def quantize(
        module: str, weight: torch.Tensor, tensors: dict[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        leaves, meant = quantize_projection(weight, variant, seed + zlib.crc32(_input_of(module).encode()))
        if variant.zero_biases and f"{module}.bias" not in tensors:
            leaves["bias"] = torch.zeros(weight.shape[0], dtype=torch.float16)
        return leaves, meant

    rewrite_checkpoint(source, out, dequantized, quantize, variant.quantization_config())


def _input_of(module: str) -> str:
    """The projections of one input share a name here (q/k/v, gate/up): their act-order."""
    for part, first in (("k_proj", "q_proj"), ("v_proj", "q_proj"), ("up_proj", "gate_proj")):
        module = module.replace(f".{part}", f".{first}")
    return module
