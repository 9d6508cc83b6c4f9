"""One chat answer split into reasoning, answer text and tool calls, streamed or whole.

The reasoning parser (--reasoning-parser) sees the model's text first; the tool-call parser
sees only the answer part after it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from engine.function_call import (
    ToolCall,
    ToolCallDelta,
    ToolCallDetector,
    ToolCallParser,
)
from engine.reasoning import ReasoningFormat, ReasoningParser, reasoning_format


@dataclass(frozen=True)
class ChatOutput:
    content: str
    reasoning: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class ChatOutputDelta:
    content: str = ""
    reasoning: str = ""
    calls: tuple[ToolCallDelta, ...] = ()


class ChatOutputParser:
    """One choice's parser: ``feed`` each text delta (the last with ``final``), or ``parse`` it whole."""

    def __init__(
        self,
        reasoning: ReasoningFormat | None,
        detector: ToolCallDetector | None,
        tool_names: Collection[str],
    ) -> None:
        self._reasoning = None if reasoning is None else ReasoningParser(reasoning)
        self._tools = None if detector is None else ToolCallParser(detector, tool_names)

    def feed(self, text: str, final: bool = False) -> ChatOutputDelta:
        """What ``text`` (the next delta) releases; ``final`` on the last one flushes the rest."""
        reasoning, content = "", text
        if self._reasoning is not None:
            split = self._reasoning.feed(text, final)
            reasoning, content = split.reasoning, split.content
        if self._tools is None:
            return ChatOutputDelta(content, reasoning)
        answer = self._tools.feed(content, final)
        return ChatOutputDelta(answer.normal_text, reasoning, answer.calls)

    def parse(self, text: str) -> ChatOutput:
        reasoning, content = "", text
        if self._reasoning is not None:
            split = self._reasoning.feed(text, final=True)
            reasoning, content = split.reasoning, split.content
        if self._tools is None:
            return ChatOutput(content, reasoning, ())
        parsed = self._tools.parse(content)
        return ChatOutput(parsed.normal_text, reasoning, parsed.calls)


def chat_output_parser(
    reasoning_parser: str | None, detector: ToolCallDetector | None, tool_names: Collection[str]
) -> ChatOutputParser | None:
    """The parser for one choice; None where the text goes out as it is."""
    if reasoning_parser is None and detector is None:
        return None
    return ChatOutputParser(
        None if reasoning_parser is None else reasoning_format(reasoning_parser),
        detector,
        tool_names,
    )
