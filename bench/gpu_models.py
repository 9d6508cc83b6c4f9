"""The model shapes the GPU bench runs, and engine ModelRunners built on random weights of
those shapes, made on the device (nothing downloaded, nothing written to disk but config.json).

A shape is a Hugging Face config.json's values (the fields the engine and transformers read).
The checkpoint's tensor names and shapes come from transformers' model class built on the
meta device (no memory); each tensor is drawn on the bench's device and handed to the
engine's own loader (``LlamaFamilyForCausalLM.load_weights``) in place of the safetensors
reader, so a runner's build is the engine's real one minus the disk: the weights are in
place, and what is timed is the model's construction, the copy into its fused parameters,
the KV pool and the CUDA graph capture.
"""

from __future__ import annotations

import gc
import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

import torch

if TYPE_CHECKING:
    from engine.runtime.model_runner import ModelRunner

# NOTE: meta-llama/Meta-Llama-3-8B's config.json (Llama-3.1-8B differs only in its RoPE
# scaling and context): untied 128,256-row embedding and head, GQA 32/8 heads of 128.
LLAMA3_8B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "torch_dtype": "bfloat16",
}

# NOTE: Qwen/Qwen2.5-0.5B-Instruct's config.json: tied embedding, q/k/v biases.
QWEN25_05B_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "use_sliding_window": False,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "torch_dtype": "bfloat16",
}

# NOTE: a two-layer Llama for the bench's CPU smoke run (tests/bench): untied, like the 8B.
TINY_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 512,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "bfloat16",
}


@dataclass(frozen=True)
class Shape:
    key: str  # what --shapes names
    label: str  # the model whose shape it is
    config: dict[str, Any]

    @property
    def attention_heads(self) -> tuple[int, int, int]:
        """(query heads, KV heads, head dim)."""
        c = self.config
        heads = int(c["num_attention_heads"])
        return heads, int(c["num_key_value_heads"]), int(c["hidden_size"]) // heads


SHAPES: dict[str, Shape] = {
    s.key: s
    for s in (
        Shape("8b", "Llama-3-8B", LLAMA3_8B_CONFIG),
        Shape("0.5b", "Qwen2.5-0.5B", QWEN25_05B_CONFIG),
        Shape("tiny", "a 2-layer Llama", TINY_CONFIG),
    )
}


def parse_shapes(text: str) -> tuple[Shape, ...]:
    """``8b,0.5b`` -> those shapes, in that order; ValueError naming the unknown ones."""
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SHAPES]
    if unknown or not keys:
        raise ValueError(f"unknown shape(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(SHAPES)}")
    return tuple(SHAPES[k] for k in dict.fromkeys(keys))


def checkpoint_tensors(config: dict[str, Any]) -> list[tuple[str, torch.Size]]:
    """The Hugging Face checkpoint's (name, shape) for ``config``: transformers' model class on
    the meta device; a tied head is one tensor, the embedding's (as save_pretrained writes it)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    hf_config = AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    return [(name, p.shape) for name, p in model.named_parameters()]


def random_weights(config: dict[str, Any], device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Every checkpoint tensor drawn on ``device``: norms 1, the rest N(0, 0.02) (transformers'
    initializer_range), seeded."""
    generator = torch.Generator(device=device).manual_seed(0)
    weights = {}
    for name, shape in checkpoint_tensors(config):
        tensor = torch.empty(shape, dtype=dtype, device=device)
        if name.endswith("norm.weight"):
            tensor.fill_(1.0)
        else:
            tensor.normal_(0.0, 0.02, generator=generator)
        weights[name] = tensor
    return weights


@dataclass(frozen=True)
class RunnerSpec:
    """What a bench runner is built with, besides its shape."""

    device: torch.device
    dtype: str  # the engine's --dtype
    context_length: int
    max_running_requests: int
    attention_backend: str | None  # None: the engine's default for the device


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class RandomModel:
    """A shape's config.json in a temporary folder and its random weights on the device, from
    which ModelRunners are built (``build``) as often as needed, each timed to ready."""

    def __init__(self, shape: Shape, spec: RunnerSpec) -> None:
        self.shape = shape
        self.spec = spec
        self._folder = tempfile.TemporaryDirectory(prefix=f"gomgr-gpu-bench-{shape.key}-")
        Path(self._folder.name, "config.json").write_text(json.dumps(shape.config))
        weight_dtype = torch.float32 if spec.dtype == "float32" else torch.bfloat16
        self.weights = random_weights(shape.config, spec.device, weight_dtype)
        sync(spec.device)

    @property
    def weight_bytes(self) -> int:
        """The checkpoint's bytes (a tied head counted once)."""
        return sum(t.numel() * t.element_size() for t in self.weights.values())

    def _iterate(self, model_path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
        assert Path(model_path) == Path(self._folder.name), model_path
        yield from self.weights.items()

    def build(self, *, cuda_graphs: bool) -> tuple[ModelRunner, float]:
        """A runner on these weights and the seconds from the call to ready (CUDA graphs
        captured, when on)."""
        from engine.engine_config import EngineConfig
        from engine.runtime.model_runner import ModelRunner

        spec = self.spec
        config = EngineConfig(
            model_path=self._folder.name, device=spec.device.type, dtype=spec.dtype,
            context_length=spec.context_length, max_running_requests=spec.max_running_requests,
            # NOTE: room for every request at full context, on any device (CPU's default is one).
            max_total_tokens=spec.max_running_requests * spec.context_length,
            attention_backend=spec.attention_backend, disable_cuda_graph=not cuda_graphs,
        )
        sync(spec.device)
        start = time.perf_counter()
        # NOTE: the engine's safetensors reader is the one step left out: the runner's loader
        # takes the tensors already on the device.
        with mock.patch("engine.runtime.model_runner.iterate_weights", self._iterate):
            runner = ModelRunner(config)
        sync(spec.device)
        return runner, time.perf_counter() - start

    def close(self) -> None:
        self.weights.clear()
        self._folder.cleanup()
        release_memory(self.spec.device)


def release_memory(device: torch.device) -> None:
    """Frees what dropped runners and weights held, so the next shape has the device's memory."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
