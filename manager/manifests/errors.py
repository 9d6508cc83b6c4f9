"""The one error of the manifests package; `message` is one line a user can act on."""

from __future__ import annotations


class ManifestError(Exception):
    """A manifest or override file is unreadable or invalid, or names what does not exist."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
