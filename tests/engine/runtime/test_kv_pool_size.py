"""The KV pool's size: the flags' when given, else one model context on CPU, not a share of RAM."""

from __future__ import annotations

import psutil
import pytest
import torch

from engine.engine_config import EngineConfig
from engine.memory import KVPool
from engine.runtime.kv_pool_size import CPU_MEM_FRACTION_CAP, kv_pool_tokens

CPU = torch.device("cpu")
# SmolLM2-135M in fp32: 30 layers x 3 KV heads x 64 dims, K and V.
SMOLLM2_BYTES_PER_TOKEN = KVPool.bytes_per_token(30, 3, 64, torch.float32)


def test_the_cpu_default_is_one_model_context() -> None:
    config = EngineConfig(model_path="smollm2")
    assert kv_pool_tokens(config, CPU, SMOLLM2_BYTES_PER_TOKEN, 8192) == 8192


def _tokens_in(fraction: float, bytes_per_token: int) -> tuple[int, int]:
    """Bounds on ``fraction`` of the free RAM in tokens: free memory moves while other
    processes run, so it is read before and after (with 10% slack) around the call."""
    free = psutil.virtual_memory().available
    return int(free * fraction * 0.9) // bytes_per_token, int(free * fraction * 1.1) // bytes_per_token


def test_a_long_context_is_capped_by_a_fifth_of_the_free_ram() -> None:
    config = EngineConfig(model_path="llama-3.1-8b", max_running_requests=1)
    per_token = KVPool.bytes_per_token(32, 8, 128, torch.float32)
    low, high = _tokens_in(CPU_MEM_FRACTION_CAP, per_token)
    assert low <= kv_pool_tokens(config, CPU, per_token, 1 << 30) <= high


def test_a_given_size_or_memory_fraction_wins() -> None:
    given = EngineConfig(model_path="smollm2", max_total_tokens=1234)
    assert kv_pool_tokens(given, CPU, SMOLLM2_BYTES_PER_TOKEN, 8192) == 1234
    # NOTE: a context of 2**30 tokens, so the fraction, not the requests, bounds the pool.
    fraction = EngineConfig(model_path="smollm2", mem_fraction_static=0.01, max_running_requests=1)
    low, high = _tokens_in(0.01, SMOLLM2_BYTES_PER_TOKEN)
    assert low <= kv_pool_tokens(fraction, CPU, SMOLLM2_BYTES_PER_TOKEN, 1 << 30) <= high


def test_a_pool_that_cannot_hold_two_tokens_is_refused() -> None:
    config = EngineConfig(model_path="huge", mem_fraction_static=1e-12)
    with pytest.raises(RuntimeError, match="not enough free memory"):
        kv_pool_tokens(config, CPU, SMOLLM2_BYTES_PER_TOKEN, 8192)
