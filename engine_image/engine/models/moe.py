"""The mixture-of-experts MLP of Qwen2-MoE, Qwen3-MoE and Mixtral, and its checkpoint names.

Each token goes to its ``top_k`` experts by softmax routing (renormalised when the model
says so); Qwen2-MoE adds a shared expert whose output a sigmoid gate scales. Small batches
on CUDA compute the experts capture-safely (``moe_static``), so decode runs in CUDA graphs.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn

from engine.config.model_config import MoeConfig
from engine.models.expert_distribution import ExpertDistributionRecorder
from engine.models.moe_static import ExpertKernel, dense_experts, expert_kernel, gathered_experts

# (expert, part) of a per-expert checkpoint tensor; part 0 gate, 1 up (both in our
# ``gate_up_proj``), 2 down (``down_proj``).
ExpertShard = tuple[int, int]

_DOWN = 2
# NOTE: Qwen-MoE names the parts gate/up/down_proj; Mixtral w1 (gate), w3 (up), w2 (down).
_PARTS = {"gate_proj": 0, "up_proj": 1, "down_proj": _DOWN, "w1": 0, "w3": 1, "w2": _DOWN}
_PER_EXPERT = re.compile(
    r"(layers\.\d+\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj|w1|w2|w3)\.weight"
)
_STACKED = re.compile(r"layers\.\d+\.mlp\.experts\.(gate_up_proj|down_proj)")


def route(
    router_logits: torch.Tensor, top_k: int, renormalize: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's top-k experts and their weights (float32): ``([T, k], [T, k])``."""
    probs = torch.softmax(router_logits, dim=-1, dtype=torch.float32)
    weights, expert_ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, expert_ids


class Experts(nn.Module):
    """Every routed expert's SwiGLU MLP, stacked as transformers 5 stacks them."""

    def __init__(self, num_experts: int, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.intermediate_size = intermediate_size
        self.gate_up_proj = nn.Parameter(
            torch.empty(num_experts, 2 * intermediate_size, hidden_size)
        )
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden_size, intermediate_size))

    def forward(
        self,
        x: torch.Tensor,
        expert_ids: torch.Tensor,
        weights: torch.Tensor,
        tokens_per_expert: list[int],
    ) -> torch.Tensor:
        """Sum over each token's experts of weight × expert MLP(token): ``[T, hidden]``."""
        top_k = expert_ids.shape[1]
        # NOTE: (token, choice) pairs grouped by expert, so each expert's tokens are one
        # contiguous run of ``order``; a pair's token is its flat index // top_k.
        order = torch.argsort(expert_ids.flatten(), stable=True)
        token_rows = order // top_k
        pair_weights = weights.flatten()[order].to(x.dtype).unsqueeze(-1)
        out = torch.zeros_like(x)
        end = 0
        for expert, count in enumerate(tokens_per_expert):
            if count == 0:
                continue
            start, end = end, end + count
            rows = token_rows[start:end]
            gate, up = F.linear(x.index_select(0, rows), self.gate_up_proj[expert]).chunk(2, dim=-1)
            y = F.linear(F.silu(gate) * up, self.down_proj[expert])
            out.index_add_(0, rows, y * pair_weights[start:end])
        return out


class SparseMoeBlock(nn.Module):
    """A decoder layer's MoE MLP; ``shared_expert`` is Qwen2-MoE's always-on dense MLP."""

    def __init__(
        self, moe: MoeConfig, hidden_size: int, layer_id: int, shared_expert: nn.Module | None
    ) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.top_k = moe.top_k
        self.norm_topk_prob = moe.norm_topk_prob
        self.gate = nn.Linear(hidden_size, moe.num_experts, bias=False)
        self.experts = Experts(moe.num_experts, hidden_size, moe.expert_intermediate_size)
        self.shared_expert = shared_expert
        self.shared_expert_gate = (
            nn.Linear(hidden_size, 1, bias=False) if shared_expert is not None else None
        )
        # NOTE: a plain attribute, not a submodule: it outlives weight reloads (set by
        # attach_expert_recorder) and holds no parameters.
        self.recorder: ExpertDistributionRecorder | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_with(
            x, expert_kernel(x.shape[0], self.top_k, self.experts.num_experts, x.device)
        )

    def forward_with(self, x: torch.Tensor, kernel: ExpertKernel) -> torch.Tensor:
        """The block's output with the routed experts computed by ``kernel``."""
        weights, expert_ids = route(self.gate(x), self.top_k, self.norm_topk_prob)
        if self.recorder is not None:
            self.recorder.record(self.layer_id, expert_ids)
        experts = self.experts
        out: torch.Tensor
        if kernel == "routed":
            counts = torch.bincount(expert_ids.flatten(), minlength=experts.num_experts)
            out = experts(x, expert_ids, weights, counts.tolist())
        else:
            static = gathered_experts if kernel == "gather" else dense_experts
            out = static(x, experts.gate_up_proj, experts.down_proj, expert_ids, weights)
        if self.shared_expert is not None and self.shared_expert_gate is not None:
            out = out + torch.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)
        return out


def attach_expert_recorder(model: nn.Module, recorder: ExpertDistributionRecorder) -> None:
    """Makes every MoE block of ``model`` report its routing to ``recorder``."""
    for module in model.modules():
        if isinstance(module, SparseMoeBlock):
            module.recorder = recorder


# ---------------------------------------------------------------- checkpoint names


def expert_target(name: str) -> tuple[str, ExpertShard | None] | None:
    """Our parameter (and shard) for a checkpoint's MoE tensor, ``model.`` prefix removed;
    None for any other tensor.

    Accepts the Hub's per-expert tensors (``mlp.experts.3.gate_proj.weight``; Mixtral's
    ``block_sparse_moe.experts.3.w1.weight``) and transformers 5's stacked ones
    (``mlp.experts.gate_up_proj``), which fill a whole parameter.
    """
    renamed = name.replace(".block_sparse_moe.", ".mlp.")
    per_expert = _PER_EXPERT.fullmatch(renamed)
    if per_expert is not None:
        prefix, expert, part = per_expert[1], int(per_expert[2]), _PARTS[per_expert[3]]
        return f"{prefix}.{'down_proj' if part == _DOWN else 'gate_up_proj'}", (expert, part)
    if renamed != name or is_stacked_expert_param(renamed):
        return renamed, None
    return None


def expert_shards(name: str, param: torch.Tensor) -> list[ExpertShard]:
    """Every per-expert checkpoint tensor our stacked parameter ``name`` is made of."""
    parts = (_DOWN,) if name.endswith(".experts.down_proj") else (0, 1)
    return [(expert, part) for expert in range(param.shape[0]) for part in parts]


def is_stacked_expert_param(name: str) -> bool:
    return _STACKED.fullmatch(name) is not None


def expert_shard_view(param: torch.Tensor, shard: ExpertShard) -> torch.Tensor:
    expert, part = shard
    if part == _DOWN:
        return param[expert]
    size = param.shape[1] // 2
    return param[expert].narrow(0, part * size, size)


def expert_checkpoint_name(name: str, shard: ExpertShard) -> str:
    """The Hub name of one expert's part of our stacked parameter ``name``."""
    expert, part = shard
    prefix = name.rsplit(".", 1)[0]
    return f"model.{prefix}.{expert}.{('gate_proj', 'up_proj', 'down_proj')[part]}.weight"
