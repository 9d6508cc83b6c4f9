import pytest
import torch

from engine.memory import ReqToTokenPool


def test_alloc_until_full_then_none() -> None:
    pool = ReqToTokenPool(max_reqs=3, max_context_len=8)
    assert [pool.alloc(), pool.alloc(), pool.alloc()] == [0, 1, 2]
    assert pool.available_size() == 0
    assert pool.alloc() is None


def test_free_makes_row_reusable_and_rejects_double_free() -> None:
    pool = ReqToTokenPool(max_reqs=2, max_context_len=8)
    a = pool.alloc()
    assert a is not None
    pool.free(a)
    assert pool.available_size() == 2
    with pytest.raises(ValueError):
        pool.free(a)
    with pytest.raises(ValueError):
        pool.free(5)


def test_table_shape_dtype_and_zero_init() -> None:
    pool = ReqToTokenPool(max_reqs=2, max_context_len=5)
    assert pool.req_to_token.shape == (2, 5)
    assert pool.req_to_token.dtype == torch.int64
    assert pool.req_to_token.abs().sum().item() == 0


def test_write_sets_a_range_of_a_row() -> None:
    pool = ReqToTokenPool(max_reqs=2, max_context_len=6)
    idx = pool.alloc()
    assert idx is not None
    pool.write(idx, 0, torch.tensor([5, 6, 7]))
    pool.write(idx, 3, torch.tensor([9]))
    assert pool.req_to_token[idx, :4].tolist() == [5, 6, 7, 9]
    assert pool.req_to_token[1 - idx].abs().sum().item() == 0
    with pytest.raises(ValueError):
        pool.write(idx, 4, torch.tensor([1, 2, 3]))


def test_write_each_sets_one_slot_per_row_in_one_write_and_journals_it() -> None:
    """A decode step's writes: request rows and positions given on the device too."""
    pool = ReqToTokenPool(max_reqs=3, max_context_len=6)
    pool.keep_journal()
    rows, positions = [2, 0], [4, 1]
    on_device = (torch.tensor(rows), torch.tensor(positions))
    pool.write_each(rows, positions, torch.tensor([33, 11]), on_device)
    assert pool.req_to_token[2, 4] == 33 and pool.req_to_token[0, 1] == 11
    assert pool.req_to_token.abs().sum().item() == 44
    assert pool.take_journal() == [(2, 4, [33]), (0, 1, [11])]
    with pytest.raises(ValueError):
        pool.write_each([1], [6], torch.tensor([5]), (torch.tensor([1]), torch.tensor([6])))


def test_clear() -> None:
    pool = ReqToTokenPool(max_reqs=2, max_context_len=4)
    pool.alloc()
    pool.alloc()
    pool.clear()
    assert pool.available_size() == 2
    assert pool.alloc() == 0
