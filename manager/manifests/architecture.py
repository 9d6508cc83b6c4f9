"""A model's architecture (config.json `architectures[0]`), from what is already on disk."""

from __future__ import annotations

import json
from pathlib import Path

from manager.manifests.resolve import is_path
from manager.models.errors import InvalidRepoIdError
from manager.models.store import ModelStore, RepoId


def detect_architecture(repo_or_path: str, store: ModelStore | None = None) -> str | None:
    """From the directory itself, or the store's copy of the repo; None if neither has one.

    Never downloads: a repo not yet pulled is matched by its repo id alone.
    """
    if is_path(repo_or_path):
        return architecture_of(Path(repo_or_path).expanduser())
    try:
        repo = RepoId.parse(repo_or_path)
    except InvalidRepoIdError:
        return None
    return architecture_of((store or ModelStore.from_env()).path_for(repo))


def architecture_of(model_dir: Path) -> str | None:
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    architectures = config.get("architectures") if isinstance(config, dict) else None
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None
