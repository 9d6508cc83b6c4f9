"""One generation request as the scheduler tracks it."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.constrained import GrammarMatcher
from engine.ipc.finish_reason import FinishReason
from engine.ipc.messages import LogprobPair
from engine.memory import TreeNode
from engine.sampling.params import SamplingParams
from engine.sampling.penalties import RequestPenaltyState


@dataclass(eq=False)
class Req:
    """A request's tokens, its KV bookkeeping and what it generated so far.

    KV invariant: the KV of ``fill_ids[:kv_len]`` is in the pool, at slots
    ``req_to_token[req_pool_idx, :kv_len]``; the first ``len(prefix_indices)`` of those
    belong to the radix tree (locked through ``last_node``), the rest to this request.
    """

    rid: str
    input_ids: list[int]
    params: SamplingParams
    max_new_tokens: int  # params.max_new_tokens capped by the context and the KV pool
    eos_token_ids: frozenset[int]
    return_logprob: bool = False
    top_logprobs_num: int = 0
    emit_output: bool = True  # False for the hidden prefill that n > 1 requests share
    penalty_state: RequestPenaltyState | None = None
    grammar: GrammarMatcher | None = None  # set once its grammar compiled (GrammarQueue)
    worker: int = 0  # the tokenizer worker that sent it: where a refusal goes

    output_ids: list[int] = field(default_factory=list)
    output_logprobs: list[float] = field(default_factory=list)
    output_top_logprobs: list[list[LogprobPair]] = field(default_factory=list)
    finish_reason: FinishReason | None = None

    req_pool_idx: int | None = None
    prefix_indices: torch.Tensor | None = None
    last_node: TreeNode | None = None
    kv_len: int = 0
    cached_tokens: int = 0

    @property
    def fill_ids(self) -> list[int]:
        return self.input_ids + self.output_ids

    @property
    def prefix_len(self) -> int:
        return 0 if self.prefix_indices is None else len(self.prefix_indices)

    @property
    def is_prefilling(self) -> bool:
        """True until every prompt token has its KV (a chunked prompt spans several steps)."""
        return self.kv_len < len(self.input_ids)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def future_tokens(self) -> int:
        """KV slots this request may still need: the rest of its prompt plus its outputs."""
        # NOTE: a decoding request's kv_len is past its prompt: no prompt left, not a negative count.
        prompt_left = max(0, len(self.input_ids) - self.kv_len)
        return prompt_left + self.max_new_tokens - len(self.output_ids)
