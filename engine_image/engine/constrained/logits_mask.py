"""Each step: the allowed-token bitmask of every constrained row, applied to the batch's logits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.constrained.base import GrammarBackend, GrammarMatcher

if TYPE_CHECKING:
    import torch


class GrammarLogitsMask:
    """Masks the logits rows whose requests have a grammar; other rows are left untouched.

    One CPU bitmask is reused across steps, grown when a batch outgrows it.

    NOTE: allocated at the first constrained step, not here: allocating imports the
    backend's library (xgrammar: torch and transformers, seconds at every start).
    """

    def __init__(self, backend: GrammarBackend, initial_rows: int) -> None:
        self.backend = backend
        self._initial_rows = initial_rows
        self._bitmask: torch.Tensor | None = None

    def apply(self, logits: torch.Tensor, matchers: Sequence[GrammarMatcher | None]) -> None:
        """``matchers[i]`` constrains ``logits[i]`` (in place); None leaves row i free."""
        rows = [i for i, m in enumerate(matchers) if m is not None]
        if not rows:
            return
        if self._bitmask is None or len(matchers) > self._bitmask.shape[0]:
            self._bitmask = self.backend.allocate_bitmask(max(len(matchers), self._initial_rows))
        for row in rows:
            matcher = matchers[row]
            assert matcher is not None
            matcher.fill_bitmask(self._bitmask, row)
        self.backend.apply_bitmask(logits, self._bitmask[: len(matchers)], rows)
