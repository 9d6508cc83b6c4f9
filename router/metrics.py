"""Prometheus metrics of one router: requests, upstream errors, requests in flight."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.responses import Response


class RouterMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            "gomgr_router_requests",
            "Client requests by route and status.",
            ["route", "status"],
            registry=self.registry,
        )
        self._upstream_errors = Counter(
            "gomgr_router_upstream_errors",
            "Upstream failures by backend and kind.",
            ["backend", "kind"],
            registry=self.registry,
        )
        self._inflight = Gauge(
            "gomgr_router_inflight_requests",
            "Requests being proxied, by backend.",
            ["backend"],
            registry=self.registry,
        )
        # NOTE: `labels()` locks and validates on every call; the hot path reuses its children.
        self._request_children: dict[tuple[str, int], Counter] = {}

    def request(self, route: str, status: int) -> None:
        child = self._request_children.get((route, status))
        if child is None:
            child = self._request_children[(route, status)] = self._requests.labels(
                route, str(status)
            )
        child.inc()

    def upstream_error(self, backend_id: str, kind: str) -> None:
        self._upstream_errors.labels(backend_id, kind).inc()

    @contextmanager
    def track(self, backend_id: str) -> Iterator[None]:
        gauge = self._inflight.labels(backend_id)
        gauge.inc()
        try:
            yield
        finally:
            gauge.dec()

    def response(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
