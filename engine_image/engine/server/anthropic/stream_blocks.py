"""Answer text and tool-call deltas as Anthropic's streamed content blocks.

Text goes into a text block; each tool call opens a tool_use block whose input arrives as
``input_json_delta`` fragments. A block is stopped when the next one starts or at the end.
"""

from __future__ import annotations

import uuid

from engine.function_call import ToolCallDelta
from engine.server.anthropic.protocol import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    InputJsonDelta,
    TextBlock,
    TextDelta,
    ToolUseBlock,
)

BlockEvent = ContentBlockStart | ContentBlockDelta | ContentBlockStop


def new_tool_use_id() -> str:
    return f"toolu_{uuid.uuid4().hex[:24]}"


class BlockEvents:
    def __init__(self, text_open: bool = False) -> None:
        """``text_open``: text block 0 was already started by the caller."""
        self._index = 0 if text_open else -1
        self._open: str | None = "text" if text_open else None
        # NOTE: whitespace before a call would be a block of its own; it waits for real text.
        self._pending_space = ""
        self.called_tools = False

    def text(self, text: str) -> list[BlockEvent]:
        if not text:
            return []
        events: list[BlockEvent] = []
        if self._open != "text":
            if not text.strip():
                self._pending_space += text
                return []
            text, self._pending_space = self._pending_space + text, ""
            events += self._start(TextBlock(text=""))
        events.append(ContentBlockDelta(index=self._index, delta=TextDelta(text=text)))
        return events

    def call(self, delta: ToolCallDelta) -> list[BlockEvent]:
        events: list[BlockEvent] = []
        if delta.name is not None:
            self._pending_space, self.called_tools = "", True
            events += self._start(ToolUseBlock(id=new_tool_use_id(), name=delta.name, input={}))
        if delta.arguments:
            events.append(
                ContentBlockDelta(
                    index=self._index, delta=InputJsonDelta(partial_json=delta.arguments)
                )
            )
        return events

    def close(self) -> list[BlockEvent]:
        """Stops the open block; an answer with no block at all gets one empty text block."""
        events: list[BlockEvent] = []
        if self._open is None:
            events += self._start(TextBlock(text=""))
        events.append(ContentBlockStop(index=self._index))
        self._open = None
        return events

    def _start(self, block: TextBlock | ToolUseBlock) -> list[BlockEvent]:
        events: list[BlockEvent] = []
        if self._open is not None:
            events.append(ContentBlockStop(index=self._index))
        self._index += 1
        self._open = "text" if isinstance(block, TextBlock) else "tool_use"
        events.append(ContentBlockStart(index=self._index, content_block=block))
        return events
