"""Linear and embedding layers over GGUF weights kept in (repacked) block form.

On CPU the blocks are repacked once at load for the C++ kernels (``kernels/cpu/quantized``):
the weight stays at about the file's bits per weight, which is what decode, bound by memory
bandwidth, pays for. Where those kernels cannot be built, and on CUDA, the weight is
dequantized once at load to ``dtype`` and multiplied by torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.block_tensor import BlockTensor

CPU = torch.device("cpu")
TORCH_PATH = "torch (dequantized at load)"


def _check_parts(parts: Sequence[BlockTensor]) -> int:
    """The parts' shared width (in_features); raises when there are none or they differ."""
    if not parts:
        raise ValueError("a quantized linear layer needs at least one weight part")
    widths = {part.cols for part in parts}
    if len(widths) != 1:
        raise ValueError(f"fused weight parts must share in_features, got {sorted(widths)}")
    return parts[0].cols


def _dequantized(parts: Sequence[BlockTensor], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    return torch.cat([part.dequantize() for part in parts]).to(device=device, dtype=dtype)


class QuantizedLinear(nn.Module):
    """``y = x @ W^T + bias`` with ``W`` the parts stacked along the output dimension (fused
    q/k/v or gate/up, whose GGUF types may differ); every part has ``in_features`` columns."""

    def __init__(
        self,
        parts: Sequence[BlockTensor],
        bias: torch.Tensor | None = None,
        *,
        device: torch.device = CPU,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.in_features = _check_parts(parts)
        self.out_features = sum(part.rows for part in parts)
        if bias is not None and bias.shape != (self.out_features,):
            raise ValueError(f"bias has shape {tuple(bias.shape)}, expected ({self.out_features},)")
        weight = _dequantized(parts, device, dtype)
        self.kernel_path = TORCH_PATH
        self.weight_bytes = weight.numel() * weight.element_size()
        # NOTE: buffers, not parameters: nothing trains, and the GGUF file is the checkpoint.
        self.register_buffer("weight", weight, persistent=False)
        self.register_buffer(
            "bias", None if bias is None else bias.detach().to(device=device, dtype=dtype), persistent=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x.to(self.weight.dtype), self.weight, self.bias)
        return out.to(x.dtype)


class QuantizedEmbedding(nn.Module):
    """Token embedding rows from a GGUF weight ``[vocab, hidden]``."""

    def __init__(
        self, weight: BlockTensor, *, device: torch.device = CPU, dtype: torch.dtype = torch.float32
    ) -> None:
        super().__init__()
        self.num_embeddings = weight.rows
        self.embedding_dim = weight.cols
        self._block_weight = weight
        self._device = device
        self._dtype = dtype
        self._linear = QuantizedLinear([weight], device=device, dtype=dtype)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids.to(self._linear.weight.device), self._linear.weight)

    def as_linear(self) -> QuantizedLinear:
        """The tied LM head: the same weight, the same memory."""
        return self._linear
