"""A GGUF file's tensors, memory-mapped, as BlockTensors in Hugging Face's row order."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader

from engine.config.model_config import ModelConfig
from engine.core.errors import UnsupportedModelError
from engine.gguf.hparams import architecture
from engine.layers.block_tensor import BlockTensor

Q = GGMLQuantizationType
# The types the quantized layers take (engine.layers.quantized_linear).
SUPPORTED_TYPES: tuple[GGMLQuantizationType, ...] = (
    Q.Q4_0, Q.Q4_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.F16, Q.BF16, Q.F32,
)


class GGUFWeights:
    """The tensors of one GGUF file by their GGUF names (``blk.3.attn_q.weight``).

    NOTE: the reader maps the file read-only: a BlockTensor's data is a view of the page
    cache, not a copy, until a layer repacks it.
    """

    def __init__(self, path: Path, config: ModelConfig) -> None:
        self.path = path
        reader = GGUFReader(path, "r")
        self.arch = architecture(reader)
        self._config = config
        self._tensors = {tensor.name: tensor for tensor in reader.tensors}
        counts = Counter(tensor.tensor_type for tensor in reader.tensors)
        unsupported = sorted(qtype.name for qtype in counts if qtype not in SUPPORTED_TYPES)
        if unsupported:
            supported = ", ".join(qtype.name for qtype in SUPPORTED_TYPES)
            raise UnsupportedModelError(
                f"GGUF quant type {', '.join(unsupported)} in {path.name} is not supported (supported: {supported})"
            )
        # NOTE: the most common first, so the file's main type leads (Q4_1 before Q8_0, F32).
        self.quant_types = tuple(qtype.name for qtype, _ in counts.most_common())
        self.unread = set(self._tensors)

    def __contains__(self, name: str) -> bool:
        return name in self._tensors

    def matrix(self, name: str) -> BlockTensor:
        """The 2-D weight ``name`` as ``[out_features, in_features]`` in Hugging Face's row order."""
        tensor = self._tensors[name]
        if len(tensor.shape) != 2:
            raise UnsupportedModelError(f"GGUF tensor {name} has {len(tensor.shape)} dimensions, expected 2")
        cols, rows = (int(n) for n in tensor.shape)  # NOTE: GGML lists the fastest dimension first
        data = _as_torch(tensor.data)
        if tensor.tensor_type == Q.BF16:
            data = data.view(torch.bfloat16)
        block = BlockTensor(tensor.tensor_type, rows, cols, data)
        self.unread.discard(name)
        heads = self._permuted_heads(name)
        return block if heads is None else block.select_rows(_unpermute_index(rows, heads))

    def vector(self, name: str) -> torch.Tensor:
        """The 1-D float tensor ``name`` (a norm's weight, a bias) as float32."""
        tensor = self._tensors[name]
        if tensor.tensor_type not in (Q.F32, Q.F16) or len(tensor.shape) != 1:
            raise UnsupportedModelError(f"GGUF tensor {name} is {tensor.tensor_type.name} {list(tensor.shape)}, expected a float vector")
        self.unread.discard(name)
        values = _as_torch(tensor.data).float()
        heads = self._permuted_heads(name)
        return values if heads is None else values[_unpermute_index(values.numel(), heads)]

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


def _as_torch(array: np.ndarray) -> torch.Tensor:
    # NOTE: the memory map is read-only, and torch warns that it does not enforce that; no
    # consumer writes to a BlockTensor's data.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


def _unpermute_index(rows: int, heads: int) -> torch.Tensor:
    """For each Hugging Face row, the GGUF row that holds it.

    Within a head of ``d`` rows, HF row ``p * d/2 + i`` (half ``p``, pair ``i``) is GGUF row ``2 * i + p``.
    """
    head_dim = rows // heads
    head = torch.arange(heads).view(heads, 1, 1) * head_dim
    half = torch.arange(2).view(1, 2, 1)
    pair = torch.arange(head_dim // 2).view(1, 1, head_dim // 2)
    return (head + 2 * pair + half).reshape(-1)
