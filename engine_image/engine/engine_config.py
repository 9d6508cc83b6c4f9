"""Everything that configures an engine instance, shared by the offline API and the server."""

from __future__ import annotations

from dataclasses import dataclass

KV_CACHE_DTYPES = ("auto", "fp8_e4m3", "bf16", "bfloat16")


@dataclass(frozen=True)
class EngineConfig:
    model_path: str
    tokenizer_path: str | None = None
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    # NOTE: SGLang's flag: "fp8_e4m3" stores the KV pool in float8_e4m3fn with a scale per
    # layer for K and V (the checkpoint's k_scale/v_scale, else 1.0); "bf16" (or "bfloat16")
    # in bfloat16 on CPU, half the bytes of the float32 pool the CPU kernels otherwise read;
    # auto: the model dtype.
    kv_cache_dtype: str = "auto"
    device: str = "auto"  # auto | cpu | cuda
    context_length: int | None = None  # default: the model's max_position_embeddings
    max_total_tokens: int | None = None  # KV pool size; default: runtime/kv_pool_size.py
    mem_fraction_static: float | None = None  # default: 0.85 of free VRAM; on CPU see runtime/kv_pool_size.py
    # Max new tokens in one prefill batch; -1 disables chunking; default: per device
    # (see ``prefill_chunk``).
    chunked_prefill_size: int | None = None
    max_running_requests: int = 128
    disable_radix_cache: bool = False
    attention_backend: str | None = None  # default: triton on CUDA (if installed), cpu on CPU, else torch_native
    disable_cuda_graph: bool = False
    random_seed: int = 0
    is_embedding: bool = False  # serve embeddings (/encode, /v1/embeddings), not generation
    tp_size: int = 1  # tensor-parallel ranks (engine/distributed); > 1 only in the server
    # The overlap scheduler (scheduler/overlap.py): the next batch is built while the forward runs.
    enable_overlap_schedule: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype must be one of {', '.join(KV_CACHE_DTYPES)}, got {self.kv_cache_dtype!r}")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.context_length is not None and self.context_length < 2:
            raise ValueError(f"context_length must be >= 2, got {self.context_length}")
        if self.max_total_tokens is not None and self.max_total_tokens < 2:
            raise ValueError(f"max_total_tokens must be >= 2, got {self.max_total_tokens}")
        if self.mem_fraction_static is not None and not 0 < self.mem_fraction_static <= 1:
            raise ValueError(f"mem_fraction_static must be in (0, 1], got {self.mem_fraction_static}")
        if self.chunked_prefill_size is not None and self.chunked_prefill_size != -1 and self.chunked_prefill_size < 1:
            raise ValueError(f"chunked_prefill_size must be -1 or >= 1, got {self.chunked_prefill_size}")
        if self.tp_size < 1:
            raise ValueError(f"tp_size must be >= 1, got {self.tp_size}")
        if self.max_running_requests < 1:
            raise ValueError(f"max_running_requests must be >= 1, got {self.max_running_requests}")

    def prefill_chunk(self, device_type: str) -> int | None:
        """The prefill token budget per step on a ``device_type`` ("cpu", "cuda") device;
        None when chunking is disabled.

        NOTE: the default is SGLang's 2,048 tokens, and 1,024 on CPU. On CPU the step's
        activations stay in the process (runtime/host_malloc.py) and grow with its tokens:
        SmolLM2-135M's heap grew by 0.23 GiB over one 2,048-token prefill and 0.11 GiB over a
        1,024-token one, and issue #30 holds its whole engine under 1.5 GiB; with the panel
        kernel (kernels/cpu/linear.cpp) 2,048 prefills 1.06x the tokens/s of 1,024
        (docs/benchmarks.md). On CPU it was 1,024 before, while oneDNN ran the matrix products.
        """
        if self.chunked_prefill_size == -1:
            return None
        if self.chunked_prefill_size is not None:
            return self.chunked_prefill_size
        return 1024 if device_type == "cpu" else 2048
