"""The rewrite both of the project's quantizers (int4_checkpoints.py, fp8_checkpoints.py) run:
a float checkpoint transformers wrote, its projections replaced by a format's tensors, plus
the same model dequantized (a plain float32 checkpoint transformers loads as it is)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# NOTE: (a projection's module name, its float weight, every tensor of the source) -> its
# tensors by leaf name and the float32 weight they mean; None: the projection stays float.
Quantize = Callable[[str, torch.Tensor, dict[str, torch.Tensor]], tuple[dict[str, torch.Tensor], torch.Tensor] | None]


def rewrite_checkpoint(
    source: Path,
    out: Path,
    dequantized: Path,
    quantize: Quantize,
    quantization_config: dict[str, Any],
    extra: dict[str, torch.Tensor] | None = None,
) -> None:
    """``source``'s projections quantized into ``out`` (with source's other files, ``extra``
    tensors, and ``quantization_config`` in its config.json), and the same model dequantized
    to float32 into ``dequantized``."""
    for path in (out, dequantized):
        shutil.copytree(source, path)
        (path / "model.safetensors").unlink()
    float_tensors = load_file(source / "model.safetensors")
    quantized_tensors: dict[str, torch.Tensor] = dict(extra or {})
    dequantized_tensors: dict[str, torch.Tensor] = {}
    for name, tensor in sorted(float_tensors.items()):
        module = name.removesuffix(".weight")
        is_projection = name.endswith(".weight") and module.rpartition(".")[2] in PROJECTIONS
        quantized = quantize(module, tensor, float_tensors) if is_projection else None
        if quantized is None:
            quantized_tensors[name] = tensor
            dequantized_tensors[name] = tensor
            continue
        leaves, dequantized_tensors[name] = quantized
        quantized_tensors |= {f"{module}.{leaf}": t for leaf, t in leaves.items()}
    save_file(quantized_tensors, out / "model.safetensors", metadata={"format": "pt"})
    save_file(dequantized_tensors, dequantized / "model.safetensors", metadata={"format": "pt"})
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    config["quantization_config"] = quantization_config
    config_path.write_text(json.dumps(config, indent=2))
