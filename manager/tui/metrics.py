"""One engine's load, in one request: its Prometheus `/metrics`, else its `/server_info`.

`/metrics` exists only with `--enable-metrics` (SGLang's flag and names); it gives requests
running and queued and the generated-token counter. Without it, `/server_info` still gives
the requests in flight, and tokens/s stays unknown.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

INFLIGHT_GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs")
GENERATED_COUNTER = "sglang:generation_tokens"


@dataclass(frozen=True)
class MetricsSample:
    at: float  # time.monotonic() of the reply
    inflight: int | None
    generated_tokens: float | None  # counter since the engine started; None: no metrics


class NoMetrics(Exception):
    """The engine serves no /metrics (started without --enable-metrics)."""


async def sample_metrics(
    client: httpx.AsyncClient, base_url: str, headers: dict[str, str] | None = None
) -> MetricsSample:
    """`headers`: the engine's key where it requires one (EngineSpec.auth_headers)."""
    reply = await client.get(f"{base_url}/metrics", headers=headers)
    if reply.status_code == 404:
        raise NoMetrics(base_url)
    reply.raise_for_status()
    inflight = 0.0
    generated = 0.0
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            if family.name in INFLIGHT_GAUGES:
                inflight += sample.value
            elif family.name == GENERATED_COUNTER and sample.name.endswith("_total"):
                generated += sample.value
    return MetricsSample(time.monotonic(), int(inflight), generated)


async def sample_server_info(
    client: httpx.AsyncClient, base_url: str, headers: dict[str, str] | None = None
) -> MetricsSample:
    reply = await client.get(f"{base_url}/server_info", headers=headers)
    reply.raise_for_status()
    inflight = reply.json().get("in_flight_requests")
    return MetricsSample(time.monotonic(), inflight if isinstance(inflight, int) else None, None)
