"""Replicas end to end (issue 27): `gomgr start --replicas 3` runs three real SmolLM2 engines,
each on its own port and CPU share, registered with the router under one served name; the
router's cache-aware routing keeps a conversation on the replica that cached it; a replica
killed mid-run loses no request that had not started on it."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from manager.lifecycle.replicas import OMP_AFFINITY, OMP_THREADS
from tests.conftest import SMOLLM2_REPO
from tests.support.engine_process import free_port_block
from tests.support.gomgr_env import Env

pytestmark = pytest.mark.slow
NAME = "smollm2-replicas"
SYSTEM = (
    "You are a careful assistant for a harbor office. The notes below list the boats, their "
    "moorings and the tide tables; answer in one short sentence. "
)
VICTIM_PROMPT = f"Count slowly, then answer. {SYSTEM * 2}"
_REQUESTS = re.compile(r"^sglang:num_requests_total\{[^}]*\} (\S+)$", re.MULTILINE)
_CLOSED = re.compile(r'^gomgr_router_upstream_errors_total\{[^}]*kind="closed"[^}]*\} (\S+)$', re.MULTILINE)


@dataclass(frozen=True)
class Replicas:
    env: Env
    port: int
    started: list[dict[str, Any]]  # the engine records `gomgr start --json` printed

    @property
    def urls(self) -> list[str]:
        return [str(e["base_url"]) for e in self.started]

    def admin(self, path: str) -> Any:
        token = Path(self.env.vars["GOMGR_ROUTER_TOKEN_FILE"]).read_text().strip()
        headers = {"authorization": f"Bearer {token}"}
        return httpx.get(f"{self.env.router_url}/admin{path}", headers=headers, timeout=10).json()

    def served(self) -> list[int]:
        """Requests each engine finished, by its own /metrics."""
        counts = []
        for url in self.urls:
            found = _REQUESTS.search(httpx.get(f"{url}/metrics", timeout=10).text)
            counts.append(int(float(found.group(1))) if found else 0)
        return counts

    def chat(self, messages: list[dict[str, str]], max_tokens: int = 4) -> dict[str, Any]:
        body = {"model": NAME, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
        reply = httpx.post(f"{self.env.router_url}/v1/chat/completions", json=body, timeout=120)
        assert reply.status_code == 200, reply.text
        return dict(reply.json())


@pytest.fixture(scope="module")
def replicas(env: Env) -> Replicas:
    port = free_port_block(3)
    result = env.gomgr(
        "start", SMOLLM2_REPO, "--replicas", "3", "--port", str(port), "--served-model-name", NAME, "--json"
    )
    assert result.returncode == 0, result.stderr
    return Replicas(env, port, json.loads(result.stdout))


def test_each_replica_has_its_port_and_cpu_share_under_one_name(replicas: Replicas) -> None:
    port = replicas.port
    assert [e["port"] for e in replicas.started] == [port, port + 1, port + 2]
    # NOTE: no GPU here: each replica's thread count and the cores they bind to
    assert all(e["env"][OMP_THREADS] == str(len(e["env"][OMP_AFFINITY].split())) for e in replicas.started)
    routed = [b["base_url"] for b in replicas.admin("/backends")["backends"] if b["model"] == NAME]
    assert sorted(routed) == sorted(replicas.urls)


def test_cache_aware_keeps_each_conversation_on_the_replica_that_cached_it(replicas: Replicas) -> None:
    conversations = [
        [{"role": "system", "content": f"Office {n}. {SYSTEM * 3}"}, {"role": "user", "content": f"Where is boat {n}?"}]
        for n in range(3)
    ]
    before = replicas.served()
    firsts = [replicas.chat(messages) for messages in conversations]
    first_at = [a - b for a, b in zip(replicas.served(), before, strict=True)]
    # NOTE: three conversations that differ from their first words, on idle replicas, spread
    # out (the tie goes to the replica holding the least text), one each
    assert first_at == [1, 1, 1]
    for messages, first in zip(conversations, firsts, strict=True):
        grown = [*messages, first["choices"][0]["message"], {"role": "user", "content": "And its mooring?"}]
        served_before = replicas.served()
        second = replicas.chat(grown)
        moved = [a - b for a, b in zip(replicas.served(), served_before, strict=True)]
        assert moved.count(1) == 1
        cached = (second["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        # NOTE: landed where its first turn did, and found that turn's prompt cached there
        assert cached >= first["usage"]["prompt_tokens"] // 2, second["usage"]


def test_a_replica_killed_mid_run_loses_no_request_that_had_not_started(replicas: Replicas) -> None:
    """Runs last in the module: it kills one of the replicas."""
    stream_lines: list[bytes] = []
    first_chunk = threading.Event()

    def stream() -> None:
        body = {
            "model": NAME, "stream": True, "max_tokens": 400, "temperature": 0, "ignore_eos": True,
            "messages": [{"role": "user", "content": VICTIM_PROMPT}],
        }  # fmt: skip
        with httpx.stream("POST", f"{replicas.env.router_url}/v1/chat/completions", json=body, timeout=120) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    stream_lines.append(line.encode())
                    first_chunk.set()

    streamer = threading.Thread(target=stream)
    streamer.start()
    assert first_chunk.wait(60), "the stream never started"
    # NOTE: the replica running the stream is the one to kill: its stream has started
    inflight = {b["base_url"]: b["inflight"] for b in replicas.admin("/backends")["backends"]}
    victim = next(e for e in replicas.started if inflight[e["base_url"]])
    results: list[int] = []

    def one(n: int) -> None:
        body = {
            "model": NAME, "max_tokens": 24, "temperature": 0, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"{VICTIM_PROMPT} Boat {n}?"}],
        }  # fmt: skip
        reply = httpx.post(f"{replicas.env.router_url}/v1/chat/completions", json=body, timeout=120)
        results.append(reply.status_code)

    # NOTE: they share the stream's long prompt, so cache-aware routing sends them to the
    # victim too (its load stays within the balance threshold)
    senders = [threading.Thread(target=one, args=(n,)) for n in range(6)]
    for sender in senders:
        sender.start()
    time.sleep(0.5)  # NOTE: some of them are now in flight on the victim, before any answer
    os.kill(int(victim["pid"]), signal.SIGKILL)
    for sender in senders:
        sender.join(120)
    streamer.join(120)
    assert results == [200] * 6
    closed = _CLOSED.search(httpx.get(f"{replicas.env.router_url}/metrics", timeout=10).text)
    assert closed is not None and float(closed.group(1)) >= 1, "no request was in flight on the victim"
    last = orjson.loads(stream_lines[-1].removeprefix(b"data: "))
    assert last["error"]["code"] == "bad_gateway", stream_lines[-3:]
