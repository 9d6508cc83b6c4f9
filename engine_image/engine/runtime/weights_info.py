"""How the served weights are stored and multiplied: what the load log line and /server_info say."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from engine.layers.fp8_linear import Fp8Linear
from engine.layers.int4_linear import Int4Linear
from engine.layers.packed_linear import PackedLinear
from engine.layers.quantized_linear import QuantizedLinear


@dataclass(frozen=True)
class WeightsInfo:
    format: str  # safetensors | gguf | awq | gptq | fp8 | compressed-tensors
    # NOTE: the GGUF file's types, the most common first; an int4 or FP8 checkpoint's format
    # (e.g. "int4 g128 asym", "fp8 e4m3 block 128x128"); () for float safetensors.
    quant_types: tuple[str, ...]
    kernel: str  # the linear layers' kernel path(s); "" where torch multiplies

    def __str__(self) -> str:
        if not self.quant_types:
            return f"{self.format} weights" + (f", {self.kernel}" if self.kernel else "")
        return f"{self.format} {'+'.join(self.quant_types)} weights, {self.kernel}"


def quantized_kernel_paths(model: nn.Module) -> str:
    """The kernel paths of ``model``'s quantized layers, e.g. "dequantized to bfloat16 at load"."""
    return ", ".join(sorted({m.kernel_path for m in model.modules() if isinstance(m, QuantizedLinear)}))


def packed_kernel_paths(model: nn.Module) -> str:
    """The kernel paths of ``model``'s packed CPU linear layers, e.g. "avx512-bf16"."""
    return ", ".join(sorted({m.kernel_path for m in model.modules() if isinstance(m, PackedLinear)}))


def checkpoint_kernel_paths(model: nn.Module) -> str:
    """The kernel paths of ``model``'s int4 and FP8 layers, e.g. "triton int4 dequantize-GEMM"."""
    return ", ".join(sorted({m.kernel_path for m in model.modules() if isinstance(m, (Int4Linear, Fp8Linear))}))
