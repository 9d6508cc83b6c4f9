"""Random GGUF weights for the quantized kernels' tests and micro-benchmark.

Block types the ``gguf`` package can quantize are quantized from normal values; K-quants are
random bytes under small positive fp16 super-block scales (every byte pattern of their quants
and sub-block scales is valid, so ``gguf``'s dequantizer reads them all).
"""

from __future__ import annotations

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import quantize

from engine.layers.block_tensor import BlockTensor

T = GGMLQuantizationType
QUANTIZABLE = frozenset({T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0})
HALF_TYPES = (T.BF16, T.F16)


def random_block_tensor(qtype: GGMLQuantizationType, rows: int, cols: int, seed: int = 0) -> BlockTensor:
    rng = np.random.default_rng(seed)
    if qtype in HALF_TYPES:
        dtype = torch.bfloat16 if qtype == T.BF16 else torch.float16
        return BlockTensor(qtype, rows, cols, torch.from_numpy(rng.standard_normal((rows, cols), np.float32)).to(dtype))
    if qtype in QUANTIZABLE:
        data = quantize(rng.standard_normal((rows, cols), np.float32), qtype)
        return BlockTensor(qtype, rows, cols, torch.from_numpy(data))
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (rows * cols // block_size, type_size), dtype=np.uint8)
    scales = (rng.random((len(blocks), 2)) * 0.01 + 1e-3).astype(np.float16).view(np.uint8)
    if qtype == T.Q6_K:
        blocks[:, -2:] = scales[:, :2]  # d
    else:
        blocks[:, :4] = scales  # d, dmin
    return BlockTensor(qtype, rows, cols, torch.from_numpy(blocks.reshape(rows, -1)))
