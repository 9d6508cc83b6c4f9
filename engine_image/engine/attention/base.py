"""The attention backend interface and its registry."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from engine.kernels.triton import triton_available

if TYPE_CHECKING:
    from engine.core.forward_batch import ForwardBatch
    from engine.layers.rotary import RopeAngles


@dataclass(frozen=True)
class LayerAttention:
    """What one layer's attention adds to plain causal softmax(q·k * head_dim ** -0.5)."""

    # NOTE: as transformers masks it: query position p sees keys p - window + 1 .. p.
    sliding_window: int | None = None
    logit_cap: float | None = None  # Gemma 2: each scaled score s becomes cap * tanh(s / cap)
    scale: float | None = None  # None: head_dim ** -0.5 (Gemma: query_pre_attn_scalar ** -0.5)


FULL_ATTENTION = LayerAttention()


class AttentionBackend(ABC):
    """Stores a layer's new K/V in the pool, then attends over each request's whole KV."""

    # NOTE: True when a decode forward through the backend can be captured in a CUDA graph:
    # no host syncs and no shapes taken from ``seq_lens_cpu``.
    cuda_graph_safe: bool = False
    # NOTE: True when ``forward_rope`` rotates q and k in the kernel that writes the pool, so
    # the model hands it q and k before RoPE even where it would rotate them another way.
    fuses_rope: bool = False

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int) -> None:
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.scale = head_dim**-0.5

    @abstractmethod
    def init_forward_metadata(self, batch: ForwardBatch) -> None:
        """Prepare per-forward index tensors and masks on ``batch.attn_metadata``."""

    @abstractmethod
    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer_id: int,
        batch: ForwardBatch,
        layer: LayerAttention = FULL_ATTENTION,
    ) -> torch.Tensor:
        """q: [T, heads, head_dim]; k, v: [T, kv_heads, head_dim] -> [T, heads * head_dim]."""

    def forward_rope(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        rope: RopeAngles,
        layer_id: int,
        batch: ForwardBatch,
        layer: LayerAttention = FULL_ATTENTION,
    ) -> torch.Tensor:
        """``forward`` of q and k before RoPE: rotates them by ``rope``, then attends. A
        backend that ``fuses_rope`` overrides it."""
        q, k = rope.apply(q, k)
        return self.forward(q, k, v, layer_id, batch, layer)

    def scale_of(self, layer: LayerAttention) -> float:
        return self.scale if layer.scale is None else layer.scale


_REGISTRY: dict[str, type[AttentionBackend]] = {}
# NOTE: backends whose module needs an optional package register on first use, so listing
# or defaulting never imports it (triton is absent on many CPU machines).
_OPTIONAL: dict[str, str] = {"triton": "engine.attention.triton_backend"}


def register_attention_backend(name: str) -> Callable[[type[AttentionBackend]], type[AttentionBackend]]:
    def decorate(cls: type[AttentionBackend]) -> type[AttentionBackend]:
        _REGISTRY[name] = cls
        return cls

    return decorate


def available_attention_backends() -> list[str]:
    return sorted({*_REGISTRY, *_OPTIONAL})


def default_attention_backend(device: torch.device) -> str:
    """Triton kernels on CUDA when triton is installed, the C++ decode kernel on CPU, and
    the torch-native reference elsewhere."""
    if device.type == "cuda" and triton_available():
        return "triton"
    return "cpu" if device.type == "cpu" else "torch_native"


def create_attention_backend(
    name: str, num_heads: int, num_kv_heads: int, head_dim: int
) -> AttentionBackend:
    if name not in _REGISTRY and name in _OPTIONAL:
        try:
            importlib.import_module(_OPTIONAL[name])
        except ImportError as err:
            raise ValueError(
                f"attention backend {name!r} needs the {err.name!r} package, which is not installed"
            ) from err
    if name not in _REGISTRY:
        raise ValueError(
            f"unknown attention backend {name!r}; available: {', '.join(available_attention_backends())}"
        )
    return _REGISTRY[name](num_heads, num_kv_heads, head_dim)
