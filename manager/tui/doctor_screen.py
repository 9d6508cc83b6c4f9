"""`d`: the full readiness report, rendered by `gomgr doctor`'s own renderer."""

from __future__ import annotations

import io
from typing import ClassVar

from rich.console import Console
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from manager.readiness.doctor import render
from manager.readiness.report import ReadinessReport

MIN_WIDTH = 40


class DoctorScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    DoctorScreen { align: center middle; }
    #doctor { width: 90%; height: 90%; border: thick $primary; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("d", "dismiss", "Close"),
        Binding("q", "dismiss", "Close"),
    ]

    def __init__(self, report: ReadinessReport | None) -> None:
        super().__init__()
        self._report = report

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="doctor"):
            yield Static(Text("checking readiness…", style="dim"), id="report")

    def on_mount(self) -> None:
        self.query_one("#doctor").border_title = "doctor (esc closes)"
        if self._report is not None:
            self.call_after_refresh(self.show, self._report)

    def show(self, report: ReadinessReport) -> None:
        self._report = report
        buffer = io.StringIO()
        # NOTE: the doctor renders for a terminal of this width: the box's, once laid out.
        width = self.query_one("#doctor", VerticalScroll).scrollable_content_region.width
        width = width - 1 if width > MIN_WIDTH else max(MIN_WIDTH, self.app.size.width - 12)
        render(
            report, Console(file=buffer, force_terminal=True, color_system="truecolor", width=width)
        )
        self.query_one("#report", Static).update(Text.from_ansi(buffer.getvalue()))
