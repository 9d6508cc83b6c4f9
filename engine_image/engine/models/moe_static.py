"""Capture-safe expert compute for small (decode) batches on CUDA.

Both formulations here take each token's routing as device tensors and never read it back:
every shape follows the token count alone and nothing syncs with the host, so a CUDA graph
captures them. The host-routed path (``Experts.forward``) stays for large batches and for
the CPU, where a host sync costs nothing and it reads and computes only the experts hit.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

# gather: each token's k experts' weights, copied out and applied with one bmm per projection.
# dense: every expert on every token (one bmm per projection), unchosen experts weighted 0.
# routed: tokens grouped by expert on the host (Experts.forward).
ExpertKernel = Literal["gather", "dense", "routed"]

# NOTE: as the largest decode batch the CUDA graphs capture (cuda_graph_runner); beyond it a
# step is compute-heavy, and dense would compute num_experts / top_k times the needed flops.
MAX_STATIC_TOKENS = 256


def expert_kernel(tokens: int, top_k: int, num_experts: int, device: torch.device) -> ExpertKernel:
    """The fastest capture-safe formulation for ``tokens`` tokens, or ``routed``.

    NOTE: decode is bound by reading weights. gather reads each chosen expert three times
    (the copy's read and write, then the bmm's read): 3·tokens·top_k experts' bytes; dense
    reads every expert once: num_experts'. So gather below that crossover (batch 1-5 on
    Qwen3-30B-A3B's 128 experts, top-8; batch 1 on Mixtral's 8, top-2) and dense above it, up
    to the largest captured batch, where dense's extra flops (num_experts / top_k times the
    needed) still cost less than routed's ~3 kernel launches per expert hit, each behind a
    host sync. On the CPU host syncs are free and routed reads only the experts hit. A graph
    being captured always gets a capture-safe kernel, whatever its batch.
    """
    if device.type != "cuda":
        return "routed"
    capturing = torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    if tokens > MAX_STATIC_TOKENS and not capturing:
        return "routed"
    return "gather" if 3 * tokens * top_k <= num_experts else "dense"


def gathered_experts(
    x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor, expert_ids: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """Sum over each token's experts of weight × expert MLP(token), from the chosen experts'
    weights gathered per (token, choice): ``[T, hidden]``. ``gate_up``: ``[E, 2I, H]``,
    ``down``: ``[E, H, I]``, ``expert_ids``/``weights``: ``[T, k]``."""
    tokens, top_k = expert_ids.shape
    chosen = expert_ids.flatten()
    # NOTE: pair p is token p // top_k. expand, not repeat_interleave: on CUDA that one may
    # sum its repeats on the host to size its output.
    rows = x.unsqueeze(1).expand(tokens, top_k, x.shape[1]).reshape(tokens * top_k, -1, 1)
    gate, up = torch.bmm(gate_up.index_select(0, chosen), rows).squeeze(-1).chunk(2, dim=-1)
    hidden = (F.silu(gate) * up).unsqueeze(-1)
    y = torch.bmm(down.index_select(0, chosen), hidden).view(tokens, top_k, -1)
    return (y * weights.to(x.dtype).unsqueeze(-1)).sum(dim=1)


def dense_experts(
    x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor, expert_ids: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """The same sum, with every expert run on every token and weighted 0 where not chosen."""
    gate, up = torch.matmul(x, gate_up.transpose(1, 2)).chunk(2, dim=-1)  # [E, T, I] each
    y = torch.bmm(F.silu(gate) * up, down.transpose(1, 2))  # [E, T, H]
    per_expert = torch.zeros(
        x.shape[0], gate_up.shape[0], dtype=x.dtype, device=x.device
    ).scatter_(1, expert_ids, weights.to(x.dtype))  # [T, E]
    return torch.einsum("te,eth->th", per_expert, y)
