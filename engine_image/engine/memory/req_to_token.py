"""Map (request slot, token position) to KV slot."""

from __future__ import annotations

import torch


class ReqToTokenPool:
    """A ``[max_reqs, max_context_len]`` int64 table; row ``r`` lists request ``r``'s KV slots.

    A running request owns one row (``alloc``); entry ``[r, p]`` is the KV slot of its token
    at position ``p``. NOTE: the table starts zeroed, so an entry nobody wrote points at the
    dummy KV slot 0. ``free`` does not re-zero the row: the next owner overwrites what it
    uses and must never read past what it wrote.
    """

    def __init__(
        self, max_reqs: int, max_context_len: int, device: torch.device | str = "cpu"
    ) -> None:
        if max_reqs < 1 or max_context_len < 1:
            raise ValueError(
                f"max_reqs and max_context_len must be >= 1, got {max_reqs}, {max_context_len}"
            )
        self.max_reqs = max_reqs
        self.max_context_len = max_context_len
        self.device = torch.device(device)
        self.req_to_token = torch.zeros(
            (max_reqs, max_context_len), dtype=torch.int64, device=self.device
        )
        self._free: list[int] = []
        self._in_use: list[bool] = []
        # NOTE: kept on the tensor-parallel driver only: the writes its workers' copies of
        # the table have not seen yet (distributed/step_channel.py); None elsewhere.
        self._journal: list[tuple[int, int, list[int]]] | None = None
        self.clear()

    def keep_journal(self) -> None:
        """From now on, record every ``write`` until ``take_journal``."""
        self._journal = []

    def take_journal(self) -> list[tuple[int, int, list[int]]]:
        """The (row, start, slots) writes since the last call, oldest first."""
        assert self._journal is not None, "keep_journal was not called"
        writes, self._journal = self._journal, []
        return writes

    def available_size(self) -> int:
        return len(self._free)

    def alloc(self) -> int | None:
        """A free row index, or None if every row is taken.

        Rows go out lowest first after ``clear``; after that the most recently freed row
        is reused first.
        """
        if not self._free:
            return None
        idx = self._free.pop()
        self._in_use[idx] = True
        return idx

    def free(self, idx: int) -> None:
        """Give row ``idx`` back. Raises on a row that is out of range or not allocated."""
        if not 0 <= idx < self.max_reqs or not self._in_use[idx]:
            raise ValueError(f"request slot {idx} is not allocated")
        self._in_use[idx] = False
        self._free.append(idx)

    def write(self, idx: int, start: int, slots: torch.Tensor) -> None:
        """Set ``req_to_token[idx, start : start + len(slots)] = slots``."""
        end = start + slots.numel()
        if start < 0 or end > self.max_context_len:
            raise ValueError(
                f"positions {start}..{end} exceed max_context_len {self.max_context_len}"
            )
        self.req_to_token[idx, start:end] = slots
        if self._journal is not None:
            self._journal.append((idx, start, slots.tolist()))

    def write_each(
        self, rows: list[int], positions: list[int], slots: torch.Tensor, on_device: tuple[torch.Tensor, torch.Tensor]
    ) -> None:
        """Set ``req_to_token[rows[i], positions[i]] = slots[i]`` for every ``i``, in one write
        indexed by ``on_device``: ``rows`` and ``positions`` on the table's device already."""
        if positions and (min(positions) < 0 or max(positions) >= self.max_context_len):
            raise ValueError(f"positions {min(positions)}..{max(positions)} exceed max_context_len {self.max_context_len}")
        self.req_to_token[on_device] = slots
        if self._journal is not None:
            self._journal += [(row, pos, [slot]) for row, pos, slot in zip(rows, positions, slots.tolist(), strict=True)]

    def clear(self) -> None:
        """Mark every row free again."""
        # NOTE: reversed so that ``list.pop()`` (O(1), from the end) hands out row 0 first.
        self._free = list(range(self.max_reqs - 1, -1, -1))
        self._in_use = [False] * self.max_reqs
