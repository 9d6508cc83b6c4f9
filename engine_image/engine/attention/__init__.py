"""Attention backends behind one abstract interface, chosen by name from a registry."""

from engine.attention import cpu_backend as _cpu_backend  # noqa: F401  (registers itself)
from engine.attention import torch_native as _torch_native  # noqa: F401  (registers itself)
from engine.attention.base import (
    FULL_ATTENTION,
    AttentionBackend,
    LayerAttention,
    available_attention_backends,
    create_attention_backend,
    default_attention_backend,
    register_attention_backend,
)

__all__ = [
    "FULL_ATTENTION",
    "AttentionBackend",
    "LayerAttention",
    "available_attention_backends",
    "create_attention_backend",
    "default_attention_backend",
    "register_attention_backend",
]
