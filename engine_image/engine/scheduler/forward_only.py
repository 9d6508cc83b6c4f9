"""Queues embed and score requests and runs them in token-budgeted forwards, in arrival order."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.errors import InvalidRequest
from engine.ipc.messages import EmbedRequest, ForwardOnlyOutput, RequestError, ScoreRequest
from engine.runtime.forward_only_model import ForwardOnlyModel

ForwardOnlyMessage = EmbedRequest | ScoreRequest


@dataclass
class _Pending:
    message: ForwardOnlyMessage
    values: list[list[float]] = field(default_factory=list)


class ForwardOnlyQueue:
    def __init__(self, model: ForwardOnlyModel, token_budget: int | None) -> None:
        self.model = model
        self.token_budget = token_budget
        self.pending: deque[_Pending] = deque()

    def __bool__(self) -> bool:
        return bool(self.pending)

    def add(self, message: ForwardOnlyMessage) -> RequestError | None:
        """Queues the request, or returns why it is refused."""
        try:
            self._check(message)
        except InvalidRequest as err:
            return RequestError(message.rid, str(err))
        self.pending.append(_Pending(message))
        return None

    def abort(self, rid: str) -> bool:
        for item in self.pending:
            if item.message.rid == rid:
                self.pending.remove(item)
                return True
        return False

    def run_once(self) -> ForwardOnlyOutput | None:
        """One forward for the oldest request; its output once all its prompts are done."""
        if not self.pending:
            return None
        item = self.pending[0]
        message = item.message
        prompts = self._next_prompts(message.input_ids[len(item.values) :])
        if not prompts:
            return None
        if isinstance(message, ScoreRequest):
            result = self.model.score(prompts, message.label_token_ids)
        else:
            result = self.model.embed(prompts)
        if result is None:
            return None  # no memory free this step; retried on the next one
        item.values += result.tolist()
        if len(item.values) < len(message.input_ids):
            return None
        self.pending.popleft()
        return ForwardOnlyOutput(message.rid, item.values, sum(len(p) for p in message.input_ids))

    def _next_prompts(self, remaining: list[list[int]]) -> list[list[int]]:
        """As many prompts as fit in the token budget and the free rows (at least one)."""
        rows = self.model.free_rows()
        chosen: list[list[int]] = []
        tokens = 0
        for prompt in remaining:
            over_budget = self.token_budget is not None and tokens + len(prompt) > self.token_budget
            if len(chosen) >= rows or (chosen and over_budget):
                break
            chosen.append(prompt)
            tokens += len(prompt)
        return chosen

    def _check(self, message: ForwardOnlyMessage) -> None:
        model = self.model
        if not message.input_ids:
            raise InvalidRequest("the input is empty")
        if isinstance(message, ScoreRequest):
            if not model.supports_score:
                raise InvalidRequest("this model cannot score: /v1/score needs a generation (decoder) model")
            if not message.label_token_ids:
                raise InvalidRequest("label_token_ids must not be empty")
            if any(not 0 <= t < model.vocab_size for t in message.label_token_ids):
                raise InvalidRequest(f"label_token_ids must be token ids in [0, {model.vocab_size})")
        elif not model.supports_embedding:
            raise InvalidRequest(
                "this model is not an embedding model: start the engine with --is-embedding to embed"
            )
        for ids in message.input_ids:
            model.check_prompt(ids)
