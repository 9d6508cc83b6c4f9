"""A model's architecture, from what is already on disk: config.json `architectures[0]`, or
a GGUF's `general.architecture` as its Hugging Face class name."""

from __future__ import annotations

import json
from pathlib import Path

from manager.gguf.architectures import hf_architecture
from manager.gguf.byte_source import FileSource, HeaderReadError
from manager.gguf.header import read_header
from manager.manifests.resolve import is_path
from manager.models.errors import InvalidRepoIdError
from manager.models.model_path import is_gguf_file, model_path_in
from manager.models.store import ModelStore, RepoId


def detect_architecture(repo_or_path: str, store: ModelStore | None = None) -> str | None:
    """From the directory or GGUF file itself, or the store's copy of the repo; None if
    neither has one.

    Never downloads: a repo not yet pulled is matched by its repo id alone.
    """
    if is_path(repo_or_path):
        return architecture_of(Path(repo_or_path).expanduser())
    try:
        repo = RepoId.parse(repo_or_path)
    except InvalidRepoIdError:
        return None
    stored = (store or ModelStore.from_env()).get_or_default_tag(repo)
    return architecture_of(stored.model_path) if stored else None


def architecture_of(model_path: Path) -> str | None:
    """`model_path`: a model directory, a GGUF file, or a store directory holding one."""
    if not is_gguf_file(model_path):
        model_path = model_path_in(model_path) if model_path.is_dir() else model_path
    if is_gguf_file(model_path):
        return _gguf_architecture(model_path)
    try:
        config = json.loads((model_path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    architectures = config.get("architectures") if isinstance(config, dict) else None
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None


def _gguf_architecture(path: Path) -> str | None:
    try:
        name = read_header(FileSource(path)).get("general.architecture")
    except HeaderReadError:
        return None
    return hf_architecture(name) if isinstance(name, str) else None
