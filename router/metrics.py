"""Prometheus metrics of one router: requests, upstream errors, requests in flight."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.responses import Response


class RouterMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "gomgr_router_requests", "Client requests by route and status.",
            ["route", "status"], registry=self.registry,
        )
        self.upstream_errors = Counter(
            "gomgr_router_upstream_errors", "Upstream failures by backend and kind.",
            ["backend", "kind"], registry=self.registry,
        )
        self.inflight = Gauge(
            "gomgr_router_inflight_requests", "Requests being proxied, by backend.",
            ["backend"], registry=self.registry,
        )

    def response(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
