"""float8_e4m3fn decoded from its bytes with integer ops, for the kernels that read FP8 (the
weight-only FP8 GEMM, attention over an FP8 KV pool) on any GPU: no FP8 conversion
instruction (sm89+) is needed. Sign, 4-bit exponent with bias 7, 3-bit mantissa; subnormals
``m * 2^-9``; e4m3fn's NaN codes (0x7F, 0xFF) are never written by the engine nor expected in
a checkpoint.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def e4m3_to_float32(byte):
    """float8_e4m3fn bytes (int32 0..255) as float32."""
    magnitude = byte & 0x7F
    exponent = magnitude >> 3
    mantissa = magnitude & 0x7
    normal = (((exponent + 120) << 23) | (mantissa << 20)).to(tl.float32, bitcast=True)
    value = tl.where(exponent == 0, mantissa.to(tl.float32) * 0.001953125, normal)
    return tl.where(byte >= 128, -value, value)


@triton.jit
def load_kv(ptrs, mask, scale, dtype: tl.constexpr, KV_FP8: tl.constexpr):
    """K or V rows from the pool in ``dtype``: FP8 bytes (a uint8 view) decoded times ``scale``
    when ``KV_FP8``, else as stored."""
    if KV_FP8:
        byte = tl.load(ptrs, mask=mask, other=0).to(tl.int32)
        return (e4m3_to_float32(byte) * scale).to(dtype)
    return tl.load(ptrs, mask=mask, other=0.0).to(dtype)
