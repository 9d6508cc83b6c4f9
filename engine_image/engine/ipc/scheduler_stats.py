"""One snapshot of the scheduler's state: what /server_info and /metrics report."""

from __future__ import annotations

import msgspec


class KVCacheStats(msgspec.Struct, frozen=True):
    """The KV pool and the radix cache, in tokens."""

    pool_free_tokens: int
    pool_used_tokens: int
    radix_cache_tokens: int
    radix_cache_evictable_tokens: int


class SchedulerStats(msgspec.Struct, frozen=True, tag=True):
    """The scheduler process's answer to a ServerInfoRequest.

    ``model_path`` and ``weight_version`` are those of the weights serving now (a weight
    update changes both); ``kv`` is None for an encoder model, which has no KV cache. The
    ``weights_*`` fields say how the weights are stored and multiplied.
    """

    model_path: str
    weight_version: int
    max_total_tokens: int
    context_length: int
    device: str
    dtype: str
    num_running_reqs: int
    num_waiting_reqs: int
    kv: KVCacheStats | None
    weights_format: str = "safetensors"  # or "gguf"
    weights_quant_types: tuple[str, ...] = ()  # a GGUF file's types, the most common first
    weights_kernel: str = ""  # a GGUF model's kernel path, e.g. "dequantized to bfloat16 at load"
    kv_pool_bytes: int = 0  # the K and V buffers of max_total_tokens tokens; 0 without a KV cache
    kv_pool_dtype: str = ""  # what they hold: the model's dtype, "bfloat16" or "float8_e4m3fn" (--kv-cache-dtype)
