"""Linear layers with weights pre-packed for oneDNN, the CPU path's matrix multiplications.

``F.linear`` hands an fp32 weight to the BLAS in its plain layout, which is re-blocked on
every call; a weight reordered once into oneDNN's blocked layout (what torch.compile's
CPU backend does with frozen weights) makes the decode-sized products markedly faster.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)

# NOTE: the batch size oneDNN picks the blocking for; any batch size runs on the result.
_PACKING_BATCH_HINT = 32


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    """oneDNN packing pays on CPU in fp32 (bf16 needs AVX-512 or AVX-NE-CONVERT)."""
    return device.type == "cpu" and dtype == torch.float32 and torch.backends.mkldnn.is_available()


class PackedLinear(nn.Module):
    """``F.linear(x, weight, bias)`` for 2-D ``x``, on a weight reordered for oneDNN."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.in_features = weight.shape[1]
        self.out_features = weight.shape[0]
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _PACKING_BATCH_HINT)
        # NOTE: buffers, not parameters: nothing trains, and state_dict stays the checkpoint's.
        self.register_buffer("packed_weight", packed, persistent=False)
        self.register_buffer("bias", None if bias is None else bias.detach(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")


def pack_linear_layers(model: nn.Module) -> int:
    """Replaces every ``nn.Linear`` in ``model`` by a ``PackedLinear``; returns how many."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, PackedLinear(child.weight, child.bias))
                replaced += 1
    return replaced
