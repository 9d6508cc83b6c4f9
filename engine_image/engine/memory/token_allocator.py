"""Free-list allocator of KV-cache token slots."""

from __future__ import annotations

import torch

# NOTE: slot 0 is the padding/dummy slot. It is never handed out, so kernels may write the
# KV of padded positions there (and unwritten ``req_to_token`` entries may point there)
# without corrupting any live token.
DUMMY_SLOT = 0


class TokenAllocator:
    """Hands out KV slots ``1..size`` from a tensor free list.

    ``alloc`` slices the head of the free tensor and ``free`` concatenates slots back onto
    its tail (as SGLang's ``TokenToKVPoolAllocator``), so both cost one tensor op and never
    touch Python ints per slot.

    NOTE: ``free`` trusts its input by default. With ``debug=True`` the allocator keeps a
    per-slot "is free" mask and rejects out-of-range slots, duplicates and double frees;
    that costs O(n) per call and is meant for tests.
    """

    def __init__(
        self, size: int, device: torch.device | str = "cpu", *, debug: bool = False
    ) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._size = size
        self._device = torch.device(device)
        self._debug = debug
        self._free_slots = torch.empty(0, dtype=torch.int64, device=self._device)
        self._is_free: torch.Tensor | None = None
        self.clear()

    @property
    def size(self) -> int:
        """Number of usable slots (the dummy slot 0 excluded)."""
        return self._size

    @property
    def device(self) -> torch.device:
        return self._device

    def available_size(self) -> int:
        return int(self._free_slots.numel())

    def alloc(self, n: int) -> torch.Tensor | None:
        """Return ``n`` distinct free slots (int64, 1-D), or None if fewer than ``n`` are free."""
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of slots: {n}")
        if n > self._free_slots.numel():
            return None
        selected = self._free_slots[:n]
        self._free_slots = self._free_slots[n:]
        if self._is_free is not None:
            self._is_free[selected] = False
        return selected

    def free(self, indices: torch.Tensor) -> None:
        """Return slots to the free list. An empty tensor is a no-op."""
        if indices.numel() == 0:
            return
        if self._is_free is not None:
            self._check_free(indices)
            self._is_free[indices] = True
        self._free_slots = torch.cat((self._free_slots, indices.to(self._device)))

    def clear(self) -> None:
        """Mark every slot free again (ascending order, so allocation is deterministic)."""
        self._free_slots = torch.arange(1, self._size + 1, dtype=torch.int64, device=self._device)
        if self._debug:
            self._is_free = torch.ones(self._size + 1, dtype=torch.bool, device=self._device)
            self._is_free[DUMMY_SLOT] = False

    def _check_free(self, indices: torch.Tensor) -> None:
        assert self._is_free is not None
        if indices.dtype != torch.int64 or indices.dim() != 1:
            raise ValueError(f"expected a 1-D int64 tensor, got {indices.dtype} {indices.shape}")
        if int(indices.min()) < 1 or int(indices.max()) > self._size:
            raise ValueError(f"slot out of range 1..{self._size}: {indices.tolist()}")
        if indices.unique().numel() != indices.numel():
            raise ValueError(f"duplicate slots in free: {indices.tolist()}")
        if bool(self._is_free[indices].any()):
            raise ValueError(f"double free of slots: {indices[self._is_free[indices]].tolist()}")
