"""The overlap scheduler's forward thread: runs each step's forward and sampling, in order,
while the scheduler thread builds the next step (SGLang's TpModelWorkerClient).

A step's input token that was not sampled yet is a placeholder: ``-(i + 1)`` stands for
entry ``i`` of ``FutureTokens``, which the step that samples it writes and the next step
reads, both on this thread, so the host never waits for a token to build a batch. The
sampled tokens go to the host in one copy queued right after the sampling, which the
scheduler thread waits for alone, not for the next step's forward queued behind it.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch

from engine.core.forward_batch import ForwardBatch
from engine.distributed.step_channel import TableWrite
from engine.runtime.model_runner import ModelRunner
from engine.sampling.sampler import SampleOutput
from engine.scheduler.request import Req
from engine.scheduler.token_sampling import TokenSampling


class FutureTokens:
    """A ring of sampled-token entries on the device; a step takes one entry per sampled row.

    NOTE: entries are read by the next step only, so two steps' worth (2 × the rows a step
    samples at most) never hands out an entry that is still to be read.
    """

    def __init__(self, max_rows: int, device: torch.device) -> None:
        self.capacity = 2 * max_rows
        self.buffer = torch.zeros(self.capacity, dtype=torch.int64, device=device)
        self.device = device
        self._next = 0

    def reserve(self, n: int) -> tuple[list[int], torch.Tensor]:
        """The next ``n`` entries, as a host list and as a device tensor."""
        start = self._next
        entries = [(start + i) % self.capacity for i in range(n)]
        self._next = (start + n) % self.capacity
        # NOTE: made on the device, not copied from the list: a host-to-device copy from
        # pageable memory waits for the stream, i.e. for the forward in flight.
        on_device = torch.arange(start, start + n, dtype=torch.int64, device=self.device).remainder_(self.capacity)
        return entries, on_device

    @staticmethod
    def placeholder(entry: int) -> int:
        return -(entry + 1)

    def resolve(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``input_ids`` with every placeholder replaced by the token it stands for."""
        return torch.where(input_ids < 0, self.buffer[(-input_ids - 1).clamp(min=0)], input_ids)


@dataclass(frozen=True)
class StepJob:
    """One forward and the sampling of its rows, as the forward thread runs it."""

    batch: ForwardBatch
    table_writes: list[TableWrite]  # for the tensor-parallel workers, taken when the batch was built
    sampled: list[Req]  # the requests a token is sampled for, in row order
    sample_rows: torch.Tensor | None  # their rows of the logits (None: every row)
    output_lens: list[int]  # tokens each of them will have generated before this one
    entries: torch.Tensor  # the FutureTokens entries their tokens go to


class ForwardThread:
    def __init__(self, runner: ModelRunner, sampling: TokenSampling, future: FutureTokens) -> None:
        self.runner = runner
        self.sampling = sampling
        self.future = future
        # NOTE: one worker: the steps run one after another, in the order they were submitted.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forward")

    def submit(self, job: StepJob) -> Future[SampleOutput | None]:
        return self._executor.submit(self._run, job)

    def _run(self, job: StepJob) -> SampleOutput | None:
        batch = job.batch
        batch.input_ids = self.future.resolve(batch.input_ids)
        logits = self.runner.forward(batch, job.table_writes)
        if not job.sampled:
            return None
        if job.sample_rows is not None:
            logits = logits[job.sample_rows]
        result = self.sampling.sample(job.sampled, logits, job.output_lens)
        self.future.buffer[job.entries] = result.next_token_ids
        return result.to_host()
