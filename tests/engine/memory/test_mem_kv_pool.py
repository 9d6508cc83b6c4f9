import psutil
import pytest
import torch

from engine.memory import KVPool, available_memory_bytes, memory_budget_bytes


def make_pool(dtype: torch.dtype = torch.float16) -> KVPool:
    return KVPool(num_layers=2, num_kv_heads=3, head_dim=4, size=10, dtype=dtype, device="cpu")


def test_buffer_shapes_include_dummy_row() -> None:
    pool = make_pool()
    for layer in range(2):
        assert pool.k_buffer(layer).shape == (11, 3, 4)
        assert pool.v_buffer(layer).shape == (11, 3, 4)
        assert pool.k_buffer(layer).dtype == torch.float16


def test_set_kv_reads_back_and_casts() -> None:
    pool = make_pool(torch.bfloat16)
    loc = torch.tensor([3, 7, 1])
    k = torch.randn(3, 3, 4, dtype=torch.float32)
    v = torch.randn(3, 3, 4, dtype=torch.float32)
    pool.set_kv(1, loc, k, v)
    assert pool.k_buffer(1).dtype == torch.bfloat16
    torch.testing.assert_close(pool.k_buffer(1)[loc], k.to(torch.bfloat16))
    torch.testing.assert_close(pool.v_buffer(1)[loc], v.to(torch.bfloat16))


def test_layers_are_independent() -> None:
    pool = make_pool(torch.float32)
    pool.k_buffer(0).zero_()
    pool.k_buffer(1).zero_()
    pool.set_kv(0, torch.tensor([2]), torch.ones(1, 3, 4), torch.ones(1, 3, 4))
    assert pool.k_buffer(0)[2].sum().item() == 12
    assert pool.k_buffer(1).abs().sum().item() == 0


def test_bytes_per_token() -> None:
    assert KVPool.bytes_per_token(2, 3, 4, torch.float16) == 2 * 2 * 3 * 4 * 2
    assert KVPool.bytes_per_token(32, 8, 128, torch.bfloat16) == 131072
    assert KVPool.bytes_per_token(1, 1, 1, torch.float32) == 8


def test_size_from_memory_accounts_for_dummy_row() -> None:
    per_token = KVPool.bytes_per_token(2, 3, 4, torch.float16)
    assert KVPool.size_from_memory(2, 3, 4, torch.float16, per_token * 101) == 100
    assert KVPool.size_from_memory(2, 3, 4, torch.float16, per_token * 101 + 5) == 100
    assert KVPool.size_from_memory(2, 3, 4, torch.float16, per_token) == 0
    assert KVPool.size_from_memory(2, 3, 4, torch.float16, 0) == 0


def test_memory_budget_on_cpu_uses_psutil() -> None:
    available = available_memory_bytes("cpu")
    assert available > 0
    assert abs(available - psutil.virtual_memory().available) < available // 10
    budget = memory_budget_bytes(torch.device("cpu"), 0.5)
    assert 0 < budget <= available
    with pytest.raises(ValueError):
        memory_budget_bytes("cpu", 0.0)
    with pytest.raises(ValueError):
        memory_budget_bytes("cpu", 1.5)


def test_invalid_pool_arguments() -> None:
    with pytest.raises(ValueError):
        KVPool(num_layers=0, num_kv_heads=1, head_dim=1, size=1, dtype=torch.float16, device="cpu")
