"""The scheduler's step messages to the worker ranks: a typed, frozen description of each
forward, broadcast over the group's gloo channel; the workers rebuild the ForwardBatch on
their own device, KV pool and request table.

NOTE: the workers keep a copy of the scheduler's request→slot table (memory/req_to_token.py):
each step carries the table writes made since the previous one (the radix cache may rewrite a
request's row, so the new tokens' slots alone would not do), and the workers apply them in
order. The scheduler's one allocator and radix cache decide the slots for every rank.
"""

from __future__ import annotations

import msgspec
import torch
import torch.distributed as dist

from engine.core.forward_batch import ForwardBatch, ForwardMode, KVCache
from engine.distributed.parallel_state import TensorParallel


class TableWrite(msgspec.Struct, frozen=True, array_like=True):
    """``req_to_token[row, start : start + len(slots)] = slots``."""

    row: int
    start: int
    slots: list[int]


class ForwardStep(msgspec.Struct, frozen=True, tag=True):
    """One forward of the model, as ``ForwardBatch`` describes it, in plain lists."""

    mode: str  # a ForwardMode name
    input_ids: list[int]
    positions: list[int]
    out_cache_loc: list[int]
    req_pool_indices: list[int]
    seq_lens: list[int]
    extend_prefix_lens: list[int]
    extend_seq_lens: list[int]
    table_writes: list[TableWrite]


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ForwardStep)


def describe(batch: ForwardBatch, table_writes: list[TableWrite]) -> ForwardStep:
    return ForwardStep(
        mode=batch.mode.name,
        input_ids=batch.input_ids.tolist(),
        positions=batch.positions.tolist(),
        out_cache_loc=batch.out_cache_loc.tolist(),
        req_pool_indices=batch.req_pool_indices.tolist(),
        seq_lens=list(batch.seq_lens_cpu),
        extend_prefix_lens=list(batch.extend_prefix_lens_cpu),
        extend_seq_lens=list(batch.extend_seq_lens_cpu),
        table_writes=table_writes,
    )


def rebuild(step: ForwardStep, req_to_token: torch.Tensor, kv_pool: KVCache) -> ForwardBatch:
    """The step as a batch over this rank's table (its writes applied first) and KV pool."""
    device = req_to_token.device
    for write in step.table_writes:
        req_to_token[write.row, write.start : write.start + len(write.slots)] = torch.tensor(
            write.slots, dtype=torch.int64, device=device
        )

    def ids(values: list[int]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.int64, device=device)

    return ForwardBatch(
        mode=ForwardMode[step.mode],
        input_ids=ids(step.input_ids),
        positions=ids(step.positions),
        out_cache_loc=ids(step.out_cache_loc),
        req_pool_indices=ids(step.req_pool_indices),
        seq_lens=ids(step.seq_lens),
        seq_lens_cpu=step.seq_lens,
        extend_prefix_lens_cpu=step.extend_prefix_lens,
        extend_seq_lens_cpu=step.extend_seq_lens,
        req_to_token=req_to_token,
        kv_pool=kv_pool,
    )


def broadcast_step(step: ForwardStep, state: TensorParallel) -> None:
    """Rank 0: sends ``step`` to every worker (its length, then its bytes)."""
    payload = _encoder.encode(step)
    dist.broadcast(torch.tensor([len(payload)], dtype=torch.int64), src=0, group=state.step_group)
    dist.broadcast(torch.frombuffer(bytearray(payload), dtype=torch.uint8), src=0, group=state.step_group)


def receive_step(state: TensorParallel) -> ForwardStep:
    """A worker: blocks until rank 0 broadcasts the next step."""
    length = torch.empty(1, dtype=torch.int64)
    dist.broadcast(length, src=0, group=state.step_group)
    payload = torch.empty(int(length.item()), dtype=torch.uint8)
    dist.broadcast(payload, src=0, group=state.step_group)
    return _decoder.decode(payload.numpy().tobytes())
