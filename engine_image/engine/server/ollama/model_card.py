"""What /api/tags, /api/show and /api/ps say about the served model, read from its directory."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.server.context import ServerContext
from engine.server.ollama.protocol import ModelDetails, timestamp

# NOTE: HF config key → the GGUF-style suffix Ollama shows in model_info as "<arch>.<suffix>".
_MODEL_INFO_KEYS = {
    "hidden_size": "embedding_length",
    "num_hidden_layers": "block_count",
    "intermediate_size": "feed_forward_length",
    "num_attention_heads": "attention.head_count",
    "num_key_value_heads": "attention.head_count_kv",
    "rms_norm_eps": "attention.layer_norm_rms_epsilon",
    "rope_theta": "rope.freq_base",
    "vocab_size": "vocab_size",
}


@dataclass(frozen=True)
class ModelCard:
    size: int  # bytes of the *.safetensors files
    digest: str
    modified_at: str
    parameter_count: int
    details: ModelDetails


def _header(path: Path) -> bytes:
    """The JSON header of a safetensors file: tensor names, dtypes and shapes (no weights)."""
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return f.read(length)


def human_number(n: int) -> str:
    """Ollama's parameter_size format: 8B, 7.2B, 135M, 134.52M, 500K."""
    for scale, suffix, decimals in ((10**9, "B", 1), (10**6, "M", 2), (10**3, "K", 0)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f}{suffix}" if value.is_integer() else f"{value:.{decimals}f}{suffix}"
    return str(n)


def model_card(ctx: ServerContext) -> ModelCard:
    """Read on each call (headers only, a few KB), so a weight update by path shows at once."""
    files = sorted(Path(ctx.model_path).glob("*.safetensors"))
    digest = hashlib.sha256()
    params_by_dtype: Counter[str] = Counter()
    size = 0
    newest = 0.0
    for path in files:
        stat = path.stat()
        header = _header(path)
        # NOTE: names, sizes, times and tensor headers identify the files without hashing gigabytes.
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
        digest.update(header)
        size += stat.st_size
        newest = max(newest, stat.st_mtime)
        for name, tensor in json.loads(header).items():
            if name != "__metadata__":
                params_by_dtype[tensor["dtype"]] += math.prod(tensor["shape"])
    family = str(ctx.hf_config.get("model_type", "unknown"))
    parameter_count = sum(params_by_dtype.values())
    details = ModelDetails(
        parent_model="",
        format="safetensors",
        family=family,
        families=[family],
        parameter_size=human_number(parameter_count),
        quantization_level=params_by_dtype.most_common(1)[0][0] if params_by_dtype else "unknown",
    )
    return ModelCard(
        size=size,
        digest=digest.hexdigest(),
        modified_at=timestamp(datetime.fromtimestamp(newest, UTC)),
        parameter_count=parameter_count,
        details=details,
    )


def model_info(ctx: ServerContext, card: ModelCard) -> dict[str, Any]:
    """GGUF-style metadata keys, as /api/show's ``model_info``."""
    arch = card.details.family
    info: dict[str, Any] = {
        "general.architecture": arch,
        "general.parameter_count": card.parameter_count,
        f"{arch}.context_length": ctx.context_length,
    }
    for hf_key, suffix in _MODEL_INFO_KEYS.items():
        if hf_key in ctx.hf_config:
            info[f"{arch}.{suffix}"] = ctx.hf_config[hf_key]
    return info
