"""Where a GGUF header's bytes come from: a local file, or (http_source.py) HTTP range reads."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class HeaderReadError(Exception):
    """The header cannot be read or is not a GGUF header; `str(exc)` says why in one line."""


class ByteSource(Protocol):
    @property
    def name(self) -> str:
        """What the bytes are of, for error lines (a path or a repo file)."""

    def read_at(self, offset: int, length: int) -> bytes:
        """Up to `length` bytes from `offset`; fewer only at the end of the file."""


class FileSource:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def name(self) -> str:
        return str(self.path)

    def read_at(self, offset: int, length: int) -> bytes:
        try:
            with self.path.open("rb") as handle:
                handle.seek(offset)
                return handle.read(length)
        except OSError as exc:
            raise HeaderReadError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
