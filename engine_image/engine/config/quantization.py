"""The quantized formats the engine loads, read from ``config.json``'s ``quantization_config``:
the weight-only int4 ones here, the FP8 ones in ``fp8_quantization``.

AWQ in its GEMM layout and GPTQ in its v1 checkpoint format (act-order on or off, symmetric or
not), 4 bits, groups of 32, 64 or 128 input columns or one group per row (``group_size: -1``).
Every other variant is refused in one line that names it.

NOTE: ``manager/manifests/engine_support.py`` copies these tables (a test keeps them equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config.architectures import SPLIT_PROJECTION_DECODERS
from engine.config.fp8_quantization import FP8_METHODS, Fp8Config, fp8_config
from engine.core.errors import UnsupportedModelError

INT4_METHODS = ("awq", "gptq")
INT4_BITS = 4
AWQ_VERSIONS = ("gemm",)
GPTQ_CHECKPOINT_FORMATS = ("gptq",)
# NOTE: -1 is one group per row; the CPU kernels split every group into runs of 32.
INT4_GROUP_SIZES = (-1, 32, 64, 128)


@dataclass(frozen=True)
class Int4Config:
    """A checkpoint's int4 quantization: ``method`` awq or gptq."""

    method: str
    group_size: int  # -1: one group over the whole input row
    desc_act: bool  # GPTQ act-order: input columns grouped by ``g_idx``
    sym: bool

    def describe(self) -> str:
        """e.g. "int4 g128 act-order asym", for the load log and /server_info."""
        group = "per-row" if self.group_size == -1 else f"g{self.group_size}"
        words = ["int4", group]
        if self.desc_act:
            words.append("act-order")
        words.append("sym" if self.sym else "asym")
        return " ".join(words)


def quantization_config(raw: Any, architecture: str) -> Int4Config | Fp8Config | None:
    """The format ``quantization_config`` (``raw``) of an ``architecture`` model declares;
    None without one.

    Raises UnsupportedModelError naming the first thing the engine does not load.
    """
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise UnsupportedModelError("quantization_config in config.json is not an object")
    method = str(raw.get("quant_method", "")).lower()
    if method in FP8_METHODS:
        return fp8_config(raw, architecture)
    if method not in INT4_METHODS:
        raise UnsupportedModelError(
            f"quantization {method or 'without quant_method'!r} is not supported "
            "(supported: awq, gptq, fp8, compressed-tensors)"
        )
    return _int4_config(raw, method, architecture)


def _int4_config(raw: dict[str, Any], method: str, architecture: str) -> Int4Config:
    if architecture not in SPLIT_PROJECTION_DECODERS:
        raise UnsupportedModelError(f"{method} checkpoints of {architecture} are not supported yet")
    bits = raw.get("bits", raw.get("w_bit"))
    if bits != INT4_BITS:
        raise UnsupportedModelError(f"{method} with bits {bits!r} is not supported (only 4)")
    group_size = raw.get("group_size", raw.get("q_group_size"))
    if group_size not in INT4_GROUP_SIZES:
        raise UnsupportedModelError(
            f"{method} with group_size {group_size!r} is not supported (supported: -1, 32, 64, 128)"
        )
    if method == "awq":
        version = str(raw.get("version", "gemm")).lower()
        if version not in AWQ_VERSIONS:
            raise UnsupportedModelError(f"awq version {version!r} is not supported (only gemm)")
        if raw.get("zero_point", True) is not True:
            raise UnsupportedModelError("awq without zero_point is not supported")
        return Int4Config("awq", int(group_size), desc_act=False, sym=False)
    # NOTE: GPTQModel writes ``checkpoint_format``; AutoGPTQ's older configs only v1 (none).
    checkpoint_format = str(raw.get("checkpoint_format", "gptq")).lower()
    if checkpoint_format not in GPTQ_CHECKPOINT_FORMATS:
        raise UnsupportedModelError(
            f"gptq checkpoint_format {checkpoint_format!r} is not supported (only gptq, v1)"
        )
    return Int4Config("gptq", int(group_size), desc_act=bool(raw.get("desc_act", False)), sym=bool(raw.get("sym", True)))
