"""Counts, per MoE layer and expert, how many tokens were routed there while recording.

A token counts once for each of its top-k experts. The counts stay on the model's device
(one add per layer and forward, no host sync) until a dump reads them.
"""

from __future__ import annotations

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

    def start(self) -> None:
        """Clears the counts and starts counting."""
        self.counts.zero_()
        self.recording = True

    def stop(self) -> None:
        """Stops counting; the counts so far stay for a dump."""
        self.recording = False

    def record(self, layer_id: int, tokens_per_expert: torch.Tensor) -> None:
        """Adds one forward's ``[num_experts]`` routed-token counts of layer ``layer_id``."""
        if self.recording:
            self.counts[self._rows[layer_id]] += tokens_per_expert

    def dump_csv(self) -> str:
        """``layer_id,expert_id,count`` rows, one per MoE layer and expert, in that order."""
        lines = [CSV_HEADER]
        for layer_id, per_expert in zip(self.layer_ids, self.counts.tolist()):
            lines += [f"{layer_id},{expert},{count}" for expert, count in enumerate(per_expert)]
        return "\n".join(lines) + "\n"
