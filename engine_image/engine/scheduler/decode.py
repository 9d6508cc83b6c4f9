"""The running requests and the decode step: one new token for each of them."""

from __future__ import annotations

from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.ipc.messages import RequestDelta
from engine.runtime.model_runner import ModelRunner
from engine.scheduler.batch import forward_batch
from engine.scheduler.request import Req
from engine.scheduler.request_kv import RequestKV
from engine.scheduler.token_sampling import TokenSampling


class Decode:
    def __init__(self, runner: ModelRunner, kv: RequestKV, sampling: TokenSampling) -> None:
        self.runner = runner
        self.kv = kv
        self.sampling = sampling
        self.running: list[Req] = []

    def __bool__(self) -> bool:
        return bool(self.running)

    def remove(self, rid: str) -> Req | None:
        for req in self.running:
            if req.rid == rid:
                self.running.remove(req)
                return req
        return None

    def run(self) -> tuple[list[RequestDelta], list[Req]]:
        """One decode forward over every running request; the deltas and the requests that
        finished (no longer running)."""
        reqs = self.running
        batch = self.build(reqs, [r.output_ids[-1] for r in reqs])
        deltas = self.sampling.advance(reqs, self.runner.forward(batch))
        self.running = [r for r in reqs if not r.finished]
        return deltas, [r for r in reqs if r.finished]

    def build(self, reqs: list[Req], tokens: list[int]) -> ForwardBatch:
        """The decode batch of ``reqs`` (``tokens``: their input tokens), one new KV slot each."""
        positions = [r.kv_len for r in reqs]
        out_cache_loc = self.kv.extend_decode(reqs)
        batch = forward_batch(
            self.runner, ForwardMode.DECODE, reqs, tokens, positions, out_cache_loc, positions, [1] * len(reqs)
        )
        self.kv.write_decode(reqs, batch)
        return batch
