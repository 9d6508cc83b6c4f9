"""Rotary position embedding with a precomputed cos/sin cache indexed by position."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.config.model_config import RopeConfig
from engine.kernels.cpu import cpu_kernels_for_heads
from engine.kernels.triton import use_triton_kernels


def inverse_frequencies(rope: RopeConfig, head_dim: int, long: bool = False) -> torch.Tensor:
    """The rotation speed of each pair of dimensions (longrope: of positions past the
    original context when ``long``)."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    inv_freq = 1.0 / (rope.theta**exponents)
    if rope.freq_factors is not None:
        return inv_freq / torch.tensor(rope.freq_factors, dtype=torch.float32)
    if rope.rope_type == "linear":
        return inv_freq / rope.factor
    if rope.rope_type == "llama3":
        return _llama3_scaled(inv_freq, rope)
    if rope.rope_type == "yarn":
        return _yarn_scaled(rope, head_dim)
    if rope.rope_type == "longrope":
        factors = rope.long_factor if long else rope.short_factor
        if factors is None:
            raise ValueError("longrope needs short_factor and long_factor")
        return 1.0 / (torch.tensor(factors, dtype=torch.float32) * rope.theta**exponents)
    return inv_freq


def attention_factor(rope: RopeConfig) -> float:
    """What yarn and longrope multiply cos and sin by (1 for the other types)."""
    if rope.attention_factor is not None:
        return rope.attention_factor
    if rope.rope_type == "yarn":
        if rope.mscale and rope.mscale_all_dim:
            return _yarn_mscale(rope.factor, rope.mscale) / _yarn_mscale(rope.factor, rope.mscale_all_dim)
        return _yarn_mscale(rope.factor, 1.0)
    if rope.rope_type == "longrope" and rope.factor > 1.0:
        original = rope.original_max_position_embeddings or 4096
        return math.sqrt(1 + math.log(rope.factor) / math.log(original))
    return 1.0


def _yarn_mscale(scale: float, mscale: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn_scaled(rope: RopeConfig, dim: int) -> torch.Tensor:
    """YaRN: original frequencies for the fast dimensions, interpolated (÷ factor) for the
    slow ones, a linear ramp between (transformers' ``_compute_yarn_parameters``)."""
    original = rope.original_max_position_embeddings or 4096

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(rope.theta))

    low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # NOTE: as transformers: no zero-width ramp
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = rope.theta ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation = 1 - ramp
    return (1.0 / (rope.factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation


def _llama3_scaled(inv_freq: torch.Tensor, rope: RopeConfig) -> torch.Tensor:
    original = rope.original_max_position_embeddings or 8192
    low_wavelen = original / rope.low_freq_factor
    high_wavelen = original / rope.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / rope.factor, inv_freq)
    smooth = (original / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
    smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


class RotaryEmbedding:
    """Applies rotate-half RoPE to q and k laid out as ``[tokens, heads, head_dim]``.

    NOTE: a plain object, not an ``nn.Module``: its cos/sin cache is derived data, so the
    model can be built on the meta device and materialised without losing it.
    """

    def __init__(self, rope: RopeConfig, head_dim: int, max_positions: int, device: torch.device) -> None:
        # NOTE: the cache is as wide as the rotating part of a head (all of it but under a
        # partial_rotary_factor); RopeAngles passes the rest through.
        head_dim = int(head_dim * rope.partial_rotary_factor)
        positions = torch.arange(max_positions, dtype=torch.float32)
        # NOTE: same float32 op order as transformers (outer product, then cat), so the
        # angles are bit-identical and greedy outputs match the reference.
        freqs = positions[:, None] * inverse_frequencies(rope, head_dim)[None, :]
        if rope.rope_type == "longrope":
            # NOTE: by position, not (as transformers) by the length of the whole sequence, so
            # a cached prefix keeps its rotation: the long factors from the original context on.
            original = rope.original_max_position_embeddings or max_positions
            long = positions[original:, None] * inverse_frequencies(rope, head_dim, long=True)[None, :]
            freqs = torch.cat((freqs[:original], long))
        emb = torch.cat((freqs, freqs), dim=-1)
        scale = attention_factor(rope)
        self.cos_cache = (emb.cos() * scale).to(device)
        self.sin_cache = (emb.sin() * scale).to(device)

    def lookup(self, positions: torch.Tensor, dtype: torch.dtype) -> RopeAngles:
        """cos/sin for ``positions``; computed once per forward and shared by every layer."""
        cos = self.cos_cache[positions].to(dtype).unsqueeze(1)
        sin = self.sin_cache[positions].to(dtype).unsqueeze(1)
        half = sin.shape[-1] // 2
        return RopeAngles(cos=cos, sin=sin, sin_signed=torch.cat((-sin[..., :half], sin[..., half:]), dim=-1))


@dataclass(frozen=True)
class RopeAngles:
    cos: torch.Tensor  # [tokens, 1, rotating dims: head_dim but under a partial_rotary_factor]
    sin: torch.Tensor
    # NOTE: sin with its first half negated, so rotate-half needs no negation of x:
    # x2 * -sin1 is bit-identical to -(x2 * sin1).
    sin_signed: torch.Tensor

    def apply(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if use_triton_kernels(q) and not self.partial(q):
            # NOTE: imported here, on CUDA only: importing it imports triton.
            from engine.kernels.triton.rotary import apply_rotary

            return apply_rotary(q, k, self.cos, self.sin)
        return self.rotate_heads(q), self.rotate_heads(k)

    def rotate_heads(self, x: torch.Tensor) -> torch.Tensor:
        """Rotate-half RoPE of ``x`` (``[tokens, heads, head_dim]``, any heads): one C++ pass
        on CPU in float32 (bit-identical), torch ops elsewhere."""
        if self.partial(x):
            rotary = self.cos.shape[-1]
            return torch.cat((self._rotate(x[..., :rotary]), x[..., rotary:]), dim=-1)
        return self._rotate(x)

    def partial(self, x: torch.Tensor) -> bool:
        """Whether only the leading part of ``x``'s heads rotates (a partial_rotary_factor)."""
        return self.cos.shape[-1] != x.shape[-1]

    def _rotate(self, x: torch.Tensor) -> torch.Tensor:
        kernels = cpu_kernels_for_heads(x)
        if kernels is not None and self.cos.dtype == torch.float32:
            out = torch.empty(x.shape, dtype=x.dtype)
            kernels.rotary_heads(x, self.cos, self.sin_signed, out)
            return out
        half = x.shape[-1] // 2
        swapped = torch.cat((x[..., half:], x[..., :half]), dim=-1)
        rotated = x * self.cos
        rotated += swapped.mul_(self.sin_signed)
        return rotated
