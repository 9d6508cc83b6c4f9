"""Validating scans over JSON text that may still be growing (a prefix of a model's output).

Each scan either returns where a value ends, or raises ``Incomplete`` (the text stops inside
the value but is a valid start of one) or ``Invalid`` (no continuation could make it JSON).

NOTE: a stream rescans its open call after every delta; a ``ScanCache`` keeps what earlier
scans learned (where complete values end, how far an open string is valid), so a long
argument string is not read again from its start each time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field


class Incomplete(Exception):
    """The text ends inside the value; what is there is a valid JSON prefix."""


class Invalid(Exception):
    """The text cannot be (the start of) valid JSON."""


@dataclass
class ScanCache:
    """Facts about one text that only grows (positions stay valid as it does)."""

    value_ends: dict[int, int] = field(default_factory=dict)  # complete value: start → end
    string_body: dict[int, int] = field(default_factory=dict)  # open string: start → valid to
    # NOTE: an open container: start → just past its last comma, where the next item begins.
    next_item: dict[int, int] = field(default_factory=dict)


_WS = re.compile(r"[ \t\n\r]*")
_STRING_BODY = re.compile(r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
_PARTIAL_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")
_NUMBER_RUN = re.compile(r"[-+0-9.eE]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_NUMBER_PREFIX = re.compile(r"-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:(?<=[0-9])[eE][-+]?[0-9]*)?)?")
_LITERALS = ("true", "false", "null")


def skip_ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]


def _need(text: str, i: int) -> str:
    if i >= len(text):
        raise Incomplete
    return text[i]


def scan_string(text: str, i: int, cache: ScanCache) -> int:
    if (known := cache.value_ends.get(i)) is not None:
        return known
    if _need(text, i) != '"':
        raise Invalid
    body_end = _STRING_BODY.match(text, cache.string_body.get(i, i + 1)).end()  # type: ignore[union-attr]
    if body_end < len(text) and text[body_end] == '"':
        cache.string_body.pop(i, None)
        cache.value_ends[i] = body_end + 1
        return body_end + 1
    if body_end == len(text) or _PARTIAL_ESCAPE.match(text, body_end):
        cache.string_body[i] = body_end
        raise Incomplete
    raise Invalid


def _scan_scalar(text: str, i: int, cache: ScanCache) -> int:
    head = _need(text, i)
    if head == '"':
        return scan_string(text, i, cache)
    if head in "-0123456789":
        run = _NUMBER_RUN.match(text, i).end()  # type: ignore[union-attr]
        token = text[i:run]
        if run == len(text) and _NUMBER_PREFIX.fullmatch(token):
            raise Incomplete  # NOTE: "12" may still become "123"
        if not _NUMBER.fullmatch(token):
            raise Invalid
        return run
    for literal in _LITERALS:
        if text.startswith(literal, i):
            return i + len(literal)
        if literal.startswith(text[i:]):
            raise Incomplete
    raise Invalid


def scan_key(text: str, i: int, cache: ScanCache) -> tuple[str, int]:
    """An object key and its colon; returns the key and where its value starts."""
    end = scan_string(text, i, cache)
    colon = skip_ws(text, end)
    if _need(text, colon) != ":":
        raise Invalid
    return json.loads(text[i:end]), skip_ws(text, colon + 1)


def scan_value(text: str, i: int, cache: ScanCache) -> int:
    """The end of the JSON value starting at ``i`` (iterative: nesting depth is unbounded)."""
    stack: list[tuple[str, int]] = []  # (closing bracket, where the container starts)
    i = skip_ws(text, i)
    while True:
        head = _need(text, i)
        if (known := cache.value_ends.get(i)) is not None:
            i = known
        elif head in "{[":
            stack.append(("}" if head == "{" else "]", i))
            resume = cache.next_item.get(i)
            i = skip_ws(text, i + 1 if resume is None else resume)
            if resume is not None or _need(text, i) != stack[-1][0]:
                if head == "{":
                    _, i = scan_key(text, i, cache)
                continue
        else:
            i = _scan_scalar(text, i, cache)
        while True:  # a value ended: close containers until the next value starts
            if not stack:
                return i
            i = skip_ws(text, i)
            head = _need(text, i)
            if head == ",":
                cache.next_item[stack[-1][1]] = i + 1
                i = skip_ws(text, i + 1)
                if stack[-1][0] == "}":
                    _, i = scan_key(text, i, cache)
                break
            closer, start = stack.pop()
            if head != closer:
                raise Invalid
            i += 1
            cache.value_ends[start] = i


# NOTE: "parameters" is Llama's name for the arguments; "id" and "type" are tolerated extras.
ARGUMENT_KEYS = ("arguments", "parameters")
_IGNORED_KEYS = ("id", "type")


@dataclass(frozen=True)
class CallObject:
    """A ``{"name": ..., "arguments": {...}}`` object as far as the text shows it."""

    name: str | None
    args_start: int | None
    args_end: int | None  # None while the arguments are still arriving
    end: int | None  # None while the object is open


def scan_call_object(text: str, i: int, cache: ScanCache) -> CallObject:
    """Reads one call object at ``i``; raises Invalid for anything else (unknown keys too)."""
    name: str | None = None
    args_start: int | None = None
    args_end: int | None = None
    seen: set[str] = set()
    try:
        if _need(text, i) != "{":
            raise Invalid
        i = skip_ws(text, i + 1)
        if _need(text, i) == "}":
            raise Invalid  # NOTE: a call needs a name
        while True:
            key, i = scan_key(text, i, cache)
            if key in seen:
                raise Invalid
            seen.add(key)
            if key == "name":
                end = scan_string(text, i, cache)
                name = json.loads(text[i:end])
            elif key in ARGUMENT_KEYS and not seen.intersection(ARGUMENT_KEYS) - {key}:
                if _need(text, i) != "{":
                    raise Invalid
                args_start = i
                end = args_end = scan_value(text, i, cache)
            elif key in _IGNORED_KEYS:
                end = scan_value(text, i, cache)
            else:
                raise Invalid
            i = skip_ws(text, end)
            head = _need(text, i)
            if head == "}":
                if name is None:
                    raise Invalid
                return CallObject(name, args_start, args_end, i + 1)
            if head != ",":
                raise Invalid
            i = skip_ws(text, i + 1)
    except Incomplete:
        return CallObject(name, args_start, args_end, None)
