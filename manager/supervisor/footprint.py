"""What a store model needs loaded: readiness' estimate (weights + KV cache + overhead) for the
context its manifest gives, and that context, which is the KV share the engine is told."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from manager.manifests.architecture import traits_of
from manager.manifests.errors import ManifestError
from manager.manifests.resolve import resolve_manifest
from manager.models.model_path import is_gguf_file
from manager.models.store import ModelStore, RepoId
from manager.readiness.gguf_fit import local_gguf_fit
from manager.readiness.memory import (
    GIB,
    MemoryEstimate,
    config_dtype_bytes,
    context_for,
    estimate_memory,
)
from manager.readiness.weights import WeightsUnknownError, local_weights


@dataclass(frozen=True)
class Footprint:
    estimate: MemoryEstimate
    context_tokens: int  # the KV cache the estimate holds: the engine's --max-total-tokens

    @property
    def total(self) -> int:
        return self.estimate.total

    def describe(self) -> str:
        """e.g. '1.95 GiB (weights 0.50 + KV cache 0.35 for 8192 tokens + overhead 1.10)'."""
        e = self.estimate
        return (
            f"{e.total / GIB:.2f} GiB (weights {e.weights / GIB:.2f} + KV cache "
            f"{e.kv_cache / GIB:.2f} for {self.context_tokens} tokens + overhead {e.overhead / GIB:.2f})"
        )


def footprint_of(repo: str, model_dir: Path) -> Footprint | None:
    """The model's footprint, or None where it cannot be read (no safetensors, odd config):
    such a model is admitted by the loaded-models cap alone, as readiness only warns for it.
    `model_dir` may be a GGUF file (a tagged model), sized by its size and header."""
    try:
        context = resolve_manifest(repo, traits_of(model_dir)).context_length
        if is_gguf_file(model_dir):
            fit = local_gguf_fit(model_dir, context)
            return Footprint(fit.memory, fit.context_tokens)
        config = json.loads((model_dir / "config.json").read_text())
        tokens = context_for(config, context)
        weights = local_weights(model_dir).total_bytes
        estimate = estimate_memory(config, weights, tokens, config_dtype_bytes(config))
    except (ManifestError, WeightsUnknownError, OSError, ValueError):
        return None
    return Footprint(estimate, tokens)


def store_footprint(store: ModelStore, repo: str) -> Footprint | None:
    """`footprint_of` the store's copy of `repo` (None when the store no longer has it)."""
    stored = store.get(RepoId.parse(repo))
    return None if stored is None else footprint_of(repo, stored.model_path)
