"""Lifecycle errors: one user-facing line each, and the CLI exit status that goes with it.

Exit statuses of `gomgr start/stop/ps/logs` (1 is a model error, 2 a usage error, as for
every command):
    3  readiness blocked the start (the blocker's title and first fix follow)
    4  the engine exited or did not become healthy in time (its last log lines follow)
    5  the router could not be started or refused the registration
    6  no engine matches the id or served name given
  130  the start was cancelled (Ctrl-C); nothing it began is left running
"""

from __future__ import annotations


class LifecycleError(Exception):
    exit_code = 1

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.details = details  # e.g. the engine's last log lines, printed after the message


class StartBlocked(LifecycleError):
    exit_code = 3


class EngineFailed(LifecycleError):
    exit_code = 4


class RouterUnavailable(LifecycleError):
    exit_code = 5


class EngineNotFound(LifecycleError):
    exit_code = 6


class StartCancelled(LifecycleError):
    exit_code = 130
