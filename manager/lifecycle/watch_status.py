"""What `gomgr apply --watch` knows that no record holds: entries waiting out a backoff, or
unloaded for idleness. Written by the watch loop each tick, read by `gomgr ps`.

The file also says which process watches the state directory, so a second watch refuses.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from manager.state.paths import StatePaths


@dataclass(frozen=True)
class WaitingEntry:
    key: str  # the entry's key (its served name)
    state: str  # "backoff" or "unloaded"
    retry_at: float | None  # backoff: unix seconds of the next start
    failures: int


@dataclass(frozen=True)
class WatchStatus:
    pid: int
    create_time: float  # tells the watch process apart from a later one with its pid
    source: str  # the desired-state file
    waiting: tuple[WaitingEntry, ...]


def status_path(paths: StatePaths) -> Path:
    return paths.root / "apply-watch.json"


def write_status(paths: StatePaths, status: WatchStatus) -> None:
    path = status_path(paths)
    paths.ensure(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(status), f)
    os.replace(tmp, path)


def read_status(paths: StatePaths) -> WatchStatus | None:
    """The status of a watch loop that still runs; None when none does."""
    try:
        data = json.loads(status_path(paths).read_text())
        status = WatchStatus(
            pid=int(data["pid"]), create_time=float(data["create_time"]), source=str(data["source"]),
            waiting=tuple(WaitingEntry(**entry) for entry in data["waiting"]),
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return status if _runs(status.pid, status.create_time) else None


def clear_status(paths: StatePaths, pid: int) -> None:
    """Remove the file if the watch process `pid` wrote it."""
    current = read_status(paths)
    if current is not None and current.pid == pid:
        status_path(paths).unlink(missing_ok=True)


def process_create_time(pid: int) -> float:
    return psutil.Process(pid).create_time()


def _runs(pid: int, create_time: float) -> bool:
    try:
        return abs(psutil.Process(pid).create_time() - create_time) < 0.5
    except psutil.NoSuchProcess:
        return False


def waiting_rows(paths: StatePaths, now: float) -> list[dict[str, object]]:
    """`gomgr ps --json` rows for the entries a running watch loop holds back (no engine)."""
    status = read_status(paths)
    return [
        {
            "id": None, "served_name": w.key, "state": w.state, "runtime": None, "port": None,
            "pid": None, "uptime_s": None, "routed": False, "failures": w.failures,
            "retry_in_s": None if w.retry_at is None else round(max(w.retry_at - now, 0.0), 1),
        }
        for w in (status.waiting if status is not None else ())
    ]  # fmt: skip
