"""The `gomgr` command line: a thin face over manager/. Typed errors become one line.

app.py          the typer app: global options, sub-commands wired together
engines.py      start, stop, restart, ps, logs, tui
apply.py        apply -f engines.yaml [--dry-run | --watch]
models.py       models pull / list / rm
router.py       router serve / start / status / stop
output.py       errors as one line and an exit code, progress, tables
completion.py   shell completion of engine names and model repos
"""

from manager.cli.app import app

__all__ = ["app"]
