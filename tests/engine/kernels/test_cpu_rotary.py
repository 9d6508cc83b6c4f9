"""The CPU C++ rotate-half RoPE (bit-identical to the torch ops it replaces) and KV store
(rows written where ``loc`` says, k and v read where they lie inside qkv)."""

from __future__ import annotations

import pytest
import torch

from engine.config.model_config import RopeConfig
from engine.kernels.cpu import cpu_kernels_for_heads, load_cpu_kernels
from engine.layers.rotary import RotaryEmbedding
from engine.memory.kv_pool import KVPool

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def kernels():
    loaded = load_cpu_kernels()
    assert loaded is not None, "the CPU kernels did not build; see the warning logged"
    return loaded


def _torch_rotate(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    swapped = torch.cat((x[..., half:], x[..., :half]), dim=-1)
    rotated = x * cos
    rotated += swapped.mul_(sin_signed)
    return rotated


@pytest.mark.parametrize("tokens", [1, 32, 700])
@pytest.mark.parametrize("head_dim, heads", [(64, 12), (128, 5), (16, 3)])
def test_rotary_is_bit_identical_to_torch(kernels, tokens: int, head_dim: int, heads: int) -> None:
    rope = RotaryEmbedding(RopeConfig(theta=100000.0), head_dim, 4096, CPU)
    angles = rope.lookup(torch.randint(0, 4096, (tokens,)), torch.float32)
    qkv = torch.randn(tokens, (heads + 2) * head_dim) * 4
    x = qkv[:, : heads * head_dim].view(tokens, heads, head_dim)  # tokens lie apart
    assert cpu_kernels_for_heads(x) is kernels
    got = angles.rotate_heads(x)
    assert torch.equal(got, _torch_rotate(x, angles.cos, angles.sin_signed))


def test_store_kv_writes_rows_at_their_slots(kernels) -> None:
    pool = KVPool(2, 3, 64, 100, torch.float32, CPU)
    qkv = torch.randn(5, 15 * 64)
    k = qkv[:, 9 * 64 : 12 * 64].view(5, 3, 64)
    v = qkv[:, 12 * 64 :].view(5, 3, 64)
    loc = torch.tensor([7, 1, 100, 42, 3])
    pool.set_kv(1, loc, k, v)
    assert torch.equal(pool.k_buffer(1)[loc], k) and torch.equal(pool.v_buffer(1)[loc], v)
    assert torch.equal(pool.k_buffer(1)[0], torch.zeros(3, 64)), "the dummy row stays zero"
    with pytest.raises(RuntimeError, match="outside the pool"):
        kernels.store_kv(k, v, pool.k_buffer(0), pool.v_buffer(0), torch.tensor([1, 2, 3, 4, 101]))


def test_heads_views_that_the_kernels_cannot_read_take_the_torch_path() -> None:
    x = torch.randn(4, 3, 64)
    assert cpu_kernels_for_heads(x.transpose(0, 1)) is None  # heads not contiguous in a token
    assert cpu_kernels_for_heads(x.to(torch.bfloat16)) is None
    assert cpu_kernels_for_heads(x[..., :32]) is None
