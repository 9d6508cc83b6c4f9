"""How many tokens the KV pool holds: from the flags, else from the device's memory or the model."""

from __future__ import annotations

import torch

from engine.engine_config import EngineConfig
from engine.memory import memory_budget_bytes

CUDA_MEM_FRACTION = 0.85
# NOTE (issue 30): with no memory flag a CPU engine holds this many full contexts of KV, not a
# share of the RAM, as llama-server holds one context (`-c`, the model's) shared by all its
# slots. One context is what the manager's readiness counts for a model
# (manager/readiness/memory.py) and what its supervisor gives an engine it loads on demand;
# it fits any one request the context allows, and short requests share it by the hundred.
# What does not fit waits: admission reserves each request's whole completion budget
# (scheduler/admission.py), so a chat sent without max_tokens, which may run to the end of
# the context, holds the pool alone until it ends. For SmolLM2-135M in fp32 one context is
# 8,192 tokens x 45 KiB = 0.35 GiB, where the old default, a fifth of the free RAM, was
# 98,528 tokens (4.2 GiB on a 24 GiB desktop), touched as the radix cache filled.
CPU_DEFAULT_CONTEXTS = 1
# NOTE: the cap where a model's context is long (128k tokens of a Llama 3.1 8B in fp32 are
# 32 GiB): a fifth of the RAM free after the weights loaded.
CPU_MEM_FRACTION_CAP = 0.2


def kv_pool_tokens(config: EngineConfig, device: torch.device, bytes_per_token: int, context_length: int) -> int:
    """The pool's size in tokens; RuntimeError when not even two tokens fit.

    ``--max-total-tokens`` is taken as given. ``--mem-fraction-static`` sizes the pool to that
    fraction of the memory free now (on CUDA: the VRAM left after the weights); without either,
    CUDA takes ``CUDA_MEM_FRACTION`` of the free VRAM and CPU ``CPU_DEFAULT_CONTEXTS`` contexts.
    """
    if config.max_total_tokens is not None:
        return config.max_total_tokens
    # NOTE: more slots than every running request at full context can never be used.
    useful = config.max_running_requests * context_length
    if config.mem_fraction_static is not None or device.type == "cuda":
        fraction = config.mem_fraction_static or CUDA_MEM_FRACTION
        size = min(useful, memory_budget_bytes(device, fraction) // bytes_per_token)
    else:
        by_memory = memory_budget_bytes(device, CPU_MEM_FRACTION_CAP) // bytes_per_token
        size = min(useful, CPU_DEFAULT_CONTEXTS * context_length, by_memory)
    if size < 2:
        raise RuntimeError("not enough free memory for a KV cache; lower the context length or free memory")
    return int(size)
