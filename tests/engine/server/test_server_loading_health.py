"""While the model loads, the port answers every request 503 (the API's error shape); once
ready, 200 (issue 29, as SGLang's /health): no request sent across the handover from the
loading responder to the HTTP server is lost, reset or left hanging."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support.engine_process import free_port, start_engine_server

pytestmark = pytest.mark.slow

# NOTE: far above any answer's time here: a request left hanging shows as a timeout.
REQUEST_TIMEOUT_S = 20.0
# NOTE: as tests.support.engine_process polls: the probers must not slow the load they watch.
PROBE_EVERY_S = 0.1
READY_ANSWERS = 3  # each prober goes on this many 200s past the handover
CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
# NOTE: the HTTP server's own /health is 503 too until its warm-up task has run (no body).
LOADING = "503 loading"
Probe = Callable[[httpx.Client], httpx.Response]


def _health(client: httpx.Client) -> httpx.Response:
    return client.get("/health")


def _chat(client: httpx.Client) -> httpx.Response:
    return client.post("/v1/chat/completions", json=CHAT)


def _probe_until_ready(
    url: str, probe: Probe, seen: list[int | str], stop: threading.Event
) -> None:
    """Fresh connections, one after another: the status (LOADING for the loading responder's
    503), or the error's name."""
    ready = 0
    while ready < READY_ANSWERS and not stop.wait(PROBE_EVERY_S):
        try:
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as client:
                reply = probe(client)
        except httpx.HTTPError as err:
            seen.append(type(err).__name__)
            continue
        seen.append(LOADING if _loading_503(reply) else reply.status_code)
        ready += reply.status_code == 200


def _loading_503(reply: httpx.Response) -> bool:
    return (
        reply.status_code == 503
        and reply.headers.get("connection") == "close"
        and reply.headers.get("content-type") == "application/json"
        and reply.json()["error"]["type"] == "service_unavailable"
    )


def test_loading_answers_503_then_200_and_loses_no_request(
    smollm2_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    stop = threading.Event()
    seen: dict[str, list[int | str]] = {
        f"{name}-{i}": [] for name in ("health", "chat") for i in range(2)
    }
    probers = [
        threading.Thread(
            target=_probe_until_ready,
            args=(url, _health if name.startswith("health") else _chat, log, stop),
        )
        for name, log in seen.items()
    ]
    for prober in probers:
        prober.start()
    try:
        server = start_engine_server(
            smollm2_dir, tmp_path / "engine.log", ["--skip-server-warmup"], port=port
        )
    except BaseException:
        stop.set()
        raise
    finally:
        for prober in probers:
            prober.join(REQUEST_TIMEOUT_S * 2)
    try:
        for name, log in seen.items():
            # NOTE: refused until the launcher listens (the interpreter starts first); from
            # then on every request is answered: 503s while loading, then only 200s.
            answers = log[len(list(itertools.takewhile(lambda s: s == "ConnectError", log))) :]
            assert answers[:1] == [LOADING] and 200 in answers, (name, log)
            first_200 = answers.index(200)
            assert set(answers[:first_200]) <= {LOADING, 503}, (name, log)
            assert set(answers[first_200:]) == {200}, (name, log)
    finally:
        server.stop_and_check()
