"""The tensor-parallel group of this process: its rank, the collectives the model runs, the
step channel from the scheduler to the workers.

Megatron's layout, as SGLang's: every rank holds 1/N of each sharded weight and of the KV
heads; the ranks run the same forward in lockstep and meet at one all-reduce after o_proj
and after down_proj, and at a gather of the vocab-parallel logits on rank 0, which samples.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

# NOTE: workers wait on the step channel for as long as the server idles; gloo's default
# timeout (30 min) would end an idle server. A dead peer still fails the wait at once: its
# connection closes (and the launcher's supervisor stops every process when one dies).
_STEP_CHANNEL_TIMEOUT = timedelta(days=365)


@dataclass(frozen=True)
class TensorParallel:
    """This process's place in the group; the group objects live in torch.distributed."""

    rank: int
    size: int
    step_group: dist.ProcessGroup  # gloo, CPU tensors: the scheduler's step messages

    @property
    def is_driver(self) -> bool:
        """Rank 0: the scheduler's process, the one that samples."""
        return self.rank == 0


_STATE: TensorParallel | None = None


def rendezvous_path(directory: str) -> str:
    """The ``file://`` store the ranks meet at: in the server's private socket directory."""
    return f"file://{os.path.join(directory, 'tp-rendezvous')}"


def init_tensor_parallel(rank: int, size: int, init_method: str, device: torch.device) -> TensorParallel:
    """Joins the group (blocks until every rank has joined); NCCL on CUDA, gloo on CPU."""
    global _STATE
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        # NOTE: rank r drives GPU r of those it sees (the runtimes pass an engine exactly its GPUs).
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=size)
    step_group = dist.new_group(backend="gloo", timeout=_STEP_CHANNEL_TIMEOUT)
    if device.type == "cpu" and hasattr(os, "sched_getaffinity"):
        # NOTE: the ranks share the machine's cores; N processes each with a thread per core
        # would spin against each other at every all-reduce.
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // size))
    _STATE = TensorParallel(rank, size, step_group)
    return _STATE


def tensor_parallel() -> TensorParallel | None:
    """The group, or None when this process runs the whole model (--tp-size 1)."""
    return _STATE


def all_reduce(tensor: torch.Tensor) -> torch.Tensor:
    """In place: the sum of ``tensor`` over the ranks (the row-parallel layers' partial sums)."""
    dist.all_reduce(tensor)
    return tensor


def gather_on_driver(local: torch.Tensor, state: TensorParallel) -> torch.Tensor:
    """Rank 0: every rank's ``local`` joined along the last axis; other ranks: ``local``."""
    parts = [torch.empty_like(local) for _ in range(state.size)] if state.is_driver else None
    dist.gather(local.contiguous(), parts, dst=0)
    return torch.cat(parts, dim=-1) if parts is not None else local


def min_over_ranks(value: int) -> int:
    """The smallest ``value`` any rank holds (every rank gets the same KV slot count)."""
    tensor = torch.tensor([value], dtype=torch.int64)
    state = tensor_parallel()
    assert state is not None, "only with tensor parallelism"
    dist.all_reduce(tensor, op=dist.ReduceOp.MIN, group=state.step_group)
    return int(tensor.item())
