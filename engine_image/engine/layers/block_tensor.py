"""A weight matrix as a GGUF file stores it: rows of quantized blocks, or plain floats.

The GGUF loader (``engine.gguf``) produces these; the quantized layers
(``engine.layers.quantized_linear``) consume them. The ``gguf`` package's dequantizer is the
one reference of what the blocks mean: kernels are tested against it, and it is the torch
fallback where the C++ kernels cannot be built.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

FLOAT_TYPES = frozenset({GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16})


@dataclass(frozen=True)
class BlockTensor:
    """``rows`` x ``cols`` (out_features x in_features) in the GGML type ``qtype``.

    ``data`` is uint8 ``[rows, row_bytes]`` for block types and the float tensor
    ``[rows, cols]`` (float32, float16 or bfloat16) for the float types. It may be a read-only
    view of the memory-mapped file: consumers copy or repack it, never write to it.
    """

    qtype: GGMLQuantizationType
    rows: int
    cols: int
    data: torch.Tensor

    def __post_init__(self) -> None:
        if self.qtype in FLOAT_TYPES:
            expected: tuple[int, ...] = (self.rows, self.cols)
        else:
            block_size, type_size = GGML_QUANT_SIZES[self.qtype]
            if self.cols % block_size:
                raise ValueError(f"{self.qtype.name} rows of {self.cols} values are not whole blocks of {block_size}")
            expected = (self.rows, self.cols // block_size * type_size)
        if tuple(self.data.shape) != expected:
            raise ValueError(f"{self.qtype.name} data has shape {tuple(self.data.shape)}, expected {expected}")

    def select_rows(self, index: torch.Tensor) -> BlockTensor:
        """The rows ``index`` (int64) in that order: a reordering of whole rows is lossless."""
        return BlockTensor(self.qtype, int(index.numel()), self.cols, self.data.index_select(0, index))

    def dequantize(self) -> torch.Tensor:
        """float32 ``[rows, cols]``, as the ``gguf`` package's reference dequantizer gives it."""
        if self.qtype in FLOAT_TYPES:
            return self.data.float()
        values = dequantize(self.data.numpy(), self.qtype)
        return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).reshape(self.rows, self.cols)
