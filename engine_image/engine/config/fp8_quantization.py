"""The FP8 weight formats the engine loads, read from ``config.json``'s ``quantization_config``.

- ``quant_method: "fp8"`` (transformers' finegrained FP8 / vLLM's ``fp8``): float8_e4m3fn
  weights with ``weight_scale_inv`` float32 per ``weight_block_size`` block of ``[out, in]``
  (128 x 128), or without a block size one ``weight_scale`` per tensor; activations dynamic.
- ``quant_method: "compressed-tensors"`` in its ``float-quantized`` format (llm-compressor's
  FP8 schemes): one config group of 8-bit float weights, ``strategy`` tensor (``weight_scale``
  ``[1]``) or channel (``[out, 1]``), symmetric and static; input activations dynamic
  (per token or per tensor) or absent (weight-only).

What a format leaves in float (``ignore``, ``modules_to_not_convert``, a head the quantizer
skipped) needs no reading: the loader sees those projections carry no scale and loads them
as float. Every other variant is refused in one line that names it.

NOTE: ``manager/manifests/engine_support.py`` copies these tables (a test keeps them equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config.architectures import SPLIT_PROJECTION_DECODERS
from engine.core.errors import UnsupportedModelError

FP8_METHODS = ("fp8", "compressed-tensors")
# NOTE: the ``fp8`` method's ``fmt``; e5m2 weights are refused.
FP8_FORMATS = ("e4m3",)
FP8_BLOCK_SIZES = ((128, 128),)
FP8_ACTIVATION_SCHEMES = ("dynamic",)
COMPRESSED_TENSORS_FORMATS = ("float-quantized",)
COMPRESSED_TENSORS_STRATEGIES = ("tensor", "channel")


@dataclass(frozen=True)
class Fp8Config:
    """A checkpoint's FP8 weights: ``method`` fp8 or compressed-tensors, ``strategy`` block,
    tensor or channel (how ``weight_scale`` or ``weight_scale_inv`` is laid out)."""

    method: str
    strategy: str
    block: tuple[int, int] | None  # [out, in] block of one scale; None unless strategy block

    @property
    def scale_leaf(self) -> str:
        """The checkpoint's name of the weight scale (a multiplier in both formats)."""
        return "weight_scale_inv" if self.strategy == "block" else "weight_scale"

    def describe(self) -> str:
        """e.g. "fp8 e4m3 block 128x128", for the load log and /server_info."""
        if self.block is not None:
            return f"fp8 e4m3 block {self.block[0]}x{self.block[1]}"
        return f"fp8 e4m3 per-{self.strategy}"


def fp8_config(raw: dict[str, Any], architecture: str) -> Fp8Config:
    """The FP8 format of a ``quantization_config`` whose ``quant_method`` is in FP8_METHODS.

    Raises UnsupportedModelError naming the first thing the engine does not load.
    """
    method = str(raw.get("quant_method", "")).lower()
    if architecture not in SPLIT_PROJECTION_DECODERS:
        raise UnsupportedModelError(f"{method} checkpoints of {architecture} are not supported yet")
    if method == "fp8":
        return _fp8_method(raw)
    return _compressed_tensors(raw)


def _fp8_method(raw: dict[str, Any]) -> Fp8Config:
    fmt = str(raw.get("fmt", "e4m3")).lower()
    if fmt not in FP8_FORMATS:
        raise UnsupportedModelError(f"fp8 weights in {fmt} are not supported (only e4m3)")
    scheme = str(raw.get("activation_scheme", "dynamic")).lower()
    if scheme not in FP8_ACTIVATION_SCHEMES:
        raise UnsupportedModelError(f"fp8 with activation_scheme {scheme!r} is not supported (only dynamic)")
    block = raw.get("weight_block_size")
    if block is None:
        return Fp8Config("fp8", "tensor", None)
    if not isinstance(block, list) or tuple(block) not in FP8_BLOCK_SIZES:
        raise UnsupportedModelError(f"fp8 with weight_block_size {block!r} is not supported (only [128, 128])")
    return Fp8Config("fp8", "block", (int(block[0]), int(block[1])))


def _compressed_tensors(raw: dict[str, Any]) -> Fp8Config:
    fmt = raw.get("format")
    if fmt not in COMPRESSED_TENSORS_FORMATS:
        raise UnsupportedModelError(f"compressed-tensors format {fmt!r} is not supported (only float-quantized: FP8)")
    groups = raw.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        count = len(groups) if isinstance(groups, dict) else 0
        raise UnsupportedModelError(f"compressed-tensors with {count} config_groups is not supported (only one)")
    group = next(iter(groups.values()))
    weights = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(weights, dict):
        raise UnsupportedModelError("compressed-tensors config group without weights is not supported")
    kind, bits = weights.get("type"), weights.get("num_bits")
    if (kind, bits) != ("float", 8):
        raise UnsupportedModelError(
            f"compressed-tensors with {kind} {bits}-bit weights is not supported (only float 8-bit: FP8)"
        )
    strategy = str(weights.get("strategy"))
    if strategy not in COMPRESSED_TENSORS_STRATEGIES:
        raise UnsupportedModelError(
            f"compressed-tensors FP8 with weight strategy {strategy!r} is not supported (supported: tensor, channel)"
        )
    if weights.get("dynamic", False) or not weights.get("symmetric", True):
        raise UnsupportedModelError("compressed-tensors FP8 with dynamic or asymmetric weights is not supported")
    activations = group.get("input_activations")
    if isinstance(activations, dict) and not activations.get("dynamic", False):
        raise UnsupportedModelError("compressed-tensors FP8 with static input activation scales is not supported")
    return Fp8Config("compressed-tensors", strategy, None)
