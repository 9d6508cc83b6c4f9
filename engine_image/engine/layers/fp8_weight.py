"""A weight matrix as an FP8 checkpoint stores it, and its meaning.

Both formats keep float8_e4m3fn values ``q[n, k]`` and float32 multipliers (``weight_scale``
of compressed-tensors and the ``fp8`` method's per-tensor form, ``weight_scale_inv`` of its
block form, despite the name): ``w[n, k] = q[n, k] * s`` with ``s`` one per tensor, per output
row (``[out, 1]``) or per ``128 x 128`` block (``[ceil(out / 128), ceil(in / 128)]``).

Every layout is read into one: a float32 scale per output row and run of ``block_k`` input
columns (``scale[n, k // block_k]``; ``block_k`` is ``in`` unless blocked), so fused parts
with different per-tensor scales or block rows that a part's height cuts stack as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.config.fp8_quantization import Fp8Config
from engine.kernels.fp8_cast import E4M3


@dataclass(frozen=True)
class Fp8Weight:
    """``weight`` float8_e4m3fn ``[out, in]``; ``scale`` float32 ``[out, ceil(in / block_k)]``."""

    weight: torch.Tensor
    scale: torch.Tensor
    block_k: int

    def __post_init__(self) -> None:
        if self.weight.dtype != E4M3:
            raise ValueError(f"fp8 weight is {self.weight.dtype}, expected float8_e4m3fn")
        n, k = self.weight.shape
        expected = (n, -(-k // self.block_k))
        if tuple(self.scale.shape) != expected:
            raise ValueError(f"fp8 scale has shape {tuple(self.scale.shape)}, expected {expected}")

    @classmethod
    def from_checkpoint(cls, quant: Fp8Config, tensors: dict[str, torch.Tensor]) -> Fp8Weight:
        """From a projection's tensors by leaf name (weight, and weight_scale or weight_scale_inv)."""
        missing = sorted({"weight", quant.scale_leaf} - set(tensors))
        if missing:
            raise ValueError(f"{quant.method} projection lacks {', '.join(missing)}")
        weight, scale = tensors["weight"], tensors[quant.scale_leaf].float()
        n, k = weight.shape
        if quant.block is not None:
            block_n, block_k = quant.block
            rows = -(-n // block_n)
            if scale.shape != (rows, -(-k // block_k)):
                raise ValueError(f"{quant.scale_leaf} has shape {tuple(scale.shape)}, expected {(rows, -(-k // block_k))}")
            return cls(weight, scale.repeat_interleave(block_n, 0)[:n].contiguous(), block_k)
        if quant.strategy == "tensor" and scale.numel() == 1:
            return cls(weight, scale.reshape(1, 1).expand(n, 1).contiguous(), k)
        if quant.strategy == "channel" and scale.numel() == n:
            return cls(weight, scale.reshape(n, 1).contiguous(), k)
        raise ValueError(f"per-{quant.strategy} {quant.scale_leaf} has {scale.numel()} values for {n} rows")

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])

    def dequantize(self) -> torch.Tensor:
        """float32 ``[out, in]`` (exact where the scales have at most 20 significant bits)."""
        columns = self.scale.repeat_interleave(self.block_k, 1)[:, : self.in_features]
        return self.weight.float() * columns

    def to(self, device: torch.device) -> Fp8Weight:
        """The same weight with its tensors on ``device``."""
        return Fp8Weight(self.weight.to(device), self.scale.to(device), self.block_k)


def concat_outputs(parts: Sequence[Fp8Weight]) -> Fp8Weight:
    """The parts stacked along the output (fused q/k/v, gate/up) as one weight."""
    blocks = {p.block_k for p in parts}
    if len(blocks) != 1:
        raise ValueError(f"fused fp8 parts must share their scale blocks, got {sorted(blocks)}")
    return Fp8Weight(
        torch.cat([p.weight for p in parts]), torch.cat([p.scale for p in parts]), parts[0].block_k
    )
