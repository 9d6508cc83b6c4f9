"""Downloads from the Hugging Face hub: a whole repo (weights, configs, tokenizer), or one
file of it (a GGUF)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from huggingface_hub import constants, hf_hub_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from manager.models.download_progress import progress_bar_class
from manager.models.errors import DownloadError, HubUnavailableError, ModelNotFoundError
from manager.models.progress import Progress

logger = logging.getLogger(__name__)

# What an engine needs: safetensors weights (and their index), JSON configs, the tokenizer
# in any of its formats, and the chat template. No .bin/.pt/.gguf/.onnx copies.
ALLOW_PATTERNS = ["*.safetensors", "*.json", "*.jinja", "tokenizer.model", "*.tiktoken", "*.txt"]
# NOTE: where hf_hub_download with local_dir keeps its resume metadata; the store does not resume.
_LOCAL_DIR_CACHE = ".cache"


def download_repo(repo: str, dest: Path) -> None:
    """Download `repo` into `dest` (created). Raises a ModelError subclass on failure."""
    # NOTE (issue 30): imported here: it brings the hub's API client, a tenth of the
    # supervisor's boot, which a start of a model already in the store does not need.
    from huggingface_hub import snapshot_download

    _refuse_offline(repo)
    logger.info("downloading %s from the hub into %s", repo, dest)
    with hub_errors(repo):
        snapshot_download(repo, local_dir=dest, allow_patterns=ALLOW_PATTERNS)
    shutil.rmtree(dest / _LOCAL_DIR_CACHE, ignore_errors=True)
    if not any(dest.glob("*.safetensors")):
        raise ModelNotFoundError(f"{repo} has no safetensors weights on the hub")


def download_file(
    repo: str, path: str, revision: str, dest_dir: Path, progress: Progress
) -> Path:
    """Download the one file `path` of `repo` at `revision` into `dest_dir` (created), flat."""
    _refuse_offline(repo)
    logger.info("downloading %s from %s@%s into %s", path, repo, revision[:12], dest_dir)
    landing = dest_dir / ".download"
    with hub_errors(repo):
        hf_hub_download(
            repo, path, revision=revision, local_dir=landing,
            tqdm_class=progress_bar_class(progress),
        )  # fmt: skip
    target = dest_dir / PurePosixPath(path).name
    (landing / path).rename(target)
    shutil.rmtree(landing, ignore_errors=True)
    return target


@contextmanager
def hub_errors(repo: str) -> Iterator[None]:
    """The hub client's exceptions as one-line ModelErrors."""
    try:
        yield
    except GatedRepoError as exc:
        raise ModelNotFoundError(
            f"{repo} is gated: accept its license on huggingface.co and set HF_TOKEN"
        ) from exc
    except RepositoryNotFoundError as exc:
        raise ModelNotFoundError(
            f"{repo} was not found on the Hugging Face hub (private? set HF_TOKEN)"
        ) from exc
    except RevisionNotFoundError as exc:
        raise ModelNotFoundError(f"{repo} has no default revision on the hub") from exc
    except LocalEntryNotFoundError as exc:
        raise HubUnavailableError(
            f"{repo} is not in the store and the Hugging Face hub cannot be reached"
        ) from exc
    # NOTE: after LocalEntryNotFoundError, which subclasses it (no network, not "no file").
    except EntryNotFoundError as exc:
        raise ModelNotFoundError(f"{repo} has no such file on the hub: {exc}") from exc
    except HfHubHTTPError as exc:
        raise DownloadError(f"downloading {repo} from the hub failed: {exc}") from exc


def _refuse_offline(repo: str) -> None:
    if constants.is_offline_mode():
        raise HubUnavailableError(
            f"{repo} is not in the store and the Hugging Face hub is disabled (HF_HUB_OFFLINE=1)"
        )
