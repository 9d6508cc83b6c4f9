"""Check 4: GPU memory an engine needs (weights + KV cache + overhead) against free VRAM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from manager.readiness.blocker import Blocker
from manager.readiness.gpu import GpuInfo

GIB = 1024**3
# NOTE: runtime overhead = a fixed 1 GiB (CUDA context ~0.3-0.5 GiB, cuBLAS/Triton
# workspaces, CUDA graphs for decode) plus 10% of the weights (activations of a prefill
# chunk and the sampler's logits grow with model width). Conservative on purpose: an
# engine that starts and then runs out of memory is worse than a warning.
OVERHEAD_FIXED_BYTES = GIB
OVERHEAD_WEIGHTS_FRACTION = 0.10
# NOTE: the context sized when the caller gives none: enough for one real conversation,
# capped by the model's own max_position_embeddings. A model's full context (128k for
# Llama 3.1) would demand 16 GiB of KV cache for one request and reject most GPUs.
DEFAULT_CONTEXT_TOKENS = 8192
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    kv_cache: int
    overhead: int
    total: int

    def to_dict(self) -> dict[str, int]:
        return {
            "weights": self.weights,
            "kv_cache": self.kv_cache,
            "overhead": self.overhead,
            "total": self.total,
        }


def kv_cache_bytes(config: Mapping[str, object], context_tokens: int, kv_dtype_bytes: int) -> int:
    """`2 (K and V) * layers * kv_heads * head_dim * dtype_bytes * tokens`."""
    layers = _int(config, "num_hidden_layers")
    heads = _int(config, "num_attention_heads")
    kv_heads = _int(config, "num_key_value_heads") if "num_key_value_heads" in config else heads
    # NOTE: Qwen3 and Gemma give head_dim explicitly (not hidden/heads); others leave it out.
    head_dim = (
        _int(config, "head_dim")
        if config.get("head_dim") is not None
        else _int(config, "hidden_size") // heads
    )
    return 2 * layers * kv_heads * head_dim * kv_dtype_bytes * context_tokens


def estimate_memory(
    config: Mapping[str, object], weights_bytes: int, context_tokens: int, kv_dtype_bytes: int
) -> MemoryEstimate:
    return estimate_from_parts(weights_bytes, kv_cache_bytes(config, context_tokens, kv_dtype_bytes))


def estimate_from_parts(weights_bytes: int, kv_cache: int) -> MemoryEstimate:
    """Weights and KV cache as measured, plus the runtime overhead for those weights."""
    overhead = OVERHEAD_FIXED_BYTES + int(weights_bytes * OVERHEAD_WEIGHTS_FRACTION)
    return MemoryEstimate(weights_bytes, kv_cache, overhead, weights_bytes + kv_cache + overhead)


def config_dtype_bytes(config: Mapping[str, object]) -> int:
    """Bytes per element of the model's compute dtype (the KV cache's dtype); bf16 if unsaid."""
    # NOTE: transformers 5 writes "dtype"; earlier releases wrote "torch_dtype".
    name = config.get("dtype") or config.get("torch_dtype") or "bfloat16"
    return _DTYPE_BYTES.get(str(name), 2)


def context_for(config: Mapping[str, object], context_tokens: int | None) -> int:
    limit = config.get("max_position_embeddings")
    return context_within(limit if isinstance(limit, int) else None, context_tokens)


def context_within(model_limit: int | None, context_tokens: int | None) -> int:
    """The context to size: the one asked for, else the default capped by the model's own."""
    if context_tokens is not None:
        return context_tokens
    return min(DEFAULT_CONTEXT_TOKENS, model_limit) if model_limit else DEFAULT_CONTEXT_TOKENS


def per_rank(estimate: MemoryEstimate, tp_size: int) -> MemoryEstimate:
    """What each of `tp_size` tensor-parallel GPUs holds: 1/N of the weights and of the KV
    cache (KV heads split), and each its own runtime overhead."""
    if tp_size == 1:
        return estimate
    return estimate_from_parts(estimate.weights // tp_size, estimate.kv_cache // tp_size)


def check_vram_fit(
    estimate: MemoryEstimate, gpus: Sequence[GpuInfo], context_tokens: int, tp_size: int = 1
) -> tuple[Blocker, ...]:
    """A blocker when the `tp_size` GPUs with the most free memory cannot each hold their
    share of the estimate (none without GPUs)."""
    if not gpus:
        return ()
    if len(gpus) < tp_size:
        return (_too_few_gpus(tp_size, len(gpus)),)
    chosen = sorted(gpus, key=lambda gpu: gpu.free_bytes, reverse=True)[:tp_size]
    best = chosen[-1]  # NOTE: the tightest of the chosen: every rank needs the same share
    estimate = per_rank(estimate, tp_size)
    if estimate.total <= best.free_bytes:
        return ()
    return (
        Blocker(
            id="model-does-not-fit-vram",
            title=f"The model needs {_gib(estimate.total)} of GPU memory; "
            f"GPU {best.index} has {_gib(best.free_bytes)} free",
            explanation=(
                f"Weights {_gib(estimate.weights)} + KV cache {_gib(estimate.kv_cache)} for "
                f"{context_tokens} tokens + runtime overhead {_gib(estimate.overhead)} = "
                f"{_gib(estimate.total)}, more than the {_gib(best.free_bytes)} free on "
                f"GPU {best.index} ({best.name}, {_gib(best.total_bytes)} total)."
            ),
            fix_steps=(
                (
                    "Free GPU memory: stop other engines (`gomgr ps`, `gomgr stop NAME`) or "
                    "other GPU processes (`nvidia-smi`)."
                ),
                "Or ask for a shorter context (`--context-length`), which shrinks the KV cache.",
                "Or pick a smaller or quantized variant of the model.",
            ),
            severity="blocks",
            blocks=("gpu",),
        ),
    )


def _too_few_gpus(tp_size: int, seen: int) -> Blocker:
    return Blocker(
        id="too-few-gpus-for-tp",
        title=f"--tp-size {tp_size} needs {tp_size} GPUs; NVML sees {seen}",
        explanation="Tensor parallelism runs one engine process per GPU, each on its own GPU.",
        fix_steps=(f"Lower --tp-size to at most {seen} in the manifest's engine_args.",),
        severity="blocks",
        blocks=("gpu",),
    )


def _int(config: Mapping[str, object], key: str) -> int:
    value = config.get(key)
    if isinstance(value, int):
        return value
    raise ValueError(f"config.json has no integer {key!r}")


def _gib(size: int) -> str:
    return f"{size / GIB:.2f} GiB"
