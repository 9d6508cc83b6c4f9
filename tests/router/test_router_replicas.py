"""Three real SmolLM2 engines behind the real router as replicas of one model (issue 27):
cache-aware routing keeps a conversation on the replica that cached it, and a replica killed
mid-run loses no request that had not started on it."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.router.replica_set import MODEL, ReplicaSet, replica_set

pytestmark = pytest.mark.slow
SYSTEM = (
    "You are a careful assistant for a harbor office. The notes below list the boats, their "
    "moorings and the tide tables; answer in one short sentence. "
)

VICTIM_PROMPT = f"Count slowly, then answer. {SYSTEM * 2}"


@pytest.fixture(scope="module")
def replicas(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicaSet]:
    log_dir = tmp_path_factory.mktemp("replicas")
    with replica_set(smollm2_dir, log_dir, 3, "cache_aware", "--max-total-tokens", "4096") as running:
        yield running


def _chat(replicas: ReplicaSet, messages: list[dict[str, str]], max_tokens: int = 4) -> dict[str, object]:
    body = {"model": MODEL, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    reply = httpx.post(f"{replicas.router.url}/v1/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _cached(reply: dict[str, object]) -> int:
    usage = reply["usage"]
    assert isinstance(usage, dict)
    return int((usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))


def test_cache_aware_keeps_each_conversation_on_the_replica_that_cached_it(
    replicas: ReplicaSet,
) -> None:
    conversations = [
        [{"role": "system", "content": f"Office {n}. {SYSTEM * 3}"}, {"role": "user", "content": f"Where is boat {n}?"}]
        for n in range(3)
    ]
    before = replicas.served()
    firsts = [_chat(replicas, messages) for messages in conversations]
    after_first = replicas.served()
    # NOTE: three conversations that differ from their first words, on idle replicas, spread
    # out (the tie goes to the replica holding the least text), one each
    assert sorted(a - b for a, b in zip(after_first, before, strict=True)) == [1, 1, 1]
    for messages, first in zip(conversations, firsts, strict=True):
        choices = first["choices"]
        assert isinstance(choices, list)
        grown = [*messages, choices[0]["message"], {"role": "user", "content": "And its mooring?"}]
        served_before = replicas.served()
        second = _chat(replicas, grown)
        moved = [a - b for a, b in zip(replicas.served(), served_before, strict=True)]
        # NOTE: the second turn landed where the first did, and found its prompt cached there
        first_at = [a - b for a, b in zip(after_first, before, strict=True)]
        assert moved.index(1) in [i for i, n in enumerate(first_at) if n]
        usage = first["usage"]
        assert isinstance(usage, dict)
        assert _cached(second) >= int(usage["prompt_tokens"]) // 2, second["usage"]


def test_a_replica_killed_mid_run_loses_no_request_that_had_not_started(
    replicas: ReplicaSet,
) -> None:
    """Runs last in the module: it kills one of the replicas."""
    stream_lines: list[bytes] = []
    first_chunk = threading.Event()

    def stream() -> None:
        body = {
            "model": MODEL, "stream": True, "max_tokens": 400, "temperature": 0,
            "ignore_eos": True, "messages": [{"role": "user", "content": VICTIM_PROMPT}],
        }  # fmt: skip
        with httpx.stream("POST", f"{replicas.router.url}/v1/chat/completions", json=body, timeout=120) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    stream_lines.append(line.encode())
                    first_chunk.set()

    streamer = threading.Thread(target=stream)
    streamer.start()
    assert first_chunk.wait(60), "the stream never started"
    # NOTE: the replica running the stream is the one to kill: its stream has started
    victim = next(e for e, n in zip(replicas.engines, _running(replicas), strict=True) if n)
    results: list[int] = []

    def one(n: int) -> None:
        body = {
            "model": MODEL, "max_tokens": 24, "temperature": 0, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"{VICTIM_PROMPT} Boat {n}?"}],
        }  # fmt: skip
        reply = httpx.post(f"{replicas.router.url}/v1/chat/completions", json=body, timeout=120)
        results.append(reply.status_code)

    # NOTE: they share the stream's long prompt, so cache-aware routing sends them to the
    # victim too (its load stays within the balance threshold)
    senders = [threading.Thread(target=one, args=(n,)) for n in range(6)]
    for sender in senders:
        sender.start()
    time.sleep(0.5)  # NOTE: some of them are now in flight on the victim, before any answer
    victim.process.kill()
    for sender in senders:
        sender.join(120)
    streamer.join(120)
    assert results == [200] * 6
    metrics = httpx.get(f"{replicas.router.url}/metrics", timeout=10).text
    closed = re.search(r'^gomgr_router_upstream_errors_total\{[^}]*kind="closed"[^}]*\} (\S+)$', metrics, re.MULTILINE)
    assert closed is not None and float(closed.group(1)) >= 1, "no request was in flight on the victim"
    last = orjson.loads(stream_lines[-1].removeprefix(b"data: "))
    assert last["error"]["code"] == "bad_gateway", stream_lines[-3:]
    backends = replicas.router.admin("GET", "/backends").json()["backends"]
    assert len(backends) == 2, backends


def _running(replicas: ReplicaSet) -> list[int]:
    """Requests each engine is running now, by the router's count of those in flight."""
    shown = {b["base_url"]: b["inflight"] for b in replicas.router.admin("GET", "/backends").json()["backends"]}
    return [int(shown[e.url]) for e in replicas.engines]
