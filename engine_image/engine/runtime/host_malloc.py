"""glibc malloc tuning for the CPU path: freed activations stay in the process.

A CPU forward allocates and frees tens of megabytes of activations per layer. With glibc's
defaults, blocks that large are mapped fresh from the kernel (or the heap is trimmed after
they are freed), so every forward faults its activation pages in again: 7% of a prefill
step on SmolLM2 at 1,024 tokens. Raising the mmap threshold and the trim threshold keeps
those pages, much as a GPU caching allocator keeps device memory (vLLM's CPU backend
preloads tcmalloc for the same reason). Only long-lived buffers above 32 MiB (weights, the
KV pool) are still mapped on their own.

What is freed and not needed again soon is another matter, and goes back to the kernel
(``return_freed_memory``): the checkpoint's tensors, freed once packed or converted (as large
as the model), once the model is in place; and a burst's activations once the scheduler has
gone idle, so an idle engine on a shared desktop holds its weights and KV pool, not its
busiest moment's heap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from functools import cache

import torch

logger = logging.getLogger(__name__)

# mallopt(3) parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

# NOTE: 32 MiB is the largest mmap threshold glibc accepts on 64-bit (HEAP_MAX_SIZE / 2).
_MMAP_THRESHOLD = 32 << 20
_TRIM_THRESHOLD = 1 << 30
_TOP_PAD = 64 << 20


@cache
def _libc() -> ctypes.CDLL | None:
    """The C library, looked up once: ``find_library`` runs ``ldconfig -p`` each call, and
    the scheduler trims its heap each time it goes idle."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"))
    except (OSError, TypeError):
        return None


def keep_freed_memory(device: torch.device) -> bool:
    """On CPU under glibc, tunes malloc so freed activations are reused; True if applied."""
    if device.type != "cpu":
        return False
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False  # not glibc (musl, macOS): their allocators keep their own policy
    mallopt = libc.mallopt
    applied = all(
        mallopt(param, value) == 1
        for param, value in (
            (_M_MMAP_THRESHOLD, _MMAP_THRESHOLD),
            (_M_TRIM_THRESHOLD, _TRIM_THRESHOLD),
            (_M_TOP_PAD, _TOP_PAD),
        )
    )
    if not applied:
        logger.debug("malloc tuning refused; activation pages are faulted in anew each forward")
    return applied


def return_freed_memory(device: torch.device) -> bool:
    """On CPU under glibc, hands the heap's free pages back to the kernel (``malloc_trim(0)``);
    True if any were. Called after the weights load: kept, the tensors freed while loading
    (the checkpoint's, replaced by packed or converted ones: 0.4 GiB for SmolLM2-135M in fp32)
    would count in the process's RSS for its whole life. Called again each time the scheduler
    goes idle: a burst of 256 short requests leaves ~0.4 GiB of freed activations that the
    trim threshold above keeps for the next forward."""
    if device.type != "cpu":
        return False
    libc = _libc()
    if libc is None or not hasattr(libc, "malloc_trim"):
        return False
    malloc_trim = libc.malloc_trim
    return bool(malloc_trim(0))
