"""The last part of every step: choose each request's next token, record it, apply the finish rules."""

from __future__ import annotations

import torch

from engine.constrained import GrammarLogitsMask
from engine.ipc.messages import LogprobPair, RequestDelta
from engine.sampling.batch_info import SamplingBatchInfoCache
from engine.sampling.penalties import cumulate_batch
from engine.sampling.sampler import SampleOutput, Sampler
from engine.scheduler.finish import FinishRules
from engine.scheduler.outputs import request_delta
from engine.scheduler.request import Req


class TokenSampling:
    def __init__(self, device: torch.device, finish_rules: FinishRules, grammar_mask: GrammarLogitsMask | None) -> None:
        self.device = device
        self.finish_rules = finish_rules
        self.grammar_mask = grammar_mask
        self.sampler = Sampler()
        self.infos = SamplingBatchInfoCache(device)

    def advance(self, reqs: list[Req], logits: torch.Tensor) -> list[RequestDelta]:
        """Appends one token to each request (row ``i`` of ``logits`` is ``reqs[i]``'s); the
        deltas of those that emit output."""
        return self.record(reqs, self.sample(reqs, logits, [len(r.output_ids) for r in reqs]).to_host())

    def sample(self, reqs: list[Req], logits: torch.Tensor, output_lens: list[int]) -> SampleOutput:
        """The device half of ``advance``: chooses each row's token and updates the penalty
        state; reads no request's outputs (``output_lens[i]``: the tokens ``reqs[i]`` will have
        generated before this one), so the overlap scheduler runs it on its forward thread."""
        info = self.infos.get([r.params for r in reqs], logits.shape[-1], output_lens)
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
        return result

    def record(self, reqs: list[Req], result: SampleOutput) -> list[RequestDelta]:
        """The host half of ``advance``: appends the chosen tokens and applies the finish rules."""
        # NOTE: after ``to_host``, tokens and log-probs arrive in one wait, not two syncs.
        result.wait_on_host()
        next_ids: list[int] = result.next_token_ids.tolist()
        logprobs: list[float] | None = result.logprobs.tolist() if result.logprobs is not None else None
        deltas = []
        for i, (req, token) in enumerate(zip(reqs, next_ids, strict=True)):
            req.output_ids.append(token)
            new_logprobs: list[float] = []
            new_top: list[list[LogprobPair]] = []
            if req.return_logprob and logprobs is not None:
                req.output_logprobs.append(logprobs[i])
                new_logprobs = [logprobs[i]]
                if req.top_logprobs_num and result.top_logprobs is not None:
                    ids, values = result.top_logprobs[i]
                    pairs = list(zip(values, ids, strict=True))
                    req.output_top_logprobs.append(pairs)
                    new_top = [pairs]
            self.finish_rules.check(req, token)
            if req.emit_output:
                deltas.append(request_delta(req, [token], new_logprobs, new_top))
        return deltas
