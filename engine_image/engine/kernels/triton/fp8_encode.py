"""float32 encoded as float8_e4m3fn bytes with integer ops, for the kernels that write an FP8
KV pool on any GPU: no FP8 conversion instruction (sm89+) is needed. The inverse of
``fp8_decode.e4m3_to_float32``, and bit-identical to the engine's one rounding to FP8 on the
host (``kernels/fp8_cast.to_e4m3``: saturated at ±448, then rounded to nearest even).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def float32_to_e4m3(x):
    """``x`` (float32) as float8_e4m3fn bytes (int32 0..255); NaN is not expected."""
    x = tl.minimum(tl.maximum(x, -448.0), 448.0)
    bits = x.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    magnitude = bits & 0x7FFFFFFF
    exponent = magnitude >> 23
    # NOTE: normal (|x| >= 2^-6): the float32 exponent and top three mantissa bits, rounded to
    # nearest even on the 20 dropped bits (a carry steps the exponent), rebiased 127 -> 7.
    normal = ((magnitude + 0x7FFFF + ((magnitude >> 20) & 1)) >> 20) - (120 << 3)
    # NOTE: subnormal: |x| * 2^9 rounded to nearest even, from the significand with its
    # implicit bit; 8 lands on the smallest normal's code (0x08), as it should.
    significand = (magnitude & 0x7FFFFF) | 0x800000
    shift = tl.minimum(141 - exponent, 25)
    kept = significand >> shift
    dropped = significand & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    round_up = (dropped > half) | ((dropped == half) & ((kept & 1) == 1))
    subnormal = kept + round_up.to(tl.int32)
    return tl.where(exponent >= 121, normal, subnormal) | sign
