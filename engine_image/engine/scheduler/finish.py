"""When a request ends: on EOS or a stop token, a stop string, its grammar's end, its length."""

from __future__ import annotations

from collections.abc import Callable

from engine.ipc.finish_reason import FinishReason
from engine.scheduler.request import Req
from engine.text.stop_strings import find_stop_string, stop_window_tokens

DecodeText = Callable[[list[int]], str]


class FinishRules:
    def __init__(self, decode: DecodeText) -> None:
        self.decode = decode  # ids -> text, to find stop strings in the output's tail

    def check(self, req: Req, token: int) -> None:
        """Sets ``req.finish_reason`` if ``token``, just appended to its output, ends it."""
        grammar = req.grammar
        if grammar is not None and not grammar.accept_token(token):
            # NOTE: only at a dead end (the grammar allowed no token); the mask prevents the rest.
            req.finish_reason = FinishReason("abort", message=f"the grammar does not allow token {token}")
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
