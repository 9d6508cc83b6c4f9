"""Typed errors of the model store. Each carries one user-facing line in `message`."""

from __future__ import annotations


class ModelError(Exception):
    """Base of every model error; `message` is one line a user can act on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRepoIdError(ModelError):
    """The argument is neither `<org>/<name>` nor a local model directory."""


class ModelNotFoundError(ModelError):
    """The repository is not in the store, or no source has it."""


class DownloadError(ModelError):
    """A source could not be downloaded (package index or network)."""


class HubUnavailableError(DownloadError):
    """The Hugging Face hub cannot be reached (offline mode or no network)."""


class SourceIntegrityError(ModelError):
    """A downloaded or bundled file is corrupt, truncated or unreadable."""


class ConversionError(ModelError):
    """Turning a GGUF file into a safetensors directory failed."""


class StoreError(ModelError):
    """The model store cannot be written, or holds something gomgr did not finish."""


class InvalidModelDirError(ModelError):
    """A local directory to import is not a model directory (no config.json, no weights)."""


class ModelExistsError(ModelError):
    """An import would replace a model already in the store (and was not told to)."""


class NoSuchTagError(ModelNotFoundError):
    """A `repo:TAG` whose repo has no GGUF file of that quantization tag."""


class UnsupportedGgufError(ModelError):
    """A GGUF the manager does not serve: split in parts, or no tag to choose by default."""
