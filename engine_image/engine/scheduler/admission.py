"""Admission of waiting requests into a prefill batch under a token and a KV budget.

The KV budget is a reservation: every admitted request reserves the KV slots it may still
need (rest of its prompt + its remaining ``max_new_tokens``). A request is admitted only
if all reservations together fit in the free slots plus what the radix tree could evict,
so a running request never finds the pool full and nothing has to be retracted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto

from engine.scheduler.request import Req
from engine.scheduler.request_kv import RequestKV


class AddResult(Enum):
    ADDED = auto()
    CHUNKED = auto()  # added with only part of its prompt: the budget is now spent
    NO_TOKEN_BUDGET = auto()  # not added: this step's prefill budget is spent
    NO_MEMORY = auto()  # the KV pool cannot hold its reservation now
    NO_SLOT = auto()  # max running requests reached


@dataclass
class PrefillPlan:
    """Requests to extend this step and how many of their prompt tokens to compute."""

    reqs: list[Req] = field(default_factory=list)
    extend_lens: list[int] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(self.extend_lens)


class PrefillAdder:
    def __init__(
        self,
        kv: RequestKV,
        token_budget: int | None,
        reserved_tokens: int,
        free_running_slots: int,
    ) -> None:
        self.kv = kv
        self.token_budget = token_budget  # None: no chunking, whole prompts only
        self.reserved = reserved_tokens
        self.free_running_slots = free_running_slots
        self.plan = PrefillPlan()

    def add_chunk_continuation(self, req: Req) -> AddResult:
        """The next chunk of a request whose prompt is already partly in the pool."""
        return self._schedule(req, already_reserved=True)

    def add_new(self, req: Req) -> AddResult:
        if self.free_running_slots <= len(self.plan.reqs) or self.kv.free_rows() == 0:
            return AddResult.NO_SLOT
        if self.token_budget is not None and self.plan.num_tokens >= self.token_budget:
            return AddResult.NO_TOKEN_BUDGET
        self.kv.lock_cached_prefix(req)
        if self.reserved + req.future_tokens() > self.kv.obtainable_tokens():
            self.kv.unlock_cached_prefix(req)
            return AddResult.NO_MEMORY
        self.kv.assign_row(req)
        return self._schedule(req, already_reserved=False)

    def _schedule(self, req: Req, already_reserved: bool) -> AddResult:
        remaining = len(req.input_ids) - req.kv_len
        chunk = remaining
        if self.token_budget is not None:
            chunk = min(remaining, self.token_budget - self.plan.num_tokens)
        if not already_reserved:
            self.reserved += req.future_tokens()
        self.plan.reqs.append(req)
        self.plan.extend_lens.append(chunk)
        return AddResult.ADDED if chunk == remaining else AddResult.CHUNKED
