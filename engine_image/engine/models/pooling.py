"""How an embedding model turns hidden states into one vector: sentence-transformers' config."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.core.errors import UnsupportedModelError

POOLING_MODES = ("cls", "mean", "max", "lasttoken")


@dataclass(frozen=True)
class PoolingConfig:
    mode: str  # one of POOLING_MODES
    normalize: bool

    @classmethod
    def from_dir(cls, model_path: str | Path, default_mode: str) -> PoolingConfig:
        """Read from ``modules.json`` (and the Pooling module's config.json) when present.

        Without them, ``default_mode`` and L2 normalisation (SGLang's defaults: CLS for BERT,
        the last token for decoders).
        """
        modules_file = Path(model_path) / "modules.json"
        if not modules_file.is_file():
            return cls(default_mode, normalize=True)
        modules = json.loads(modules_file.read_text())
        kinds = {str(m.get("type", "")).rsplit(".", 1)[-1]: m for m in modules}
        mode = default_mode
        if "Pooling" in kinds:
            pooling = json.loads((Path(model_path) / kinds["Pooling"]["path"] / "config.json").read_text())
            chosen = [m for m in POOLING_MODES if pooling.get(f"pooling_mode_{m}_token") or pooling.get(f"pooling_mode_{m}_tokens")]
            if len(chosen) != 1:
                raise UnsupportedModelError(f"pooling config {pooling} is not one of {', '.join(POOLING_MODES)}")
            mode = chosen[0]
        return cls(mode, normalize="Normalize" in kinds)


def pool(config: PoolingConfig, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """hidden [B, L, H] over right-padded inputs (mask [B, L]) -> float32 vectors [B, H]."""
    hidden = hidden.float()
    mask = attention_mask[..., None].to(hidden.dtype)
    if config.mode == "cls":
        pooled = hidden[:, 0]
    elif config.mode == "mean":
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    elif config.mode == "max":
        pooled = hidden.masked_fill(mask == 0, float("-inf")).amax(1)
    else:
        last = attention_mask.sum(1) - 1
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    return normalize(config, pooled)


def normalize(config: PoolingConfig, vectors: torch.Tensor) -> torch.Tensor:
    return F.normalize(vectors, p=2, dim=-1) if config.normalize else vectors
