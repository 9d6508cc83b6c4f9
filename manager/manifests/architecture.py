"""A model's traits (architecture, quantization, RoPE type), from what is already on disk:
config.json, or a GGUF's `general.architecture` as its Hugging Face class name."""

from __future__ import annotations

from pathlib import Path

from manager.gguf.architectures import hf_architecture
from manager.gguf.byte_source import FileSource, HeaderReadError
from manager.gguf.header import read_header
from manager.manifests.engine_support import ModelTraits
from manager.manifests.resolve import is_path
from manager.models.errors import InvalidRepoIdError
from manager.models.model_path import is_gguf_file, model_path_in
from manager.models.store import ModelStore, RepoId


def detect_traits(repo_or_path: str, store: ModelStore | None = None) -> ModelTraits:
    """From the directory or GGUF file itself, or the store's copy of the repo; unknown
    traits (None) where neither has them.

    Never downloads: a repo not yet pulled is matched by its repo id alone.
    """
    if is_path(repo_or_path):
        return traits_of(Path(repo_or_path).expanduser())
    try:
        repo = RepoId.parse(repo_or_path)
    except InvalidRepoIdError:
        return ModelTraits()
    stored = (store or ModelStore.from_env()).get_or_default_tag(repo)
    return traits_of(stored.model_path) if stored else ModelTraits()


def traits_of(model_path: Path) -> ModelTraits:
    """`model_path`: a model directory, a GGUF file, or a store directory holding one."""
    if not is_gguf_file(model_path):
        model_path = model_path_in(model_path) if model_path.is_dir() else model_path
    if is_gguf_file(model_path):
        name = _gguf_architecture(model_path)
        return ModelTraits(architecture=hf_architecture(name) if name else None, gguf_architecture=name)
    return ModelTraits.of_directory(model_path)


def _gguf_architecture(path: Path) -> str | None:
    """The file's `general.architecture` (llama.cpp's name), None where it cannot be read."""
    try:
        name = read_header(FileSource(path)).get("general.architecture")
    except HeaderReadError:
        return None
    return name if isinstance(name, str) else None
