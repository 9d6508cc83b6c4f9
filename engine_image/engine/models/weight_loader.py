"""Reads safetensors checkpoints: one file, or shards listed in ``model.safetensors.index.json``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open


def checkpoint_files(model_path: str | Path) -> list[Path]:
    path = Path(model_path)
    index = path / "model.safetensors.index.json"
    if index.is_file():
        weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
        files = sorted({path / name for name in weight_map.values()})
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise FileNotFoundError(f"{path}: shards listed in the index are missing: {', '.join(missing)}")
        return files
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{path} has no *.safetensors weights")
    return files


def iterate_weights(model_path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Yields (name, tensor) one at a time so peak memory stays near one tensor."""
    for file in checkpoint_files(model_path):
        with safe_open(str(file), framework="pt") as handle:
            # NOTE: a safetensors handle is not iterable; keys() is its API.
            for name in handle.keys():  # noqa: SIM118
                yield name, handle.get_tensor(name)
