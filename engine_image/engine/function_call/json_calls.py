"""Detectors for formats whose calls are JSON objects ``{"name": ..., "arguments": {...}}``.

A region is ``marker [open] call (separator call)* [close]``; the formats differ only in
those strings. Arguments are released as the model's own text (a JSON object), unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.function_call.base import ToolCallDetector, held_suffix
from engine.function_call.json_prefix import (
    CallObject,
    Incomplete,
    Invalid,
    ScanCache,
    scan_call_object,
    skip_ws,
)
from engine.function_call.types import PartialCall, RegionScan, RegionStart


@dataclass(frozen=True)
class JsonCallsDetector(ToolCallDetector):
    markers: tuple[str, ...]  # strings that open a region
    bare_start: str | None  # opens a region without a marker, at the output's start only
    open: str = ""  # between the marker and the first call
    separator: str = ""  # between calls; "" means one call per region
    close: str = ""  # ends the region; "" means it ends after the last call
    whole_output: bool = False  # see ToolCallDetector.whole_output

    def find_region(self, text: str, pos: int, at_start: bool) -> RegionStart:
        if at_start and self.bare_start is not None:
            first = skip_ws(text, pos)
            rest = text[first:]
            marker_like = any(m.startswith(rest) or rest.startswith(m) for m in self.markers)
            if rest and not marker_like and rest.startswith(self.bare_start):
                return RegionStart(first, first)
        found = [p for m in self.markers if (p := text.find(m, pos)) != -1]
        if found:
            return RegionStart(min(found), min(found))
        return RegionStart(None, held_suffix(text, pos, self.markers))

    def scan_region(self, text: str, start: int, final: bool, cache: ScanCache) -> RegionScan:
        i = start + next((len(m) for m in self.markers if text.startswith(m, start)), 0)
        calls: list[PartialCall] = []
        valid_to = start
        try:
            i = skip_ws(text, i)
            if self.open:
                i = skip_ws(text, _expect(text, i, self.open))
            while True:
                call = scan_call_object(text, i, cache)
                calls.append(_partial(text, call))
                if call.end is None:
                    raise Incomplete
                i = valid_to = call.end
                after = skip_ws(text, i)
                if self.separator and text.startswith(self.separator, after):
                    i = skip_ws(text, after + len(self.separator))
                    continue
                if self.close:
                    return RegionScan(
                        tuple(calls), _expect(text, after, self.close), valid_to=valid_to
                    )
                if after == len(text):
                    raise Incomplete  # NOTE: a separator may still come
                return RegionScan(tuple(calls), i, valid_to=valid_to)
        except Incomplete:
            done = final and bool(calls) and all(c.complete for c in calls)
            return RegionScan(tuple(calls), len(text) if done else None, valid_to=valid_to)
        except Invalid:
            return RegionScan(tuple(calls), None, invalid=True, valid_to=valid_to)


def _expect(text: str, i: int, literal: str) -> int:
    """The end of ``literal`` at ``i``."""
    if text.startswith(literal, i):
        return i + len(literal)
    if literal.startswith(text[i:]):
        raise Incomplete
    raise Invalid


def _partial(text: str, call: CallObject) -> PartialCall:
    complete = call.end is not None
    if call.args_start is None:
        arguments = "{}" if complete else ""
    else:
        arguments = text[
            call.args_start : call.args_end if call.args_end is not None else len(text)
        ]
    return PartialCall(call.name, arguments, complete)
