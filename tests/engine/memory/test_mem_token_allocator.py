import pytest
import torch

from engine.memory import DUMMY_SLOT, TokenAllocator


def test_alloc_until_exhaustion_then_none() -> None:
    alloc = TokenAllocator(10)
    a = alloc.alloc(4)
    b = alloc.alloc(6)
    assert a is not None and b is not None
    assert alloc.available_size() == 0
    assert alloc.alloc(1) is None
    assert alloc.alloc(0) is not None and alloc.alloc(0).numel() == 0


def test_alloc_larger_than_free_returns_none_and_takes_nothing() -> None:
    alloc = TokenAllocator(5)
    assert alloc.alloc(6) is None
    assert alloc.available_size() == 5


def test_slots_are_1_to_size_int64_distinct_never_dummy() -> None:
    alloc = TokenAllocator(8)
    slots = alloc.alloc(8)
    assert slots is not None
    assert slots.dtype == torch.int64
    assert DUMMY_SLOT not in slots.tolist()
    assert sorted(slots.tolist()) == list(range(1, 9))


def test_free_returns_slots_and_no_duplicates_across_reuse() -> None:
    alloc = TokenAllocator(6, debug=True)
    a = alloc.alloc(4)
    assert a is not None
    alloc.free(a[1:3])
    assert alloc.available_size() == 4
    b = alloc.alloc(4)
    assert b is not None
    live = a[[0, 3]].tolist() + b.tolist()
    assert len(set(live)) == len(live) == 6
    assert alloc.size - alloc.available_size() == 6


def test_free_empty_is_noop() -> None:
    alloc = TokenAllocator(3, debug=True)
    alloc.free(torch.empty(0, dtype=torch.int64))
    assert alloc.available_size() == 3


def test_clear_restores_everything() -> None:
    alloc = TokenAllocator(4)
    alloc.alloc(3)
    alloc.clear()
    assert alloc.available_size() == 4
    assert alloc.alloc(4).tolist() == [1, 2, 3, 4]


def test_debug_rejects_double_free_dummy_and_duplicates() -> None:
    alloc = TokenAllocator(4, debug=True)
    a = alloc.alloc(2)
    assert a is not None
    alloc.free(a)
    with pytest.raises(ValueError, match="double free"):
        alloc.free(a)
    with pytest.raises(ValueError, match="out of range"):
        alloc.free(torch.tensor([DUMMY_SLOT]))
    b = alloc.alloc(4)
    assert b is not None
    with pytest.raises(ValueError, match="duplicate"):
        alloc.free(torch.tensor([b[0].item(), b[0].item()]))


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        TokenAllocator(0)
    with pytest.raises(ValueError):
        TokenAllocator(2).alloc(-1)
