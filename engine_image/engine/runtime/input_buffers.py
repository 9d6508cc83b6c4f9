"""Persistent buffers for a generation step's index tensors, filled in place.

A step's token ids, positions, request rows and sequence lengths are written into one
host buffer (pinned on CUDA) through its numpy view and reach the device in one
non-blocking copy, instead of four tensors built from Python lists, each a synchronous
copy on CUDA.

NOTE: two sets, used in turn: the overlap scheduler builds step n+1 while step n's forward
still reads its set; step n+2 reuses that set only after step n's tokens were read, so its
forward, and the copy before it, are done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StepInputs:
    input_ids: torch.Tensor  # [T] int64
    positions: torch.Tensor  # [T] int64
    req_pool_indices: torch.Tensor  # [B] int64
    seq_lens: torch.Tensor  # [B] int64


class _BufferSet:
    def __init__(self, width: int, device: torch.device) -> None:
        self.width = width
        pin = device.type == "cuda"
        self.host = torch.empty((4, width), dtype=torch.int64, pin_memory=pin)
        self.view = self.host.numpy()
        self.device = self.host if device.type == "cpu" else torch.empty((4, width), dtype=torch.int64, device=device)


class InputBuffers:
    def __init__(self, width: int, device: torch.device) -> None:
        self.device = device
        self._sets = [_BufferSet(width, device), _BufferSet(width, device)]
        self._turn = 0

    def fill(
        self, tokens: Sequence[int], positions: Sequence[int], rows: Sequence[int], seq_lens: Sequence[int]
    ) -> StepInputs:
        """The step's four index tensors, views of the next buffer set (grown if too narrow)."""
        num_tokens, num_reqs = len(tokens), len(rows)
        width = max(num_tokens, num_reqs)
        self._turn ^= 1
        buffers = self._sets[self._turn]
        if buffers.width < width:
            buffers = self._sets[self._turn] = _BufferSet(max(width, 2 * buffers.width), self.device)
        view = buffers.view
        view[0, :num_tokens] = tokens
        view[1, :num_tokens] = positions
        view[2, :num_reqs] = rows
        view[3, :num_reqs] = seq_lens
        if buffers.device is not buffers.host:
            buffers.device[:, :width].copy_(buffers.host[:, :width], non_blocking=True)
        out = buffers.device
        return StepInputs(out[0, :num_tokens], out[1, :num_tokens], out[2, :num_reqs], out[3, :num_reqs])

