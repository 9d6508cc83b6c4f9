"""The overlap scheduler (``--enable-overlap-schedule``; SGLang's zero-overhead scheduler):
step n+1 is built (admission, radix matching, KV slots, input tensors) and handed to the
forward thread while step n's forward runs; step n's tokens are read and its requests
advanced after that, one step later than without overlap.

What keeps every token and every KV slot what the plain scheduler gives:
- A decode step's input token that is still being sampled is a placeholder the forward
  thread resolves (``FutureTokens``); its position and KV slot are known without it.
- A request that must end on its in-flight token (its length reached) is left out of the
  next step; one that ends on a stop token runs one more, discarded, step, whose KV slot
  (the KV of its last token, within its reservation) joins the tree on release.
- Nothing a step in flight reads changes under it: a request's KV and request row are
  released only once no step in flight holds it (``InFlight.releasing``); an extend step is
  resolved before the next step is built (its prompt KV joins the tree, rewriting request
  rows); a step with a grammar is resolved at once (the next mask needs the token accepted).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.ipc.messages import RequestDelta
from engine.runtime.model_runner import ModelRunner
from engine.sampling.sampler import SampleOutput
from engine.scheduler.admission import PrefillPlan
from engine.scheduler.decode import Decode
from engine.scheduler.forward_thread import ForwardThread, FutureTokens, StepJob
from engine.scheduler.outputs import StepOutputs
from engine.scheduler.prefill import Prefill
from engine.scheduler.request import Req
from engine.scheduler.token_sampling import TokenSampling


@dataclass
class InFlight:
    """A step handed to the forward thread and not resolved yet."""

    mode: ForwardMode
    result: Future[SampleOutput | None]
    reqs: list[Req]
    sampled: list[Req]
    entries: dict[Req, int]  # each sampled request's FutureTokens entry
    plan: PrefillPlan | None  # an extend step's plan
    # Requests that ended while this step was already built with them: released once it ran.
    releasing: list[Req] = field(default_factory=list)


class OverlapSchedule:
    def __init__(
        self, runner: ModelRunner, prefill: Prefill, decode: Decode, sampling: TokenSampling, finish: Callable[[Req], None]
    ) -> None:
        self.runner = runner
        self.prefill = prefill
        self.decode = decode
        self.finish = finish  # releases a finished request's KV
        self.future = FutureTokens(runner.config.max_running_requests, runner.device)
        self.thread = ForwardThread(runner, sampling, self.future)
        self.sampling = sampling
        self.in_flight: InFlight | None = None
        # Outputs of a step resolved outside ``step`` (``sync``): the next ``step`` returns them.
        self.ready = StepOutputs()

    def __bool__(self) -> bool:
        return self.in_flight is not None or bool(self.ready.deltas)

    def step(self, outputs: StepOutputs) -> None:
        """Builds and launches the next step, then resolves the one before it into ``outputs``."""
        outputs.deltas += self.ready.deltas
        self.ready.deltas = []
        previous = self.in_flight
        if previous is not None and (
            previous.mode is ForwardMode.EXTEND or any(r.grammar is not None for r in self.decode.running)
        ):
            self.sync()
            outputs.deltas += self.ready.deltas
            self.ready.deltas = []
            previous = None
        self.in_flight = self._launch(previous)
        if previous is not None:
            outputs.deltas += self._resolve(previous)
        job = self.in_flight
        if job is not None and any(r.grammar is not None for r in job.reqs):
            self.sync()
            outputs.deltas += self.ready.deltas
            self.ready.deltas = []

    def sync(self) -> None:
        """Waits for the step in flight and resolves it (its outputs go to ``ready``)."""
        job, self.in_flight = self.in_flight, None
        if job is not None:
            self.ready.deltas += self._resolve(job)

    def drop_outputs(self, rid: str) -> None:
        """Forgets the resolved outputs of an aborted request."""
        self.ready.deltas = [d for d in self.ready.deltas if d.rid != rid]

    # ------------------------------------------------------------------ launching

    def _launch(self, previous: InFlight | None) -> InFlight | None:
        plan = self.prefill.plan(self.decode.running)
        if plan.reqs:
            batch = self.prefill.build(plan)
            sampled = self.prefill.to_sample(plan)
            rows = self.prefill.sample_rows(plan, sampled) if sampled else None
            lens = [len(r.output_ids) for r in sampled]
            return self._submit(ForwardMode.EXTEND, batch, plan.reqs, sampled, rows, lens, plan)
        pending = previous.entries if previous is not None else {}
        reqs = [r for r in self.decode.running if not (r in pending and len(r.output_ids) + 1 >= r.max_new_tokens)]
        if not reqs:
            return None
        tokens = [FutureTokens.placeholder(pending[r]) if r in pending else r.output_ids[-1] for r in reqs]
        lens = [len(r.output_ids) + (r in pending) for r in reqs]
        return self._submit(ForwardMode.DECODE, self.decode.build(reqs, tokens), reqs, reqs, None, lens, None)

    def _submit(
        self,
        mode: ForwardMode,
        batch: ForwardBatch,
        reqs: list[Req],
        sampled: list[Req],
        rows: torch.Tensor | None,
        output_lens: list[int],
        plan: PrefillPlan | None,
    ) -> InFlight:
        entries, device_entries = self.future.reserve(len(sampled))
        job = StepJob(batch, self.runner.take_table_writes(), sampled, rows, output_lens, device_entries)
        return InFlight(mode, self.thread.submit(job), reqs, sampled, dict(zip(sampled, entries, strict=True)), plan)

    # ------------------------------------------------------------------ resolving

    def _resolve(self, job: InFlight) -> list[RequestDelta]:
        """Reads ``job``'s tokens and advances its requests; ``self.in_flight`` is the step
        launched after it (None if none)."""
        sampled = job.result.result()
        if sampled is not None:
            sampled.wait_on_host()
        if job.plan is not None:
            deltas, prefilled = self.prefill.complete(job.plan, job.sampled, sampled)
            ended = [r for r in prefilled if r.finished]
            self.decode.running += [r for r in prefilled if not r.finished]
        else:
            # NOTE: a request that ended on the step before ran this one too; its token is dropped.
            keep = [i for i, r in enumerate(job.sampled) if not r.finished]
            live = [job.sampled[i] for i in keep]
            deltas = self.sampling.record(live, _rows(sampled, keep)) if sampled is not None and live else []
            ended = [r for r in live if r.finished]
            self.decode.running = [r for r in self.decode.running if not r.finished]
        nxt = self.in_flight
        for req in ended:
            if nxt is not None and req in nxt.entries:
                nxt.releasing.append(req)
            else:
                self.finish(req)
        for req in job.releasing:
            self.finish(req)
        return deltas


def _rows(result: SampleOutput, keep: list[int]) -> SampleOutput:
    """``result`` restricted to the rows ``keep``."""
    if len(keep) == len(result.next_token_ids):
        return result
    index = torch.tensor(keep, dtype=torch.int64, device=result.next_token_ids.device)
    return SampleOutput(
        next_token_ids=result.next_token_ids[index],
        logprobs=result.logprobs[index] if result.logprobs is not None else None,
        top_logprobs=[result.top_logprobs[i] for i in keep] if result.top_logprobs is not None else None,
    )
