"""Per-layer K and V buffers indexed by KV slot."""

from __future__ import annotations

import torch

from engine.kernels.cpu import cpu_kernels_for_heads


class KVPool:
    """K and V buffers of shape ``[size + 1, num_kv_heads, head_dim]`` for every layer.

    Row ``i`` holds the token in KV slot ``i`` (as handed out by ``TokenAllocator``); row 0
    is the dummy slot that padded positions write to.

    NOTE: buffers come from ``torch.empty``: a slot's content is garbage until ``set_kv``
    writes it, which is fine because attention only reads slots the scheduler wrote (and
    the zeroed dummy row, masked out).
    """

    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        size: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        if num_layers < 1 or num_kv_heads < 1 or head_dim < 1 or size < 1:
            raise ValueError(
                "num_layers, num_kv_heads, head_dim and size must all be >= 1, got "
                f"{num_layers}, {num_kv_heads}, {head_dim}, {size}"
            )
        self.num_layers = num_layers
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.size = size
        self.dtype = dtype
        self.device = torch.device(device)
        shape = (size + 1, num_kv_heads, head_dim)
        self._k = [torch.empty(shape, dtype=dtype, device=self.device) for _ in range(num_layers)]
        self._v = [torch.empty(shape, dtype=dtype, device=self.device) for _ in range(num_layers)]
        # NOTE: padded attention rows read the dummy slot under a -inf mask, yet a NaN left
        # there by torch.empty still poisons the output (0 * NaN): the dummy row is zeroed.
        for buffer in self._k + self._v:
            buffer[0].zero_()

    @property
    def nbytes(self) -> int:
        """Bytes of every K and V buffer: the memory the pool holds once its slots are written."""
        return sum(buffer.nbytes for buffer in self._k + self._v)

    def k_buffer(self, layer: int) -> torch.Tensor:
        return self._k[layer]

    def v_buffer(self, layer: int) -> torch.Tensor:
        return self._v[layer]

    def set_kv(self, layer: int, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write ``k``/``v`` (``[n, num_kv_heads, head_dim]``) into slots ``loc`` (``[n]``).

        Values are cast to the pool dtype. NOTE: ``loc`` must not repeat a slot other than
        the dummy slot 0; for a repeated slot, which row wins is unspecified.
        """
        kernels = cpu_kernels_for_heads(k) if self.dtype == torch.float32 else None
        if kernels is not None and cpu_kernels_for_heads(v) is not None and loc.dtype == torch.int64:
            # NOTE: one C++ pass writing both rows of each token, k and v read where they lie.
            kernels.store_kv(k, v, self._k[layer], self._v[layer], loc.contiguous())
            return
        self._k[layer][loc] = k.to(self.dtype)
        self._v[layer][loc] = v.to(self.dtype)

    @staticmethod
    def bytes_per_token(
        num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype
    ) -> int:
        """Bytes one token's K and V take across all layers."""
        return 2 * num_layers * num_kv_heads * head_dim * dtype.itemsize

    @classmethod
    def size_from_memory(
        cls,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        budget_bytes: int,
    ) -> int:
        """Largest pool ``size`` (in tokens) whose buffers fit in ``budget_bytes``.

        NOTE: the buffers hold ``size + 1`` rows (dummy slot 0), which this accounts for.
        The result is 0 when not even one usable token fits; the caller reports that. Get
        the budget from ``memory_budget_bytes(device, memory_fraction)``.
        """
        per_token = cls.bytes_per_token(num_layers, num_kv_heads, head_dim, dtype)
        return max(0, budget_bytes // per_token - 1)
