"""The scheduling loop: admit, prefill (chunked), decode, sample, finish; one step at a time.

The scheduler owns every request from admission to release and is the only writer of
the KV memory (allocator, request table, radix tree). ``step`` runs one model forward;
the offline ``Engine`` and the server's scheduler process both drive it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence

import torch

from engine.constrained import GrammarBackend, GrammarCache, GrammarLogitsMask
from engine.core.errors import InvalidRequest
from engine.core.forward_batch import ForwardBatch, ForwardMode
from engine.ipc.finish_reason import FinishReason
from engine.memory import RadixCache
from engine.runtime.model_runner import ModelRunner
from engine.sampling.batch_info import SamplingBatchInfo
from engine.sampling.params import SamplingParams
from engine.sampling.penalties import RequestPenaltyState, cumulate_batch
from engine.sampling.sampler import Sampler
from engine.scheduler.admission import AddResult, PrefillAdder, PrefillPlan
from engine.scheduler.grammar_queue import GrammarQueue
from engine.scheduler.outputs import StepOutput
from engine.scheduler.request import Req
from engine.scheduler.request_kv import RequestKV
from engine.text.stop_strings import find_stop_string, stop_window_tokens

logger = logging.getLogger(__name__)

Decode = Callable[[list[int]], str]

# NOTE: with nothing else to run, a step waits this long for a grammar compile to finish.
GRAMMAR_WAIT_S = 0.005


class Scheduler:
    def __init__(
        self,
        runner: ModelRunner,
        decode: Decode,
        extra_eos_ids: Sequence[int] = (),
        grammar_backend: GrammarBackend | None = None,
    ) -> None:
        self.runner = runner
        self.decode = decode
        self.eos_ids = frozenset(runner.model_config.eos_token_ids) | frozenset(extra_eos_ids)
        self.tree = RadixCache(runner.allocator, disable=runner.config.disable_radix_cache)
        self.kv = RequestKV(runner, self.tree)
        self.sampler = Sampler()
        self.token_budget = runner.config.prefill_chunk()
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.chunked: Req | None = None
        # n > 1: children wait here until the hidden request that caches their prompt ends.
        self.held: dict[str, list[Req]] = {}
        # NOTE: set while a weight update waits for in-flight requests to drain.
        self.admission_paused = False
        # Structured output: requests wait in grammar_queue while their grammar compiles.
        self.grammar_queue: GrammarQueue | None = None
        self.grammar_mask: GrammarLogitsMask | None = None
        if grammar_backend is not None:
            self.grammar_queue = GrammarQueue(GrammarCache(grammar_backend))
            rows = runner.config.max_running_requests
            self.grammar_mask = GrammarLogitsMask(grammar_backend, rows)

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
        mc, context = self.runner.model_config, self.runner.context_length
        if not input_ids:
            raise InvalidRequest("the prompt is empty")
        if any(not 0 <= t < mc.vocab_size for t in input_ids):
            raise InvalidRequest(f"input_ids must be token ids in [0, {mc.vocab_size})")
        if len(input_ids) >= context:
            raise InvalidRequest(
                f"the prompt has {len(input_ids)} tokens; this model's context length is {context}"
            )
        if len(input_ids) >= self.runner.max_total_tokens:
            raise InvalidRequest(
                f"the prompt has {len(input_ids)} tokens; the KV cache holds only {self.runner.max_total_tokens}"
            )
        if top_logprobs_num < 0:
            raise InvalidRequest("top_logprobs_num must be >= 0")
        if params.grammar is not None and self.grammar_queue is None:
            raise InvalidRequest(f"{params.grammar[0]} needs a grammar backend; there is none")
        room = min(context, self.runner.max_total_tokens) - len(input_ids)
        return Req(
            rid=rid,
            input_ids=list(input_ids),
            params=params,
            max_new_tokens=min(params.max_new_tokens, room),
            eos_token_ids=frozenset() if params.ignore_eos else self.eos_ids,
            return_logprob=return_logprob or top_logprobs_num > 0,
            top_logprobs_num=top_logprobs_num,
            penalty_state=RequestPenaltyState.for_request(params, input_ids, mc.vocab_size, self.runner.device),
        )

    def add_request(self, req: Req) -> None:
        self.waiting.append(req)

    def add_group(self, children: list[Req]) -> None:
        """n > 1 samples of one prompt: its KV is computed once and shared via the radix tree."""
        if children[0].params.grammar is not None and self.grammar_queue is not None:
            self.grammar_queue.add(children)
        else:
            self._enqueue_group(children)

    def _enqueue_group(self, children: list[Req]) -> None:
        if self.tree.disable or len(children) == 1:
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

    def request_ids(self) -> list[str]:
        """Every request the scheduler knows, in any state (hidden prefill requests excluded)."""
        active = self.running + list(self.waiting) + ([self.chunked] if self.chunked else [])
        held = [r for group in self.held.values() for r in group]
        compiling = self.grammar_queue.reqs() if self.grammar_queue is not None else []
        return [r.rid for r in active + held + compiling if r.emit_output]

    def abort(self, rid: str) -> bool:
        """Ends a request wherever it is and frees its KV; False if it is unknown."""
        if self.grammar_queue is not None and self.grammar_queue.remove(rid):
            return True
        for group in self.held.values():
            for req in group:
                if req.rid == rid:
                    group.remove(req)
                    return True
        for req in list(self.waiting):
            if req.rid == rid:
                self.waiting.remove(req)
                return True
        for req in self.running + ([self.chunked] if self.chunked else []):
            if req.rid == rid:
                self.kv.release(req)
                if req is self.chunked:
                    self.chunked = None
                else:
                    self.running.remove(req)
                return True
        return False

    @property
    def is_idle(self) -> bool:
        return not (self.waiting or self.running or self.chunked or self.held or self.grammar_queue)

    def flush_cache(self) -> bool:
        """Empties the radix tree; refused (False) while any request is in flight."""
        if not self.is_idle:
            return False
        self.tree.reset()
        return True

    # ------------------------------------------------------------------ stepping

    def step(self) -> list[StepOutput]:
        """Runs one forward: a prefill batch if one can be formed, else a decode batch."""
        refused: list[StepOutput] = []
        if self.grammar_queue:
            busy = bool(self.waiting or self.running or self.chunked)
            ready, refused = self.grammar_queue.pop_done(0.0 if busy else GRAMMAR_WAIT_S)
            for group in ready:
                self._enqueue_group(group)
        plan = self._plan_prefill()
        if plan.reqs:
            return refused + self._run_prefill(plan)
        if self.running:
            return refused + self._run_decode()
        return refused

    def _reserved_tokens(self) -> int:
        active = self.running + ([self.chunked] if self.chunked else [])
        return sum(r.future_tokens() for r in active)

    def _plan_prefill(self) -> PrefillPlan:
        adder = PrefillAdder(
            self.tree,
            self.runner.allocator,
            self.runner.req_to_token_pool,
            self.token_budget,
            self._reserved_tokens(),
            self.runner.config.max_running_requests - len(self.running) - (1 if self.chunked else 0),
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

    def _run_prefill(self, plan: PrefillPlan) -> list[StepOutput]:
        device = self.runner.device
        tokens: list[int] = []
        positions: list[int] = []
        prefix_lens: list[int] = []
        for req, n in zip(plan.reqs, plan.extend_lens):
            start = req.kv_len
            tokens += req.input_ids[start : start + n]
            positions += range(start, start + n)
            prefix_lens.append(start)
        out_cache_loc = self.kv.alloc_slots(len(tokens))
        offset = 0
        for req, n in zip(plan.reqs, plan.extend_lens):
            assert req.req_pool_idx is not None, "a request in a batch holds a request row"
            self.runner.req_to_token_pool.write(req.req_pool_idx, req.kv_len, out_cache_loc[offset : offset + n])
            req.kv_len += n
            offset += n
        batch = self._forward_batch(
            ForwardMode.EXTEND, plan.reqs, tokens, positions, out_cache_loc, prefix_lens, plan.extend_lens
        )
        logits = self.runner.forward(batch)
        for req in plan.reqs:
            self.kv.cache_prefilled(req)
        done_rows = [i for i, req in enumerate(plan.reqs) if not req.is_prefilling]
        for req in plan.reqs:
            if req.is_prefilling and req is not self.chunked:
                raise RuntimeError(f"request {req.rid} stopped mid-prompt without being the chunked request")
        outputs: list[StepOutput] = []
        finished_prefill = [plan.reqs[i] for i in done_rows]
        to_sample = [r for r in finished_prefill if r.max_new_tokens > 0]
        for req in finished_prefill:
            if req.max_new_tokens == 0:
                req.finish_reason = FinishReason("length", length=0)
                if req.emit_output:
                    outputs.append(self._output(req, (), (), ()))
        if to_sample:
            rows = torch.tensor([plan.reqs.index(r) for r in to_sample], device=device)
            outputs += self._sample_and_advance(to_sample, logits[rows])
        for req in finished_prefill:
            if req.finished:
                self._finish(req)
            else:
                self.running.append(req)
        return outputs

    def _run_decode(self) -> list[StepOutput]:
        reqs = self.running
        out_cache_loc = self.kv.alloc_slots(len(reqs))
        tokens = [r.output_ids[-1] for r in reqs]
        positions = [r.kv_len for r in reqs]
        table = self.runner.req_to_token_pool
        for i, req in enumerate(reqs):
            assert req.req_pool_idx is not None, "a running request holds a request row"
            table.write(req.req_pool_idx, req.kv_len, out_cache_loc[i : i + 1])
            req.kv_len += 1
        batch = self._forward_batch(
            ForwardMode.DECODE, reqs, tokens, positions, out_cache_loc, positions, [1] * len(reqs)
        )
        outputs = self._sample_and_advance(reqs, self.runner.forward(batch))
        still_running = []
        for req in reqs:
            if req.finished:
                self._finish(req)
            else:
                still_running.append(req)
        self.running = still_running
        return outputs

    def _forward_batch(
        self,
        mode: ForwardMode,
        reqs: list[Req],
        tokens: list[int],
        positions: list[int],
        out_cache_loc: torch.Tensor,
        prefix_lens: list[int],
        extend_lens: list[int],
    ) -> ForwardBatch:
        device = self.runner.device
        seq_lens = [r.kv_len for r in reqs]
        return ForwardBatch(
            mode=mode,
            input_ids=torch.tensor(tokens, dtype=torch.int64, device=device),
            positions=torch.tensor(positions, dtype=torch.int64, device=device),
            out_cache_loc=out_cache_loc,
            req_pool_indices=torch.tensor([r.req_pool_idx for r in reqs], dtype=torch.int64, device=device),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int64, device=device),
            seq_lens_cpu=seq_lens,
            extend_prefix_lens_cpu=prefix_lens,
            extend_seq_lens_cpu=extend_lens,
            req_to_token=self.runner.req_to_token_pool.req_to_token,
            kv_pool=self.runner.kv_pool,
        )

    def _sample_and_advance(self, reqs: list[Req], logits: torch.Tensor) -> list[StepOutput]:
        info = SamplingBatchInfo.from_params(
            [r.params for r in reqs], self.runner.device, logits.shape[-1], [len(r.output_ids) for r in reqs]
        )
        want_logprob = any(r.return_logprob for r in reqs)
        if self.grammar_mask is not None and any(r.grammar for r in reqs):
            self.grammar_mask.apply(logits, [r.grammar for r in reqs])
        result = self.sampler.sample(
            logits,
            info,
            penalty_states=[r.penalty_state for r in reqs] if info.has_penalties else None,
            return_logprob=want_logprob,
            top_logprobs_nums=[r.top_logprobs_num for r in reqs] if want_logprob else None,
        )
        if info.has_penalties:
            cumulate_batch([r.penalty_state for r in reqs], result.next_token_ids)
        next_ids = result.next_token_ids.tolist()
        logprobs = result.logprobs.tolist() if result.logprobs is not None else None
        outputs = []
        for i, (req, token) in enumerate(zip(reqs, next_ids)):
            req.output_ids.append(token)
            new_logprobs: tuple[float, ...] = ()
            new_top: tuple[tuple[tuple[float, int], ...], ...] = ()
            if req.return_logprob and logprobs is not None:
                req.output_logprobs.append(logprobs[i])
                new_logprobs = (logprobs[i],)
                if req.top_logprobs_num and result.top_logprobs is not None:
                    ids, values = result.top_logprobs[i]
                    pairs = tuple(zip(values, ids))
                    req.output_top_logprobs.append(list(pairs))
                    new_top = (pairs,)
            self._check_finished(req, token)
            if req.emit_output:
                outputs.append(self._output(req, (token,), new_logprobs, new_top))
        return outputs

    def _check_finished(self, req: Req, token: int) -> None:
        grammar = req.grammar
        if grammar is not None and not grammar.accept_token(token):
            # NOTE: only at a dead end (the grammar allowed no token); the mask prevents the rest.
            refusal = f"the grammar does not allow token {token}"
            req.finish_reason = FinishReason("abort", message=refusal)
        elif (
            token in req.eos_token_ids
            or token in req.params.stop_token_ids
            or (grammar is not None and grammar.is_terminated())
        ):
            req.finish_reason = FinishReason("stop", matched=token)
        elif req.params.stop and (
            matched := find_stop_string(
                self.decode(req.output_ids[-stop_window_tokens(req.params.stop) :]), req.params.stop
            )
        ):
            req.finish_reason = FinishReason("stop", matched=matched)
        elif len(req.output_ids) >= req.max_new_tokens:
            req.finish_reason = FinishReason("length", length=len(req.output_ids))

    def _output(
        self,
        req: Req,
        tokens: tuple[int, ...],
        logprobs: tuple[float, ...],
        top: tuple[tuple[tuple[float, int], ...], ...],
    ) -> StepOutput:
        return StepOutput(
            rid=req.rid,
            token_ids=tokens,
            logprobs=logprobs,
            top_logprobs=top,
            finish_reason=req.finish_reason,
            prompt_tokens=len(req.input_ids),
            cached_tokens=req.cached_tokens,
            completion_tokens=len(req.output_ids),
        )

    # ------------------------------------------------------------------ finishing

    def _finish(self, req: Req) -> None:
        self.kv.release(req)
        children = self.held.pop(req.rid, None)
        if children:
            self.waiting.extendleft(reversed(children))
