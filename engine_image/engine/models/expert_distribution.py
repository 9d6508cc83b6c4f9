"""Counts, per MoE layer and expert, how many tokens were routed there while recording.

A token counts once for each of its top-k experts. The counts stay on the model's device
(one add per layer and forward, no host sync) until a dump reads them. A CUDA graph's
forwards are counted after each replay, from the routing the graph left in its own tensors
(``capturing``, ``record_replay``): only the batch's real rows, never its padding.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

CSV_HEADER = "layer_id,expert_id,count"


class ExpertDistributionRecorder:
    def __init__(self, moe_layer_ids: list[int], num_experts: int, device: torch.device) -> None:
        self.layer_ids = list(moe_layer_ids)
        self._rows = {layer_id: row for row, layer_id in enumerate(self.layer_ids)}
        self.counts = torch.zeros(
            len(self.layer_ids), num_experts, dtype=torch.int64, device=device
        )
        self.recording = False
        self._captured: dict[int, torch.Tensor] | None = None

    def start(self) -> None:
        """Clears the counts and starts counting."""
        self.counts.zero_()
        self.recording = True

    def stop(self) -> None:
        """Stops counting; the counts so far stay for a dump."""
        self.recording = False

    def record(self, layer_id: int, expert_ids: torch.Tensor) -> None:
        """Counts one forward's ``[T, top_k]`` expert choices of layer ``layer_id``; while a
        graph is captured, keeps them for ``record_replay`` instead."""
        if self._captured is not None:
            self._captured[layer_id] = expert_ids
        elif self.recording:
            chosen = expert_ids.flatten()
            self.counts[self._rows[layer_id]].index_add_(0, chosen, torch.ones_like(chosen))

    @contextmanager
    def capturing(self) -> Iterator[dict[int, torch.Tensor]]:
        """While open, each layer's expert choices are kept, not counted: a graph captured
        meanwhile writes every replay's choices into those same tensors (the last kept)."""
        captured: dict[int, torch.Tensor] = {}
        self._captured = captured
        try:
            yield captured
        finally:
            self._captured = None

    def record_replay(self, captured: dict[int, torch.Tensor], num_tokens: int) -> None:
        """Counts a graph replay's first ``num_tokens`` rows (the rest are padding)."""
        for layer_id, expert_ids in captured.items():
            self.record(layer_id, expert_ids[:num_tokens])

    def dump_csv(self) -> str:
        """``layer_id,expert_id,count`` rows, one per MoE layer and expert, in that order."""
        lines = [CSV_HEADER]
        for layer_id, per_expert in zip(self.layer_ids, self.counts.tolist()):
            lines += [f"{layer_id},{expert},{count}" for expert, count in enumerate(per_expert)]
        return "\n".join(lines) + "\n"
