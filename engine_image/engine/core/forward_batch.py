"""The description of one model forward: which tokens, where their KV lives."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any, Protocol

import torch


class KVCache(Protocol):
    """The per-layer K/V storage a forward's attention writes its new tokens into and reads.

    NOTE: a protocol, so that core imports no other engine package: ``engine.memory.KVPool``
    is the one implementation, and mypy checks it against this wherever a batch is built.
    """

    dtype: torch.dtype  # float8_e4m3fn: stored values mean ``stored * scales[layer]``
    device: torch.device
    scales: list[tuple[float, float]]  # per layer: (k_scale, v_scale)

    def k_buffer(self, layer: int) -> torch.Tensor: ...

    def v_buffer(self, layer: int) -> torch.Tensor: ...

    def set_kv(self, layer: int, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None: ...

    def read(self, layer: int, value: bool, slots: torch.Tensor, dtype: torch.dtype) -> torch.Tensor: ...

    def as_stored(self, layer: int, value: bool, x: torch.Tensor) -> torch.Tensor: ...


class ForwardMode(Enum):
    EXTEND = auto()  # new prompt tokens, possibly on top of a cached prefix (prefill)
    DECODE = auto()  # exactly one new token per request


@dataclass
class ForwardBatch:
    """Flattened inputs of a batch: ``T`` new tokens from ``B`` requests.

    ``seq_lens`` count every token of a request whose KV exists after this forward
    (prefix + new). The KV slots of request ``i`` are ``req_to_token[req_pool_indices[i],
    :seq_lens[i]]``; the new tokens' slots are ``out_cache_loc``.
    """

    mode: ForwardMode
    input_ids: torch.Tensor  # [T] int64
    positions: torch.Tensor  # [T] int64
    out_cache_loc: torch.Tensor  # [T] int64
    req_pool_indices: torch.Tensor  # [B] int64
    seq_lens: torch.Tensor  # [B] int64
    seq_lens_cpu: list[int]
    extend_prefix_lens_cpu: list[int]  # [B]; zeros for decode
    extend_seq_lens_cpu: list[int]  # [B]; ones for decode
    req_to_token: torch.Tensor
    kv_pool: KVCache
    # NOTE: filled by the attention backend's ``init_forward_metadata`` once per forward,
    # so per-layer calls reuse index tensors and masks instead of rebuilding them.
    attn_metadata: Any = field(default=None)

    @property
    def batch_size(self) -> int:
        return len(self.seq_lens_cpu)

    @property
    def last_token_indices(self) -> torch.Tensor:
        """Positions in the flattened token axis of each request's last new token."""
        if self.mode is ForwardMode.DECODE:
            # NOTE: built on the device, not copied from the host: CUDA graphs capture this.
            return torch.arange(self.batch_size, device=self.input_ids.device)
        lens = torch.tensor(self.extend_seq_lens_cpu, dtype=torch.int64, device=self.input_ids.device)
        return torch.cumsum(lens, 0) - 1
