"""Tool-call detectors by ``--tool-call-parser`` name (SGLang's names)."""

from __future__ import annotations

from engine.function_call.base import ToolCallDetector
from engine.function_call.hermes import HERMES
from engine.function_call.llama3 import LLAMA3
from engine.function_call.mistral import MISTRAL
from engine.function_call.pythonic import PYTHONIC
from engine.function_call.qwen25 import QWEN25

TOOL_CALL_DETECTORS: dict[str, ToolCallDetector] = {
    "qwen25": QWEN25,
    "hermes": HERMES,
    "llama3": LLAMA3,
    "mistral": MISTRAL,
    "pythonic": PYTHONIC,
}


def tool_call_detector(name: str) -> ToolCallDetector:
    try:
        return TOOL_CALL_DETECTORS[name]
    except KeyError:
        known = ", ".join(TOOL_CALL_DETECTORS)
        raise ValueError(f"unknown tool-call parser {name!r}; known: {known}") from None
