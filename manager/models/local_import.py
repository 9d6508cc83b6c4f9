"""Import a local model directory into the store: `gomgr models pull DIR --name org/name`.

The directory is checked (a parseable config.json, safetensors or GGUF weights), copied into
a staging directory of the store and committed under the given repo id, so a model appears
complete or not at all.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from manager.models.errors import (
    InvalidModelDirError,
    InvalidRepoIdError,
    ModelExistsError,
    StoreError,
)
from manager.models.model_path import PATH_PREFIXES
from manager.models.progress import Progress, SilentProgress
from manager.models.store import ModelMetadata, ModelStore, RepoId, StoredModel

logger = logging.getLogger(__name__)

WEIGHT_PATTERNS = ("*.safetensors", "*.gguf")


def names_a_directory(argument: str) -> bool:
    """Whether `gomgr models pull ARGUMENT` means a directory rather than a repo id.

    A path prefix always means a directory; an existing directory does too unless the
    argument is also a valid repo id (`org/name` stays a repo, as in resolve_model).
    """
    if argument.startswith(PATH_PREFIXES):
        return True
    if not Path(argument).is_dir():
        return False
    try:
        RepoId.parse(argument)
    except InvalidRepoIdError:
        return True
    return False


def check_model_dir(source: Path) -> None:
    """Raise InvalidModelDirError unless `source` looks like a model an engine can load."""
    if not source.is_dir():
        raise InvalidModelDirError(f"{source} is not a directory")
    config = source / "config.json"
    try:
        parsed = json.loads(config.read_text())
    except FileNotFoundError as exc:
        raise InvalidModelDirError(
            f"{source} has no config.json: not a Hugging Face model directory"
        ) from exc
    except json.JSONDecodeError as exc:
        raise InvalidModelDirError(
            f"{config} is not valid JSON ({exc.msg} at line {exc.lineno})"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidModelDirError(f"cannot read {config}: {exc}") from exc
    if not isinstance(parsed, dict):
        raise InvalidModelDirError(f"{config} is not a JSON object")
    if not any(p.is_file() for pattern in WEIGHT_PATTERNS for p in source.glob(pattern)):
        raise InvalidModelDirError(f"{source} has no weights (*.safetensors or *.gguf)")


def import_model_dir(
    source: Path,
    repo: RepoId,
    store: ModelStore | None = None,
    *,
    force: bool = False,
    progress: Progress | None = None,
) -> StoredModel:
    """Copy the model directory `source` into the store as `repo`; `force` replaces one there."""
    store = store or ModelStore.from_env()
    progress = progress or SilentProgress()
    source = source.expanduser().resolve()
    check_model_dir(source)
    if store.root.expanduser().resolve().is_relative_to(source):
        raise InvalidModelDirError(f"the model store {store.root} lies inside {source}")
    files = _model_files(source)
    total = _total_size(source, files)
    with store.lock(repo):
        if (existing := store.get(repo)) and not force:
            raise ModelExistsError(
                f"{repo} is already in the model store at {existing.path} "
                "(give --force to replace it)"
            )
        with store.staging() as work:
            _check_free_space(work, total)
            model_dir = work / "model"
            progress.step(f"Copying {source} ({total / 1e6:.1f} MB)")
            _copy(source, files, model_dir, total, progress)
            metadata = ModelMetadata(
                repo=str(repo), source="local", imported_from=str(source), created=datetime.now(UTC)
            )
            return store.commit(repo, model_dir, metadata, replace=existing is not None)


def _model_files(source: Path) -> list[Path]:
    """Paths (relative to `source`) of the files to copy.

    NOTE: hidden entries are skipped: `.git` (whose LFS objects repeat the weights), the hub
    client's `.cache`, and a `.gomgr.json` of a directory copied out of a store. Symlinked
    files are copied as their targets (a hub cache snapshot is all symlinks into its blobs).
    """
    files: list[Path] = []
    for directory, subdirs, names in os.walk(source):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        files.extend(
            Path(directory, name).relative_to(source)
            for name in sorted(names)
            if not name.startswith(".")
        )
    return files


def _total_size(source: Path, files: list[Path]) -> int:
    try:
        return sum((source / relative).stat().st_size for relative in files)
    except OSError as exc:
        raise InvalidModelDirError(f"cannot read {exc.filename}: {exc.strerror or exc}") from exc


def _check_free_space(work: Path, total: int) -> None:
    free = shutil.disk_usage(work).free
    if free < total:
        raise StoreError(
            f"the model store's disk has {free / 1e9:.1f} GB free, the model needs "
            f"{total / 1e9:.1f} GB"
        )


def _copy(source: Path, files: list[Path], dest: Path, total: int, progress: Progress) -> None:
    # NOTE: a copy, not hard links: a user who later edits the source directory in place
    # must not change the stored model. Progress is per file (safetensors shards).
    done = 0
    for relative in files:
        target = dest / relative
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / relative, target)
        except OSError as exc:
            raise StoreError(f"cannot copy {source / relative}: {exc.strerror or exc}") from exc
        done += target.stat().st_size
        progress.transferred(done, total)
    logger.info("copied %d files (%d bytes) from %s", len(files), total, source)
