"""Download a repository from the Hugging Face hub: weights, configs and tokenizer only."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from huggingface_hub import constants, snapshot_download
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from manager.models.errors import DownloadError, HubUnavailableError, ModelNotFoundError

logger = logging.getLogger(__name__)

# What an engine needs: safetensors weights (and their index), JSON configs, the tokenizer
# in any of its formats, and the chat template. No .bin/.pt/.gguf/.onnx copies.
ALLOW_PATTERNS = ["*.safetensors", "*.json", "*.jinja", "tokenizer.model", "*.tiktoken", "*.txt"]


def download_repo(repo: str, dest: Path) -> None:
    """Download `repo` into `dest` (created). Raises a ModelError subclass on failure."""
    if constants.is_offline_mode():
        raise HubUnavailableError(
            f"{repo} is not in the store and the Hugging Face hub is disabled (HF_HUB_OFFLINE=1)"
        )
    logger.info("downloading %s from the hub into %s", repo, dest)
    try:
        snapshot_download(repo, local_dir=dest, allow_patterns=ALLOW_PATTERNS)
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
    except HfHubHTTPError as exc:
        raise DownloadError(f"downloading {repo} from the hub failed: {exc}") from exc
    # NOTE: local_dir downloads keep resume metadata in <dest>/.cache; the store does not resume.
    shutil.rmtree(dest / ".cache", ignore_errors=True)
    if not any(dest.glob("*.safetensors")):
        raise ModelNotFoundError(f"{repo} has no safetensors weights on the hub")
