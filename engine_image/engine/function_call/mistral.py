"""Mistral (7B v0.3, Nemo, Small): ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]``.

NOTE: ``[TOOL_CALLS]`` is a special token in Mistral's tokenizers and is dropped by default
detokenization; the bare array at the start of the answer covers that case.
"""

from __future__ import annotations

from engine.function_call.json_calls import JsonCallsDetector

MISTRAL = JsonCallsDetector(
    markers=("[TOOL_CALLS]",), bare_start="[", open="[", separator=",", close="]"
)
