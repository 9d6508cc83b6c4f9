"""Queues embed, score and classify requests and runs them in token-budgeted forwards, in arrival order."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.core.errors import InvalidRequest
from engine.ipc.messages import (
    ClassifyRequest,
    EmbedRequest,
    ForwardOnlyOutput,
    RequestError,
    ScoreRequest,
)
from engine.runtime.forward_only_model import ForwardOnlyModel

ForwardOnlyMessage = EmbedRequest | ScoreRequest | ClassifyRequest


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
            return RequestError(message.rid, str(err), message.worker)
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
        done = len(item.values)
        prompts = self._next_prompts(message.input_ids[done:])
        if not prompts:
            return None
        if isinstance(message, ScoreRequest):
            result = self.model.score(prompts, message.label_token_ids)
        elif isinstance(message, ClassifyRequest):
            types = message.token_type_ids
            result = self.model.classify(prompts, None if types is None else types[done : done + len(prompts)])
        else:
            result = self.model.embed(prompts)
        if result is None:
            return None  # no memory free this step; retried on the next one
        item.values += result.tolist()
        if len(item.values) < len(message.input_ids):
            return None
        self.pending.popleft()
        return ForwardOnlyOutput(message.rid, item.values, sum(len(p) for p in message.input_ids), message.worker)

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
        elif isinstance(message, ClassifyRequest):
            if not model.supports_classify:
                raise InvalidRequest(
                    "this model has no classification head: /v1/rerank and /classify need a "
                    "sequence-classification (cross-encoder or reward) model"
                )
            _check_token_types(message, model.type_vocab_size)
        elif model.supports_classify:
            raise InvalidRequest(
                "this is a sequence-classification model: it has no embeddings; use /v1/rerank or /classify"
            )
        elif not model.supports_embedding:
            raise InvalidRequest(
                "this model is not an embedding model: start the engine with --is-embedding to embed"
            )
        for ids in message.input_ids:
            model.check_prompt(ids)


def _check_token_types(message: ClassifyRequest, type_vocab_size: int) -> None:
    types = message.token_type_ids
    if types is None:
        return
    if [len(t) for t in types] != [len(ids) for ids in message.input_ids]:
        raise InvalidRequest("token_type_ids must have one id per input token")
    if any(not 0 <= t < type_vocab_size for row in types for t in row):
        raise InvalidRequest(f"token_type_ids must be in [0, {type_vocab_size})")
