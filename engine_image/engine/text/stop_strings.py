"""Stop strings: detecting them in freshly decoded text and trimming them from the output."""

from __future__ import annotations

from collections.abc import Sequence


def stop_window_tokens(stops: Sequence[str]) -> int:
    """How many trailing output tokens to decode so any stop string ending now is seen.

    NOTE: a token decodes to at least one character except special tokens, so the longest
    stop string in characters, plus slack for a multi-byte character split across tokens,
    bounds the window.
    """
    return max((len(s) for s in stops), default=0) + 2


def find_stop_string(text: str, stops: Sequence[str]) -> str | None:
    """The stop string that occurs in ``text`` (earliest position first), if any."""
    best: tuple[int, str] | None = None
    for stop in stops:
        pos = text.find(stop)
        if pos != -1 and (best is None or pos < best[0]):
            best = (pos, stop)
    return None if best is None else best[1]


def trim_at_stop(text: str, stops: Sequence[str]) -> str:
    """``text`` cut just before its first stop string; unchanged if none occurs."""
    positions = [pos for stop in stops if stop and (pos := text.find(stop)) != -1]
    return text[: min(positions)] if positions else text
