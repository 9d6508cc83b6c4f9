"""The one rounding to FP8 (float8_e4m3fn) the engine does: activations for ``_scaled_mm``
(``layers/fp8_linear.py``) and K/V rows into an FP8 pool (``memory/kv_pool.py``)."""

from __future__ import annotations

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = torch.finfo(E4M3).max


def to_e4m3(x: torch.Tensor, scale: torch.Tensor | float) -> torch.Tensor:
    """``x / scale`` in e4m3, saturated at its largest finite value (e4m3fn has no infinity)."""
    return (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
