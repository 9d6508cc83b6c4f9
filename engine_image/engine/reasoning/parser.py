"""Splits ``<think>...</think>`` reasoning from the answer, incrementally or all at once."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class ReasoningFormat:
    start: str = "<think>"
    end: str = "</think>"
    # NOTE: True where the chat template already opened the block in the prompt (DeepSeek-R1),
    # so the output starts inside it and may omit the opening tag.
    starts_in_reasoning: bool = False


@dataclass(frozen=True)
class ReasoningDelta:
    reasoning: str = ""
    content: str = ""


class _Mode(Enum):
    OPENING = 0  # before the first non-space text: is it the opening tag?
    REASONING = 1
    CONTENT = 2


class ReasoningParser:
    """One output's splitter: ``feed`` each text delta, the last one with ``final``.

    Leading whitespace of the reasoning and of the answer after the closing tag is dropped;
    reasoning that never closes is all reasoning.
    """

    def __init__(self, fmt: ReasoningFormat) -> None:
        self._fmt = fmt
        self._mode = _Mode.OPENING
        self._buffer = ""
        self._part_started = False  # has the current part released non-space text

    def feed(self, delta: str, final: bool = False) -> ReasoningDelta:
        """What ``delta`` (the next text) releases; ``final`` on the last one flushes the rest.

        The whole output fed at once with ``final`` is the one-shot split.
        """
        self._buffer += delta
        return self._advance(final)

    def _advance(self, final: bool) -> ReasoningDelta:
        reasoning: list[str] = []
        content: list[str] = []
        if self._mode is _Mode.OPENING:
            head = self._buffer.lstrip()
            if head.startswith(self._fmt.start):
                self._buffer = head[len(self._fmt.start) :]
                self._switch(_Mode.REASONING)
            elif final or (head and not self._fmt.start.startswith(head)):
                self._switch(_Mode.REASONING if self._fmt.starts_in_reasoning else _Mode.CONTENT)
        if self._mode is _Mode.REASONING:
            end = self._buffer.find(self._fmt.end)
            if end != -1:
                reasoning.append(self._take(end))
                self._buffer = self._buffer[len(self._fmt.end) :]
                self._switch(_Mode.CONTENT)
            else:
                keep = 0 if final else _held(self._buffer, self._fmt.end)
                reasoning.append(self._take(len(self._buffer) - keep))
        if self._mode is _Mode.CONTENT:
            content.append(self._take(len(self._buffer)))
        return ReasoningDelta("".join(reasoning), "".join(content))

    def _switch(self, mode: _Mode) -> None:
        self._mode, self._part_started = mode, False

    def _take(self, count: int) -> str:
        piece, self._buffer = self._buffer[:count], self._buffer[count:]
        if not self._part_started:
            piece = piece.lstrip()
            self._part_started = bool(piece)
        return piece


def _held(text: str, marker: str) -> int:
    """The length of the longest end of ``text`` that is a proper prefix of ``marker``."""
    for length in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:length]):
            return length
    return 0
