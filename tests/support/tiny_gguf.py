"""Small real GGUF files for tests, written with the gguf package's GGUFWriter (the reference
writer llama.cpp's converters use)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter


def write_tiny_gguf(
    path: Path,
    *,
    arch: str = "llama",
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | list[int] = 2,
    embedding: int = 64,
    context: int = 2048,
    key_length: int | None = None,
    value_length: int | None = None,
    vocab: int = 300,
    padding_bytes: int = 4096,
) -> Path:
    """A GGUF with a llama.cpp-style header (general.*, <arch>.*, a tokenizer vocabulary) and
    one F32 tensor of `padding_bytes` (the file's bulk, as weights are)."""
    writer = GGUFWriter(path, arch)
    writer.add_name("Tiny")
    writer.add_block_count(layers)
    writer.add_context_length(context)
    writer.add_embedding_length(embedding)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    if key_length is not None:
        writer.add_key_length(key_length)
    if value_length is not None:
        writer.add_value_length(value_length)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"token-{i}" for i in range(vocab)])
    writer.add_token_scores([0.0] * vocab)
    writer.add_tensor("output.weight", np.zeros(padding_bytes // 4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
