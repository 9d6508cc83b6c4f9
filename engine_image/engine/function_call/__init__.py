"""Tool calls in model output: one detector per format, one parser that drives any of them."""

from engine.function_call.base import ToolCallDetector
from engine.function_call.parser import ToolCallParser
from engine.function_call.registry import TOOL_CALL_DETECTORS, tool_call_detector
from engine.function_call.types import ParseResult, StreamDelta, ToolCall, ToolCallDelta

__all__ = [
    "TOOL_CALL_DETECTORS",
    "ParseResult",
    "StreamDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallDetector",
    "ToolCallParser",
    "tool_call_detector",
]
