"""Per-request detokenizer state inside the detokenizer process, free of sockets."""

from __future__ import annotations

import msgspec

from engine.detokenizer.incremental import IncrementalDetokenizer
from engine.ipc.messages import (
    AnyMessage,
    ControlResponse,
    DetokenizeOptions,
    ForwardOnlyOutput,
    RequestError,
    TextOutputs,
    TokenOutputs,
)
from engine.text.tokenizer import TextTokenizer


class DetokenizerManager:
    """Maps scheduler messages to tokenizer-manager messages; one detokenizer per live rid."""

    def __init__(self, tokenizer: TextTokenizer) -> None:
        self._tokenizer = tokenizer
        self._requests: dict[str, IncrementalDetokenizer] = {}

    @property
    def active_rids(self) -> list[str]:
        return list(self._requests)

    def handle(
        self, message: AnyMessage
    ) -> TextOutputs | RequestError | ControlResponse | ForwardOnlyOutput | None:
        """The message to forward to the tokenizer manager, or None for one not meant for it."""
        if isinstance(message, DetokenizeOptions):
            for rid in message.rids:
                self._requests[rid] = IncrementalDetokenizer(
                    self._tokenizer, message.skip_special_tokens, message.stops
                )
            return None
        if isinstance(message, TokenOutputs):
            return self._detokenize(message)
        if isinstance(message, RequestError):
            self._requests.pop(message.rid, None)
            return message
        if isinstance(message, ControlResponse | ForwardOnlyOutput):
            return message
        return None

    def _detokenize(self, out: TokenOutputs) -> TextOutputs:
        deltas = []
        for delta in out.deltas:
            finished = delta.finish_reason is not None
            # NOTE: every request ends with one delta carrying a finish_reason (aborts
            # included), so this is the only cleanup the state needs.
            detok = self._requests.pop(delta.rid) if finished else self._requests[delta.rid]
            deltas.append(msgspec.structs.replace(delta, text=detok.feed(delta.token_ids, finished)))
        return TextOutputs(deltas)
