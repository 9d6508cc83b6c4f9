"""Tool calls parsed from a chat answer, in OpenAI's response shapes (whole and streamed)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from engine.function_call import ToolCall, ToolCallDelta
from engine.server.openai.protocol import (
    FunctionCallDelta,
    FunctionCallOut,
    ToolCallDeltaOut,
    ToolCallOut,
)


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def tool_calls_out(calls: Iterable[ToolCall]) -> list[ToolCallOut]:
    return [
        ToolCallOut(
            id=new_call_id(),
            type="function",
            function=FunctionCallOut(name=c.name, arguments=c.arguments),
        )
        for c in calls
    ]


def tool_call_deltas_out(deltas: Iterable[ToolCallDelta]) -> list[ToolCallDeltaOut]:
    """Stream deltas in OpenAI's shape, one entry per call index (a call's first one names it)."""
    merged: dict[int, tuple[str | None, str]] = {}
    for delta in deltas:
        name, arguments = merged.get(delta.index, (None, ""))
        merged[delta.index] = (name or delta.name, arguments + delta.arguments)
    out = []
    for index, (name, arguments) in merged.items():
        if name is None:
            out.append(
                ToolCallDeltaOut(index=index, function=FunctionCallDelta(arguments=arguments))
            )
        else:
            function = FunctionCallDelta(name=name, arguments=arguments)
            out.append(
                ToolCallDeltaOut(index=index, function=function, id=new_call_id(), type="function")
            )
    return out
