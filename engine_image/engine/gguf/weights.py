"""A GGUF file's tensors, memory-mapped, as BlockTensors in Hugging Face's row order."""

from __future__ import annotations

import mmap
import warnings
from collections import Counter
from pathlib import Path

import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from engine.config.model_config import ModelConfig
from engine.core.errors import UnsupportedModelError
from engine.gguf.header import TensorInfo, read_header
from engine.gguf.hparams import architecture
from engine.kernels.cpu.quantized import PACKABLE_TYPES
from engine.layers.block_tensor import BlockTensor

Q = GGMLQuantizationType
# NOTE: the types the CPU kernels repack (engine.layers.quantized_linear), and F32: what the
# engine serves at the file's size. It refuses the rest rather than widen them at load.
SUPPORTED_TYPES: tuple[GGMLQuantizationType, ...] = tuple(sorted(PACKABLE_TYPES | {Q.F32}))
_FLOAT_DTYPES = {Q.F32: torch.float32, Q.F16: torch.float16, Q.BF16: torch.bfloat16}


class GGUFWeights:
    """The tensors of one GGUF file by their GGUF names (``blk.3.attn_q.weight``).

    NOTE: the file is mapped read-only: a BlockTensor's data is a view of the page cache, not
    a copy, until a layer repacks it; ``release_pages`` then lets the kernel drop the pages
    read so far from this process's resident set (they stay in the page cache).
    """

    def __init__(self, path: Path, config: ModelConfig) -> None:
        self.path = path
        header = read_header(path)
        self.arch = architecture(header)
        self._config = config
        self._tensors = header.tensors
        counts = Counter(info.qtype for info in self._tensors.values())
        unsupported = sorted(qtype.name for qtype in counts if qtype not in SUPPORTED_TYPES)
        if unsupported:
            supported = ", ".join(qtype.name for qtype in SUPPORTED_TYPES)
            raise UnsupportedModelError(
                f"GGUF quant type {', '.join(unsupported)} in {path.name} is not supported (supported: {supported})"
            )
        # NOTE: the most common first, so the file's main type leads (Q4_1 before Q8_0, F32).
        self.quant_types = tuple(qtype.name for qtype, _ in counts.most_common())
        self.unread = set(self._tensors)
        with path.open("rb") as file:
            self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)

    def __contains__(self, name: str) -> bool:
        return name in self._tensors

    def matrix(self, name: str) -> BlockTensor:
        """The 2-D weight ``name`` as ``[out_features, in_features]`` in Hugging Face's row order."""
        info = self._tensors[name]
        if len(info.shape) != 2:
            raise UnsupportedModelError(f"GGUF tensor {name} has {len(info.shape)} dimensions, expected 2")
        cols, rows = info.shape  # NOTE: GGML lists the fastest-varying dimension first
        if info.qtype in _FLOAT_DTYPES:
            data = self._view(info, _FLOAT_DTYPES[info.qtype]).view(rows, cols)
        else:
            block_size, type_size = GGML_QUANT_SIZES[info.qtype]
            data = self._view(info, torch.uint8).view(rows, cols // block_size * type_size)
        block = BlockTensor(info.qtype, rows, cols, data)
        self.unread.discard(name)
        heads = self._permuted_heads(name)
        return block if heads is None else block.select_rows(_unpermute_index(rows, heads))

    def vector(self, name: str) -> torch.Tensor:
        """The 1-D float tensor ``name`` (a norm's weight, a bias) as float32."""
        info = self._tensors[name]
        if info.qtype not in (Q.F32, Q.F16) or len(info.shape) != 1:
            raise UnsupportedModelError(f"GGUF tensor {name} is {info.qtype.name} {list(info.shape)}, expected a float vector")
        self.unread.discard(name)
        values = self._view(info, _FLOAT_DTYPES[info.qtype]).float()
        heads = self._permuted_heads(name)
        return values if heads is None else values[_unpermute_index(values.numel(), heads)]

    def release_pages(self) -> None:
        """Drops the mapped pages read so far from the resident set; they are read back on use."""
        self._map.madvise(mmap.MADV_DONTNEED)

    def _view(self, info: TensorInfo, dtype: torch.dtype) -> torch.Tensor:
        # NOTE: the map is read-only, and torch warns that it does not enforce that; no
        # consumer writes to a BlockTensor's data.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.frombuffer(self._map, dtype=dtype, count=info.nbytes // dtype.itemsize, offset=info.offset)

    def _permuted_heads(self, name: str) -> int | None:
        """How many heads llama.cpp's converter interleaved ``name``'s rows over, if it did.

        NOTE: for the ``llama`` architecture only, the converter reorders each q/k head's rows
        from rotate-half order to interleaved pairs (GPT-J style, what ggml's rope expects);
        transformers' GGUF loader undoes the same.
        """
        if self.arch != "llama":
            return None
        if ".attn_q." in name:
            return self._config.num_heads
        if ".attn_k." in name:
            return self._config.num_kv_heads
        return None


def _unpermute_index(rows: int, heads: int) -> torch.Tensor:
    """For each Hugging Face row, the GGUF row that holds it.

    Within a head of ``d`` rows, HF row ``p * d/2 + i`` (half ``p``, pair ``i``) is GGUF row ``2 * i + p``.
    """
    head_dim = rows // heads
    head = torch.arange(heads).view(heads, 1, 1) * head_dim
    half = torch.arange(2).view(1, 2, 1)
    pair = torch.arange(head_dim // 2).view(1, 1, head_dim // 2)
    return (head + 2 * pair + half).reshape(-1)
