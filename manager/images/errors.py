"""Image errors: one readable line, and the steps that fix it."""

from __future__ import annotations


class ImageError(Exception):
    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
