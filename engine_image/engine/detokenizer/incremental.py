"""Incremental detokenization of one request's output, with stop-string holdback."""

from __future__ import annotations

from engine.text.stop_strings import trim_at_stop
from engine.text.tokenizer import TextTokenizer

_REPLACEMENT_CHAR = "\ufffd"


class IncrementalDetokenizer:
    """Turns one request's output token ids, fed in chunks, into new text per chunk.

    Decoding uses the offsets method (as in SGLang / vLLM): only the window
    ``ids[prefix_offset:]`` is decoded each step, and the new text is what it adds to
    ``ids[prefix_offset:read_offset]`` (text already produced). Decoding a few earlier
    tokens along with the new ones keeps tokenizer-level context (e.g. a SentencePiece
    leading space) identical to a full decode.

    Invariant: the concatenation of everything ``feed`` returns equals
    ``trim_at_stop(tokenizer.decode(all_ids, skip_special_tokens=...), stops)`` and never
    contains a stop string.
    """

    def __init__(
        self, tokenizer: TextTokenizer, skip_special_tokens: bool, stops: list[str]
    ) -> None:
        self._tokenizer = tokenizer
        self._skip_special_tokens = skip_special_tokens
        self._stops = [stop for stop in stops if stop]
        self._ids: list[int] = []
        self._prefix_offset = 0
        self._read_offset = 0
        self._pending = ""  # decoded text not emitted yet (a possible stop-string start)
        self._emitted_chars = 0

    def feed(self, new_ids: list[int], finished: bool) -> str:
        """Appends ``new_ids`` and returns the text that became final since the last call."""
        self._ids.extend(new_ids)
        if finished:
            # NOTE: the final text comes from one full decode, so the emitted total equals
            # it exactly; the streamed part is a prefix of it because the offsets method
            # reproduces the full decode and the stream never passes a stop string.
            text = self._tokenizer.decode(self._ids, self._skip_special_tokens)
            return trim_at_stop(text, self._stops)[self._emitted_chars :]
        self._pending += self._decode_new()
        release = self._releasable_chars()
        out, self._pending = self._pending[:release], self._pending[release:]
        self._emitted_chars += len(out)
        return out

    def _decode_new(self) -> str:
        """Text added by the ids since ``read_offset``; "" while it ends mid-character."""
        skip = self._skip_special_tokens
        prefix_text = self._tokenizer.decode(self._ids[self._prefix_offset : self._read_offset], skip)
        window_text = self._tokenizer.decode(self._ids[self._prefix_offset :], skip)
        # NOTE: a trailing U+FFFD means the window ends inside a multi-byte UTF-8 character
        # split across tokens; the offsets stay put so the next call decodes it whole.
        if len(window_text) <= len(prefix_text) or window_text.endswith(_REPLACEMENT_CHAR):
            return ""
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        return window_text[len(prefix_text) :]

    def _releasable_chars(self) -> int:
        """How many leading chars of ``_pending`` can never belong to a stop string.

        NOTE: everything from the first complete stop string on is held (the final trim drops
        it); otherwise the longest suffix that is a prefix of some stop string is held until
        later text shows whether it completes. Only ``_pending`` is searched: an emitted char
        was never part of a stop-string prefix still open at the end of the text.
        """
        positions = [pos for stop in self._stops if (pos := self._pending.find(stop)) != -1]
        if positions:
            return min(positions)
        held = 0
        for stop in self._stops:
            for length in range(min(len(stop) - 1, len(self._pending)), held, -1):
                if self._pending.endswith(stop[:length]):
                    held = length
                    break
        return len(self._pending) - held
