"""Per-layer K and V buffers indexed by KV slot, in the model dtype, in bfloat16 on CPU
(``--kv-cache-dtype bf16``) or in FP8 (e4m3) with a scale per layer for K and for V
(``--kv-cache-dtype fp8_e4m3``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.kernels.cpu import cpu_kernels_for_heads
from engine.kernels.fp8_cast import E4M3, to_e4m3

FP8_KV_DTYPE = E4M3
# NOTE: the pool dtypes the CPU kernels store into and attend over (store_kv, decode_attention).
CPU_KERNEL_KV_DTYPES = (torch.float32, torch.bfloat16)


class KVPool:
    """K and V buffers of shape ``[size + 1, num_kv_heads, head_dim]`` for every layer.

    Row ``i`` holds the token in KV slot ``i`` (as handed out by ``TokenAllocator``); row 0
    is the dummy slot that padded positions write to.

    NOTE: buffers come from ``torch.empty``: a slot's content is garbage until ``set_kv``
    writes it, which is fine because attention only reads slots the scheduler wrote (and
    the zeroed dummy row, masked out).

    In FP8 (``dtype`` float8_e4m3fn) a stored value means ``stored * scale``: ``scales``
    gives each layer's (k_scale, v_scale), 1.0 each where not given (a checkpoint's
    ``k_scale``/``v_scale`` where it has them). Readers take the buffers and ``scales``
    (the Triton kernels) or ``read`` (torch).
    """

    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        size: int,
        dtype: torch.dtype,
        device: torch.device | str,
        scales: Sequence[tuple[float, float]] | None = None,
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
        self.fp8 = dtype == FP8_KV_DTYPE
        self.scales = list(scales) if scales is not None else [(1.0, 1.0)] * num_layers
        if len(self.scales) != num_layers:
            raise ValueError(f"{len(self.scales)} KV scales for {num_layers} layers")
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
        kernels = cpu_kernels_for_heads(k) if self.dtype in CPU_KERNEL_KV_DTYPES else None
        if kernels is not None and cpu_kernels_for_heads(v) is not None and loc.dtype == torch.int64:
            # NOTE: one C++ pass writing both rows of each token, k and v read where they lie.
            kernels.store_kv(k, v, self._k[layer], self._v[layer], loc.contiguous())
            return
        if self.fp8:
            k_scale, v_scale = self.scales[layer]
            self._k[layer][loc] = to_e4m3(k, k_scale)
            self._v[layer][loc] = to_e4m3(v, v_scale)
            return
        self._k[layer][loc] = k.to(self.dtype)
        self._v[layer][loc] = v.to(self.dtype)

    def read(self, layer: int, value: bool, slots: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The K (or, ``value``, V) rows of ``slots`` (``[n]``) in ``dtype``: an FP8 pool's scaled,
        a bfloat16 pool's widened."""
        rows = (self._v if value else self._k)[layer].index_select(0, slots).to(dtype)
        return rows * self.scales[layer][int(value)] if self.fp8 else rows

    def as_stored(self, layer: int, value: bool, x: torch.Tensor) -> torch.Tensor:
        """``x`` (K, or ``value``, V rows) as ``read`` gives them back once stored, in x's dtype."""
        if not self.fp8:
            return x.to(self.dtype).to(x.dtype)
        scale = self.scales[layer][int(value)]
        return to_e4m3(x, scale).to(x.dtype) * scale

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
