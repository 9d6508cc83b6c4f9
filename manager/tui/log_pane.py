"""The log pane: the selected engine's output, followed as it is written."""

from __future__ import annotations

import threading

from textual.widgets import RichLog

from manager.runtimes.base import Runtime
from manager.state.records import EngineRecord

BACKLOG_LINES = 200


class LogPane(RichLog):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=2000, wrap=False, markup=False, highlight=False)
        self.engine_id: str | None = None
        self._stop = threading.Event()

    def on_mount(self) -> None:
        self.border_title = "logs"
        self.write("select an engine to follow its log")

    def follow(self, record: EngineRecord | None, runtime: Runtime | None) -> None:
        """Show `record`'s last lines, then its new ones as they come; None: no engine."""
        if (record.id if record else None) == self.engine_id:
            return
        self._stop.set()
        self.clear()
        self.engine_id = record.id if record else None
        self.border_title = f"logs · {record.id}" if record else "logs"
        if record is None or runtime is None:
            return
        self._stop = threading.Event()
        # NOTE: a daemon thread, not a Textual worker: Runtime.follow blocks until the next
        # line, and a worker thread would hold the app's exit until then. Reading the backlog
        # there too keeps a container daemon's answer off the UI thread.
        threading.Thread(
            target=self._follow,
            args=(record, runtime, self._stop),
            daemon=True,
            name=f"log-{record.id}",
        ).start()

    def on_unmount(self) -> None:
        self._stop.set()

    def _follow(self, record: EngineRecord, runtime: Runtime, stop: threading.Event) -> None:
        try:
            self.app.call_from_thread(
                self._append, runtime.logs(record.handle, BACKLOG_LINES), stop
            )
            for line in runtime.follow(record.handle):
                if stop.is_set():
                    return
                self.app.call_from_thread(self._append, [line], stop)
        except RuntimeError:  # NOTE: the app has exited meanwhile
            return

    def _append(self, lines: list[str], stop: threading.Event) -> None:
        if not stop.is_set():  # NOTE: checked here too: another engine may be shown by now
            for line in lines:
                self.write(line)
