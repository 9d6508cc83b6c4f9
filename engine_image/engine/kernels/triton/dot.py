"""The ``tl.dot`` precision the attention kernels use for a storage dtype."""

from __future__ import annotations

import torch


def dot_precision(dtype: torch.dtype) -> str:
    """"ieee" for float32 tensors, "tf32" (ignored by half-precision inputs) otherwise.

    NOTE: Triton's default TF32 would round float32 q/k to a 10-bit mantissa on GPU;
    float32 serving exists to match a reference, so it keeps full precision.
    """
    return "ieee" if dtype == torch.float32 else "tf32"
