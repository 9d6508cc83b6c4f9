"""The project's own small FP8 quantizer: a float checkpoint transformers wrote, rewritten in
the exact on-disk formats of the ``fp8`` quant method (transformers' finegrained FP8 / vLLM:
``weight_scale_inv`` per 128 x 128 block, or one ``weight_scale`` per tensor) and of
compressed-tensors' ``float-quantized`` FP8 (llm-compressor's FP8 schemes: ``weight_scale``
``[1]`` per tensor or ``[out, 1]`` per channel, dynamic per-token input activations, an
``ignore`` list), plus the same model dequantized (a plain float32 checkpoint).

Round-to-nearest with absmax scales, no calibration (the formats, not the accuracy, are under
test): ``scale = absmax / 448`` made 1% larger and rounded to bfloat16's 8 significant bits,
so every ``q * scale`` is exact in float32 and the dequantized checkpoint means exactly what
the FP8 one does. Scales are stored float32, as both formats allow.

With ``kv_scales`` (compressed-tensors' ``kv_cache_scheme``) each layer also gets
``self_attn.k_scale``/``v_scale``: twice the absmax of its K/V projections' outputs over a
calibration prompt, over 448 (twice: RoPE may grow a K element by up to sqrt 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from tests.support.quantized_checkpoints import rewrite_checkpoint

FP8_MAX = 448.0
BLOCK = 128
CALIBRATION_IDS = [9, 1204, 88, 3071, 5, 640, 211, 17, 305, 42, 700, 31]


@dataclass(frozen=True)
class Fp8Variant:
    method: str  # fp8 | compressed-tensors
    strategy: str  # block | tensor (both methods) | channel (compressed-tensors)
    # NOTE: modules left in float (compressed-tensors' ``ignore``; the fp8 method's
    # ``modules_to_not_convert``), by their checkpoint name.
    ignore: tuple[str, ...] = ()
    kv_scales: bool = False  # NOTE: compressed-tensors only (its kv_cache_scheme)

    @property
    def name(self) -> str:
        return f"{self.method}-{self.strategy}" + ("-ignore" if self.ignore else "") + ("-kv" if self.kv_scales else "")

    def quantization_config(self) -> dict[str, Any]:
        if self.method == "fp8":
            config: dict[str, Any] = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3"}
            if self.strategy == "block":
                config["weight_block_size"] = [BLOCK, BLOCK]
            return config | {"modules_to_not_convert": list(self.ignore) or None}
        group = {
            "targets": ["Linear"],
            "weights": {
                "num_bits": 8, "type": "float", "strategy": self.strategy, "symmetric": True,
                "dynamic": False, "group_size": None, "observer": "minmax",
            },
            "input_activations": {
                "num_bits": 8, "type": "float", "strategy": "token", "symmetric": True,
                "dynamic": True, "observer": None,
            },
            "output_activations": None,
        }
        return {
            "quant_method": "compressed-tensors", "format": "float-quantized",
            "quantization_status": "compressed", "config_groups": {"group_0": group},
            "ignore": ["lm_head", *self.ignore], "kv_cache_scheme": _KV_SCHEME if self.kv_scales else None,
        }


_KV_SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}


def _scale(absmax: torch.Tensor) -> torch.Tensor:
    """float64 scales over ``absmax`` whose ``q * scale`` are exact in float32."""
    return (absmax.double().clamp(min=1e-8) / FP8_MAX * 1.01).to(torch.bfloat16).double()


def quantize_projection(weight: torch.Tensor, variant: Fp8Variant) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """``weight`` [out, in] as the checkpoint's tensors by leaf name, and the float32 weight
    they mean."""
    w = weight.double()
    n, k = w.shape
    if variant.strategy == "block":
        rows, cols = -(-n // BLOCK), -(-k // BLOCK)
        padded = torch.zeros(rows * BLOCK, cols * BLOCK, dtype=torch.float64)
        padded[:n, :k] = w.abs()
        absmax = padded.view(rows, BLOCK, cols, BLOCK).amax(dim=(1, 3))
        scale = _scale(absmax)
        full = scale.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:n, :k]
        stored = {"weight_scale_inv": scale.float()}
    elif variant.strategy == "channel":
        scale = _scale(w.abs().amax(dim=1, keepdim=True))
        full = scale.expand(n, k)
        stored = {"weight_scale": scale.float()}
    else:
        scale = _scale(w.abs().amax())
        full = scale.expand(n, k)
        # NOTE: the fp8 method's per-tensor scale is a scalar; compressed-tensors' is [1].
        stored = {"weight_scale": scale.float().reshape(() if variant.method == "fp8" else (1,))}
    q = (w / full).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return {"weight": q, **stored}, (q.double() * full).float()


def write_fp8_checkpoint(source: Path, out: Path, dequantized: Path, variant: Fp8Variant) -> None:
    """``source``'s projections quantized into ``out`` (the checkpoint, with source's other
    files), and the same model dequantized to float32 into ``dequantized``."""

    def quantize(
        module: str, weight: torch.Tensor, _tensors: dict[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor] | None:
        return None if module in variant.ignore else quantize_projection(weight, variant)

    extra = _kv_scales(source) if variant.kv_scales else None
    rewrite_checkpoint(source, out, dequantized, quantize, variant.quantization_config(), extra)


def _kv_scales(source: Path) -> dict[str, torch.Tensor]:
    """Each layer's ``self_attn.k_scale``/``v_scale`` over CALIBRATION_IDS (float32 scalars)."""
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32).eval()
    absmax: dict[str, float] = {}

    def record(name: str) -> Callable[[torch.nn.Module, object, torch.Tensor], None]:
        def hook(_module: torch.nn.Module, _inputs: object, output: torch.Tensor) -> None:
            absmax[name] = float(output.abs().max())

        return hook

    for index, layer in enumerate(model.model.layers):
        layer.self_attn.k_proj.register_forward_hook(record(f"model.layers.{index}.self_attn.k_scale"))
        layer.self_attn.v_proj.register_forward_hook(record(f"model.layers.{index}.self_attn.v_scale"))
    with torch.inference_mode():
        model(torch.tensor([CALIBRATION_IDS]))
    return {name: _scale(torch.tensor(2 * value)).float().reshape(()) for name, value in absmax.items()}
