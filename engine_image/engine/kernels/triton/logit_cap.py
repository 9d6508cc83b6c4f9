"""Gemma 2's attention logit soft-capping, inlined into the attention kernels."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def cap_logits(scores: tl.tensor, cap: tl.constexpr) -> tl.tensor:
    """``cap * tanh(scores / cap)``, tanh written with exp (1 - 2 / (e^2x + 1): saturates to
    ±1 without a NaN) so that it runs compiled and in the interpreter alike."""
    return cap * (1.0 - 2.0 / (tl.exp(2.0 * scores / cap) + 1.0))
