"""A process's start-up without the cyclic garbage collector (issue 30).

NOTE: CPython's collector runs each time allocations outnumber deallocations by 700, over and
over while a process imports torch, the model code or the web stack (a million objects): a
quarter of those imports' CPU time (the scheduler's: 1.4-1.9 s → 1.1-1.4 s on two cores).
What a start-up makes (modules, classes, the app) lives as long as the process, so it is
frozen afterwards (`gc.freeze`): no later collection walks it either.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def uncollected_start_up() -> Iterator[None]:
    """Within: no cyclic collection. After: what exists is frozen, and collection resumes."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
