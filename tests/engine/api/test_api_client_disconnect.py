"""A client that goes away frees its request's slot and KV within 2 s (issue 22, item 2).

Every generating surface, streamed or not, straight to the engine and through a real router,
with ``--enable-metrics`` on as ``gomgr start`` runs it. The client is a raw socket: it sends
the request, waits until the scheduler runs it, then closes the socket.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_stack import MODEL, Stack, engine_behind_router, post_bytes

pytestmark = pytest.mark.slow

MAX_TOKENS = 2000  # far more than a test lets it generate
CUT_AFTER_S = 0.2  # generating for this long once running (a few decode steps), then the client leaves
FREED_WITHIN_S = 2.0
STORY = "Write a very long story about a dragon who learns to fly."
MESSAGES = [{"role": "user", "content": STORY}]

Body = Callable[[bool], dict[str, Any]]
SURFACES: dict[str, tuple[str, Body]] = {
    "chat": ("/v1/chat/completions", lambda stream: {
        "model": MODEL, "messages": MESSAGES, "max_tokens": MAX_TOKENS, "stream": stream,
        "ignore_eos": True}),
    "completions": ("/v1/completions", lambda stream: {
        "model": MODEL, "prompt": STORY, "max_tokens": MAX_TOKENS, "stream": stream,
        "ignore_eos": True}),
    "responses": ("/v1/responses", lambda stream: {
        "model": MODEL, "input": STORY, "max_output_tokens": MAX_TOKENS, "stream": stream}),
    "anthropic": ("/v1/messages", lambda stream: {
        "model": MODEL, "messages": MESSAGES, "max_tokens": MAX_TOKENS, "stream": stream}),
    "ollama-chat": ("/api/chat", lambda stream: {
        "model": MODEL, "messages": MESSAGES, "stream": stream,
        "options": {"num_predict": MAX_TOKENS}}),
    "ollama-generate": ("/api/generate", lambda stream: {
        "model": MODEL, "prompt": STORY, "stream": stream, "options": {"num_predict": MAX_TOKENS}}),
    "native": ("/generate", lambda stream: {
        "text": STORY, "stream": stream,
        "sampling_params": {"max_new_tokens": MAX_TOKENS, "ignore_eos": True}}),
}
# NOTE: the router dispatches by the body's `model`; the native /generate has none.
NOT_ROUTED = frozenset({"native"})
CASES = [
    pytest.param(name, stream, via, id=f"{name}-{'stream' if stream else 'whole'}-{via}")
    for name in SURFACES
    for stream in (False, True)
    for via in ("direct", "router")
    if not (via == "router" and name in NOT_ROUTED)
]


@pytest.fixture(scope="module")
def stack(
    smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory, serving_flags: tuple[str, ...]
) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("disconnect")
    with engine_behind_router(smollm2_dir, logs, *serving_flags) as running:
        yield running


def _wait_running(stack: Stack, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while stack.load().running == 0:
        assert time.monotonic() < deadline, f"never ran:\n{stack.engine.log_tail()}"
        time.sleep(0.05)


def _disconnect_lines(stack: Stack) -> int:
    return stack.engine.log_path.read_text(errors="replace").count("client disconnected")


@pytest.mark.parametrize(("surface", "stream", "via"), CASES)
def test_client_leaving_frees_slot_and_kv(stack: Stack, surface: str, stream: bool, via: str) -> None:
    settled, _ = stack.wait_idle(timeout_s=30)
    assert settled.idle, f"not idle before the test: {settled}"
    logged = _disconnect_lines(stack)
    path, body = SURFACES[surface]
    port = stack.engine.port if via == "direct" else stack.router.port
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        client.sendall(post_bytes(port, path, body(stream)))
        _wait_running(stack)
        time.sleep(CUT_AFTER_S)
        busy = stack.load()
        assert busy.running == 1 and busy.kv_used > busy.radix, busy
    finally:
        client.close()
    load, waited = stack.wait_idle(timeout_s=FREED_WITHIN_S + 3)
    assert load.idle and waited <= FREED_WITHIN_S, (
        f"{waited:.2f} s after the client left: {load}\n{stack.engine.log_tail()}"
    )
    assert stack.running_gauge() == 0
    assert _disconnect_lines(stack) > logged, stack.engine.log_tail()
