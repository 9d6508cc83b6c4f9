"""Reasoning (``<think>...</think>``) split from the answer, per --reasoning-parser."""

from engine.reasoning.parser import ReasoningDelta, ReasoningFormat, ReasoningParser
from engine.reasoning.registry import REASONING_FORMATS, reasoning_format

__all__ = [
    "REASONING_FORMATS",
    "ReasoningDelta",
    "ReasoningFormat",
    "ReasoningParser",
    "reasoning_format",
]
