"""The desired-state file the last `gomgr apply` handed the supervisor, remembered in the state
directory so a restarted supervisor lists its entries again."""

from __future__ import annotations

import logging
from pathlib import Path

from manager.lifecycle.desired_state import DesiredState, load_desired_state
from manager.lifecycle.errors import LifecycleError
from manager.state.paths import StatePaths

logger = logging.getLogger(__name__)

APPLIED_FILE = "applied-desired-state"  # in the router's directory: the file's absolute path


def remember(paths: StatePaths, desired: DesiredState) -> None:
    paths.router_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    (paths.router_dir / APPLIED_FILE).write_text(f"{desired.source.resolve()}\n")


def recall(paths: StatePaths) -> DesiredState | None:
    """The remembered file, read again; None if none was applied or it no longer loads."""
    try:
        source = Path((paths.router_dir / APPLIED_FILE).read_text().strip())
    except FileNotFoundError:
        return None
    try:
        return load_desired_state(source)
    except LifecycleError as exc:
        logger.warning(
            "the desired-state file last applied, %s, no longer loads (%s); its entries are not "
            "listed until the next `gomgr apply`", source, exc.message,
        )
        return None
