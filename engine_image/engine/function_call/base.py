"""The tool-call detector interface: one implementation per output format (qwen25, llama3, ...).

A detector is stateless. It finds where a tool-call region starts in a model's text and reads
a region as far as the text goes; ``ToolCallParser`` drives it, one-shot or over a stream.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from engine.function_call.json_prefix import ScanCache
from engine.function_call.types import RegionScan, RegionStart


def held_suffix(text: str, pos: int, markers: tuple[str, ...]) -> int:
    """Where the longest end of ``text[pos:]`` that is a proper prefix of a marker begins."""
    held = 0
    for marker in markers:
        for length in range(min(len(marker) - 1, len(text) - pos), held, -1):
            if text.endswith(marker[:length]):
                held = length
                break
    return len(text) - held


class ToolCallDetector(ABC):
    # NOTE: True where a grammar makes the whole output one region of calls ("required", a
    # named tool): a call is released only once complete, and an output cut off inside the
    # region (max_tokens) keeps its complete calls and drops the open one, so a stream never
    # sends a call that the one-shot parse would not return.
    whole_output: bool = False

    @abstractmethod
    def find_region(self, text: str, pos: int, at_start: bool) -> RegionStart:
        """The first region start in ``text[pos:]``.

        ``at_start`` is True while the output so far is only whitespace: formats whose calls
        may open without a marker (bare JSON) only do so there.
        """

    @abstractmethod
    def scan_region(self, text: str, start: int, final: bool, cache: ScanCache) -> RegionScan:
        """Reads the region at ``start``; ``final`` says no more text will come.

        ``cache`` belongs to this text (one per parser) and may be used to skip rescanning.
        """
