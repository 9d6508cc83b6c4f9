"""The scheduler: every generation request from admission to release, one step at a time.

A step runs one model forward: a prefill batch (``Prefill``) if one can be formed, else a
decode batch (``Decode``); both sample through ``TokenSampling``, whose ``FinishRules`` end
requests. With ``--enable-overlap-schedule`` the next step is built while the forward runs
(``OverlapSchedule``). ``RequestKV`` is the only writer of the KV memory (allocator, request table,
radix tree). The offline ``Engine`` and the server's scheduler process both drive ``step``.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.constrained import GrammarBackend, GrammarCache, GrammarLogitsMask
from engine.ipc.scheduler_stats import SchedulerStats
from engine.memory import RadixCache
from engine.models.expert_distribution import ExpertDistributionRecorder
from engine.runtime.model_runner import ModelRunner
from engine.sampling.params import SamplingParams
from engine.scheduler.decode import Decode
from engine.scheduler.finish import DecodeText, FinishRules
from engine.scheduler.grammar_queue import GrammarQueue
from engine.scheduler.new_request import new_request
from engine.scheduler.outputs import StepOutputs
from engine.scheduler.overlap import OverlapSchedule
from engine.scheduler.prefill import Prefill
from engine.scheduler.request import Req
from engine.scheduler.request_kv import RequestKV
from engine.scheduler.token_sampling import TokenSampling

# NOTE: with nothing else to run, a step waits this long for a grammar compile to finish.
GRAMMAR_WAIT_S = 0.005


class Scheduler:
    def __init__(
        self,
        runner: ModelRunner,
        decode_text: DecodeText,
        extra_eos_ids: Sequence[int] = (),
        grammar_backend: GrammarBackend | None = None,
    ) -> None:
        self.runner = runner
        self.eos_ids = frozenset(runner.model_config.eos_token_ids) | frozenset(extra_eos_ids)
        self.kv = RequestKV(runner, RadixCache(runner.allocator, disable=runner.config.disable_radix_cache))
        # Structured output: requests wait in grammar_queue while their grammar compiles.
        self.grammar_queue: GrammarQueue | None = None
        grammar_mask: GrammarLogitsMask | None = None
        if grammar_backend is not None:
            self.grammar_queue = GrammarQueue(GrammarCache(grammar_backend))
            grammar_mask = GrammarLogitsMask(grammar_backend, runner.config.max_running_requests)
        self.sampling = TokenSampling(runner.device, FinishRules(decode_text), grammar_mask)
        self.prefill = Prefill(runner, self.kv, self.sampling)
        self.decode = Decode(runner, self.kv, self.sampling)
        self.overlap = (
            OverlapSchedule(runner, self.prefill, self.decode, self.sampling, self._finish)
            if runner.config.enable_overlap_schedule
            else None
        )
        self.model_path = runner.config.model_path
        self.weight_version = 1

    @property
    def token_budget(self) -> int | None:
        """Prompt tokens one prefill step computes at most (None: whole prompts)."""
        return self.prefill.token_budget

    @property
    def expert_recorder(self) -> ExpertDistributionRecorder | None:
        return self.runner.expert_recorder

    # ------------------------------------------------------------------ requests

    def new_request(
        self,
        rid: str,
        input_ids: list[int],
        params: SamplingParams,
        return_logprob: bool = False,
        top_logprobs_num: int = 0,
    ) -> Req:
        """Checks the prompt against the model and the KV pool and builds a request; raises
        InvalidRequest (a client error). ``params`` come validated (``SamplingParams.validate``)."""
        return new_request(
            self.runner,
            self.eos_ids,
            self.grammar_queue is not None,
            rid,
            input_ids,
            params,
            return_logprob,
            top_logprobs_num,
        )

    def add_request(self, req: Req) -> None:
        self.prefill.waiting.append(req)

    def add_group(self, children: list[Req]) -> None:
        """The n samples of one prompt (n may be 1)."""
        if children[0].params.grammar is not None and self.grammar_queue is not None:
            self.grammar_queue.add(children)
        else:
            self.prefill.enqueue_group(children)

    def request_ids(self) -> list[str]:
        """Every request the scheduler knows, in any state (hidden prefill requests excluded)."""
        return [r.rid for r in self._in_flight() + self._not_started() if r.emit_output]

    def abort(self, rid: str) -> bool:
        """Ends a request wherever it is and frees its KV; False if it is unknown."""
        if self.overlap is not None:
            # NOTE: the request may be in the step in flight: that step is resolved first.
            self.overlap.sync()
            self.overlap.drop_outputs(rid)
        if self.grammar_queue is not None and self.grammar_queue.remove(rid):
            return True
        if self.prefill.remove_queued(rid):
            return True
        chunked = self.prefill.chunked
        req = self.decode.remove(rid)
        if req is None and chunked is not None and chunked.rid == rid:
            req, self.prefill.chunked = chunked, None
        if req is None:
            return False
        self.kv.release(req)
        return True

    @property
    def is_idle(self) -> bool:
        return not (self.prefill or self.decode or self.grammar_queue or self.overlap)

    def sync(self) -> None:
        """With the overlap scheduler, waits for the step in flight and resolves it (its
        outputs come with the next ``step``): the model is then free for another forward."""
        if self.overlap is not None:
            self.overlap.sync()

    def pause_admission(self) -> None:
        """Admits nothing new until ``resume_admission``: in-flight requests drain."""
        self.prefill.admission_paused = True

    def resume_admission(self) -> None:
        self.prefill.admission_paused = False

    def flush_cache(self) -> bool:
        """Empties the radix tree; refused (False) while any request is in flight."""
        if not self.is_idle:
            return False
        self.kv.empty_tree()
        return True

    def update_weights(self, model_path: str) -> None:
        """Serves the weights at ``model_path`` from now on (the scheduler must be idle); raises
        what loading raised, the old weights serving on."""
        assert self.is_idle, "weights change only between requests"
        self.runner.reload_weights(model_path)
        self.flush_cache()
        self.weight_version += 1
        self.model_path = model_path

    def stats(self) -> SchedulerStats:
        runner = self.runner
        return SchedulerStats(
            model_path=self.model_path,
            weight_version=self.weight_version,
            max_total_tokens=runner.max_total_tokens,
            context_length=runner.context_length,
            device=str(runner.device),
            dtype=str(runner.dtype).removeprefix("torch."),
            num_running_reqs=len(self._in_flight()),
            num_waiting_reqs=len(self._not_started()),
            kv=self.kv.stats(),
            weights_format=runner.weights.format,
            weights_quant_types=runner.weights.quant_types,
            weights_kernel=runner.weights.kernel,
            kv_pool_bytes=runner.kv_pool.nbytes,
            kv_pool_dtype=str(runner.kv_pool.dtype).removeprefix("torch."),
        )

    # ------------------------------------------------------------------ stepping

    def step(self) -> StepOutputs:
        """Runs one forward: a prefill batch if one can be formed, else a decode batch."""
        outputs = StepOutputs()
        if self.grammar_queue:
            busy = bool(self.prefill.waiting or self.prefill.chunked or self.decode)
            ready, outputs.refused = self.grammar_queue.pop_done(0.0 if busy else GRAMMAR_WAIT_S)
            for group in ready:
                self.prefill.enqueue_group(group)
        if self.overlap is not None:
            self.overlap.step(outputs)
            return outputs
        plan = self.prefill.plan(self.decode.running)
        if plan.reqs:
            deltas, prefilled = self.prefill.run(plan)
            for req in prefilled:
                if req.finished:
                    self._finish(req)
                else:
                    self.decode.running.append(req)
        elif self.decode:
            deltas, finished = self.decode.run()
            for req in finished:
                self._finish(req)
        else:
            deltas = []
        outputs.deltas = deltas
        return outputs

    def _finish(self, req: Req) -> None:
        self.kv.release(req)
        self.prefill.on_finished(req)

    def _in_flight(self) -> list[Req]:
        """Requests holding KV: running, and the one whose prompt is half prefilled."""
        chunked = self.prefill.chunked
        return self.decode.running + ([chunked] if chunked is not None else [])

    def _not_started(self) -> list[Req]:
        compiling = self.grammar_queue.reqs() if self.grammar_queue is not None else []
        return self.prefill.queued() + compiling

