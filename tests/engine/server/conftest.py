"""Fixtures for the engine-server integration tests: the real server in a subprocess.

One session-scoped server (``--max-total-tokens 16384``) is shared by every test that
does not break it; tests that freeze or kill a child start their own short-lived one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from tests.support.engine_process import EngineServer, start_engine_server

FRANCE_QUESTION = "What is the capital of France?"
FRANCE_ANSWER = "The capital of France is Paris."


@pytest.fixture(scope="session")
def smol_tokenizer(smollm2_dir: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(smollm2_dir)


@pytest.fixture(scope="session")
def france_prompt(smol_tokenizer: PreTrainedTokenizerBase) -> str:
    """The chat-templated France question, as text."""
    text = smol_tokenizer.apply_chat_template(
        [{"role": "user", "content": FRANCE_QUESTION}], add_generation_prompt=True, tokenize=False
    )
    assert isinstance(text, str)
    return text


@pytest.fixture(scope="session")
def launch_server(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., EngineServer]:
    """Starts a server on a model dir with extra flags and env; the caller stops it."""

    def launch(
        model_dir: Path, extra_args: list[str], env: dict[str, str] | None = None
    ) -> EngineServer:
        return start_engine_server(
            model_dir, tmp_path_factory.mktemp("server") / "server.log", extra_args, env
        )

    return launch


@pytest.fixture(scope="session")
def server(
    smollm2_dir: Path, launch_server: Callable[..., EngineServer]
) -> Iterator[EngineServer]:
    """The shared server; its children must all be gone after it stops.

    NOTE: a 120 s health-check timeout: on a CPU-starved test box one prefill step of 64
    prompts can outlast the default 20 s, and /health must stay 200 while output flows.
    The timeout itself is checked on the fault-injection server.
    """
    running = launch_server(
        smollm2_dir, ["--max-total-tokens", "16384"], env={"SGLANG_HEALTH_CHECK_TIMEOUT": "120"}
    )
    yield running
    running.stop_and_check()


@pytest.fixture()
def client(server: EngineServer) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


@pytest.fixture(scope="session")
def generate_france(france_prompt: str) -> Callable[[httpx.Client], dict[str, Any]]:
    """Greedy /generate of the France question; asserts 200 and the known answer."""

    def run(client: httpx.Client) -> dict[str, Any]:
        reply = client.post(
            "/generate",
            json={
                "text": france_prompt,
                "sampling_params": {"temperature": 0, "max_new_tokens": 32},
            },
        )
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["text"] == FRANCE_ANSWER
        return body

    return run


def fetch_server_info(client: httpx.Client, timeout_s: float = 60.0) -> dict[str, Any]:
    """/server_info, retried while it is 503.

    NOTE: the scheduler answers between model steps; on a loaded CPU box one step can
    outlast the server's 5 s ping timeout, which is a 503 and not what these tests check.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        reply = client.get("/server_info")
        if reply.status_code != 503:
            assert reply.status_code == 200, reply.text
            return dict(reply.json())
        assert time.monotonic() < deadline, f"/server_info still 503 after {timeout_s:.0f} s"


@pytest.fixture(scope="session")
def server_info() -> Callable[[httpx.Client], dict[str, Any]]:
    return fetch_server_info


@pytest.fixture(scope="session")
def wait_idle() -> Callable[..., dict[str, Any]]:
    """Polls /server_info until nothing runs or waits and the KV pool holds only the radix cache."""

    def run(client: httpx.Client, timeout_s: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            info = fetch_server_info(client)
            if (
                info["num_running_reqs"] == 0
                and info["num_waiting_reqs"] == 0
                and info["in_flight_requests"] == 0
                and info["kv_pool_used_tokens"] == info["radix_cache_tokens"]
            ):
                return info
            if time.monotonic() > deadline:
                pytest.fail(f"the server did not go idle within {timeout_s:.0f} s: {info}")
            time.sleep(0.25)

    return run


@pytest.fixture(scope="session")
def sse_payloads() -> Callable[[Iterable[str]], Iterator[str]]:
    """The payloads of an SSE stream's ``data: ...`` lines (blank separators skipped)."""

    def run(lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            if not line:
                continue
            assert line.startswith("data: "), f"not an SSE data line: {line!r}"
            yield line.removeprefix("data: ")

    return run
