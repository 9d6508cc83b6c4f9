"""The official `ollama` Python client against the router's Ollama port, with a real engine."""

from __future__ import annotations

import subprocess

import httpx
import ollama
import pytest

from tests.e2e_chat_ui.stack import GOMGR, ChatStack
from tests.support.engine_process import free_port

pytestmark = pytest.mark.slow

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
GREEDY = {"temperature": 0, "num_predict": 12}


@pytest.fixture
def client(chat_stack: ChatStack) -> ollama.Client:
    return ollama.Client(host=chat_stack.ollama_url, timeout=120)


def test_lists_shows_and_runs_what_the_router_serves(
    chat_stack: ChatStack, client: ollama.Client
) -> None:
    routed = chat_stack.routed_models()
    assert chat_stack.model in routed
    assert [m.model for m in client.list().models] == routed
    assert [m.model for m in client.ps().models] == routed
    shown = client.show(chat_stack.model)
    assert shown.details is not None and shown.details.family == "llama"
    assert "<|im_start|>" in (shown.template or "")
    with pytest.raises(ollama.ResponseError) as missing:
        client.show("no-such-model")
    assert missing.value.status_code == 404


def test_root_and_version_answer_like_ollama(chat_stack: ChatStack) -> None:
    assert httpx.get(chat_stack.ollama_url, timeout=10).text == "Ollama is running"
    version = httpx.get(f"{chat_stack.ollama_url}/api/version", timeout=10).json()["version"]
    assert tuple(int(part) for part in version.split(".")) >= (0, 6, 4)


def test_chat_answers(chat_stack: ChatStack, client: ollama.Client) -> None:
    reply = client.chat(chat_stack.model, QUESTION, options=GREEDY)
    assert reply.message.role == "assistant"
    assert "Paris" in (reply.message.content or "")
    assert reply.done and (reply.eval_count or 0) > 0


def test_chat_and_generate_stream(chat_stack: ChatStack, client: ollama.Client) -> None:
    chunks = list(client.chat(chat_stack.model, QUESTION, options=GREEDY, stream=True))
    assert len(chunks) > 2 and chunks[-1].done and not any(c.done for c in chunks[:-1])
    assert "Paris" in "".join(c.message.content or "" for c in chunks)
    pieces = list(client.generate(chat_stack.model, "The capital of France is", options=GREEDY, stream=True))
    assert pieces[-1].done and "".join(p.response for p in pieces[:-1]).strip()


def test_a_taken_ollama_port_fails_in_one_line(chat_stack: ChatStack) -> None:
    free = free_port()
    result = subprocess.run(
        [str(GOMGR), "router", "serve", "--port", str(free), "--ollama-port", str(chat_stack.ollama_port)],
        capture_output=True, text=True, env=chat_stack.vars, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{chat_stack.ollama_port}: Address already in use"
    )
    with pytest.raises(httpx.ConnectError):  # NOTE: nothing was left listening on the free port
        httpx.get(f"http://127.0.0.1:{free}/health", timeout=5)
