"""Pythonic calls (Llama 3.2 / 4, ToolACE): ``[get_weather(city="Paris"), get_time(tz="CET")]``.

The list is read as Python (``ast``, literal arguments only) once its closing bracket arrives,
so each call's name and arguments come together; arguments are re-encoded as a JSON object.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from engine.function_call.base import ToolCallDetector
from engine.function_call.json_prefix import ScanCache
from engine.function_call.types import PartialCall, RegionScan, RegionStart

_LIST_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_PARTIAL_START = re.compile(r"\[\s*(?:[A-Za-z_][\w.]*\s*)?\Z")
_PARSE_ERRORS = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError)


class PythonicDetector(ToolCallDetector):
    def find_region(self, text: str, pos: int, at_start: bool) -> RegionStart:
        i = text.find("[", pos)
        while i != -1:
            if _LIST_START.match(text, i):
                return RegionStart(i, i)
            if _PARTIAL_START.match(text, i):
                return RegionStart(None, i)
            i = text.find("[", i + 1)
        return RegionStart(None, len(text))

    def scan_region(self, text: str, start: int, final: bool, cache: ScanCache) -> RegionScan:
        end = _list_end(text, start)
        if end is None:
            return RegionScan((), None, valid_to=start)
        calls = _calls(text[start:end])
        if calls is None:
            return RegionScan((), None, invalid=True, valid_to=start)
        return RegionScan(calls, end, valid_to=end)


def _list_end(text: str, start: int) -> int | None:
    """The end of the bracketed list at ``start`` (strings skipped); None if not closed yet."""
    depth = 0
    quote: str | None = None
    i = start
    while i < len(text):
        char = text[i]
        if quote is not None:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _calls(source: str) -> tuple[PartialCall, ...] | None:
    try:
        tree = ast.parse(source, mode="eval")
        if not isinstance(tree.body, ast.List) or not tree.body.elts:
            return None
        calls = [_call(node) for node in tree.body.elts]
    except _PARSE_ERRORS:
        return None
    return None if None in calls else tuple(c for c in calls if c is not None)


def _call(node: ast.expr) -> PartialCall | None:
    """One ``name(key=literal, ...)``; raises one of _PARSE_ERRORS for non-literal values."""
    if not isinstance(node, ast.Call) or node.args:
        return None
    name = _dotted_name(node.func)
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return None
        arguments[keyword.arg] = ast.literal_eval(keyword.value)
    if name is None:
        return None
    return PartialCall(name, json.dumps(arguments, ensure_ascii=False, allow_nan=False), True)


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


PYTHONIC = PythonicDetector()
