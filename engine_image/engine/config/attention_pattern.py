"""Which layers attend through a sliding window, and the attention extras of the Gemma
models (logit soft-capping, their query scale), as ``config.json`` states them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AttentionPattern:
    layer_windows: tuple[int | None, ...]  # per layer: its sliding window, None: global
    logit_cap: float | None = None  # Gemma 2: cap * tanh(score / cap) on attention scores
    final_logit_cap: float | None = None  # ... and on the LM head's logits
    scale: float | None = None  # None: head_dim ** -0.5

    def window(self, layer_id: int) -> int | None:
        return self.layer_windows[layer_id]

    @property
    def sliding_window(self) -> int | None:
        """The window of the windowed layers (None: none is windowed)."""
        return next((w for w in self.layer_windows if w is not None), None)


def attention_pattern(raw: dict[str, Any], num_layers: int) -> AttentionPattern:
    window = _sliding_window(raw)
    sliding = _sliding_layers(raw, num_layers) if window is not None else [False] * num_layers
    scalar = raw.get("query_pre_attn_scalar")
    return AttentionPattern(
        layer_windows=tuple(window if s else None for s in sliding),
        logit_cap=_optional_float(raw.get("attn_logit_softcapping")),
        final_logit_cap=_optional_float(raw.get("final_logit_softcapping")),
        scale=float(scalar) ** -0.5 if scalar else None,
    )


def _sliding_window(raw: dict[str, Any]) -> int | None:
    window = raw.get("sliding_window")
    if window is None or raw.get("use_sliding_window") is False:
        return None
    return int(window)


def _sliding_layers(raw: dict[str, Any], num_layers: int) -> list[bool]:
    """Which layers the window applies to: transformers 5 writes ``layer_types``; older
    configs leave it to the model type, as transformers' own config classes do."""
    types = raw.get("layer_types")
    if types:
        return [t == "sliding_attention" for t in types]
    model_type = raw.get("model_type")
    if model_type == "qwen2":
        return [i >= int(raw.get("max_window_layers", 28)) for i in range(num_layers)]
    if model_type == "gemma2":
        return [i % 2 == 0 for i in range(num_layers)]
    if model_type in ("gemma3", "gemma3_text"):
        pattern = int(raw.get("sliding_window_pattern", 6))
        return [(i + 1) % pattern != 0 for i in range(num_layers)]
    return [True] * num_layers


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)
