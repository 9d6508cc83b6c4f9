"""Fixtures shared by the sampling-layer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_torch_thread() -> Iterator[None]:
    """Run these tiny-tensor tests on one intra-op thread, restoring the setting after.

    NOTE: on a busy 2-core machine every OpenMP parallel region (even a softmax over a
    3x20 tensor) can stall ~15 ms waiting for a descheduled worker thread; the tests'
    tensors are too small to gain anything from parallelism.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
