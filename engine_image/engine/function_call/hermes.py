"""Hermes 2 Pro / 3 (NousResearch): ``<tool_call>\\n{"arguments": {...}, "name": ...}\\n</tool_call>``.

The tags are Qwen's; Hermes models often write ``arguments`` before ``name``, so a call's
name (and then its arguments) is released only once the name has arrived.
"""

from __future__ import annotations

from engine.function_call.json_calls import JsonCallsDetector

HERMES = JsonCallsDetector(markers=("<tool_call>",), bare_start=None, close="</tool_call>")
