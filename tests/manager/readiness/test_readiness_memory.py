"""The memory estimate: exact numbers for Llama-3.1-8B, computed by hand from its shapes."""

from __future__ import annotations

from manager.readiness.memory import GIB, estimate_memory

LLAMA_31_8B = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
}


def llama_params(c: dict[str, int]) -> int:
    hidden, inter = c["hidden_size"], c["intermediate_size"]
    head_dim = hidden // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * head_dim
    attention = 2 * hidden * hidden + 2 * hidden * kv  # q, o; k, v
    mlp = 3 * hidden * inter  # gate, up, down
    norms = 2 * hidden
    embeddings = 2 * c["vocab_size"] * hidden  # embed_tokens and an untied lm_head
    return c["num_hidden_layers"] * (attention + mlp + norms) + embeddings + hidden


def test_llama_31_8b_bf16_at_8192_tokens() -> None:
    params = llama_params(LLAMA_31_8B)
    assert params == 8_030_261_248
    weights = params * 2

    estimate = estimate_memory(LLAMA_31_8B, weights, context_tokens=8192, kv_dtype_bytes=2)

    assert estimate.weights == 16_060_522_496  # ≈ 16.06 GB
    assert estimate.kv_cache == 2 * 32 * 8 * 128 * 2 * 8192 == GIB
    assert estimate.overhead == GIB + weights // 10
    assert estimate.total == estimate.weights + estimate.kv_cache + estimate.overhead


def test_explicit_head_dim_wins_over_hidden_over_heads() -> None:
    config = {**LLAMA_31_8B, "head_dim": 256}
    estimate = estimate_memory(config, 0, context_tokens=1, kv_dtype_bytes=2)
    assert estimate.kv_cache == 2 * 32 * 8 * 256 * 2
