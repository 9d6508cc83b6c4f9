"""GGUF blocks as unsigned integer quants with a float scale and min per group: ``w = scale * q + min``.

Every block type the CPU kernels take reads this way without loss: Q4_0 (``min = -8 d``), Q4_1,
Q5_0 (``min = -16 d``), Q5_1 (llama.cpp's stand-ins for Q4_K/Q5_K in rows not a multiple of 256), Q8_0 (``q + 128``, ``min = -128 d``) and the K-quants, whose 6- or 8-bit sub-block scales times
the fp16 super-block scale are exact in float32. The bit layouts mirror the ``gguf`` package's
dequantizers, which the tests hold these against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

# NOTE: weights per group: one scale and min each; Q6_K's sub-blocks are 16 wide.
GROUP_SIZE = {
    GGMLQuantizationType.Q4_0: 32,
    GGMLQuantizationType.Q4_1: 32,
    GGMLQuantizationType.Q5_0: 32,
    GGMLQuantizationType.Q5_1: 32,
    GGMLQuantizationType.Q8_0: 32,
    GGMLQuantizationType.Q4_K: 32,
    GGMLQuantizationType.Q5_K: 32,
    GGMLQuantizationType.Q6_K: 16,
}
# NOTE: the largest quant of each type: 4-bit types pack two to a byte.
MAX_QUANT = {
    GGMLQuantizationType.Q4_0: 15,
    GGMLQuantizationType.Q4_1: 15,
    GGMLQuantizationType.Q5_0: 31,
    GGMLQuantizationType.Q5_1: 31,
    GGMLQuantizationType.Q8_0: 255,
    GGMLQuantizationType.Q4_K: 15,
    GGMLQuantizationType.Q5_K: 31,
    GGMLQuantizationType.Q6_K: 63,
}


@dataclass(frozen=True)
class UnpackedBlocks:
    """``quants`` uint8 ``[rows, cols]``; ``scale`` and ``min`` float32 ``[rows, cols / group]``.

    NOTE: not tied to GGUF: the AWQ/GPTQ layers (``layers/int4_weight.py``) describe their
    groups this way too, for the same packer (``quantized.pack_groups``).
    """

    quants: np.ndarray
    scale: np.ndarray
    min: np.ndarray


def unpack_blocks(data: np.ndarray, qtype: GGMLQuantizationType, rows: int, cols: int) -> UnpackedBlocks:
    """``data`` uint8 ``[rows, row_bytes]`` of ``qtype`` blocks, as integer quants and groups."""
    type_size = GGML_QUANT_SIZES[qtype][1]
    blocks = np.ascontiguousarray(data).reshape(-1, type_size)
    quants, scale, minimum = _UNPACKERS[qtype](blocks)
    groups = cols // GROUP_SIZE[qtype]
    return UnpackedBlocks(
        quants.reshape(rows, cols).astype(np.uint8),
        scale.reshape(rows, groups).astype(np.float32),
        minimum.reshape(rows, groups).astype(np.float32),
    )


def _fp16(raw: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(raw).view(np.float16).astype(np.float32)


def _nibbles(qs: np.ndarray, n_blocks: int, width: int) -> np.ndarray:
    """Low nibbles of ``width`` bytes, then their high nibbles (GGML's order)."""
    shifted = qs.reshape(n_blocks, -1, 1, width) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    return (shifted & np.uint8(0x0F)).reshape(n_blocks, -1)


def _q4_0(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = _fp16(blocks[:, :2])
    return _nibbles(blocks[:, 2:], len(blocks), 16), d, -8 * d


def _q4_1(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return _nibbles(blocks[:, 4:], len(blocks), 16), _fp16(blocks[:, :2]), _fp16(blocks[:, 2:4])


def _five_bits(blocks: np.ndarray) -> np.ndarray:
    """Q5_0/Q5_1: the 32 high bits (one little-endian uint32) over the nibbles after them."""
    qh = np.ascontiguousarray(blocks[:, -20:-16]).view(np.uint32) >> np.arange(32, dtype=np.uint32)
    quants: np.ndarray = _nibbles(blocks[:, -16:], len(blocks), 16) | ((qh & np.uint32(1)).astype(np.uint8) << np.uint8(4))
    return quants


def _q5_0(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = _fp16(blocks[:, :2])
    return _five_bits(blocks), d, -16 * d


def _q5_1(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return _five_bits(blocks), _fp16(blocks[:, :2]), _fp16(blocks[:, 2:4])


def _q8_0(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = _fp16(blocks[:, :2])
    return blocks[:, 2:] ^ np.uint8(0x80), d, -128 * d


def _k_scales(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K/Q5_K: the eight 6-bit sub-block scales and mins times d and dmin."""
    d, dmin = _fp16(blocks[:, :2]), _fp16(blocks[:, 2:4])
    packed = blocks[:, 4:16].reshape(-1, 3, 4)
    lo, hi, mixed = packed[:, 0], packed[:, 1], packed[:, 2]
    sc = np.concatenate([lo & 0x3F, (mixed & 0x0F) | ((lo >> 2) & 0x30)], axis=-1)
    mn = np.concatenate([hi & 0x3F, (mixed >> 4) | ((hi >> 2) & 0x30)], axis=-1)
    return d * sc.astype(np.float32), -(dmin * mn.astype(np.float32))


def _q4_k(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scale, minimum = _k_scales(blocks)
    return _nibbles(blocks[:, 16:], len(blocks), 32), scale, minimum


def _q5_k(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_blocks = len(blocks)
    scale, minimum = _k_scales(blocks)
    qh = blocks[:, 16:48].reshape(n_blocks, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)
    low = _nibbles(blocks[:, 48:], n_blocks, 32)
    return low | ((qh & np.uint8(1)).reshape(n_blocks, -1) << np.uint8(4)), scale, minimum


def _q6_k(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_blocks = len(blocks)
    low = _nibbles(blocks[:, :128], n_blocks, 64).reshape(n_blocks, -1, 32)
    qh = blocks[:, 128:192].reshape(n_blocks, -1, 1, 32) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    high = (qh & np.uint8(3)).reshape(n_blocks, -1, 32)
    scale = _fp16(blocks[:, 208:210]) * blocks[:, 192:208].view(np.int8).astype(np.float32)
    return (low | (high << np.uint8(4))).reshape(n_blocks, -1), scale, -32 * scale


_UNPACKERS = {
    GGMLQuantizationType.Q4_0: _q4_0,
    GGMLQuantizationType.Q4_1: _q4_1,
    GGMLQuantizationType.Q5_0: _q5_0,
    GGMLQuantizationType.Q5_1: _q5_1,
    GGMLQuantizationType.Q8_0: _q8_0,
    GGMLQuantizationType.Q4_K: _q4_k,
    GGMLQuantizationType.Q5_K: _q5_k,
    GGMLQuantizationType.Q6_K: _q6_k,
}
