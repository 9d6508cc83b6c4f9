"""Crash backoff: how long a model whose engine keeps dying waits before its next load.

A crash is an engine the supervisor loaded that died without being stopped. The next request
loads the model again, after 1 s, 2 s, 4 s ... for the 1st, 2nd, 3rd ... crash in a row, at
most 30 s (manager/lifecycle/backoff.py, as `gomgr apply --watch` restarts); an engine that
stayed up 2 minutes before it died starts the count again. A request is held through a wait
of up to 5 s, as through any load; beyond that it is answered 503 at once, with the crash
count, the last exit and a Retry-After of the seconds left, rather than hang a client's
timeout on a model that is crash-looping.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from manager.lifecycle.backoff import Backoff, BackoffPolicy
from manager.supervisor.reaping import Death
from router.errors import RouterError

POLICY = BackoffPolicy(first_s=1.0, cap_s=30.0, reset_after_s=120.0)
HOLD_MAX_S = 5.0


@dataclass(frozen=True)
class _Crashes:
    backoff: Backoff
    last: Death

    def exit(self) -> str:
        code = self.last.exit_code
        how = "an unknown exit code" if code is None else f"exit code {code}"
        line = self.last.last_line
        return f'{how}; last log line: "{line}"' if line else how


class CrashBackoff:
    def __init__(self, policy: BackoffPolicy = POLICY, hold_max_s: float = HOLD_MAX_S) -> None:
        self._policy = policy
        self._hold_max_s = hold_max_s
        self._crashes: dict[str, _Crashes] = {}  # by served name

    def crashed(self, name: str, death: Death) -> str:
        """Count the crash of `name`'s engine; what the next request for it meets."""
        now = time.time()
        known = self._crashes.get(name)
        backoff = known.backoff if known else Backoff(self._policy)
        # NOTE: the engine's start stands for "ready since": one that stayed up reset_after_s
        # before it died counts as the first crash again.
        backoff = backoff.started(death.record.handle.started_at).failed(now)
        self._crashes[name] = _Crashes(backoff, death)
        wait = backoff.wait_s(now)
        prefix = f"crashes in a row: {backoff.failures}"
        if wait > self._hold_max_s:
            return f"{prefix}; requests for {name} get a 503 for {wait:.0f} s, then one loads it again"
        return f"{prefix}; the next request for {name} loads it again (after {wait:.0f} s)"

    async def wait_out(self, name: str) -> bool:
        """Before a load of `name`: False at once if no backoff holds it back; True after
        sleeping out a short one; RouterError 503 (Retry-After) for a longer one."""
        known = self._crashes.get(name)
        wait = known.backoff.wait_s(time.time()) if known else 0.0
        if known is None or wait <= 0:
            return False
        if wait > self._hold_max_s:
            retry = math.ceil(wait)
            raise RouterError(
                503,
                f"The model '{name}' crashed {known.backoff.failures} times in a row (last: "
                f"{known.exit()}); it will be loaded again in {retry} s",
                type_="service_unavailable",
                code="model_crashed",
                param="model",
                headers={"Retry-After": str(retry)},
            )
        await asyncio.sleep(wait)
        return True
