"""Per-request detokenizer state inside the detokenizer process, free of sockets."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from engine.detokenizer.incremental import IncrementalDetokenizer
from engine.ipc.messages import (
    AnyMessage,
    ControlResponse,
    ForwardOnlyOutput,
    RequestError,
    TextOutputs,
    TokenOutputs,
)


class DetokenizerManager:
    """Maps scheduler messages to tokenizer-manager messages; one detokenizer per live rid."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self._tokenizer = tokenizer
        self._requests: dict[str, IncrementalDetokenizer] = {}

    @property
    def active_rids(self) -> list[str]:
        return list(self._requests)

    def handle(
        self, message: AnyMessage
    ) -> TextOutputs | RequestError | ControlResponse | ForwardOnlyOutput | None:
        """The message to forward to the tokenizer manager, or None for one not meant for it."""
        if isinstance(message, TokenOutputs):
            return self._detokenize(message)
        if isinstance(message, RequestError):
            self._requests.pop(message.rid, None)
            return message
        if isinstance(message, ControlResponse | ForwardOnlyOutput):
            return message
        return None

    def _detokenize(self, out: TokenOutputs) -> TextOutputs:
        texts: list[str] = []
        for i, rid in enumerate(out.rids):
            detok = self._requests.get(rid)
            if detok is None:
                detok = IncrementalDetokenizer(
                    self._tokenizer, out.skip_special_tokens[i], out.stops[i]
                )
                self._requests[rid] = detok
            finished = out.finish_reasons[i] is not None
            texts.append(detok.feed(out.new_token_ids[i], finished))
            # NOTE: every request ends with one output carrying a finish_reason (aborts
            # included), so this is the only cleanup the state needs.
            if finished:
                del self._requests[rid]
        return TextOutputs(
            rids=out.rids,
            texts=texts,
            new_token_ids=out.new_token_ids,
            new_logprobs=out.new_logprobs,
            new_top_logprobs=out.new_top_logprobs,
            finish_reasons=out.finish_reasons,
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            cached_tokens=out.cached_tokens,
        )
