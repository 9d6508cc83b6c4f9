"""vLLM's share of a GPU: `--gpu-memory-utilization`, sized from what NVML sees free.

NOTE: vLLM takes a fraction of the GPU's *total* memory (0.9 unless told) and refuses to
start when less than that is free, whatever the model needs. On a GPU another engine
already uses, the default fails even where readiness found room for the model; so the
share is what is free, up to vLLM's own default, less a margin for the CUDA context that
NVML cannot see until the container creates it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from manager.readiness.gpu import GpuInfo

FLAG = "--gpu-memory-utilization"
VLLM_DEFAULT_SHARE = 0.90
CONTEXT_MARGIN = 0.02


def vllm_memory_flags(engine_args: Iterable[str], gpus: Iterable[GpuInfo]) -> tuple[str, ...]:
    """`--gpu-memory-utilization F` for the GPUs the container gets (the tightest of them);
    nothing where the manifest sets it, where there is no GPU, or where vLLM's default fits."""
    if any(arg.split("=", 1)[0] == FLAG for arg in engine_args):
        return ()
    free_shares = [gpu.free_bytes / gpu.total_bytes for gpu in gpus if gpu.total_bytes > 0]
    if not free_shares:
        return ()
    share = min(VLLM_DEFAULT_SHARE, min(free_shares) - CONTEXT_MARGIN)
    if share >= VLLM_DEFAULT_SHARE:
        return ()
    # NOTE: rounded down, so the fraction vLLM checks is never above what was free.
    return (FLAG, f"{max(0.01, math.floor(share * 100) / 100):.2f}")
