"""The hub client's download progress (a tqdm bar) as a pull's Progress, byte by byte."""

from __future__ import annotations

from typing import Any

from huggingface_hub.utils import tqdm

from manager.models.progress import Progress


def progress_bar_class(progress: Progress) -> type[tqdm]:
    """A tqdm class for hf_hub_download's `tqdm_class` that prints nothing and reports each
    update to `progress` (the CLI's bar, or the events the supervisor streams)."""

    class _Reporting(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # NOTE: disabled: no second bar on the terminal; update() below still runs.
            super().__init__(*args, **{**kwargs, "disable": True})
            self._done = int(kwargs.get("initial") or 0)

        def update(self, n: float | None = 1) -> bool | None:
            self._done += int(n or 0)
            progress.transferred(self._done, int(self.total or 0))
            return None

    return _Reporting
