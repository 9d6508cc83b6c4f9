"""The scheduler child's OpenMP threads are bound one per CPU; nothing else is."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from engine.server.thread_binding import bound_omp_threads, scheduler_cpu_affinity

_BINDINGS = ("GOMP_CPU_AFFINITY", "OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY")


def _affinity_after_a_parallel_op(queue: multiprocessing.Queue) -> None:
    import torch

    torch.ones(1 << 22).sum()
    queue.put(sorted(os.sched_getaffinity(0)))


def _child_affinity() -> list[int]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_affinity_after_a_parallel_op, args=(queue,))
    child.start()
    try:
        return queue.get(timeout=120)
    finally:
        child.join(timeout=30)


@pytest.fixture
def no_operator_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _BINDINGS:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="binding needs at least two CPUs")
@pytest.mark.usefixtures("no_operator_binding")
def test_a_child_spawned_inside_binds_its_threads_and_later_children_do_not() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    with bound_omp_threads():
        bound = _child_affinity()
    # NOTE: libgomp binds the main thread, OpenMP thread 0, to the first CPU of the list.
    assert bound == allowed[:1]
    assert "GOMP_CPU_AFFINITY" not in os.environ
    assert _child_affinity() == allowed


@pytest.mark.usefixtures("no_operator_binding")
def test_an_operators_binding_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_PROC_BIND", "close")
    assert scheduler_cpu_affinity() is None
    with bound_omp_threads():
        assert "GOMP_CPU_AFFINITY" not in os.environ
