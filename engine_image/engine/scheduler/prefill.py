"""The requests not running yet, and the prefill step that starts them.

Waiting requests are admitted in arrival order (``PrefillAdder``); a prompt longer than the
step's token budget is prefilled in chunks over several steps (the chunked request); the
n > 1 samples of one prompt are held until a hidden request has cached their prompt.
"""

from __future__ import annotations

from collections import deque

import torch

from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import RequestDelta
from engine.runtime.model_runner import ModelRunner
from engine.sampling.sampler import SampleOutput
from engine.scheduler.admission import AddResult, PrefillAdder, PrefillPlan
from engine.scheduler.batch import forward_batch
from engine.scheduler.outputs import request_delta
from engine.scheduler.request import Req
from engine.scheduler.request_kv import RequestKV
from engine.scheduler.token_sampling import TokenSampling


class Prefill:
    def __init__(self, runner: ModelRunner, kv: RequestKV, sampling: TokenSampling) -> None:
        self.runner = runner
        self.kv = kv
        self.sampling = sampling
        self.token_budget = runner.config.prefill_chunk(runner.device.type)
        self.waiting: deque[Req] = deque()
        self.chunked: Req | None = None
        # n > 1: children wait here until the hidden request that caches their prompt ends.
        self.held: dict[str, list[Req]] = {}
        # NOTE: set while a weight update waits for in-flight requests to drain.
        self.admission_paused = False

    def __bool__(self) -> bool:
        return bool(self.waiting or self.chunked or self.held)

    def queued(self) -> list[Req]:
        """Every request here that holds no KV: waiting or held."""
        return list(self.waiting) + [r for group in self.held.values() for r in group]

    # ------------------------------------------------------------------ queueing

    def enqueue_group(self, children: list[Req]) -> None:
        """n > 1 samples of one prompt: its KV is computed once and shared via the radix tree."""
        if self.kv.tree.disable or len(children) == 1:
            self.waiting.extend(children)
            return
        first = children[0]
        warm = Req(
            rid=f"{first.rid}#prefix",
            input_ids=first.input_ids,
            params=first.params,
            max_new_tokens=0,
            eos_token_ids=frozenset(),
            emit_output=False,
        )
        self.held[warm.rid] = children
        self.waiting.append(warm)

    def on_finished(self, req: Req) -> None:
        """Queues the samples that waited for ``req`` to cache their prompt, first in line."""
        children = self.held.pop(req.rid, None)
        if children:
            self.waiting.extendleft(reversed(children))

    def remove_queued(self, rid: str) -> bool:
        """Drops a waiting or held request (it holds no KV); False if none has ``rid``."""
        for group in self.held.values():
            for req in group:
                if req.rid == rid:
                    group.remove(req)
                    return True
        for req in self.waiting:
            if req.rid == rid:
                self.waiting.remove(req)
                return True
        return False

    # ------------------------------------------------------------------ the step

    def plan(self, running: list[Req]) -> PrefillPlan:
        """The requests to extend this step: the chunked one first, then waiting ones that fit."""
        active = running + ([self.chunked] if self.chunked else [])
        adder = PrefillAdder(
            self.kv,
            self.token_budget,
            sum(r.future_tokens() for r in active),
            self.runner.config.max_running_requests - len(active),
        )
        if self.chunked is not None:
            chunked, self.chunked = self.chunked, None
            if adder.add_chunk_continuation(chunked) is AddResult.CHUNKED:
                self.chunked = chunked
                return adder.plan
        while self.waiting and not self.admission_paused:
            result = adder.add_new(self.waiting[0])
            if result not in (AddResult.ADDED, AddResult.CHUNKED):
                break
            req = self.waiting.popleft()
            if result is AddResult.CHUNKED:
                self.chunked = req
                break
        return adder.plan

    def run(self, plan: PrefillPlan) -> tuple[list[RequestDelta], list[Req]]:
        """One extend forward over ``plan``; the deltas, and the requests whose whole prompt
        is now in the pool (finished, or ready to decode)."""
        logits = self.runner.forward(self.build(plan))
        to_sample = self.to_sample(plan)
        sampled = None
        if to_sample:
            lens = [len(r.output_ids) for r in to_sample]
            sampled = self.sampling.sample(to_sample, logits[self.sample_rows(plan, to_sample)], lens)
        return self.complete(plan, to_sample, sampled)

    def build(self, plan: PrefillPlan) -> ForwardBatch:
        """The extend batch of ``plan``, its new tokens' KV slots allocated."""
        tokens: list[int] = []
        positions: list[int] = []
        prefix_lens: list[int] = []
        for req, n in zip(plan.reqs, plan.extend_lens, strict=True):
            start = req.kv_len
            tokens += req.input_ids[start : start + n]
            positions += range(start, start + n)
            prefix_lens.append(start)
        out_cache_loc = self.kv.extend(plan.reqs, plan.extend_lens)
        return forward_batch(
            self.runner, ForwardMode.EXTEND, plan.reqs, tokens, positions, out_cache_loc, prefix_lens, plan.extend_lens
        )

    @staticmethod
    def to_sample(plan: PrefillPlan) -> list[Req]:
        """The requests of a built ``plan`` whose whole prompt is in the pool and that generate."""
        return [r for r in plan.reqs if not r.is_prefilling and r.max_new_tokens > 0]

    def sample_rows(self, plan: PrefillPlan, to_sample: list[Req]) -> torch.Tensor:
        """The rows of the extend logits that belong to ``to_sample``."""
        return torch.tensor([plan.reqs.index(r) for r in to_sample], device=self.runner.device)

    def complete(
        self, plan: PrefillPlan, to_sample: list[Req], sampled: SampleOutput | None
    ) -> tuple[list[RequestDelta], list[Req]]:
        """After the forward of ``plan``: the prompt KV joins the tree and the sampled first
        tokens are recorded; the deltas, and the requests whose whole prompt is in the pool."""
        for req in plan.reqs:
            self.kv.cache_prefilled(req)
            if req.is_prefilling and req is not self.chunked:
                raise RuntimeError(f"request {req.rid} stopped mid-prompt without being the chunked request")
        prefilled = [req for req in plan.reqs if not req.is_prefilling]
        deltas: list[RequestDelta] = []
        for req in prefilled:
            if req.max_new_tokens == 0:
                req.finish_reason = FinishReason("length", length=0)
                if req.emit_output:
                    deltas.append(request_delta(req, [], [], []))
        if sampled is not None:
            deltas += self.sampling.record(to_sample, sampled)
        return deltas, prefilled
