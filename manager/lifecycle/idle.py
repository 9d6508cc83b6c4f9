"""How long an engine has served no request, from its own Prometheus /metrics.

The engine counts finished requests and gauges the ones running or queued (SGLang's names;
our engine uses them, `--enable-metrics` is passed by the planner). The watch loop samples
them each tick: a changed count or a busy gauge means the engine was used since the last
tick. The router's metrics have no per-backend request count, and the engine's see requests
that bypass the router too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

SCRAPE_TIMEOUT_S = 2.0
_SERVED = frozenset({"sglang:num_requests_total", "vllm:request_success_total"})
_BUSY = frozenset({
    "sglang:num_running_reqs", "sglang:num_queue_reqs",
    "vllm:num_requests_running", "vllm:num_requests_waiting",
})  # fmt: skip


@dataclass(frozen=True)
class Activity:
    served: float  # requests finished since the engine started
    busy: bool  # requests running or queued now


def scrape_activity(base_url: str, headers: dict[str, str] | None = None) -> Activity | None:
    """The engine's request counters (`headers`: its key, EngineSpec.auth_headers); None when
    it has no /metrics or does not answer."""
    try:
        reply = httpx.get(f"{base_url}/metrics", headers=headers, timeout=SCRAPE_TIMEOUT_S)
    except httpx.TransportError:
        return None
    if reply.status_code != 200:
        return None
    return parse_activity(reply.text)


def parse_activity(text: str) -> Activity | None:
    served: float | None = None
    busy = False
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in _SERVED:
                served = (served or 0.0) + sample.value
            elif sample.name in _BUSY and sample.value > 0:
                busy = True
    return None if served is None else Activity(served, busy)


@dataclass(frozen=True)
class IdleClock:
    """When the engine last served; `observe` each tick with a fresh sample."""

    last_active_at: float
    served: float | None = None

    def observe(self, activity: Activity | None, now: float) -> IdleClock:
        # NOTE: an engine whose requests cannot be seen counts as busy: never unloaded.
        if activity is None or activity.busy or activity.served != self.served:
            served = None if activity is None else activity.served
            return dataclasses.replace(self, last_active_at=now, served=served)
        return self

    def idle_s(self, now: float) -> float:
        return now - self.last_active_at
