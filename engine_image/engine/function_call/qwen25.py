"""Qwen 2.5 / Qwen 3 / QwQ: ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``.

Each call has its own tag pair; several calls are several blocks, usually newline-separated.
``<tool_call>`` is an added (not special) token, so it survives detokenization.
"""

from __future__ import annotations

from engine.function_call.json_calls import JsonCallsDetector

QWEN25 = JsonCallsDetector(markers=("<tool_call>",), bare_start=None, close="</tool_call>")
