"""When the watch loop may start a crashed engine again: exponential backoff, reset by uptime."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class BackoffPolicy:
    first_s: float = 1.0
    cap_s: float = 60.0
    reset_after_s: float = 60.0  # ready this long: the next failure counts as the first

    def delay(self, failures: int) -> float:
        """1 s, 2 s, 4 s ... for the 1st, 2nd, 3rd ... failure in a row, at most cap_s."""
        return min(self.first_s * 2.0 ** max(failures - 1, 0), self.cap_s)


@dataclass(frozen=True)
class Backoff:
    """One entry's restart history; every change returns a new value."""

    policy: BackoffPolicy = BackoffPolicy()
    failures: int = 0
    retry_at: float = 0.0  # no start before this (unix seconds)
    ready_since: float | None = None

    def failed(self, now: float) -> Backoff:
        stable = (
            self.ready_since is not None and now - self.ready_since >= self.policy.reset_after_s
        )
        failures = 1 if stable else self.failures + 1
        return dataclasses.replace(
            self, failures=failures, retry_at=now + self.policy.delay(failures), ready_since=None
        )

    def started(self, now: float) -> Backoff:
        return dataclasses.replace(self, ready_since=now)

    def due(self, now: float) -> bool:
        return now >= self.retry_at

    def wait_s(self, now: float) -> float:
        return max(self.retry_at - now, 0.0)
