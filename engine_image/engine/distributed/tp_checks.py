"""``--tp-size`` checked against the model's config.json at the command line, before any
process starts or any weight loads.

NOTE: reads the JSON only (no torch, no model code), so a bad value fails in milliseconds.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.config.architectures import SPLIT_PROJECTION_DECODERS, is_classifier, is_encoder


def tp_problems(model_path: str, tp_size: int, is_embedding: bool) -> list[str]:
    """Why ``model_path`` cannot be served at ``tp_size`` ranks; empty when it can."""
    if tp_size < 1:
        return [f"--tp-size must be >= 1, got {tp_size}"]
    if tp_size == 1:
        return []
    config_file = Path(model_path) / "config.json"
    if not config_file.is_file():
        # NOTE: a GGUF file (or a directory of one) has no config.json: its layers are the
        # packed quantized kernels, which run whole-model only.
        return [f"--tp-size {tp_size} needs a safetensors model directory; GGUF models run at --tp-size 1"]
    raw = json.loads(config_file.read_text())
    text = raw.get("text_config") or raw
    architectures = raw.get("architectures") or []
    if is_embedding or is_encoder(architectures) or is_classifier(architectures):
        return [f"--tp-size {tp_size} serves generation only, not embedding, reward or encoder models"]
    if any(key in text for key in ("num_experts", "num_local_experts")):
        return [f"--tp-size {tp_size} does not shard mixture-of-experts models yet"]
    unsharded = [name for name in architectures if name not in SPLIT_PROJECTION_DECODERS]
    if unsharded:
        return [f"--tp-size {tp_size} does not shard {unsharded[0]} yet; serve it at --tp-size 1"]
    if text.get("quantization_config"):
        return [f"--tp-size {tp_size} does not shard quantized checkpoints; serve them at --tp-size 1"]
    heads = int(text.get("num_attention_heads", 0))
    kv_heads = int(text.get("num_key_value_heads") or heads)
    intermediate = int(text.get("intermediate_size", 0))
    if heads % tp_size:
        return [f"--tp-size {tp_size} must divide the model's {heads} attention heads"]
    if kv_heads % tp_size and tp_size % kv_heads:
        return [f"--tp-size {tp_size} must divide the model's {kv_heads} KV heads, or be a multiple of them"]
    if intermediate % tp_size:
        return [f"--tp-size {tp_size} must divide the model's MLP width ({intermediate})"]
    return []
