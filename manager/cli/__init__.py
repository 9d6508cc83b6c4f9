"""The `gomgr` command line: a thin face over manager/. Typed errors become one line.

commands.py     the typer app: global options, sub-commands wired together
early_start.py  `gomgr start`'s first act, from argv, before the typer app is imported
engines.py      start, stop, restart, ps, logs, tui
apply.py        apply -f engines.yaml [--dry-run | --watch]
models.py       models pull / list / rm
router.py       router serve / start / status / stop
output.py       errors as one line and an exit code, progress, tables
completion.py   shell completion of engine names and model repos
"""

from __future__ import annotations

import gc
import sys


def app() -> None:
    """The `gomgr` console script (pyproject.toml: `manager.cli:app`).

    NOTE (issue 30): a plain `gomgr start` begins its start from argv first
    (manager/cli/early_start.py), so the supervisor plans it while typer and the rest of the
    command import; the typer app then runs as for any command and follows that start.
    """
    early = None
    if sys.argv[1:2] == ["start"]:
        from manager.cli.early_start import begin_early_start

        early = begin_early_start(sys.argv[1:])
    from manager.cli.commands import app as commands

    try:
        commands(obj=early)
    finally:
        # NOTE (issue 30): the interpreter's exit collects every object the imports made
        # (pydantic's schemas, typer's and httpx's modules): ~0.1 s after `gomgr start` has
        # printed. Frozen, they are left to the process's end; what needs closing at exit
        # (files, atexit handlers) still is.
        gc.freeze()
