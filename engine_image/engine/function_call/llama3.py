"""Llama 3.1 / 3.2 / 3.3 JSON tool calls: ``{"name": ..., "parameters": {...}}``, ``;``-separated.

The calls follow ``<|python_tag|>`` or, as the whole answer, open with bare JSON. NOTE:
``<|python_tag|>`` is a special token that the detokenizer drops by default; the bare form
covers that case.
"""

from __future__ import annotations

from engine.function_call.json_calls import JsonCallsDetector

LLAMA3 = JsonCallsDetector(markers=("<|python_tag|>",), bare_start="{", separator=";")
