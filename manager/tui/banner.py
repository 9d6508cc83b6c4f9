"""The readiness banner: what blocks a start, with numbered fix steps; one quiet line otherwise."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.text import Text
from textual.widgets import Static

from manager.readiness.blocker import Blocker
from manager.readiness.report import ReadinessReport


@dataclass(frozen=True)
class Failure:
    """A start, stop or restart that failed: the error's line and its details (fix steps, log)."""

    title: str
    details: str


class ReadinessBanner(Static):
    def on_mount(self) -> None:
        self.update(Text("checking readiness…", style="dim"))

    def show(self, report: ReadinessReport | None, failure: Failure | None) -> None:
        blocking = report.blocking(report.default_runtime()) if report else ()
        self.set_class(failure is not None or bool(blocking), "blocked")
        parts: list[RenderableType] = []
        if failure is not None:
            parts.append(_failure(failure))
        parts.extend(_blocker(b) for b in blocking)
        if not parts:
            parts.append(_ready_line(report))
        self.update(Group(*parts))


def _failure(failure: Failure) -> Text:
    text = Text.assemble((f"✗ {failure.title}", "bold red"))
    if failure.details:
        text.append(f"\n{failure.details}")
    text.append("\n(press s to try again, d for the full readiness report)", style="dim")
    return text


def _blocker(blocker: Blocker) -> Text:
    text = Text.assemble((f"✗ blocked: {blocker.title}", "bold red"))
    text.append(f"\n{blocker.explanation}")
    for number, step in enumerate(blocker.fix_steps, start=1):
        text.append(f"\n  {number}. {step}")
    text.append(f"\n  [{blocker.id}]", style="dim")
    return text


def _ready_line(report: ReadinessReport | None) -> Text:
    if report is None:
        return Text("checking readiness…", style="dim")
    text = Text("✓ ", style="bold green")
    text.append(f"ready to start engines with the {report.default_runtime()} runtime")
    unavailable = sorted({o for b in report.blockers if b.severity == "blocks" for o in b.blocks})
    if unavailable:
        text.append(f" · not available here: {', '.join(unavailable)}", style="yellow")
    text.append(" · d: details", style="dim")
    return text
