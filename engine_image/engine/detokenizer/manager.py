"""Per-request detokenizer state inside the detokenizer process, free of sockets."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from engine.detokenizer.incremental import IncrementalDetokenizer
from engine.ipc.messages import (
    AnyMessage,
    ControlResponse,
    DetokenizeOptions,
    ForwardOnlyOutput,
    RequestDelta,
    RequestError,
    TextOutputs,
    TokenOutputs,
    WeightsUpdated,
)
from engine.text.tokenizer import TextTokenizer

ToTokenizer = TextOutputs | RequestError | ControlResponse | ForwardOnlyOutput


@dataclass
class _Live:
    """One generating request: its detokenizer and the tokenizer worker that owns it."""

    detokenizer: IncrementalDetokenizer
    worker: int


class DetokenizerManager:
    """Maps scheduler messages to tokenizer-manager messages, each addressed to one of
    ``workers`` tokenizer workers; one detokenizer per live rid."""

    def __init__(self, tokenizer: TextTokenizer, workers: int = 1) -> None:
        self._tokenizer = tokenizer
        self._workers = workers
        self._requests: dict[str, _Live] = {}

    @property
    def active_rids(self) -> list[str]:
        return list(self._requests)

    def handle(self, message: AnyMessage) -> list[tuple[int, ToTokenizer]]:
        """(worker, message) for each message to forward; [] for a message not meant for them."""
        if isinstance(message, DetokenizeOptions):
            for rid in message.rids:
                detok = IncrementalDetokenizer(self._tokenizer, message.skip_special_tokens, message.stops)
                self._requests[rid] = _Live(detok, message.worker)
            return []
        if isinstance(message, TokenOutputs):
            return self._detokenize(message)
        if isinstance(message, RequestError):
            live = self._requests.get(message.rid)
            # NOTE: a refusal of a duplicate id goes to its sender, not to the id's owner.
            if live is not None and live.worker == message.worker:
                del self._requests[message.rid]
            return [(message.worker, message)]
        if isinstance(message, ControlResponse) and isinstance(message.payload, WeightsUpdated):
            # NOTE: every worker shows the weights serving now (/model_info).
            return [(worker, message) for worker in range(self._workers)]
        if isinstance(message, ControlResponse | ForwardOnlyOutput):
            return [(message.worker, message)]
        return []

    def _detokenize(self, out: TokenOutputs) -> list[tuple[int, ToTokenizer]]:
        by_worker: dict[int, list[RequestDelta]] = {}
        for delta in out.deltas:
            finished = delta.finish_reason is not None
            # NOTE: every request ends with one delta carrying a finish_reason (aborts
            # included), so this is the only cleanup the state needs.
            live = self._requests.pop(delta.rid) if finished else self._requests[delta.rid]
            text = live.detokenizer.feed(delta.token_ids, finished)
            by_worker.setdefault(live.worker, []).append(msgspec.structs.replace(delta, text=text))
        return [(worker, TextOutputs(deltas)) for worker, deltas in by_worker.items()]
