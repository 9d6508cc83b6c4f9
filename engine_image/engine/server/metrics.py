"""Prometheus metrics of one engine server (``--enable-metrics``): ``GET /metrics``.

Names follow SGLang's (``sglang:...``, label ``model_name``) so its dashboards work.
Three sources:

* ``EngineMetrics.on_outputs``: the TokenizerManager's observer, called once per batch of
  outputs from the detokenizer: time to first token, inter-token latency, end-to-end
  latency, prompt / generation / cached token counters.
* ``HttpMetricsMiddleware``: a pure ASGI middleware counting requests by route template,
  method and status (401s and 404s included).
* ``refresh``: at scrape time, running / waiting requests and KV use from the
  scheduler's stats (``SchedulerStats``, its answer to a ``ServerInfoRequest``).

Each app gets its own ``CollectorRegistry``, so several apps in one process (tests) do not
collide. With several tokenizer workers (``--tokenizer-worker-num``) each writes its values
to prometheus_client's multiprocess directory and a scrape of any worker reads all of them:
counters and histograms summed, the scheduler's gauges as last set.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.routing import Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.ipc.messages import ServerInfoRequest
from engine.ipc.scheduler_stats import SchedulerStats
from engine.server.context import ServerContext
from engine.server.tokenizer_manager import RequestState

logger = logging.getLogger(__name__)

SCRAPE_TIMEOUT_S = 2.0

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
    0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
)  # fmt: skip
E2E_BUCKETS = (
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0,
    120.0, 300.0, 600.0, 1200.0,
)  # fmt: skip


class EngineMetrics:
    """The metrics of one server, in their own registry; also the TokenizerManager's observer.

    ``multiprocess_dir``: prometheus_client's multiprocess directory, shared by the
    tokenizer workers (set in the environment before prometheus_client was imported).
    """

    def __init__(self, model_name: str, multiprocess_dir: str | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ["model_name"]
        r = self.registry

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, labels, registry=r).labels(model_name)

        def gauge(name: str, doc: str) -> Any:
            # NOTE: set at scrape time from the scheduler's stats: the last value set is the
            # server's, whichever worker set it.
            return Gauge(name, doc, labels, registry=r, multiprocess_mode="mostrecent").labels(model_name)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Any:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(model_name)

        self.prompt_tokens = counter("sglang:prompt_tokens", "Prompt tokens processed.")
        self.generation_tokens = counter("sglang:generation_tokens", "Tokens generated.")
        self.cached_tokens = counter(
            "sglang:cached_tokens", "Prompt tokens served from the radix cache."
        )
        self.num_requests = counter("sglang:num_requests", "Requests finished (any finish reason).")
        self.ttft = histogram(
            "sglang:time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS
        )
        self.itl = histogram(
            "sglang:inter_token_latency_seconds", "Time between output tokens.", ITL_BUCKETS
        )
        self.e2e = histogram(
            "sglang:e2e_request_latency_seconds", "Request latency, submit to finish.", E2E_BUCKETS
        )
        self.running = gauge("sglang:num_running_reqs", "Requests the scheduler is running.")
        self.waiting = gauge("sglang:num_queue_reqs", "Requests waiting in the scheduler's queue.")
        self.token_usage = gauge("sglang:token_usage", "Fraction of the KV pool in use.")
        self.used_tokens = gauge("sglang:num_used_tokens", "KV pool slots in use.")
        self.cache_hit_rate = gauge(
            "sglang:cache_hit_rate",
            "Cached prompt tokens / prompt tokens, since the server started.",
        )
        self.http_requests = Counter(
            "sglang:http_requests",
            "HTTP requests by route template, method and status.",
            ["model_name", "method", "route", "status"],
            registry=r,
        )
        self.model_name = model_name

    # ------------------------------------------------------------------ observer

    def on_outputs(self, states: list[RequestState]) -> None:
        """Called by the TokenizerManager after each TextOutputs; never raises."""
        try:
            now = time.perf_counter()
            for state in states:
                self._observe(state, now)
        except Exception:  # NOTE: metrics must never break the receive loop
            logger.exception("metrics observer failed")

    def _observe(self, state: RequestState, now: float) -> None:
        new = len(state.output_ids) - state.observed_tokens
        if new > 0:
            if state.observed_tokens == 0:
                state.first_token_at = now
                self.ttft.observe(now - state.created)
                # NOTE: counted at the first token, so aborted requests count too.
                self.prompt_tokens.inc(state.prompt_tokens)
                self.cached_tokens.inc(state.cached_tokens)
            else:
                self.itl.observe((now - state.last_token_at) / new)
            state.observed_tokens += new
            state.last_token_at = now
            self.generation_tokens.inc(new)
        if state.finish_reason is not None:
            self.num_requests.inc()
            self.e2e.observe(now - state.created)

    # ------------------------------------------------------------------ scrape

    async def refresh(self, ctx: ServerContext) -> None:
        """Scheduler numbers, fetched now; left as they were if the scheduler does not answer."""
        totals = {
            family.name: sum(sample.value for sample in family.samples if sample.name.endswith("_total"))
            for family in self._view().collect()
            if family.name in ("sglang:prompt_tokens", "sglang:cached_tokens")
        }
        if totals.get("sglang:prompt_tokens"):
            self.cache_hit_rate.set(totals.get("sglang:cached_tokens", 0.0) / totals["sglang:prompt_tokens"])
        reply = await ctx.tokenizer_manager.control(ServerInfoRequest, SCRAPE_TIMEOUT_S)
        if reply is None or not isinstance(reply.payload, SchedulerStats):
            return
        stats = reply.payload
        self.running.set(stats.num_running_reqs)
        self.waiting.set(stats.num_waiting_reqs)
        used = stats.kv.pool_used_tokens if stats.kv is not None else 0
        self.used_tokens.set(used)
        self.token_usage.set(used / stats.max_total_tokens if stats.max_total_tokens else 0.0)

    def render(self) -> bytes:
        return generate_latest(self._view())

    def _view(self) -> CollectorRegistry:
        """What a scrape reads: this process's registry, or every worker's values."""
        if self.multiprocess_dir is None:
            return self.registry
        view = CollectorRegistry()
        # NOTE: prometheus_client leaves this constructor unannotated.
        MultiProcessCollector(view, self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return view

    def count_request(self, method: str, route: str, status: int) -> None:
        self.http_requests.labels(self.model_name, method, route, str(status)).inc()


class HttpMetricsMiddleware:
    """Counts HTTP requests by route template (not raw path: bounded label values) and status.

    Pure ASGI, so streamed responses pass through unbuffered; the status is counted when
    the response starts.
    """

    def __init__(self, app: ASGIApp, metrics: EngineMetrics, router: Router) -> None:
        self.app = app
        self.metrics = metrics
        self.router = router
        self._templates: list[tuple[str, re.Pattern[str]]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def send_counting(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
                self.metrics.count_request(scope["method"], self._route(scope), status[0])
            await send(message)

        try:
            await self.app(scope, receive, send_counting)
        except BaseException as exc:
            if not status:
                # NOTE: cancelled = the client left before the answer (nginx's 499).
                code = 499 if isinstance(exc, asyncio.CancelledError) else 500
                self.metrics.count_request(scope["method"], self._route(scope), code)
            raise

    def _route(self, scope: Scope) -> str:
        route = scope.get("route")
        path = getattr(route, "path", None)
        if isinstance(path, str):
            return path
        # NOTE: the router did not run (a 401 from the API-key check) or nothing matched.
        if self._templates is None:
            self._templates = list(_leaf_routes(self.router.routes))
        for template, regex in self._templates:
            if regex.match(scope["path"]):
                return template
        return "other"


def _leaf_routes(routes: list[Any]) -> Iterator[tuple[str, re.Pattern[str]]]:
    """(path template, path regex) of every route, included routers walked into.

    NOTE: newer FastAPI keeps an included router as one entry (``original_router``)
    instead of copying its routes; routers included with a prefix are not walked.
    """
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            if not getattr(getattr(route, "include_context", None), "prefix", ""):
                yield from _leaf_routes(inner.routes)
            continue
        path, regex = getattr(route, "path", None), getattr(route, "path_regex", None)
        if isinstance(path, str) and regex is not None:
            yield path, regex


def install_metrics_route(app: FastAPI, ctx: ServerContext, metrics: EngineMetrics) -> None:
    async def metrics_endpoint() -> Response:
        await metrics.refresh(ctx)
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    app.add_api_route("/metrics", metrics_endpoint, methods=["GET"], include_in_schema=False)


def enable_metrics(app: FastAPI, ctx: ServerContext) -> EngineMetrics | None:
    """With --enable-metrics: the metrics object, its /metrics route and the TM observer."""
    if not ctx.args.enable_metrics:
        return None
    metrics = EngineMetrics(ctx.args.model_name, ctx.tokenizer_manager.workers.metrics_dir)
    ctx.tokenizer_manager.observer = metrics
    install_metrics_route(app, ctx, metrics)
    return metrics
