"""Progress of a pull: a small protocol, a silent sink and a rich display for terminals."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

# NOTE (issue 30): rich (~0.03 CPU-s) is imported where a display is made: the supervisor
# plans its starts with the silent and the emitting progress only.
if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID


class Progress(Protocol):
    def step(self, description: str) -> None:
        """Start the next step of the pull (the previous one is done)."""

    def transferred(self, done: int, total: int) -> None:
        """Byte progress of the current step."""


class SilentProgress:
    def step(self, description: str) -> None:
        pass

    def transferred(self, done: int, total: int) -> None:
        pass


class RichProgress:
    """Steps as rich progress lines on stderr; use as a context manager."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgressBar

        self._bar = RichProgressBar(
            SpinnerColumn(finished_text="[green]✓"),
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
        )
        self._task: TaskID | None = None

    def __enter__(self) -> Self:
        self._bar.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self._finish_current()
        self._bar.stop()

    def step(self, description: str) -> None:
        self._finish_current()
        self._task = self._bar.add_task(description, total=None, detail="")

    def transferred(self, done: int, total: int) -> None:
        if self._task is not None:
            detail = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB"
            self._bar.update(self._task, completed=done, total=total, detail=detail)

    def _finish_current(self) -> None:
        if self._task is not None:
            task = self._bar.tasks[self._task]
            self._bar.update(self._task, total=task.total or 1, completed=task.total or 1)
            self._task = None
