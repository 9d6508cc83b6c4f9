"""The models table: one row per engine, then the store models no engine serves; state in
colour, expiry, load with a tokens/s sparkline."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from manager.tui.rows import EngineRow

COLUMNS = (
    "MODEL", "SERVED NAME", "RUNTIME", "STATE", "PORT", "UPTIME", "EXPIRES", "IN FLIGHT", "TOK/S",
)  # fmt: skip
NAME_WIDTH = 30
STATE_STYLES = {
    "ready": "bold green",
    "starting": "bold yellow",
    "draining": "yellow",
    "stopping": "magenta",
    "unrouted": "bold red",
    "exited": "bold red",
    "unloaded": "dim",
    "loading": "bold yellow",
    "unloading": "magenta",
}
SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 8


class EnginesTable(DataTable[Text | str]):
    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        for column in COLUMNS:
            self.add_column(column, key=column)

    def selected_id(self) -> str | None:
        if self.row_count == 0:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def show(self, rows: tuple[EngineRow, ...]) -> None:
        """Replace the rows, keeping the cursor on the same row where it is still listed."""
        selected = self.selected_id()
        self.clear()
        for row in rows:
            self.add_row(*_cells(row), key=row.id)
        ids = [row.id for row in rows]
        if selected in ids:
            self.move_cursor(row=ids.index(selected), animate=False)


def _cells(row: EngineRow) -> tuple[Text | str, ...]:
    return (
        _model(row.model),
        _clip(row.served_name, NAME_WIDTH),
        row.runtime or "–",
        Text(row.state, style=STATE_STYLES.get(row.state, "")),
        "–" if row.port is None else str(row.port),
        "–" if row.uptime_s is None else uptime(row.uptime_s),
        row.expires or "–",
        "–" if row.inflight is None else str(row.inflight),
        _throughput(row),
    )


def _model(repo_or_dir: str) -> str:
    """The repo's name without its org (or a directory's own name): the table's short form."""
    return repo_or_dir.rstrip("/").rsplit("/", 1)[-1]


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def uptime(seconds: float) -> str:
    """e.g. 42s, 3m05s, 2h07m, 3d04h."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def sparkline(values: tuple[float, ...], width: int = SPARK_WIDTH) -> str:
    """The last `width` values as block characters scaled to their maximum, right-aligned."""
    shown = values[-width:]
    top = max(shown, default=0.0)
    bars = "".join(SPARK[round(v / top * (len(SPARK) - 1))] if top > 0 else SPARK[0] for v in shown)
    return bars.rjust(width)


def _throughput(row: EngineRow) -> Text:
    if row.tokens_per_s is None:
        return Text("–")
    return Text.assemble(f"{row.tokens_per_s:6.1f} ", (sparkline(row.rates), "cyan"))
