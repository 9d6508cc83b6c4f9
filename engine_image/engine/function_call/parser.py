"""Splits a model's output into normal text and tool calls, incrementally or all at once.

Text is released as soon as it cannot be part of a call; a call's name is released once
complete and known, then its arguments text as it arrives. A region that turns out not to be
a call (malformed JSON, an unknown tool name, cut off at the end) before anything of it was
released is plain text, and the search resumes right after its first character. A detector
with ``whole_output`` (a grammar-forced region) releases whole calls only, and its region cut
off at the end keeps the complete calls.

NOTE: a region that goes bad *after* its name was released cannot be taken back: the rest of
the output is then plain text. Only there can a stream differ from the one-shot ``parse``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from engine.function_call.base import ToolCallDetector
from engine.function_call.json_prefix import ScanCache
from engine.function_call.types import (
    ParseResult,
    RegionScan,
    StreamDelta,
    ToolCall,
    ToolCallDelta,
)


@dataclass
class _Sent:
    name: bool = False
    arguments: int = 0  # chars of the arguments text released


@dataclass
class _Output:
    text: list[str] = field(default_factory=list)
    calls: list[ToolCallDelta] = field(default_factory=list)

    def delta(self) -> StreamDelta:
        return StreamDelta("".join(self.text), tuple(self.calls))


class ToolCallParser:
    """One output's parser: ``feed`` each text delta (the last with ``final``), or ``parse`` it whole."""

    def __init__(
        self, detector: ToolCallDetector, tool_names: Collection[str] | None = None
    ) -> None:
        self._detector = detector
        self._names = None if tool_names is None else frozenset(tool_names)
        self._text = ""
        self._pos = 0  # text before this is released (or consumed by calls)
        self._region: int | None = None
        self._sent: list[_Sent] = []  # per call of the open region
        self._first_index = 0  # the tool index of the open region's first call
        self._plain = False
        self._only_whitespace = True
        self._cache = ScanCache()

    def feed(self, delta: str, final: bool = False) -> StreamDelta:
        """What ``delta`` (the next text) releases; ``final`` on the last one flushes the rest."""
        self._text += delta
        return self._advance(final)

    def parse(self, text: str) -> ParseResult:
        """The whole output at once (on a fresh parser)."""
        delta = self.feed(text, final=True)
        names: dict[int, str] = {}
        arguments: dict[int, list[str]] = {}
        for call in delta.calls:
            if call.name is not None:
                names[call.index] = call.name
            arguments.setdefault(call.index, []).append(call.arguments)
        calls = tuple(ToolCall(names[i], "".join(arguments[i])) for i in sorted(names))
        return ParseResult(delta.normal_text, calls)

    # ------------------------------------------------------------------ internals

    def _advance(self, final: bool) -> StreamDelta:
        out = _Output()
        while True:
            if self._plain:
                self._release_text(out, len(self._text))
                break
            if self._region is None:
                start = self._detector.find_region(self._text, self._pos, self._only_whitespace)
                if start.found is None:
                    self._release_text(out, len(self._text) if final else start.safe_to)
                    break
                self._release_text(out, start.found)
                self._region, self._sent = start.found, []
            scan = self._detector.scan_region(self._text, self._region, final, self._cache)
            if self._is_bad(scan, final):
                self._give_up_region(out, scan)
                continue
            self._release_calls(out, scan)
            if scan.end is None:
                break
            self._first_index += len(scan.calls)
            self._pos, self._region = scan.end, None
        return out.delta()

    def _is_bad(self, scan: RegionScan, final: bool) -> bool:
        cut_off = final and scan.end is None and not self._detector.whole_output
        if scan.invalid or cut_off:
            return True
        names = self._names
        return names is not None and any(
            c.name is not None and c.name not in names for c in scan.calls
        )

    def _give_up_region(self, out: _Output, scan: RegionScan) -> None:
        assert self._region is not None
        if any(sent.name for sent in self._sent):
            self._plain = True
            self._pos = max(self._pos, scan.valid_to)
            self._first_index += len(self._sent)
        else:
            self._release_text(out, self._region + 1)
        self._region, self._sent = None, []

    def _release_text(self, out: _Output, to: int) -> None:
        if to > self._pos:
            piece = self._text[self._pos : to]
            out.text.append(piece)
            self._only_whitespace = self._only_whitespace and not piece.strip()
            self._pos = to

    def _release_calls(self, out: _Output, scan: RegionScan) -> None:
        for k, call in enumerate(scan.calls):
            if call.name is None or (self._detector.whole_output and not call.complete):
                return
            if k == len(self._sent):
                self._sent.append(_Sent())
                self._only_whitespace = False
            sent = self._sent[k]
            name = None if sent.name else call.name
            fragment = call.arguments[sent.arguments :]
            if name is not None or fragment:
                out.calls.append(ToolCallDelta(self._first_index + k, name, fragment))
            sent.name, sent.arguments = True, len(call.arguments)
            if not call.complete:
                return
