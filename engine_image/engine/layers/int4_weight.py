"""A weight matrix as an AWQ (GEMM layout) or GPTQ (v1) checkpoint stores it, and its meaning.

Both keep 4-bit unsigned quants with an fp16 scale and a 4-bit zero per group of input columns:
``w[n, k] = scale[g, n] * (q[k, n] - zero[g, n])`` with ``g`` the group of input column ``k``.

- AWQ: ``qweight`` int32 ``[in, out / 8]``, eight output columns a word in the order
  0, 2, 4, 6, 1, 3, 5, 7 (nibble ``i`` holds column ``AWQ_ORDER[i]``); ``qzeros`` int32
  ``[groups, out / 8]`` in the same order; ``scales`` fp16 ``[groups, out]``; group ``k // size``.
- GPTQ v1: ``qweight`` int32 ``[in / 8, out]``, eight input rows a word (nibble ``j`` is row
  ``8 i + j``); ``qzeros`` int32 ``[groups, out / 8]`` in plain order, each stored minus one;
  ``scales`` fp16 ``[groups, out]``; ``g_idx`` int32 ``[in]`` the group of each input row (act-order
  permutes them; without act-order it is ``k // size``).

``g_idx`` is kept for both (computed for AWQ), so every consumer reads one description.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.kernels.cpu.block_unpack import UnpackedBlocks

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
# NOTE: the nibble holding output column j of a word: the inverse of AWQ_ORDER.
AWQ_NIBBLE_OF_COLUMN = (0, 4, 1, 5, 2, 6, 3, 7)
# NOTE: the CPU kernels' group: one float32 scale and min per 32 input columns.
CPU_RUN = 32
_SHIFTS = torch.arange(0, 32, 4, dtype=torch.int32)


def _nibbles(words: torch.Tensor) -> torch.Tensor:
    """int32 ``[..., n]`` as its eight nibbles, lowest first: ``[..., n, 8]`` (int32, 0..15)."""
    return (words.unsqueeze(-1) >> _SHIFTS.to(words.device)) & 0xF


@dataclass(frozen=True)
class Int4Weight:
    """One projection's checkpoint tensors; ``method`` awq or gptq."""

    method: str
    qweight: torch.Tensor
    qzeros: torch.Tensor
    scales: torch.Tensor
    g_idx: torch.Tensor

    def __post_init__(self) -> None:
        k, n = self.in_features, self.out_features
        packed = (k, n // 8) if self.method == "awq" else (k // 8, n)
        groups = self.scales.shape[0]
        expected = {"qweight": packed, "qzeros": (groups, n // 8), "g_idx": (k,)}
        for name, shape in expected.items():
            actual = tuple(getattr(self, name).shape)
            if actual != shape:
                raise ValueError(f"{self.method} {name} has shape {actual}, expected {shape}")
        if k % 8 or n % 8:
            raise ValueError(f"{self.method} weight [{n}, {k}] is not whole words of 8 values")

    @classmethod
    def from_checkpoint(
        cls, method: str, tensors: dict[str, torch.Tensor], group_size: int
    ) -> Int4Weight:
        """From a projection's tensors by leaf name (qweight, qzeros, scales, g_idx)."""
        missing = sorted({"qweight", "qzeros", "scales"} - set(tensors))
        if missing:
            raise ValueError(f"{method} projection lacks {', '.join(missing)}")
        qweight = tensors["qweight"].to(torch.int32)
        in_features = qweight.shape[0] * (1 if method == "awq" else 8)
        g_idx = tensors.get("g_idx") if method == "gptq" else None
        if g_idx is None:
            size = in_features if group_size == -1 else group_size
            g_idx = torch.arange(in_features, dtype=torch.int32) // size
        return cls(method, qweight, tensors["qzeros"].to(torch.int32), tensors["scales"], g_idx.to(torch.int32))

    def to(self, device: torch.device) -> Int4Weight:
        """The same weight with its tensors on ``device``."""
        moved = (t.to(device) for t in (self.qweight, self.qzeros, self.scales, self.g_idx))
        return Int4Weight(self.method, *moved)

    @property
    def in_features(self) -> int:
        return int(self.qweight.shape[0] * (1 if self.method == "awq" else 8))

    @property
    def out_features(self) -> int:
        return int(self.scales.shape[1])

    def quants(self) -> torch.Tensor:
        """The quants ``q[k, n]``, uint8 ``[in, out]``."""
        nibbles = _nibbles(self.qweight)
        if self.method == "awq":
            unordered = nibbles[..., list(AWQ_NIBBLE_OF_COLUMN)]
            return unordered.reshape(self.in_features, self.out_features).to(torch.uint8)
        return nibbles.permute(0, 2, 1).reshape(self.in_features, self.out_features).to(torch.uint8)

    def zeros(self) -> torch.Tensor:
        """The zero points, int32 ``[groups, out]`` (GPTQ v1's stored value plus one)."""
        nibbles = _nibbles(self.qzeros)
        if self.method == "awq":
            return nibbles[..., list(AWQ_NIBBLE_OF_COLUMN)].reshape(-1, self.out_features)
        return nibbles.reshape(-1, self.out_features) + 1

    def dequantize(self) -> torch.Tensor:
        """float32 ``[out, in]`` (exact: an fp16 scale times an integer under 32)."""
        g = self.g_idx.long()
        q = self.quants().to(torch.int32)
        return ((q - self.zeros()[g]).float() * self.scales.float()[g]).t().contiguous()

    def input_order(self) -> torch.Tensor | None:
        """The input columns sorted by group (act-order's permutation); None when already sorted."""
        g = self.g_idx.long()
        if bool((g[1:] >= g[:-1]).all()):
            return None
        return torch.argsort(g, stable=True)

    def cpu_runs(self, order: torch.Tensor | None) -> UnpackedBlocks | None:
        """The quants ``[out, in]`` with input columns in ``order``, a float32 scale and min per
        run of 32 (``scale * q + min``, exact); None when a run spans two groups."""
        k = self.in_features
        g = self.g_idx.long() if order is None else self.g_idx.long()[order]
        if k % CPU_RUN:
            return None
        runs = g.view(-1, CPU_RUN)
        if not bool((runs == runs[:, :1]).all()):
            return None
        run_group = runs[:, 0]
        quants = self.quants() if order is None else self.quants()[order]
        scale = self.scales.float()[run_group]
        minimum = -scale * self.zeros()[run_group].float()
        return UnpackedBlocks(
            quants.t().contiguous().numpy(), scale.t().contiguous().numpy(), minimum.t().contiguous().numpy()
        )


def concat_outputs(parts: Sequence[Int4Weight]) -> Int4Weight | None:
    """The parts stacked along the output (fused q/k/v, gate/up) as one weight; None when their
    groups differ (act-order's ``g_idx``), which one set of input groups cannot describe."""
    first = parts[0]
    if any(p.method != first.method or not torch.equal(p.g_idx, first.g_idx) for p in parts):
        return None
    if any(p.scales.shape[0] != first.scales.shape[0] for p in parts):
        return None
    return Int4Weight(
        first.method,
        torch.cat([p.qweight for p in parts], dim=1),
        torch.cat([p.qzeros for p in parts], dim=1),
        torch.cat([p.scales for p in parts], dim=1),
        first.g_idx,
    )
