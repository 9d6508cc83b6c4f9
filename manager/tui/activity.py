"""The activity line: what the running start/stop/restart operations are doing right now."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.widgets import Static


class ActivityLine(Static):
    DEFAULT_CSS = """
    ActivityLine { height: auto; padding: 0 1; display: none; }
    ActivityLine.busy { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines: dict[str, str] = {}

    @property
    def busy(self) -> bool:
        return bool(self._lines)

    def set(self, key: str, line: str | None) -> None:
        """Show `line` for the operation `key`; None: that operation ended."""
        if line is None:
            self._lines.pop(key, None)
        else:
            self._lines[key] = line
        self.set_class(self.busy, "busy")
        self.update(Text("\n".join(f"⟳ {line}" for line in self._lines.values()), style="yellow"))


class ActivityProgress:
    """manager.models.progress.Progress for an operation run in a worker thread."""

    def __init__(self, post: Callable[[str], None], what: str) -> None:
        self._post = post  # shows a line on the UI thread
        self._what = what
        self._step = ""

    def step(self, description: str) -> None:
        self._step = description
        self._post(f"{self._what}: {description}")

    def transferred(self, done: int, total: int) -> None:
        self._post(f"{self._what}: {self._step} {done / 1e6:.1f}/{total / 1e6:.1f} MB")
