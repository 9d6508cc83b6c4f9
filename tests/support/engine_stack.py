"""Our engine on SmolLM2 with ``--enable-metrics`` (as ``gomgr start`` runs it) behind a real
router, and what the engine says about its load: for the disconnect and stress tests."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.router.conftest import Router, start_router, stop
from tests.support.engine_process import EngineServer, engine_server

MODEL = "smollm2"
_RUNNING_GAUGE = re.compile(rb'^sglang:num_running_reqs\{[^}]*\} (\S+)$', re.MULTILINE)


def post_bytes(port: int, path: str, body: dict[str, Any]) -> bytes:
    """A whole HTTP/1.1 POST of ``body`` as JSON, for a client on a raw socket."""
    payload = orjson.dumps(body)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


@dataclass(frozen=True)
class Load:
    """The scheduler's numbers from /server_info."""

    running: int
    waiting: int
    kv_used: int  # KV pool slots in use, the radix cache's included
    radix: int  # slots the radix cache holds

    @property
    def idle(self) -> bool:
        """No request running or queued, and no KV beyond what the radix cache holds."""
        return self.running == 0 and self.waiting == 0 and self.kv_used == self.radix


@dataclass(frozen=True)
class Stack:
    engine: EngineServer
    router: Router

    def load(self) -> Load:
        load = self._load_unless_busy()
        assert load is not None, "/server_info answered 503: the scheduler did not answer in time"
        return load

    def _load_unless_busy(self) -> Load | None:
        """The load, or None when /server_info answers 503 (a scheduler too busy to answer in time)."""
        response = httpx.get(f"{self.engine.url}/server_info", timeout=10)
        if response.status_code == 503:
            return None
        response.raise_for_status()
        info = response.json()
        return Load(
            int(info["num_running_reqs"]),
            int(info["num_waiting_reqs"]),
            int(info["kv_pool_used_tokens"]),
            int(info["radix_cache_tokens"]),
        )

    def running_gauge(self) -> float:
        """``sglang:num_running_reqs`` as /metrics reports it now."""
        found = _RUNNING_GAUGE.search(httpx.get(f"{self.engine.url}/metrics", timeout=10).content)
        assert found is not None, "no sglang:num_running_reqs in /metrics"
        return float(found.group(1))

    def wait_idle(self, timeout_s: float, poll_s: float = 0.05) -> tuple[Load, float]:
        """Polls the load until idle or ``timeout_s``; the last load and the seconds it took."""
        started = time.monotonic()
        while True:
            # NOTE: a scheduler still draining a burst may miss /server_info's deadline; that is
            # "not idle yet", not a failure, until the timeout.
            load = self._load_unless_busy()
            waited = time.monotonic() - started
            if load is not None and (load.idle or waited > timeout_s):
                return load, waited
            if load is None and waited > timeout_s:
                return self.load(), waited
            time.sleep(poll_s)


@contextmanager
def engine_behind_router(model_dir: Path, log_dir: Path, *engine_args: str) -> Iterator[Stack]:
    """The engine (metrics on, no warm-up) registered with a fresh router as ``MODEL``."""
    args = ("--served-model-name", MODEL, "--skip-server-warmup", "--enable-metrics", *engine_args)
    with engine_server(model_dir, log_dir, *args) as engine:
        router = start_router(log_dir)
        try:
            router.register(engine.url, MODEL, id="engine")
            yield Stack(engine, router)
        finally:
            stop(router)
