"""Rotary embedding parameters as ``config.json`` states them (``rope_scaling``, or
transformers 5's ``rope_parameters``, per layer type for Gemma 3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.errors import UnsupportedModelError

# NOTE: "su" is what the first Phi-3 configs call longrope.
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn", "longrope", "su")


@dataclass(frozen=True)
class RopeConfig:
    """Rotary embedding parameters: ``rope_type`` is one of ``SUPPORTED_ROPE_TYPES``."""

    theta: float
    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int | None = None
    # NOTE: a divisor per frequency, as llama.cpp stores Llama 3.1's scaling in GGUF files
    # (``rope_freqs.weight``); it replaces ``rope_type``'s scaling when present.
    freq_factors: tuple[float, ...] | None = None
    # NOTE: yarn's ramp between interpolated and original frequencies, and its cos/sin scale
    # (None: derived from ``factor`` and ``mscale``/``mscale_all_dim``).
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool = True
    # NOTE: longrope (Phi-3): a divisor per frequency below ``original_max_position_embeddings``
    # (short) and from it on (long).
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    # NOTE: the leading fraction of each head that rotates (Phi-4-mini: 0.75); the rest passes.
    partial_rotary_factor: float = 1.0


def rope_config(raw: dict[str, Any], layer_type: str | None = None) -> RopeConfig:
    """The RoPE of ``raw``'s layers (of ``layer_type``'s, where the config has one per type)."""
    params = dict(raw.get("rope_parameters") or {})
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        params = dict(params[layer_type])
    elif any(isinstance(value, dict) for value in params.values()):
        params = dict(params.get("full_attention") or {})
    scaling = dict(raw.get("rope_scaling") or {})
    if layer_type == "sliding_attention" and "rope_local_base_freq" in raw:
        # NOTE: Gemma 3 before transformers 5: local layers have their own base and no scaling.
        scaling, params = {}, {"rope_theta": raw["rope_local_base_freq"]}
    merged = {**scaling, **params}
    theta = float(merged.get("rope_theta", raw.get("rope_theta", 10000.0)))
    rope_type = str(merged.get("rope_type", merged.get("type", "default")))
    if rope_type == "su":
        rope_type = "longrope"
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedModelError(
            f"rope type {rope_type!r} is not supported (supported: {', '.join(SUPPORTED_ROPE_TYPES)})"
        )
    # NOTE: as transformers: Phi-3's top-level value first; the context itself where none is given.
    original = raw.get("original_max_position_embeddings") or merged.get("original_max_position_embeddings")
    if original is None and rope_type in ("llama3", "yarn", "longrope"):
        original = raw.get("max_position_embeddings")
    factor = merged.get("factor")
    if factor is None and original and rope_type in ("yarn", "longrope"):
        # NOTE: as transformers: Phi-3 states no factor; it is the context's growth.
        factor = int(raw.get("max_position_embeddings", original)) / int(original)
    factors = raw.get("rope_freq_factors")
    return RopeConfig(
        theta=theta,
        rope_type=rope_type,
        factor=float(factor if factor is not None else 1.0),
        low_freq_factor=float(merged.get("low_freq_factor", 1.0)),
        high_freq_factor=float(merged.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(original) if original else None,
        freq_factors=tuple(float(f) for f in factors) if factors else None,
        beta_fast=float(merged.get("beta_fast") or 32.0),
        beta_slow=float(merged.get("beta_slow") or 1.0),
        mscale=_optional_float(merged.get("mscale")),
        mscale_all_dim=_optional_float(merged.get("mscale_all_dim")),
        attention_factor=_optional_float(merged.get("attention_factor")),
        truncate=bool(merged.get("truncate", True)),
        short_factor=_factors(merged.get("short_factor")),
        long_factor=_factors(merged.get("long_factor")),
        partial_rotary_factor=float(merged.get("partial_rotary_factor", raw.get("partial_rotary_factor", 1.0))),
    )


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _factors(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(f) for f in value)
