"""What the tool-call parsers produce (public) and what detectors report to the parser (internal)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCall:
    """One complete call: ``arguments`` is a JSON object as text, as OpenAI sends it."""

    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCallDelta:
    """What one call gained: its name once (first), then fragments of its arguments text."""

    index: int  # the call's position among all calls of the output
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True)
class ParseResult:
    normal_text: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class StreamDelta:
    normal_text: str = ""
    calls: tuple[ToolCallDelta, ...] = ()


# ---------------------------------------------------------------- detector → parser


@dataclass(frozen=True)
class RegionStart:
    """Where a tool-call region begins (``found``), else how far the text is surely plain."""

    found: int | None
    # NOTE: text from ``safe_to`` on may be the start of a marker cut off by the chunking.
    safe_to: int


@dataclass(frozen=True)
class PartialCall:
    """One call as far as the text shows it; ``arguments`` only grows as text arrives."""

    name: str | None
    arguments: str
    complete: bool


@dataclass(frozen=True)
class RegionScan:
    """A tool-call region read from its start to the end of the text seen so far."""

    calls: tuple[PartialCall, ...]
    end: int | None  # where the region ends; None while it is still open
    invalid: bool = False
    # NOTE: how far the region read as valid; plain text resumes there if it turns invalid late.
    valid_to: int = 0
