"""Quantizers for GGUF's K types (Q4_K, Q5_K, Q6_K), which the ``gguf`` package only reads.

Simple, vectorised and not llama.cpp's (which searches each sub-block's scale): per
sub-block min/max (Q4_K, Q5_K) or absolute max (Q6_K), the sub-block scales quantized to 6
(Q4_K/Q5_K) or 8 (Q6_K) bits against one fp16 scale per 256-value super-block. The blocks are
valid: ``gguf.quants.dequantize`` reads them back (tests/support/test_k_quants.py checks it).
The layouts are those of gguf.quants' dequantizers.
"""

from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType

QK_K = 256


def quantize_k(values: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    """``values`` ``[rows, cols]`` (cols a multiple of 256) as uint8 ``[rows, row_bytes]``."""
    rows = values.shape[0]
    blocks = values.astype(np.float32).reshape(-1, QK_K)
    if qtype == GGMLQuantizationType.Q6_K:
        packed = _q6_k(blocks)
    elif qtype in (GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q5_K):
        packed = _q45_k(blocks, five_bits=qtype == GGMLQuantizationType.Q5_K)
    else:
        raise ValueError(f"{qtype.name} is not a K type")
    return packed.reshape(rows, -1)


def _f16(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).astype(np.float32)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator == 0, 0.0, numerator / denominator).astype(np.float32)


def _q45_k(blocks: np.ndarray, five_bits: bool) -> np.ndarray:
    n = blocks.shape[0]
    levels = 31 if five_bits else 15
    sub = blocks.reshape(n, 8, 32)
    low = np.minimum(sub.min(axis=-1), 0.0)
    scale = (sub.max(axis=-1) - low) / levels
    d = _f16(scale.max(axis=-1, keepdims=True) / 63)
    dmin = _f16((-low).max(axis=-1, keepdims=True) / 63)
    sc = np.clip(np.rint(_ratio(scale, d)), 0, 63).astype(np.uint8)
    mn = np.clip(np.rint(_ratio(-low, dmin)), 0, 63).astype(np.uint8)
    step = (d * sc)[..., None]
    offset = (dmin * mn)[..., None]
    q = np.clip(np.rint(_ratio(sub + offset, step)), 0, levels).astype(np.uint8)
    scales = np.concatenate(
        [
            sc[:, :4] | ((sc[:, 4:] >> 4) << 6),
            mn[:, :4] | ((mn[:, 4:] >> 4) << 6),
            (sc[:, 4:] & 0x0F) | ((mn[:, 4:] & 0x0F) << 4),
        ],
        axis=-1,
    )
    nibbles = (q & 0x0F).reshape(n, 4, 2, 32)
    qs = (nibbles[:, :, 0, :] | (nibbles[:, :, 1, :] << 4)).reshape(n, 128)
    parts = [d.astype(np.float16).view(np.uint8), dmin.astype(np.float16).view(np.uint8), scales]
    if five_bits:
        high = (q >> 4).astype(np.uint8)
        qh = np.zeros((n, 32), dtype=np.uint8)
        for j in range(8):
            qh |= high[:, j, :] << j
        parts.append(qh)
    parts.append(qs)
    return np.concatenate(parts, axis=-1)


def _q6_k(blocks: np.ndarray) -> np.ndarray:
    n = blocks.shape[0]
    sub = blocks.reshape(n, 16, 16)
    scale = np.abs(sub).max(axis=-1) / 31
    d = _f16(scale.max(axis=-1, keepdims=True) / 127)
    sc = np.clip(np.rint(_ratio(scale, d)), -128, 127).astype(np.int8)
    step = (d * sc)[..., None]
    q = (np.clip(np.rint(_ratio(sub, step)), -32, 31) + 32).astype(np.uint8).reshape(n, QK_K)
    low = (q & 0x0F).reshape(n, 2, 2, 64)
    ql = (low[:, :, 0, :] | (low[:, :, 1, :] << 4)).reshape(n, 128)
    high = (q >> 4).reshape(n, 2, 4, 32)
    qh = (high[:, :, 0, :] | (high[:, :, 1, :] << 2) | (high[:, :, 2, :] << 4) | (high[:, :, 3, :] << 6)).reshape(n, 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), d.astype(np.float16).view(np.uint8)], axis=-1)
