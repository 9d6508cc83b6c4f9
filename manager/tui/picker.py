"""The start picker: local and known models; the highlighted one's manifest and fit estimate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from manager.models.store import ModelStore
from manager.tui.choices import ChoiceDetails, ModelChoice, describe, model_choices

GIB = 1024**3


class StartPicker(ModalScreen[str | None]):
    """Dismissed with the repo to start, or None."""

    DEFAULT_CSS = """
    StartPicker { align: center middle; }
    #picker { width: 90%; height: 80%; border: thick $primary; background: $surface; }
    #picker > Label { padding: 0 1; }
    #picker > Horizontal { height: 1fr; }
    #models { width: 2fr; height: 1fr; }
    #details { width: 3fr; height: 1fr; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, store: ModelStore) -> None:
        super().__init__()
        self._store = store
        self._details: dict[str, ChoiceDetails] = {}

    def compose(self) -> ComposeResult:
        choices = model_choices(self._store)
        with Vertical(id="picker"):
            yield Label("Start an engine: pick a model (enter starts, esc cancels)")
            with Horizontal():
                yield OptionList(*(Option(_label(c), id=c.repo) for c in choices), id="models")
                yield Static(Text("…", style="dim"), id="details")

    def details_of(self, repo: str) -> ChoiceDetails | None:
        """What the picker found out about `repo`; None until its check has finished."""
        return self._details.get(repo)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        repo = event.option.id
        if repo is None:
            return
        if repo in self._details:
            self._show(self._details[repo])
            return
        self.query_one("#details", Static).update(Text(f"checking {repo}…", style="dim"))
        self._describe(repo)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        repo = event.option.id
        details = self._details.get(repo or "")
        if details is not None and not details.startable():
            self.notify(_why_not(details), title="blocked", severity="error")
            return
        self.dismiss(repo)

    @work(thread=True, exclusive=True, group="describe")
    def _describe(self, repo: str) -> None:
        details = describe(repo, self._store)
        self.app.call_from_thread(self._described, details)

    def _described(self, details: ChoiceDetails) -> None:
        self._details[details.repo] = details
        highlighted = self.query_one("#models", OptionList).highlighted_option
        if highlighted is not None and highlighted.id == details.repo:
            self._show(details)

    def _show(self, details: ChoiceDetails) -> None:
        self.query_one("#details", Static).update(Group(_manifest(details), _fit(details)))


def _label(choice: ModelChoice) -> Text:
    if choice.size_bytes is None:
        return Text.assemble(choice.repo, ("  known · pulled at start", "dim"))
    return Text.assemble(choice.repo, (f"  local · {choice.size_bytes / 1e9:.2f} GB", "dim"))


def _manifest(details: ChoiceDetails) -> Table | Text:
    manifest = details.manifest
    if manifest is None:
        return Text(f"✗ manifest: {details.manifest_error}", style="bold red")
    table = Table(
        box=None, show_header=False, title=f"manifest {manifest.name}", title_justify="left"
    )
    table.add_column(style="dim")
    table.add_column()
    rows: Mapping[str, object] = {
        "selected by": manifest.selected_by,
        "engine": manifest.engine,
        "served name": manifest.served_name,
        "context": manifest.context_length,
        "tool calls": manifest.tool_call_parser,
        "reasoning": manifest.reasoning_parser,
        "engine args": " ".join(manifest.engine_args),
    }
    for field, value in rows.items():
        table.add_row(field, "-" if value in (None, "") else str(value))
    return table


def _fit(details: ChoiceDetails) -> Text:
    report = details.report
    text = Text("\nfit\n", style="italic")
    if report.memory is not None:
        m = report.memory
        text.append(
            f"  needs {m.total / GIB:.2f} GiB: weights {m.weights / GIB:.2f} + KV "
            f"{m.kv_cache / GIB:.2f} ({report.context_tokens} tokens) + overhead "
            f"{m.overhead / GIB:.2f}\n"
        )
    best = max(report.gpus, key=lambda g: g.free_bytes, default=None)
    if best is not None:
        text.append(f"  GPU {best.index} ({best.name}): {best.free_bytes / GIB:.1f} GiB free\n")
    else:
        text.append("  no GPU: the engine runs on the CPU\n", style="yellow")
    if report.runtime_hint is not None:
        text.append(f"  runtime {report.runtime_hint[0]}: {report.runtime_hint[1]}\n")
    for note in report.notes:
        text.append(f"  note: {note}\n", style="dim")
    for blocker in report.blockers:
        if blocker.severity == "warns":
            text.append(f"  ! {blocker.title}\n", style="yellow")
    if details.startable():
        text.append("✓ can start", style="bold green")
    else:
        text.append(f"✗ {_why_not(details)}", style="bold red")
    return text


def _why_not(details: ChoiceDetails) -> str:
    if details.manifest is None:
        return f"manifest: {details.manifest_error}"
    blocker = details.blockers()[0]
    steps = " ".join(f"{i}. {step}" for i, step in enumerate(blocker.fix_steps, 1))
    return f"{blocker.title}. {steps}"
